"""Our rebuilt tokenizer against llama.cpp's own, on tiny GGUF vocabularies of each family: the
byte-level BPE kind under each tokenizer.ggml.pre the popular files use, and the SentencePiece
kind as Llama 2/Mistral, Phi-3 and Gemma (no space prefix, its own specials) write it.

llama.cpp runs in its own venv (tests.helpers.http_engines.llama_python); one process reads
every vocabulary."""

from __future__ import annotations

import json
import subprocess

import pytest
from tokenizers import Tokenizer

from engine.models.gguf_tokenizer import write_tokenizer_files
from tests.engine.models.test_gguf_tokenizer import genai_tokenizer, sentencepiece_vocab, write_gguf
from tests.helpers.http_engines import llama_python
from tests.helpers.tiny_vocab import byte_level_vocab

# Merges whose use depends on the split: digits in runs, punctuation before a word, CamelCase,
# apostrophes, newlines before spaces.
SPLIT_MERGES = ["1 2", "12 3", "4 5", "3 4", "1 0", "10 0", ", t", ",t he", "o W", "' s", "' L",
                "'L L", "Ċ Ġ", "Ċ Ċ", ". Ċ", "Ġ 1", "d 1", "Ġ (", "( 1", ") .", "W or", "Wor ld"]
BYTE_LEVEL_TEXTS = [
    "Hello world 12345 and 100,000.", "HelloWorld,the end", "It's I'LL do it's",
    "line\n\n  indented\n the", "(12) (123). d12", "Café déjà 1234567", "  two  spaces ",
    "<|im_start|>user\nHello world<|im_end|>\n<|im_start|>assistant\n",
]
SENTENCEPIECE_TEXTS = [
    "Hello world and the", " leading", "Café, naïve é☕", "  two  spaces", "line\nnext",
]
SENTENCEPIECE_CHATS = {
    "mistral": "[INST] Hello world [/INST] the world</s>[INST] and [/INST]",
    "phi3": "<|system|>\nthe<|end|>\n<|user|>\nHello world<|end|>\n<|assistant|>\n",
    "gemma": "<start_of_turn>user\nHello world<end_of_turn>\n<start_of_turn>model\n",
}


def byte_level_family(pre: str) -> dict:
    vocab = byte_level_vocab() | {"pre": pre}
    tokens, merges = list(vocab["tokens"]), list(vocab["merges"])
    for merge in SPLIT_MERGES:
        joined = merge.replace(" ", "")
        if joined not in tokens:
            tokens.append(joined)
            merges.append(merge)
    return vocab | {"tokens": tokens, "merges": merges, "token_types": vocab["token_types"]
                    + [1] * (len(tokens) - len(vocab["tokens"]))}


def with_specials(vocab: dict, specials: dict[str, int]) -> dict:
    """`vocab` with these tokens (text -> llama.cpp token type) appended."""
    return vocab | {"tokens": vocab["tokens"] + list(specials),
                    "token_types": vocab["token_types"] + list(specials.values()),
                    "scores": vocab["scores"] + [0.0] * len(specials)}


def gemma_vocab() -> dict:
    """Gemma's layout: pad, eos, bos, unk first; turn markers; no space prefix."""
    base = sentencepiece_vocab(add_space_prefix=False)
    head = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"]
    rest = slice(3, None)  # drop the Llama-style <unk>, <s>, </s>
    return base | {"tokens": head + base["tokens"][rest], "token_types": [3, 3, 3, 2, 3, 3] + base["token_types"][rest],
                   "scores": [0.0] * 6 + base["scores"][rest], "pad_id": 0, "eos_id": 1, "bos_id": 2, "unk_id": 3}


# "default" is left out: llama.cpp's default split (punctuation runs, runs of three digits)
# is beyond onnxruntime-genai's regexes, so GPT-2's stands in (engine.models.gguf_tokenizer).
FAMILIES = {
    **{f"bpe-{pre}": byte_level_family(pre) for pre in ("llama-bpe", "qwen2", "smollm", "gpt-4o", "tekken")},
    "mistral": with_specials(sentencepiece_vocab(), {"[INST]": 3, "[/INST]": 3}),
    "phi3": with_specials(sentencepiece_vocab(), {"<|system|>": 3, "<|end|>": 3, "<|assistant|>": 3}),
    "gemma": gemma_vocab(),
}

LLAMA_TOKENIZE = """
import json, sys
import llama_cpp
out = {}
for path, texts in json.load(sys.stdin).items():
    llm = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
    out[path] = [llm.tokenize(t.encode(), add_bos=False, special=True) for t in texts]
json.dump(out, sys.stdout)
"""


def texts_of(family: str) -> list[str]:
    if family.startswith("bpe-"):
        return BYTE_LEVEL_TEXTS
    return SENTENCEPIECE_TEXTS + [SENTENCEPIECE_CHATS[family]]


@pytest.fixture(scope="module")
def families(tmp_path_factory):
    """family -> (our folder, special ids, llama.cpp's ids for each text)."""
    built, request = {}, {}
    for family, vocab in FAMILIES.items():
        folder = tmp_path_factory.mktemp(family)
        ids = write_tokenizer_files(write_gguf(folder / "vocab.gguf", vocab), folder / "tokenizer")
        built[family] = (folder / "tokenizer", ids)
        request[str(folder / "vocab.gguf")] = texts_of(family)
    answers = list(llama_cpp_ids(request).values())
    return {family: (*built[family], answer) for family, answer in zip(FAMILIES, answers)}


@pytest.mark.parametrize("family", list(FAMILIES))
def test_tokenizer_matches_llama_cpp(families, family):
    folder, ids, expected = families[family]
    ours = Tokenizer.from_file(str(folder / "tokenizer.json"))
    genai = genai_tokenizer(folder, len(FAMILIES[family]["tokens"]), ids)
    for text, llama_ids in zip(texts_of(family), expected):
        assert ours.encode(text, add_special_tokens=False).ids == llama_ids, text
        assert list(genai.encode(text)) == llama_ids, text


def llama_cpp_ids(requests: dict[str, list[str]]) -> dict[str, list[list[int]]]:
    done = subprocess.run([str(llama_python()), "-c", LLAMA_TOKENIZE], input=json.dumps(requests),
                          capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout)


@pytest.mark.slow
def test_builtin_tokenizer_matches_llama_cpp(tmp_path):
    import gguf

    from tests.engine.models.test_gguf_tokenizer import ROUND_TRIP_TEXTS, builtin_gguf

    source = builtin_gguf()
    ids = write_tokenizer_files(gguf.GGUFReader(str(source)), tmp_path)
    texts = ROUND_TRIP_TEXTS + BYTE_LEVEL_TEXTS
    expected = llama_cpp_ids({str(source): texts})[str(source)]
    genai = genai_tokenizer(tmp_path, Tokenizer.from_file(str(tmp_path / "tokenizer.json")).get_vocab_size(), ids)
    for text, llama_ids in zip(texts, expected):
        assert list(genai.encode(text)) == llama_ids, text
