"""tokenizer.json / tokenizer_config.json from a GGUF's vocabulary, with no network and no torch.

A GGUF carries the whole vocabulary (tokens, merges or scores, token types, special ids, chat
template). This module rebuilds a Hugging Face `tokenizers` tokenizer from it, so that
onnxruntime-genai (through onnxruntime-extensions) and `tokenizers` both can load the folder.

Two GGUF tokenizer models are supported:
- "gpt2": byte-level BPE; the pre-tokenizer split comes from `tokenizer.ggml.pre`, using the
  same regexes llama.cpp uses for each pre-type.
- "llama": SentencePiece BPE; rebuilt as BPE with byte fallback, merges derived from scores,
  "▁" for spaces (the layout of Llama 2 / Mistral / TinyLlama tokenizer.json files).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

import gguf
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

from engine.errors import ModelError
from engine.models.gguf_file import field

log = logging.getLogger(__name__)

# tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6

SPACE_MARK = "\u2581"  # SentencePiece's "▁"

# Chat models end a turn with one of these rather than with the GGUF's eos token.
END_OF_TURN_TOKENS = ("<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>", "<|eom_id|>")

# --- pre-tokenizer regexes, per tokenizer.ggml.pre (as llama.cpp's llama-vocab.cpp) ---
# Where a model's own tokenizer.json regex is known and the `tokenizers` engine accepts it
# (it has (?i:...) and lookaheads), that original form is used.
GPT2_REGEX = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN2_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
TEKKEN_REGEX = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
    r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
GPT4O_REGEX = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# Cased letters as llama.cpp lists them for deepseek-llm, as code point ranges: written as
# numbers because some of these characters change under Unicode normalisation.
DEEPSEEK_LETTERS = (
    (0x41, 0x5A), (0x61, 0x7A), (0xB5, 0xB5), (0xC0, 0xD6), (0xD8, 0xF6), (0xF8, 0x1BA),
    (0x1BC, 0x1BF), (0x1C4, 0x293), (0x295, 0x2AF), (0x370, 0x373), (0x376, 0x377),
    (0x37B, 0x37D), (0x37F, 0x37F), (0x386, 0x386), (0x388, 0x38A), (0x38C, 0x38C),
    (0x38E, 0x3A1), (0x3A3, 0x3F5), (0x3F7, 0x481), (0x48A, 0x52F), (0x531, 0x556),
    (0x10A0, 0x10C5), (0x13A0, 0x13F5), (0x13F8, 0x13FD), (0x1C90, 0x1CBA), (0x1CBD, 0x1CBF),
    (0x1D00, 0x1D2B), (0x1D6B, 0x1D77), (0x1D79, 0x1D9A), (0x1E00, 0x1F15), (0x1F18, 0x1F1D),
    (0x1F20, 0x1F45), (0x1F48, 0x1F4D), (0x1F50, 0x1F57), (0x1F59, 0x1F59), (0x1F5B, 0x1F5B),
    (0x1F5D, 0x1F5D), (0x1F5F, 0x1F7D), (0x1F80, 0x1FB4), (0x1FB6, 0x1FBC), (0x1FBE, 0x1FBE),
    (0x1FC2, 0x1FC4), (0x1FC6, 0x1FCC), (0x1FD0, 0x1FD3), (0x1FD6, 0x1FDB), (0x1FE0, 0x1FEC),
    (0x1FF2, 0x1FF4), (0x1FF6, 0x1FFC), (0x2102, 0x2102), (0x2107, 0x2107), (0x210A, 0x2113),
    (0x2115, 0x2115), (0x2119, 0x211D), (0x2124, 0x2124), (0x2126, 0x2126), (0x2128, 0x2128),
    (0x212A, 0x212D), (0x212F, 0x2134), (0x2139, 0x2139), (0x213C, 0x213F), (0x2145, 0x2149),
    (0x214E, 0x214E), (0x2183, 0x2184), (0x2C00, 0x2C7B), (0x2C7E, 0x2CE4), (0x2CEB, 0x2CEE),
    (0x2CF2, 0x2CF3), (0xA640, 0xA66D), (0xA680, 0xA69B), (0xA722, 0xA76F), (0xA771, 0xA787),
    (0xA78B, 0xA78E), (0xAB70, 0xABBF), (0xFB00, 0xFB06), (0xFB13, 0xFB17), (0xFF21, 0xFF3A),
    (0xFF41, 0xFF5A), (0x10400, 0x1044F), (0x104B0, 0x104D3), (0x104D8, 0x104FB),
    (0x10C80, 0x10CB2), (0x10CC0, 0x10CF2), (0x118A0, 0x118DF), (0x1E900, 0x1E943),
)
DEEPSEEK_PUNCTUATION = ((0x21, 0x2F), (0x3A, 0x7E), (0xFF01, 0xFF0F), (0xFF1A, 0xFF5E),
                        (0x2018, 0x201F), (0x3000, 0x3002))
DEEPSEEK_CJK = ((0x4E00, 0x9FA5), (0x0800, 0x4E00), (0xAC00, 0xD7FF))


def _char_class(ranges: tuple[tuple[int, int], ...]) -> str:
    parts = [
        _re_escape(chr(a)) if a == b else f"{_re_escape(chr(a))}-{_re_escape(chr(b))}"
        for a, b in ranges
    ]
    return "[" + "".join(parts) + "]"


def _re_escape(char: str) -> str:
    """Escape a character for use inside a regex character class."""
    return "\\" + char if char in "\\]^-[" else char


DEEPSEEK_LLM_REGEXES = [
    r"[\r\n]",
    r"\s?" + _char_class(DEEPSEEK_LETTERS) + "+",
    r"\s?" + _char_class(DEEPSEEK_PUNCTUATION) + "+",
    r"\s+$",
    _char_class(DEEPSEEK_CJK) + "+",
    r"\p{N}+",
]
DEEPSEEK_CODER_REGEXES = [
    r"[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", _char_class(DEEPSEEK_CJK) + "+", r"\p{N}",
]

# Each pre-type: the regexes to split with, in order (each splits the pieces of the one
# before), then GPT-2's byte-to-unicode mapping. One digit per piece is written as a regex,
# not as tokenizers' Digits step, which onnxruntime-genai ignores ("12345" stayed "123", "45").
SINGLE_DIGITS = r"\p{N}"
PRE_TYPES: dict[str, list[str]] = {
    "gpt2": [GPT2_REGEX],
    "smollm": [SINGLE_DIGITS, GPT2_REGEX],
    "llama3": [LLAMA3_REGEX],
    "qwen2": [QWEN2_REGEX],
    "tekken": [TEKKEN_REGEX],
    "gpt4o": [GPT4O_REGEX],
    "deepseek-llm": DEEPSEEK_LLM_REGEXES,
    "deepseek-coder": DEEPSEEK_CODER_REGEXES,
}
PRE_ALIASES = {
    # llama.cpp's own "default" (a GGUF with no pre-type; llama.cpp warns that quality suffers)
    # first splits off punctuation runs and runs of three digits; onnxruntime-genai cannot read
    # those regexes (\p{N}+, \p{P}), so GPT-2's split stands in for it.
    "default": "gpt2", "gpt-2": "gpt2", "phi-2": "gpt2", "mpt": "gpt2", "olmo": "gpt2",
    "jais": "gpt2", "trillion": "gpt2", "exaone4": "gpt2", "roberta-bpe": "gpt2",
    "starcoder": "smollm", "refact": "smollm", "command-r": "smollm", "codeshell": "smollm",
    "exaone": "smollm", "minerva-7b": "smollm",
    "llama-bpe": "llama3", "llama-v3": "llama3", "falcon3": "llama3", "pixtral": "llama3",
    "dbrx": "llama3", "smaug-bpe": "llama3", "chatglm-bpe": "llama3", "glm4": "llama3",
    "deepseek-r1-qwen": "qwen2", "stablelm2": "qwen2", "megrez": "qwen2", "hunyuan": "qwen2",
    "gpt-4o": "gpt4o", "llama4": "gpt4o",
}
# llama.cpp tokenizes a whole piece as one token when it is in the vocabulary, for these.
IGNORE_MERGES = {"llama3", "tekken"}
# llama.cpp adds a bos token by default for these (when the GGUF does not say).
ADD_BOS_BY_DEFAULT = {"llama3", "tekken"}


@dataclass(frozen=True)
class GGUFVocab:
    """What a GGUF says about its tokenizer."""

    model: str
    pre: str
    tokens: list[str]
    token_types: list[int]
    scores: list[float]
    merges: list[str]
    bos_id: int | None
    eos_id: int | None
    unk_id: int | None
    pad_id: int | None
    eot_ids: list[int]
    add_bos: bool | None
    add_eos: bool | None
    add_space_prefix: bool | None
    chat_template: str | None
    context_length: int | None

    def token(self, token_id: int | None) -> str | None:
        if token_id is None or not 0 <= token_id < len(self.tokens):
            return None
        return self.tokens[token_id]


# --- reading ---------------------------------------------------------------------------


def read_vocab(reader: gguf.GGUFReader) -> GGUFVocab:
    """Collect the tokenizer metadata of an open GGUF."""
    tokens = field(reader, "tokenizer.ggml.tokens")
    if not tokens:
        raise ModelError("This GGUF file has no tokenizer vocabulary; it cannot be imported.")
    arch = field(reader, "general.architecture", "")
    eot_ids = [
        value
        for key in ("tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id")
        if (value := field(reader, key)) is not None
    ]
    return GGUFVocab(
        model=field(reader, "tokenizer.ggml.model", ""),
        pre=field(reader, "tokenizer.ggml.pre", "default"),
        tokens=tokens,
        token_types=field(reader, "tokenizer.ggml.token_type") or [NORMAL] * len(tokens),
        scores=field(reader, "tokenizer.ggml.scores") or [],
        merges=field(reader, "tokenizer.ggml.merges") or [],
        bos_id=field(reader, "tokenizer.ggml.bos_token_id"),
        eos_id=field(reader, "tokenizer.ggml.eos_token_id"),
        unk_id=field(reader, "tokenizer.ggml.unknown_token_id"),
        pad_id=field(reader, "tokenizer.ggml.padding_token_id"),
        eot_ids=eot_ids,
        add_bos=field(reader, "tokenizer.ggml.add_bos_token"),
        add_eos=field(reader, "tokenizer.ggml.add_eos_token"),
        add_space_prefix=field(reader, "tokenizer.ggml.add_space_prefix"),
        chat_template=field(reader, "tokenizer.chat_template"),
        context_length=field(reader, f"{arch}.context_length"),
    )


# --- building --------------------------------------------------------------------------


def build_tokenizer(vocab: GGUFVocab) -> Tokenizer:
    """A `tokenizers.Tokenizer` equivalent to the GGUF's own tokenizer."""
    if vocab.model == "gpt2":
        tokenizer = _byte_level_tokenizer(vocab)
    elif vocab.model == "llama":
        tokenizer = _sentencepiece_tokenizer(vocab)
    else:
        raise ModelError(
            f"This GGUF uses the tokenizer model '{vocab.model}', which is not supported "
            "(only 'gpt2' byte-level BPE and 'llama' SentencePiece are); "
            "use an ONNX GenAI model folder instead."
        )
    added = _added_tokens(vocab)
    tokenizer.add_special_tokens([token for token in added if token.special])
    tokenizer.add_tokens([token for token in added if not token.special])
    tokenizer.post_processor = _post_processor(vocab)
    return tokenizer


