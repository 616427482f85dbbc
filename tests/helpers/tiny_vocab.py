"""A tiny GPT-2-style (byte-level BPE) GGUF vocabulary for tests and tiny generated models.

Ids 0-2 are the special tokens, then the 256 byte tokens, then one token per merge.
"""

from __future__ import annotations

import gguf

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

# Merges in priority order, written in GPT-2's byte-to-unicode alphabet ("Ġ" is a space,
# "Ċ" a newline). Each one's result must be new, and both halves must already exist. A word
# token must be what the merges make of that word, so that onnxruntime-genai and tokenizers
# count alike: with "Ġi s" after "i s", onnxruntime-genai read " is" as one token and
# tokenizers, merging by rank, as two ("Ġ", "is").
ENGLISH_MERGES = [
    "Ġ t", "h e", "i n", "Ġ a", "e r", "o n", "Ġt he", "r e", "a t", "e n", "Ġ s", "o r",
    "Ġ w", "a n", "i s", "e s", "Ġ o", "Ġ c", "n d", "i t", "in g", "Ġ b", "Ġ f", "Ġ m",
    "Ġ p", "l l", "o u", "Ġa nd", "Ġo f", "Ġ i", "Ġ is", "Ġt o", "e d", "Ġ h", "Ġ Ġ",
    "ĠĠ ĠĠ", "Ċ Ċ", "H e", "He ll", "Hell o", "l d", "Ġw or", "Ġwor ld", "Ġ P", "a r",
    "Ġp ar", "u s", "Ġ y", "Ġy ou",
]


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character mapping."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1)]
    printable += range(ord("®"), ord("ÿ") + 1)
    mapping = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + extra)
            extra += 1
    return mapping


def _unique_merges(merges: list[str]) -> list[str]:
    """Keep merges whose result is new, so each one adds exactly one token."""
    seen: set[str] = set()
    kept = []
    for merge in merges:
        result = merge.replace(" ", "")
        if result not in seen:
            seen.add(result)
            kept.append(merge)
    return kept


def byte_level_vocab() -> dict:
    """A gpt2-style vocabulary: keys match the GGUFWriter calls in add_vocab_to_writer."""
    byte_tokens = list(bytes_to_unicode().values())
    merges = _unique_merges(ENGLISH_MERGES)
    tokens = SPECIAL_TOKENS + byte_tokens
    known = set(tokens)
    for merge in merges:
        left, right = merge.split(" ")
        assert left in known and right in known, merge
        result = left + right
        if result not in known:
            tokens.append(result)
            known.add(result)
    token_types = [3] * len(SPECIAL_TOKENS) + [1] * (len(tokens) - len(SPECIAL_TOKENS))
    return {
        "model": "gpt2",
        "pre": "smollm",
        "tokens": tokens,
        "token_types": token_types,
        "merges": merges,
        "bos_id": 1,
        "eos_id": 2,
        "pad_id": 0,
        "unk_id": 0,
        "add_bos": False,
        "chat_template": CHATML_TEMPLATE,
    }


def add_vocab_to_writer(writer: gguf.GGUFWriter, vocab: dict) -> None:
    """Write the vocabulary's tokenizer.* keys; optional keys are written when present."""
    writer.add_tokenizer_model(vocab["model"])
    if vocab.get("pre"):
        writer.add_tokenizer_pre(vocab["pre"])
    writer.add_token_list(vocab["tokens"])
    writer.add_token_types(vocab["token_types"])
    if vocab.get("scores") is not None:
        writer.add_token_scores(vocab["scores"])
    if vocab.get("merges"):
        writer.add_token_merges(vocab["merges"])
    _add_ids(writer, vocab)
    writer.add_add_bos_token(bool(vocab.get("add_bos", False)))
    writer.add_add_eos_token(bool(vocab.get("add_eos", False)))
    if vocab.get("add_space_prefix") is not None:
        writer.add_add_space_prefix(bool(vocab["add_space_prefix"]))
    if vocab.get("chat_template"):
        writer.add_chat_template(vocab["chat_template"])


def _add_ids(writer: gguf.GGUFWriter, vocab: dict) -> None:
    setters = {
        "bos_id": writer.add_bos_token_id,
        "eos_id": writer.add_eos_token_id,
        "pad_id": writer.add_pad_token_id,
        "unk_id": writer.add_unk_token_id,
    }
    for key, setter in setters.items():
        if vocab.get(key) is not None:
            setter(vocab[key])
