"""Random-weight GGUF files of real model shapes, for the LLM benchmark (issue 19).

The shapes are those of Qwen2.5-0.5B and Qwen3-1.7B, with the tensor types a Q4_K_M conversion
by llama.cpp gives them: Q4_K, with Q6_K for attn_v and ffn_down on llama.cpp's "more bits"
layers (the first and last eighth, every third in between) and for the tied embedding/output.
Rows of 896 values (Qwen2.5-0.5B) cannot hold K-quants' 256-value super-blocks, so there llama.cpp
falls back, and so do these files: Q4_K -> Q5_0, Q6_K -> Q8_0.

The blocks are random bytes with scales chosen so that the values centre near zero with
about 0.8 / sqrt(inputs) deviation; the vocabulary is the real size, made of filler tokens
(the benchmark feeds token ids). A file is written once and reused from the cache folder.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Shape:
    arch: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int = 151936
    context: int = 32768
    qk_norm: bool = False
    qkv_bias: bool = False


SHAPES = {
    "qwen2.5-0.5b": Shape("qwen2", 896, 24, 14, 2, 64, 4864, qkv_bias=True),
    "qwen3-1.7b": Shape("qwen3", 2048, 28, 16, 8, 128, 6144, context=40960, qk_norm=True),
}

# bytes per block, values per block (names, so that the benchmark's llama.cpp worker, whose
# venv lacks gguf, can import this module)
_BLOCKS = {"Q4_K": (144, 256), "Q6_K": (210, 256), "Q5_0": (22, 32), "Q8_0": (34, 32)}
_FALLBACK = {"Q4_K": "Q5_0", "Q6_K": "Q8_0"}  # llama.cpp's, for rows not a multiple of 256


def shape_file(name: str, folder: Path) -> Path:
    """The cached file of that shape, written on first use."""
    path = Path(folder) / f"random-{name}-Q4_K_M.gguf"
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        write_shape(SHAPES[name], tmp)
        tmp.replace(path)
    return path


def more_bits(layer: int, layers: int) -> bool:
    """llama.cpp's use_more_bits: where Q4_K_M stores attn_v and ffn_down as Q6_K."""
    return layer < layers // 8 or layer >= 7 * layers // 8 or (layer - layers // 8) % 3 == 2


def write_shape(shape: Shape, path: Path, seed: int = 0) -> Path:
    import gguf

    rng = np.random.default_rng(seed)
    writer = gguf.GGUFWriter(str(path), shape.arch)
    _metadata(writer, shape)

    def add(name, rows, cols, kind, scale=None):
        if cols % 256 and kind in _FALLBACK:
            kind = _FALLBACK[kind]
        data = random_blocks(rng, rows, cols, kind, scale or 0.8 / np.sqrt(cols))
        writer.add_tensor(name, data, raw_dtype=gguf.GGMLQuantizationType[kind])

    add("token_embd.weight", shape.vocab, shape.hidden, "Q6_K", 1.0)  # tied: also the output
    for i in range(shape.layers):
        _layer(writer, rng, add, shape, i)
    writer.add_tensor("output_norm.weight", _norm(rng, shape.hidden))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _layer(writer, rng, add, shape: Shape, i: int) -> None:
    q_rows, kv_rows = shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
    wide = "Q6_K" if more_bits(i, shape.layers) else "Q4_K"
    writer.add_tensor(f"blk.{i}.attn_norm.weight", _norm(rng, shape.hidden))
    writer.add_tensor(f"blk.{i}.ffn_norm.weight", _norm(rng, shape.hidden))
    add(f"blk.{i}.attn_q.weight", q_rows, shape.hidden, "Q4_K", 2 / np.sqrt(shape.hidden))
    add(f"blk.{i}.attn_k.weight", kv_rows, shape.hidden, "Q4_K", 2 / np.sqrt(shape.hidden))
    add(f"blk.{i}.attn_v.weight", kv_rows, shape.hidden, wide)
    add(f"blk.{i}.attn_output.weight", shape.hidden, q_rows, "Q4_K")
    add(f"blk.{i}.ffn_gate.weight", shape.ffn, shape.hidden, "Q4_K")
    add(f"blk.{i}.ffn_up.weight", shape.ffn, shape.hidden, "Q4_K")
    add(f"blk.{i}.ffn_down.weight", shape.hidden, shape.ffn, wide)
    if shape.qkv_bias:
        for part, rows in (("q", q_rows), ("k", kv_rows), ("v", kv_rows)):
            writer.add_tensor(f"blk.{i}.attn_{part}.bias", (0.1 * rng.standard_normal(rows)).astype(np.float32))
    if shape.qk_norm:
        writer.add_tensor(f"blk.{i}.attn_q_norm.weight", _norm(rng, shape.head_dim))
        writer.add_tensor(f"blk.{i}.attn_k_norm.weight", _norm(rng, shape.head_dim))