def _token_ids(vocab: GGUFVocab) -> dict[str, int]:
    """Token text -> id; the first id wins when a GGUF repeats a token."""
    ids: dict[str, int] = {}
    for token_id, text in enumerate(vocab.tokens):
        ids.setdefault(text, token_id)
    return ids


def pre_type(vocab: GGUFVocab) -> str:
    """The canonical pre-tokenizer name for the GGUF's tokenizer.ggml.pre ("gpt2" if unknown)."""
    name = PRE_ALIASES.get(vocab.pre, vocab.pre)
    return name if name in PRE_TYPES else "gpt2"


def _byte_level_tokenizer(vocab: GGUFVocab) -> Tokenizer:
    kind = pre_type(vocab)
    if PRE_ALIASES.get(vocab.pre, vocab.pre) not in PRE_TYPES:
        log.warning("Unknown GGUF pre-tokenizer %r; using GPT-2's split, which may differ",
                    vocab.pre)
    merges = [tuple(merge.split(" ", 1)) for merge in vocab.merges]
    model = models.BPE(
        vocab=_token_ids(vocab),
        merges=merges,
        ignore_merges=kind in IGNORE_MERGES,
    )
    tokenizer = Tokenizer(model)
    if kind == "qwen2":
        tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = _byte_level_pre_tokenizer(PRE_TYPES[kind])
    tokenizer.decoder = decoders.ByteLevel()
    return tokenizer


