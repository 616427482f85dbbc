"""Tiny random GGUF decoders of each supported family, with that family's real tensor names and
metadata keys (gguf.constants MODEL_TENSORS / Keys, as llama.cpp's conversion writes them).

The weights are small (std 0.8 / sqrt(inputs) for most matmuls, 2 / sqrt(inputs) for queries and
keys, so that attention is sharp enough for a wrong rotary or window to show): the logits stay
stable enough under llama.cpp's 8-bit activations that greedy tokens compare, while each feature
still moves them. (Sharper, a model this small turns chaotic: 8-bit activations alone move its
logits by 15%.)
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import gguf
import numpy as np
from gguf import GGMLQuantizationType as QT

from tests.helpers.tiny_vocab import add_vocab_to_writer, byte_level_vocab


@dataclass(frozen=True)
class Family:
    arch: str
    hidden: int = 64
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    head_dim: int = 0  # 0: hidden // heads, and no key_length written
    ffn: int = 128
    context: int = 256
    rope_base: float = 10000.0
    rope_dim: int = 0  # 0: head_dim, and no rope.dimension_count written
    keys: dict = field(default_factory=dict)  # more {arch}.* metadata: suffix -> value
    tensors: tuple[str, ...] = ()  # optional per-family extras, see _extras


FAMILIES = {
    "llama": Family("llama"),
    # Llama 3.x: rope_freqs.weight scales the low frequencies down, as its conversion computes
    "llama3": Family("llama", head_dim=32, hidden=128, rope_base=500000.0, tensors=("rope_freqs",)),
    # Mistral: head_dim apart from hidden / heads, a sliding window that llama.cpp ignores for "llama"
    "mistral": Family("llama", hidden=64, heads=4, kv_heads=1, head_dim=32, rope_base=1e6,
                      keys={"attention.sliding_window": 4096}),
    "qwen3": Family("qwen3", head_dim=32, rope_base=1e6, tensors=("qk_norm",)),
    "smollm3": Family("smollm3", layers=4, rope_base=5e6),
    "gemma3": Family("gemma3", layers=6, heads=4, kv_heads=1, head_dim=32, rope_base=1e6,
                     keys={"attention.sliding_window": 6}, tensors=("qk_norm", "post_norms")),
    # Gemma 3 4B and up: linear rope scaling (factor 8) on the global layers only
    "gemma3_scaled": Family("gemma3", layers=6, heads=4, kv_heads=1, head_dim=32, rope_base=1e6,
                            keys={"attention.sliding_window": 6, "rope.scaling.type": "linear",
                                  "rope.scaling.factor": 8.0},
                            tensors=("qk_norm", "post_norms")),
    # Phi-3.5 / Phi-4-mini: fused qkv and gate-up, partial rotary, LongRoPE factors
    "phi3": Family("phi3", hidden=128, heads=4, kv_heads=2, rope_dim=16, context=4096,
                   keys={"rope.scaling.attn_factor": 1.19, "rope.scaling.original_context_length": 256},
                   tensors=("fused", "longrope")),
}

_METADATA = {  # key suffix -> GGUF value type
    "attention.sliding_window": gguf.GGUFValueType.UINT32,
    "rope.scaling.type": gguf.GGUFValueType.STRING,
    "rope.scaling.factor": gguf.GGUFValueType.FLOAT32,
    "rope.scaling.attn_factor": gguf.GGUFValueType.FLOAT32,
    "rope.scaling.original_context_length": gguf.GGUFValueType.UINT32,
}


def family(name: str, **changes) -> Family:
    return replace(FAMILIES[name], **changes)


def write_family_gguf(path: Path, fam: Family, weight_type: str = "F32", embed_type: str = "F32",
                      seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    vocab = byte_level_vocab()
    writer = gguf.GGUFWriter(str(path), fam.arch)
    _metadata(writer, fam, vocab)
    head_dim = fam.head_dim or fam.hidden // fam.heads

    def add(name, rows, cols, kind=weight_type, scale=None):
        _add_tensor(writer, rng, name, rows, cols, kind, 0.8 / np.sqrt(cols) if scale is None else scale)

    add("token_embd.weight", len(vocab["tokens"]), fam.hidden, embed_type, 1.0)
    for i in range(fam.layers):
        _layer(add, fam, i, head_dim)
    add("output_norm.weight", 1, fam.hidden, "F32", 0.0)
    _extras(writer, rng, fam, head_dim)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _metadata(writer, fam: Family, vocab: dict) -> None:
    writer.add_block_count(fam.layers)
    writer.add_context_length(fam.context)
    writer.add_embedding_length(fam.hidden)
    writer.add_feed_forward_length(fam.ffn)
    writer.add_head_count(fam.heads)
    writer.add_head_count_kv(fam.kv_heads)
    if fam.head_dim:
        writer.add_key_length(fam.head_dim)
        writer.add_value_length(fam.head_dim)
    if fam.rope_dim:
        writer.add_rope_dimension_count(fam.rope_dim)
    writer.add_rope_freq_base(fam.rope_base)
    writer.add_layer_norm_rms_eps(1e-6)
    for suffix, value in fam.keys.items():
        writer.add_key_value(f"{fam.arch}.{suffix}", value, _METADATA[suffix])
    # not the family name: llama.cpp gives a "phi3" name special tokens this vocabulary lacks
    writer.add_name("tiny random decoder")
    add_vocab_to_writer(writer, vocab)


def _layer(add, fam: Family, i: int, head_dim: int) -> None:
    q_rows, kv_rows = fam.heads * head_dim, fam.kv_heads * head_dim
    add(f"blk.{i}.attn_norm.weight", 1, fam.hidden, "F32", 0.0)
    add(f"blk.{i}.ffn_norm.weight", 1, fam.hidden, "F32", 0.0)
    if "fused" in fam.tensors:
        add(f"blk.{i}.attn_qkv.weight", q_rows + 2 * kv_rows, fam.hidden, scale=2 / np.sqrt(fam.hidden))
        add(f"blk.{i}.ffn_up.weight", 2 * fam.ffn, fam.hidden)  # gate rows, then up rows
    else:
        add(f"blk.{i}.attn_q.weight", q_rows, fam.hidden, scale=2 / np.sqrt(fam.hidden))
        add(f"blk.{i}.attn_k.weight", kv_rows, fam.hidden, scale=2 / np.sqrt(fam.hidden))
        add(f"blk.{i}.attn_v.weight", kv_rows, fam.hidden)
        add(f"blk.{i}.ffn_gate.weight", fam.ffn, fam.hidden)
        add(f"blk.{i}.ffn_up.weight", fam.ffn, fam.hidden)
    add(f"blk.{i}.attn_output.weight", fam.hidden, q_rows)
    add(f"blk.{i}.ffn_down.weight", fam.hidden, fam.ffn)
    if "qk_norm" in fam.tensors:
        add(f"blk.{i}.attn_q_norm.weight", 1, head_dim, "F32", 0.0)
        add(f"blk.{i}.attn_k_norm.weight", 1, head_dim, "F32", 0.0)
    if "post_norms" in fam.tensors:
        add(f"blk.{i}.post_attention_norm.weight", 1, fam.hidden, "F32", 0.0)
        add(f"blk.{i}.post_ffw_norm.weight", 1, fam.hidden, "F32", 0.0)


def _extras(writer, rng, fam: Family, head_dim: int) -> None:
    half = (fam.rope_dim or head_dim) // 2
    if "rope_freqs" in fam.tensors:
        # Llama 3's shape: high frequencies kept (1), low ones divided by up to 8
        writer.add_tensor("rope_freqs.weight", np.geomspace(1.0, 8.0, half).astype(np.float32))
    if "longrope" in fam.tensors:
        writer.add_tensor("rope_factors_short.weight", (1.0 + rng.random(half)).astype(np.float32))
        writer.add_tensor("rope_factors_long.weight", (4.0 + 8 * rng.random(half)).astype(np.float32))


def _add_tensor(writer, rng, name: str, rows: int, cols: int, kind: str, scale: float) -> None:
    """scale 0: a norm's weights, around one (Gemma's as its conversion stores them, 1 + w)."""
    if scale == 0.0:
        writer.add_tensor(name, (1.0 + 0.1 * rng.standard_normal(cols)).astype(np.float32))
        return
    values = (scale * rng.standard_normal((rows, cols))).astype(np.float32)
    if kind == "F32":
        writer.add_tensor(name, values)
    elif kind == "F16":
        writer.add_tensor(name, values.astype(np.float16))
    elif kind == "Q4_K":
        writer.add_tensor(name, _zero_mean_q4_k(rng, rows, cols, scale), raw_dtype=QT.Q4_K)
    else:
        writer.add_tensor(name, gguf.quants.quantize(values, QT[kind]), raw_dtype=QT[kind])


def _zero_mean_q4_k(rng, rows: int, cols: int, scale: float) -> np.ndarray:
    """Random Q4_K blocks whose values centre on zero with about `scale` deviation, as trained
    weights do (gguf cannot quantize to Q4_K). A value is d*sc*q - dmin*m; with m = sc and
    dmin = 7.5 d it is d*sc*(q - 7.5)."""
    blocks = rows * cols // 256
    low = rng.integers(16, 64, size=(blocks, 4))  # sub-blocks 0-3: 6-bit sc = m
    high = rng.integers(4, 16, size=(blocks, 4))  # sub-blocks 4-7: 4 bits each for sc and m
    d = scale / (4.6 * np.concatenate([low, high], axis=1).mean())
    block = np.zeros((blocks, 144), np.uint8)
    block[:, 0:2] = np.frombuffer(np.float16(d).tobytes(), np.uint8)
    block[:, 2:4] = np.frombuffer(np.float16(7.5 * d).tobytes(), np.uint8)
    block[:, 4:8], block[:, 8:12] = low, low
    block[:, 12:16] = high | (high << 4)
    block[:, 16:] = rng.integers(0, 256, size=(blocks, 128), dtype=np.uint8)
    return block.reshape(rows, -1)