def _norm(rng, n: int) -> np.ndarray:
    return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)


def _f16_bytes(value: float) -> np.ndarray:
    return np.frombuffer(np.float16(value).tobytes(), np.uint8)


def random_blocks(rng, rows: int, cols: int, kind: str, scale: float) -> np.ndarray:
    """Random blocks of `kind` whose values have about `scale` deviation around zero."""
    size, per = _BLOCKS[kind]
    blocks = rng.integers(0, 256, size=(rows * cols // per, size), dtype=np.uint8)
    if kind == "Q8_0":  # d * q, q int8 (deviation 74)
        blocks[:, 0:2] = _f16_bytes(scale / 74)
    elif kind == "Q5_0":  # d * (q - 16), q 0..31 (deviation 9.2)
        blocks[:, 0:2] = _f16_bytes(scale / 9.2)
    elif kind == "Q4_K":  # d*sc*q - dmin*m with every sc = m = 32 and dmin = 7.5 d
        d = scale / (32 * 4.6)
        blocks[:, 0:2], blocks[:, 2:4] = _f16_bytes(d), _f16_bytes(7.5 * d)
        blocks[:, 4:12], blocks[:, 12:16] = 0xA0, 0x00  # 6-bit 32s, high bits of sub-blocks 4-7
    else:  # Q6_K: d * sc * (q - 32), int8 scales of 16
        blocks[:, 192:208] = 16
        blocks[:, 208:210] = _f16_bytes(scale / (16 * 18.5))
    return blocks.reshape(rows, -1)


def _metadata(writer, shape: Shape) -> None:
    writer.add_name(f"random {shape.arch} {shape.hidden}x{shape.layers}")
    writer.add_block_count(shape.layers)
    writer.add_context_length(shape.context)
    writer.add_embedding_length(shape.hidden)
    writer.add_feed_forward_length(shape.ffn)
    writer.add_head_count(shape.heads)
    writer.add_head_count_kv(shape.kv_heads)
    if shape.head_dim != shape.hidden // shape.heads:
        writer.add_key_length(shape.head_dim)
        writer.add_value_length(shape.head_dim)
    writer.add_rope_freq_base(1e6)
    writer.add_layer_norm_rms_eps(1e-6)
    _vocab(writer, shape.vocab)


def _vocab(writer, size: int) -> None:
    """A byte-level BPE vocabulary of `size` tokens: specials, bytes, then unique fillers."""
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    from tests.helpers.tiny_vocab import bytes_to_unicode  # GPT-2's byte alphabet

    tokens = specials + list(bytes_to_unicode().values())
    tokens += ["to", "tok"]  # what the two merges below make
    tokens += [f"tok{i}" for i in range(size - len(tokens))]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(tokens)
    writer.add_token_types([3] * len(specials) + [1] * (size - len(specials)))
    writer.add_token_merges(["t o", "to k"])
    writer.add_bos_token_id(0)
    writer.add_eos_token_id(2)
    writer.add_pad_token_id(0)
    writer.add_add_bos_token(False)