def _byte_level_pre_tokenizer(regexes: list[str]) -> pre_tokenizers.PreTokenizer:
    # GPT-2's regex alone is ByteLevel's own; writing it that way keeps the common layout of
    # tokenizer.json files (GPT-2), which other loaders recognise best. After another split
    # onnxruntime-genai ignores ByteLevel's regex, so there every split is written out.
    if regexes == [GPT2_REGEX]:
        steps = [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]
    else:
        steps = [_split_step(r) for r in regexes]
        steps.append(pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False))
    return steps[0] if len(steps) == 1 else pre_tokenizers.Sequence(steps)


def _split_step(regex: str) -> pre_tokenizers.PreTokenizer:
    return pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False)


def _sentencepiece_tokenizer(vocab: GGUFVocab) -> Tokenizer:
    unk = vocab.token(vocab.unk_id)
    model = models.BPE(
        vocab=_token_ids(vocab),
        merges=sentencepiece_merges(vocab),
        unk_token=unk,
        fuse_unk=True,
        byte_fallback=True,
    )
    tokenizer = Tokenizer(model)
    # This layout (Prepend/Replace normalizer; Replace, ByteFallback, Fuse, Strip decoder) is
    # the one onnxruntime-extensions detects as SentencePiece; its Strip step turns on the
    # prefix space there too. Prepend applies to each piece between special tokens, as in
    # llama.cpp.
    prefix = _add_space_prefix(vocab)
    steps = [normalizers.Replace(" ", SPACE_MARK)]
    if prefix:
        steps.insert(0, normalizers.Prepend(SPACE_MARK))
    tokenizer.normalizer = normalizers.Sequence(steps)
    decode_steps = [decoders.Replace(SPACE_MARK, " "), decoders.ByteFallback(), decoders.Fuse()]
    if prefix:
        decode_steps.append(decoders.Strip(content=" ", left=1, right=0))
    tokenizer.decoder = decoders.Sequence(decode_steps)
    return tokenizer


