"""Tiny random GGUF decoders for tests, and an independent numpy forward pass to check them.

The reference dequantizes with `gguf` itself and follows llama.cpp's conventions (rotary on
adjacent pairs for llama, on halves for qwen2), so it shares no code with the importer.
"""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
from gguf import GGMLQuantizationType as QT

from tests.helpers.tiny_vocab import add_vocab_to_writer, byte_level_vocab

_K_QUANT_BLOCK = {QT.Q4_K: 144, QT.Q6_K: 210, QT.Q5_K: 176}


def write_tiny_gguf(
    path: Path,
    *,
    arch: str = "llama",
    weight_type: str = "Q4_0",
    embed_type: str = "Q8_0",
    hidden: int = 64,
    layers: int = 2,
    heads: int = 4,
    kv_heads: int = 2,
    ffn: int = 128,
    tied_output: bool = True,
    context_length: int = 256,
    seed: int = 0,
) -> Path:
    """A random decoder of the given shape; the vocabulary is tests.helpers.tiny_vocab's."""
    rng = np.random.default_rng(seed)
    vocab = byte_level_vocab()
    n_vocab = len(vocab["tokens"])
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_block_count(layers)
    writer.add_context_length(context_length)
    writer.add_embedding_length(hidden)
    writer.add_feed_forward_length(ffn)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_name(f"tiny-{arch}-{weight_type}")
    writer.add_license("apache-2.0")
    add_vocab_to_writer(writer, vocab)

    head_dim = hidden // heads

    def add(name, rows, cols, kind, scale=0.2):
        _add_tensor(writer, rng, name, rows, cols, QT[kind], scale)

    add("token_embd.weight", n_vocab, hidden, embed_type, 1.0)
    for i in range(layers):
        add(f"blk.{i}.attn_norm.weight", 1, hidden, "F32", 0.0)
        add(f"blk.{i}.ffn_norm.weight", 1, hidden, "F32", 0.0)
        add(f"blk.{i}.attn_q.weight", heads * head_dim, hidden, weight_type)
        add(f"blk.{i}.attn_k.weight", kv_heads * head_dim, hidden, weight_type)
        add(f"blk.{i}.attn_v.weight", kv_heads * head_dim, hidden, weight_type)
        add(f"blk.{i}.attn_output.weight", hidden, heads * head_dim, weight_type)
        add(f"blk.{i}.ffn_gate.weight", ffn, hidden, weight_type)
        add(f"blk.{i}.ffn_up.weight", ffn, hidden, weight_type)
        add(f"blk.{i}.ffn_down.weight", hidden, ffn, weight_type)
        if arch == "qwen2":
            for part, rows in (("q", heads * head_dim), ("k", kv_heads * head_dim), ("v", kv_heads * head_dim)):
                add(f"blk.{i}.attn_{part}.bias", 1, rows, "F32", 0.5)
    add("output_norm.weight", 1, hidden, "F32", 0.0)
    if not tied_output:
        add("output.weight", n_vocab, hidden, weight_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _add_tensor(writer, rng, name, rows, cols, kind, scale):
    if scale == 0.0:  # norm weights: around one, like trained models
        values = (1.0 + 0.1 * rng.standard_normal(cols)).astype(np.float32)
        writer.add_tensor(name, values)
        return
    values = (scale * rng.standard_normal((rows, cols))).astype(np.float32)
    if rows == 1:
        values = values.reshape(cols)
    if kind == QT.F32:
        writer.add_tensor(name, values)
    elif kind == QT.F16:
        writer.add_tensor(name, values.astype(np.float16))
    elif kind in _K_QUANT_BLOCK:
        writer.add_tensor(name, _random_k_quant(rng, rows, cols, kind), raw_dtype=kind)
    else:
        writer.add_tensor(name, gguf.quants.quantize(values, kind), raw_dtype=kind)


def _random_k_quant(rng, rows, cols, kind) -> np.ndarray:
    """gguf cannot quantize to k-quants, so write random blocks with sane scales."""
    block_bytes = _K_QUANT_BLOCK[kind]
    data = rng.integers(0, 256, size=(rows, cols // 256, block_bytes), dtype=np.uint8)
    scale = np.frombuffer(np.float16(0.002).tobytes(), np.uint8)
    if kind == QT.Q6_K:
        data[..., 208:210] = scale  # d is the last field
        data[..., 192:208] = rng.integers(-20, 20, size=(rows, cols // 256, 16)).astype(np.int8).view(np.uint8)
    else:
        data[..., 0:2] = scale  # d
        data[..., 2:4] = scale  # dmin
    return data.reshape(rows, -1)


# -- the reference forward pass ---------------------------------------------------------------

def reference_logits(path: Path, ids: list[int]) -> np.ndarray:
    """Logits for every position of `ids` [seq, vocab], in float64."""
    reader = gguf.GGUFReader(path)
    arch = reader.fields["general.architecture"].contents()
    meta = lambda key: reader.fields[f"{arch}.{key}"].contents()  # noqa: E731
    w = {t.name: _dequantize(t) for t in reader.tensors}
    heads, kv_heads = meta("attention.head_count"), meta("attention.head_count_kv")
    eps, base = meta("attention.layer_norm_rms_epsilon"), meta("rope.freq_base")
    x = w["token_embd.weight"][ids]
    for i in range(meta("block_count")):
        h = _rms_norm(x, w[f"blk.{i}.attn_norm.weight"], eps)
        x = x + _attention(w, i, h, heads, kv_heads, base, interleaved=(arch == "llama"))
        h = _rms_norm(x, w[f"blk.{i}.ffn_norm.weight"], eps)
        gate, up = h @ w[f"blk.{i}.ffn_gate.weight"].T, h @ w[f"blk.{i}.ffn_up.weight"].T
        x = x + (gate / (1.0 + np.exp(-gate)) * up) @ w[f"blk.{i}.ffn_down.weight"].T
    x = _rms_norm(x, w["output_norm.weight"], eps)
    return x @ w.get("output.weight", w["token_embd.weight"]).T


def _dequantize(tensor) -> np.ndarray:
    shape = tuple(int(d) for d in reversed(tensor.shape))
    data = gguf.quants.dequantize(np.asarray(tensor.data), tensor.tensor_type)
    return data.astype(np.float64).reshape(shape)


def _rms_norm(x, weight, eps):
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * weight


def _attention(w, i, h, heads, kv_heads, base, interleaved):
    seq = h.shape[0]
    q = h @ w[f"blk.{i}.attn_q.weight"].T + w.get(f"blk.{i}.attn_q.bias", 0.0)
    k = h @ w[f"blk.{i}.attn_k.weight"].T + w.get(f"blk.{i}.attn_k.bias", 0.0)
    v = h @ w[f"blk.{i}.attn_v.weight"].T + w.get(f"blk.{i}.attn_v.bias", 0.0)
    head_dim = q.shape[1] // heads
    q = _rope(q.reshape(seq, heads, head_dim), base, interleaved)
    k = _rope(k.reshape(seq, kv_heads, head_dim), base, interleaved)
    v = v.reshape(seq, kv_heads, head_dim)
    group = heads // kv_heads
    out = np.empty_like(q)
    causal = np.triu(np.full((seq, seq), -np.inf), k=1)
    for head in range(heads):
        kv = head // group
        scores = q[:, head] @ k[:, kv].T / np.sqrt(head_dim) + causal
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        out[:, head] = (scores / scores.sum(axis=-1, keepdims=True)) @ v[:, kv]
    return out.reshape(seq, -1) @ w[f"blk.{i}.attn_output.weight"].T


def _rope(x, base, interleaved):
    seq, _, dim = x.shape
    theta = base ** (-np.arange(0, dim, 2) / dim)
    angle = np.arange(seq)[:, None, None] * theta[None, None, :]
    cos, sin = np.cos(angle), np.sin(angle)
    if interleaved:
        a, b = x[..., 0::2], x[..., 1::2]
    else:
        a, b = x[..., : dim // 2], x[..., dim // 2:]
    ra, rb = a * cos - b * sin, a * sin + b * cos
    out = np.empty_like(x)
    if interleaved:
        out[..., 0::2], out[..., 1::2] = ra, rb
    else:
        out[..., : dim // 2], out[..., dim // 2:] = ra, rb
    return out
