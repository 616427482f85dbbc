"""GGUF tensors as ONNX Runtime weights.

Matmul weights become `MatMulNBits` blocks of 32 along K:
- Q4_0 (w = d*(q-8)) maps exactly: only the nibble order changes.
- Q4_1 (w = d*q + m) maps exactly as d*(q-8) plus a per-block offset c = m + 8d, applied as
  (sum of the block's inputs) * c, the way llama.cpp's own Q4_1 kernels do. A float zero point
  (-m/d) would also be exact, but ONNX Runtime then takes a path 50-100x slower.
- Q8_0 (w = d*q, q int8) maps exactly onto 8-bit blocks with zero point 128.
- Other quantized types are dequantized with `gguf` and re-quantized: types of at most 4 bits
  to 4-bit blocks, wider ones (Q5_x, Q6_K, ...) to 8-bit blocks, so no precision is thrown away.
- F32, F16 and BF16 weights stay float (exact).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from gguf import GGMLQuantizationType as QT
from gguf import quants

from engine.errors import ModelError

BLOCK = 32
FLOAT_TYPES = {QT.F32, QT.F16, QT.BF16}
_AT_MOST_4_BITS = {
    QT.Q4_K, QT.Q3_K, QT.Q2_K, QT.IQ4_NL, QT.IQ4_XS, QT.IQ3_S, QT.IQ3_XXS,
    QT.IQ2_S, QT.IQ2_XS, QT.IQ2_XXS, QT.IQ1_S, QT.IQ1_M, QT.TQ1_0, QT.TQ2_0, QT.MXFP4,
}


@dataclass(frozen=True)
class BlockWeight:
    """A [N, K] weight in MatMulNBits layout (blocks of 32 along K)."""

    bits: int
    packed: np.ndarray  # uint8 [N, K/32, 32*bits/8]
    scales: np.ndarray  # float32 [N, K/32]
    zero_points: np.ndarray | None  # uint8 4-bit pairs [N, ceil(K/64)], or None (the default)
    offsets: np.ndarray | None = None  # float32 [N, K/32], added per block: w = dequant + c

    @property
    def n(self) -> int:
        return self.packed.shape[0]

    @property
    def k(self) -> int:
        return self.packed.shape[1] * BLOCK


def tensor_rows(tensor) -> np.ndarray:
    """The raw GGUF data as [rows, bytes-or-values], rows being the output dimension."""
    data = np.asarray(tensor.data)
    return data.reshape(int(np.prod(tensor.shape[1:])), -1)


def to_float(tensor) -> np.ndarray:
    """Any GGUF tensor, dequantized, in numpy (row-major, reversed GGUF) shape."""
    data = np.asarray(tensor.data)
    if tensor.tensor_type == QT.F32:
        values = data.astype(np.float32)
    elif tensor.tensor_type == QT.F16:
        values = data.astype(np.float32)
    else:
        values = quants.dequantize(data, tensor.tensor_type).astype(np.float32)
    shape = tuple(int(d) for d in reversed(tensor.shape))
    return values.reshape(shape)


def matmul_weight(tensor) -> BlockWeight | np.ndarray:
    """The [N, K] weight of a GGUF matmul tensor: blocks, or float32 for float tensors."""
    kind = tensor.tensor_type
    if kind in FLOAT_TYPES:
        return to_float(tensor)
    k = int(tensor.shape[0])
    if k % BLOCK:
        raise ModelError(f"Tensor '{tensor.name}' has {k} columns, not a multiple of {BLOCK}.")
    rows = tensor_rows(tensor)
    if kind == QT.Q4_0:
        return _from_q4_0(rows, k)
    if kind == QT.Q4_1:
        return _from_q4_1(rows, k)
    if kind == QT.Q8_0:
        return _from_q8_0(rows, k)
    try:
        dense = to_float(tensor).reshape(-1, k)
    except (NotImplementedError, ValueError, KeyError) as exc:
        raise ModelError(
            f"Tensor '{tensor.name}' uses the {kind.name} format, which cannot be read; "
            "convert the GGUF to Q4_0, Q4_1, Q8_0 or a k-quant first."
        ) from exc
    return quantize_blocks(dense, 4 if kind in _AT_MOST_4_BITS else 8)


def _split_blocks(rows: np.ndarray, k: int, block_bytes: int) -> np.ndarray:
    return rows.reshape(rows.shape[0], k // BLOCK, block_bytes)


def _f16(blocks: np.ndarray, start: int) -> np.ndarray:
    raw = np.ascontiguousarray(blocks[..., start:start + 2])
    return raw.view(np.float16)[..., 0].astype(np.float32)


def _repack_nibbles(qs: np.ndarray) -> np.ndarray:
    """GGUF keeps value j in the low nibble of byte j and value j+16 in its high nibble;
    MatMulNBits keeps values 2i and 2i+1 in the low and high nibbles of byte i."""
    values = np.concatenate([qs & 0x0F, qs >> 4], axis=-1)
    return pack_nibbles(values)


def pack_nibbles(values: np.ndarray) -> np.ndarray:
    """[..., 2m] values in 0..15 -> [..., m] bytes, even index in the low nibble."""
    values = values.astype(np.uint8)
    return (values[..., 0::2] | (values[..., 1::2] << 4)).astype(np.uint8)


def _from_q4_0(rows: np.ndarray, k: int) -> BlockWeight:
    blocks = _split_blocks(rows, k, 18)
    return BlockWeight(4, _repack_nibbles(blocks[..., 2:]), _f16(blocks, 0), None)


def _from_q4_1(rows: np.ndarray, k: int) -> BlockWeight:
    blocks = _split_blocks(rows, k, 20)
    scale, minimum = _f16(blocks, 0), _f16(blocks, 2)
    offsets = (minimum + 8.0 * scale).astype(np.float32)
    return BlockWeight(4, _repack_nibbles(blocks[..., 4:]), scale, None, offsets)


def _from_q8_0(rows: np.ndarray, k: int) -> BlockWeight:
    blocks = _split_blocks(rows, k, 34)
    codes = (blocks[..., 2:].view(np.int8).astype(np.int16) + 128).astype(np.uint8)
    return BlockWeight(8, codes, _f16(blocks, 0), None)


def quantize_blocks(dense: np.ndarray, bits: int) -> BlockWeight:
    """Round-to-nearest block quantization of a float [N, K] weight: asymmetric 4-bit
    (uint8 zero points), or symmetric 8-bit with the default zero point 128."""
    n, k = dense.shape
    blocks = dense.reshape(n, k // BLOCK, BLOCK).astype(np.float32)
    if bits == 8:
        scale = np.abs(blocks).max(axis=-1) / 127.0
        inv = np.divide(1.0, scale, out=np.zeros_like(scale), where=scale > 0)
        codes = np.clip(np.rint(blocks * inv[..., None]), -127, 127) + 128
        return BlockWeight(8, codes.astype(np.uint8), scale.astype(np.float32), None)
    low = np.minimum(blocks.min(axis=-1), 0.0)
    high = np.maximum(blocks.max(axis=-1), 0.0)
    scale = (high - low) / 15.0
    inv = np.divide(1.0, scale, out=np.zeros_like(scale), where=scale > 0)
    zero = np.clip(np.rint(-low * inv), 0, 15)
    codes = np.clip(np.rint(blocks * inv[..., None]) + zero[..., None], 0, 15)
    zero_packed = _pack_zero_points(zero.astype(np.uint8))
    return BlockWeight(4, pack_nibbles(codes), scale.astype(np.float32), zero_packed)


def _pack_zero_points(zero: np.ndarray) -> np.ndarray:
    """uint8 4-bit zero points: per row, pairs of blocks share a byte (row padded to even)."""
    n, blocks = zero.shape
    if blocks % 2:
        zero = np.concatenate([zero, np.full((n, 1), 8, np.uint8)], axis=1)
    return pack_nibbles(zero)


def concat_rows(weights: list[BlockWeight | np.ndarray]) -> BlockWeight | np.ndarray | None:
    """Stack weights along N (fusing q/k/v or gate/up) when their layouts agree, else None."""
    first = weights[0]
    if all(isinstance(w, np.ndarray) for w in weights):
        return np.concatenate(weights, axis=0)
    if not all(isinstance(w, BlockWeight) for w in weights):
        return None
    if any(w.bits != first.bits or w.k != first.k for w in weights):
        return None
    if len({w.zero_points is None for w in weights}) > 1:
        return None
    zero_points = None if first.zero_points is None else np.concatenate([w.zero_points for w in weights])
    offsets = None
    if any(w.offsets is not None for w in weights):  # a weight without offsets has zero ones
        offsets = np.concatenate([np.zeros_like(w.scales) if w.offsets is None else w.offsets for w in weights])
    return BlockWeight(
        first.bits,
        np.concatenate([w.packed for w in weights], axis=0),
        np.concatenate([w.scales for w in weights], axis=0),
        zero_points,
        offsets,
    )