def _add_space_prefix(vocab: GGUFVocab) -> bool:
    # llama.cpp's default for SentencePiece vocabularies is to add the prefix.
    return True if vocab.add_space_prefix is None else bool(vocab.add_space_prefix)


def sentencepiece_merges(vocab: GGUFVocab) -> list[tuple[str, str]]:
    """BPE merges implied by SentencePiece scores: a pair whose joined piece scores higher
    merges first, as in SentencePiece's own BPE."""
    ids = {
        text: token_id
        for token_id, text in enumerate(vocab.tokens)
        if vocab.token_types[token_id] in (NORMAL, USER_DEFINED)
    }
    scores = vocab.scores or [-float(i) for i in range(len(vocab.tokens))]
    ranked = []
    for text, token_id in ids.items():
        for cut in range(1, len(text)):
            left, right = text[:cut], text[cut:]
            if left in ids and right in ids:
                ranked.append((-scores[token_id], ids[left], ids[right], left, right))
    ranked.sort()
    return [(left, right) for *_, left, right in ranked]


def _added_tokens(vocab: GGUFVocab) -> list[AddedToken]:
    """Control and user-defined tokens are matched whole, before the model sees the text."""
    named = {vocab.bos_id, vocab.eos_id, vocab.unk_id, vocab.pad_id}
    added = []
    for token_id, text in enumerate(vocab.tokens):
        kind = vocab.token_types[token_id]
        if text and (kind in (CONTROL, USER_DEFINED) or token_id in named):
            # User-defined tokens are plain text to the model, so decoding keeps them.
            added.append(AddedToken(text, special=kind != USER_DEFINED, normalized=False))
    return added


def _add_bos(vocab: GGUFVocab) -> bool:
    if vocab.add_bos is not None:
        return bool(vocab.add_bos) and vocab.bos_id is not None
    by_default = vocab.model == "llama" or pre_type(vocab) in ADD_BOS_BY_DEFAULT
    return by_default and vocab.bos_id is not None


def _add_eos(vocab: GGUFVocab) -> bool:
    return bool(vocab.add_eos) and vocab.eos_id is not None


def _post_processor(vocab: GGUFVocab) -> processors.PostProcessor | None:
    bos = [vocab.token(vocab.bos_id)] if _add_bos(vocab) else []
    eos = [vocab.token(vocab.eos_id)] if _add_eos(vocab) else []
    if not bos and not eos:
        return processors.ByteLevel(trim_offsets=False) if vocab.model == "gpt2" else None
    specials = {vocab.token(vocab.bos_id): vocab.bos_id} if bos else {}
    if eos:
        specials[vocab.token(vocab.eos_id)] = vocab.eos_id
    return processors.TemplateProcessing(
        single=[*bos, "$A", *eos],
        pair=[*bos, "$A", *eos, *bos, "$B:1", *eos],
        special_tokens=list(specials.items()),
    )


# --- special ids and config files ------------------------------------------------------


def special_token_ids(vocab: GGUFVocab) -> dict:
    """bos/eos/pad ids for genai_config.json; eos also lists the chat end-of-turn token."""
    eos_ids = [vocab.eos_id] if vocab.eos_id is not None else []
    ids = _token_ids(vocab)
    template = vocab.chat_template or ""
    turn_ends = [ids[t] for t in END_OF_TURN_TOKENS if t in ids and t in template]
    for token_id in vocab.eot_ids + turn_ends:
        if token_id not in eos_ids:
            eos_ids.append(token_id)
    if not eos_ids:
        raise ModelError("This GGUF names no end-of-sequence token; it cannot be used for chat.")
    pad_id = vocab.pad_id if vocab.pad_id is not None else eos_ids[0]
    return {
        "bos_token_id": vocab.bos_id,
        "eos_token_id": eos_ids[0] if len(eos_ids) == 1 else eos_ids,
        "pad_token_id": pad_id,
    }


def tokenizer_class(vocab: GGUFVocab) -> str:
    """The Hugging Face class name; onnxruntime-extensions picks its tokenizer by it."""
    if vocab.model == "llama":
        # Without a space prefix (Gemma) onnxruntime-genai splits before each "▁" unless told
        # it is Gemma's tokenizer: "a  b" lost its "▁▁" token.
        return "LlamaTokenizer" if _add_space_prefix(vocab) else "GemmaTokenizer"
    if pre_type(vocab) == "qwen2":
        return "Qwen2Tokenizer"
    if pre_type(vocab) in ("llama3", "tekken", "gpt4o", "deepseek-llm", "deepseek-coder"):
        return "PreTrainedTokenizerFast"
    return "GPT2Tokenizer"


def special_tokens_map(vocab: GGUFVocab) -> dict:
    names = {
        "bos_token": vocab.token(vocab.bos_id),
        "eos_token": vocab.token(vocab.eos_id),
        "unk_token": vocab.token(vocab.unk_id),
        "pad_token": vocab.token(vocab.pad_id if vocab.pad_id is not None else vocab.eos_id),
    }
    return {name: text for name, text in names.items() if text is not None}


def tokenizer_config(vocab: GGUFVocab) -> dict:
    config = {
        "tokenizer_class": tokenizer_class(vocab),
        "add_bos_token": _add_bos(vocab),
        "add_eos_token": _add_eos(vocab),
        "clean_up_tokenization_spaces": False,
        **{name: None for name in ("bos_token", "eos_token", "unk_token", "pad_token")},
        **special_tokens_map(vocab),
    }
    if vocab.context_length:
        config["model_max_length"] = int(vocab.context_length)
    if vocab.chat_template:
        config["chat_template"] = vocab.chat_template
    return config


def _write_json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def write_tokenizer_files(reader: gguf.GGUFReader, out_dir: Path) -> dict:
    """Write tokenizer.json, tokenizer_config.json and special_tokens_map.json into out_dir
    and return the special token ids the caller puts into genai_config.json."""
    vocab = read_vocab(reader)
    tokenizer = build_tokenizer(vocab)
    ids = special_token_ids(vocab)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(out_dir / "tokenizer.json"))
    _write_json(out_dir / "tokenizer_config.json", tokenizer_config(vocab))
    _write_json(out_dir / "special_tokens_map.json", special_tokens_map(vocab))
    return ids
