"""GGUF tensors as ONNX Runtime weights.

Matmul weights become `MatMulNBits` blocks of 32 along K:
- Q4_0 (w = d*(q-8)) maps exactly: only the nibble order changes.
- Q4_1 (w = d*q + m) maps exactly as d*(q-8) plus a per-block offset c = m + 8d, applied as
  (sum of the block's inputs) * c, the way llama.cpp's own Q4_1 kernels do. A float zero point
  (-m/d) would also be exact, but ONNX Runtime then takes a path 50-100x slower.
- Q8_0 (w = d*q, q int8) maps exactly onto 8-bit blocks with zero point 128.
- Q4_K (sub-blocks of 32, w = d*sc*q - dmin*m) maps exactly onto 4-bit blocks with per-block
  scale d*sc (a float32 product of an f16 and a 6-bit integer: no rounding) and offset.
- Q5_0, Q5_1 and Q5_K (5-bit codes) map exactly onto 8-bit blocks, with offsets where needed.
- Q2_K, Q3_K and Q6_K use sub-blocks of 16 with their own scales, which one block of 32 cannot
  hold: they are dequantized with `gguf` and re-quantized, Q2_K/Q3_K to 4-bit blocks (to keep
  the small size their user chose), Q6_K to 8-bit blocks; so are the rarer IQ*/TQ* types.
  `sub_block_weight` maps them exactly onto blocks of 16 instead (Q6_K 8-bit, Q3_K 4-bit,
  Q2_K 4-bit with offsets), which MatMulNBits accepts; it is used once the graph passes each
  weight's `block` as MatMulNBits' block_size (SUB_BLOCKS_OF_16).
- F32, F16 and BF16 weights stay float (exact); `gguf.quants` decodes BF16.

The per-block float offsets of Q4_1/Q4_K/Q5_1/Q5_K can become integer zero points instead
(`offsets`, see OFFSETS; `fold_offsets` fits codes, scale and zero point again per block, not
exactly): ONNX Runtime's MatMulNBits then runs its prepacked int8-activation kernel alone, with
no offset subgraph beside it (issue 31).

Each conversion is noted (tensor -> how it was stored, exact or not) while `recording()` is
active, so an import can tell the user which tensors were re-quantized.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, replace

import numpy as np
from gguf import GGMLQuantizationType as QT
from gguf import quants

from engine.errors import ModelError

BLOCK = 32
CHUNK_VALUES = 1 << 22  # weights converted at a time (16 MB as float32)
# True once decoder_graph builds MatMulNBits (and its block sums) with each weight's `block`.
SUB_BLOCKS_OF_16 = False
FLOAT_TYPES = {QT.F32, QT.F16, QT.BF16}
_AT_MOST_4_BITS = {
    QT.Q3_K, QT.Q2_K, QT.IQ4_NL, QT.IQ4_XS, QT.IQ3_S, QT.IQ3_XXS,
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
    block: int = BLOCK  # values per block along K (16 for sub_block_weight's)

    @property
    def n(self) -> int:
        return self.packed.shape[0]

    @property
    def k(self) -> int:
        return self.packed.shape[1] * self.block


@dataclass(frozen=True)
class Conversion:
    """How one GGUF tensor was stored in the ONNX model."""

    gguf_type: str  # the GGUF type name: "Q4_K", "F16", ...
    stored: str  # "int4" | "int8" | "float32"
    exact: bool  # True when every value is the GGUF's own dequantized value

    def describe(self) -> str:
        how = "kept exactly" if self.exact else "re-quantized"
        return f"{self.gguf_type} {how} as {self.stored}"


_RECORD: ContextVar[dict[str, Conversion] | None] = ContextVar("gguf_conversions", default=None)


@contextlib.contextmanager
def recording() -> Iterator[dict[str, Conversion]]:
    """Collects tensor name -> Conversion for every tensor converted inside the block."""
    record: dict[str, Conversion] = {}
    token = _RECORD.set(record)
    try:
        yield record
    finally:
        _RECORD.reset(token)


def _note(tensor, stored: str, exact: bool) -> None:
    record = _RECORD.get()
    if record is not None:
        record[str(tensor.name)] = Conversion(tensor.tensor_type.name, stored, exact)


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
    _note(tensor, "float32", exact=True)
    return values.reshape(shape)


def matmul_weight(tensor, offsets: str = "exact") -> BlockWeight | np.ndarray:
    """The [N, K] weight of a GGUF matmul tensor: blocks, or float32 for float tensors.
    offsets: how the offset types keep their per-block offsets (OFFSETS)."""
    kind = tensor.tensor_type
    if kind in FLOAT_TYPES:
        return to_float(tensor)
    k = int(tensor.shape[0])
    if k % BLOCK:
        raise ModelError(f"Tensor '{tensor.name}' has {k} columns, not a multiple of {BLOCK}.")
    convert = _EXACT.get(kind)
    if SUB_BLOCKS_OF_16 and kind in _PROBES:
        convert = _sub_blocks
    exact = convert is not None
    if offsets != "exact" and kind in OFFSET_TYPES:
        convert, exact = _folded(convert, OFFSETS[offsets]), False
    try:
        weight = _by_row_chunks(convert or _requantize, tensor_rows(tensor), k, kind)
    except (NotImplementedError, ValueError, KeyError) as exc:
        raise ModelError(
            f"Tensor '{tensor.name}' uses the {kind.name} format, which cannot be read; "
            "convert the GGUF to Q4_K_M, Q8_0 or another common type first."
        ) from exc
    _note(tensor, f"int{weight.bits}", exact=exact)
    return weight


def _folded(convert, bits: int | None):
    return lambda rows, k, kind: fold_offsets(convert(rows, k, kind), bits)


def embedding_weight(tensor) -> BlockWeight | np.ndarray:
    """A token embedding table [vocab, hidden], gathered from its blocks: every block type
    exactly (Q2_K/Q3_K/Q6_K in their blocks of 16, whose cost is only a matmul's), others
    re-quantized as for a matmul; float types stay float32."""
    if tensor.tensor_type not in _PROBES:
        return matmul_weight(tensor)
    weight = sub_block_weight(tensor)
    _note(tensor, f"int{weight.bits}", exact=True)
    return weight


def _by_row_chunks(convert, rows: np.ndarray, k: int, kind: QT) -> BlockWeight:
    """convert(rows, k, kind) over slices of rows: a dequantized float32 copy of a whole output
    layer (152k x 896 for Qwen2.5) would add half a GB to the import's peak."""
    step = max(1, CHUNK_VALUES // k)
    first = convert(rows[:step], k, kind)
    if rows.shape[0] <= step:
        return first
    # each slice goes into arrays of the whole tensor: joining the slices at the end would hold
    # the largest tensor (an output layer) twice
    whole = _RowFiller(first, rows.shape[0])
    for start in range(step, rows.shape[0], step):
        whole.put(start, convert(rows[start:start + step], k, kind))
    return whole.weight()


class _RowFiller:
    """A BlockWeight of n rows, filled slice by slice (slices alike but for their offsets)."""

    def __init__(self, first: BlockWeight, n: int):
        self.first = first
        self.packed = np.empty((n, *first.packed.shape[1:]), first.packed.dtype)
        self.scales = np.empty((n, *first.scales.shape[1:]), first.scales.dtype)
        self.zero_points = None if first.zero_points is None else np.empty(
            (n, *first.zero_points.shape[1:]), first.zero_points.dtype)
        self.offsets = None
        self.put(0, first)

    def put(self, start: int, part: BlockWeight) -> None:
        stop = start + part.n
        self.packed[start:stop], self.scales[start:stop] = part.packed, part.scales
        if self.zero_points is not None:
            self.zero_points[start:stop] = part.zero_points
        if part.offsets is not None:
            if self.offsets is None:  # slices before had none: zero offsets
                self.offsets = np.zeros(self.scales.shape, np.float32)
            self.offsets[start:stop] = part.offsets

    def weight(self) -> BlockWeight:
        return BlockWeight(self.first.bits, self.packed, self.scales, self.zero_points, self.offsets, self.first.block)


def _requantize(rows: np.ndarray, k: int, kind: QT) -> BlockWeight:
    return quantize_blocks(_dense(rows, k, kind), 4 if kind in _AT_MOST_4_BITS else 8)


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


def _from_q4_0(rows: np.ndarray, k: int, _kind=None) -> BlockWeight:
    blocks = _split_blocks(rows, k, 18)
    return BlockWeight(4, _repack_nibbles(blocks[..., 2:]), _f16(blocks, 0), None)


def _from_q4_1(rows: np.ndarray, k: int, _kind=None) -> BlockWeight:
    blocks = _split_blocks(rows, k, 20)
    scale, minimum = _f16(blocks, 0), _f16(blocks, 2)
    offsets = (minimum + 8.0 * scale).astype(np.float32)
    return BlockWeight(4, _repack_nibbles(blocks[..., 4:]), scale, None, offsets)


def _from_q8_0(rows: np.ndarray, k: int, _kind=None) -> BlockWeight:
    blocks = _split_blocks(rows, k, 34)
    codes = (blocks[..., 2:].view(np.int8).astype(np.int16) + 128).astype(np.uint8)
    return BlockWeight(8, codes, _f16(blocks, 0), None)


def _from_q5_0(rows: np.ndarray, k: int, kind: QT) -> BlockWeight:
    scale = _f16(_split_blocks(rows, k, 22), 0)  # w = d*(q-16)
    return _codes_on_grid(_dense(rows, k, kind), scale, None, bits=8)


def _from_q5_1(rows: np.ndarray, k: int, kind: QT) -> BlockWeight:
    blocks = _split_blocks(rows, k, 24)  # w = d*q + m
    return _codes_on_grid(_dense(rows, k, kind), _f16(blocks, 0), _f16(blocks, 2), bits=8)


def _k_quant_grid(rows: np.ndarray, k: int, block_bytes: int) -> tuple[np.ndarray, np.ndarray]:
    """Per block of 32, the scale d*sc and offset -dmin*m of a Q4_K/Q5_K super-block of 256."""
    supers = rows.reshape(rows.shape[0], k // 256, block_bytes)
    sc, mins = quants.Q4_K.get_scale_min(np.ascontiguousarray(supers[..., 4:16]).reshape(-1, 12))
    sc = sc.reshape(*supers.shape[:2], 8).astype(np.float32)
    mins = mins.reshape(*supers.shape[:2], 8).astype(np.float32)
    d, dmin = _f16(supers, 0)[..., None], _f16(supers, 2)[..., None]
    return (d * sc).reshape(rows.shape[0], -1), (-dmin * mins).reshape(rows.shape[0], -1)


def _from_q4_k(rows: np.ndarray, k: int, kind: QT) -> BlockWeight:
    scale, offset = _k_quant_grid(rows, k, 144)
    return _codes_on_grid(_dense(rows, k, kind), scale, offset, bits=4)


def _from_q5_k(rows: np.ndarray, k: int, kind: QT) -> BlockWeight:
    scale, offset = _k_quant_grid(rows, k, 176)
    return _codes_on_grid(_dense(rows, k, kind), scale, offset, bits=8)


def _dense(rows: np.ndarray, k: int, kind: QT) -> np.ndarray:
    """Raw GGUF rows [n, bytes] dequantized by `gguf`: float32 [n, k]."""
    return quants.dequantize(rows, kind).astype(np.float32, copy=False).reshape(-1, k)


def _codes_on_grid(dense: np.ndarray, scale: np.ndarray, offset: np.ndarray | None, bits: int,
                   block: int = BLOCK, shift: int | None = None) -> BlockWeight:
    """Blocks for values known to lie on w = q*scale + offset (q a small integer per block):
    q is read back from the dequantized values, which is simpler than unpacking each format's
    bit layout and exact, the grid being known. MatMulNBits computes (code - Z)*scale with
    Z = 8 or 128; codes are q + shift (by default 0 for 4 bits, 128 for 8), the rest of the
    value, offset + (Z - shift)*scale, goes to the offsets."""
    n = dense.shape[0]
    middle = 8 if bits == 4 else 128
    shift = (0 if bits == 4 else 128) if shift is None else shift
    blocks = dense.reshape(n, -1, block).astype(np.float32)
    base = np.zeros_like(scale) if offset is None else offset
    inv = np.divide(1.0, scale, out=np.zeros_like(scale), where=scale != 0)
    codes = np.clip(np.rint((blocks - base[..., None]) * inv[..., None]) + shift, 0, 2 ** bits - 1)
    packed = pack_nibbles(codes) if bits == 4 else codes.astype(np.uint8)
    offsets = (base + (middle - shift) * scale).astype(np.float32)
    return BlockWeight(bits, packed, scale.astype(np.float32), None, offsets if offsets.any() else None, block)


# Sub-block formats: bytes per super-block of 256, and the code bytes to overwrite so that every
# value decodes to q = 0 and to q = 1 (their dequantized values are then each sub-block's offset
# and offset + scale: no need to unpack each format's packed scales).
_PROBES = {
    QT.Q2_K: (84, 4, (((16, 80), (0x00, 0x55)),)),  # 2-bit codes, w = d*sc*q - dmin*m
    QT.Q3_K: (110, 4, (((0, 32), (0xFF, 0xFF)), ((32, 96), (0x00, 0x55)))),  # q in -4..3
    QT.Q6_K: (210, 8, (((0, 128), (0x00, 0x11)), ((128, 192), (0xAA, 0xAA)))),  # q - 32
}


def sub_block_weight(tensor) -> BlockWeight:
    """A Q2_K, Q3_K or Q6_K weight, exactly, in blocks of 16 (their sub-blocks)."""
    k = int(tensor.shape[0])
    return _by_row_chunks(_sub_blocks, tensor_rows(tensor), k, tensor.tensor_type)


def _sub_blocks(rows: np.ndarray, k: int, kind: QT) -> BlockWeight:
    size, bits, codes = _PROBES[kind]
    probes = []
    for q in (0, 1):
        probe = rows.reshape(-1, size).copy()
        for (start, stop), patterns in codes:
            probe[:, start:stop] = patterns[q]
        probes.append(quants.dequantize(probe, kind).reshape(-1, k)[:, ::16])
    offset, scale = probes[0], probes[1] - probes[0]
    shift = 8 if kind == QT.Q3_K else None  # Q3_K's q is signed
    return _codes_on_grid(_dense(rows, k, kind), scale, offset if offset.any() else None, bits, 16, shift)


_EXACT = {QT.Q4_0: _from_q4_0, QT.Q4_1: _from_q4_1, QT.Q8_0: _from_q8_0, QT.Q5_0: _from_q5_0,
          QT.Q5_1: _from_q5_1, QT.Q4_K: _from_q4_k, QT.Q5_K: _from_q5_k}


# Types whose exact mapping carries a float offset per block (w = d*q + m)
OFFSET_TYPES = {QT.Q4_1, QT.Q4_K, QT.Q5_1, QT.Q5_K}
# How those offsets are kept -> the width of the folded blocks (None: the tensor's own):
# "exact": float offsets, added by a subgraph beside MatMulNBits (exact, more kernels);
# "zero_points": integer zero points, 4-bit types stay 4-bit (about a quarter of a step off);
# "zero_points_8bit": integer zero points in 8-bit blocks (1/55 of a step off, twice the codes).
OFFSETS = {"exact": None, "zero_points": None, "zero_points_8bit": 8}
_REFITS = 2  # rounds of re-rounding the codes to the fitted scale, then fitting the scale again


def fold_offsets(weight: BlockWeight, bits: int | None = None) -> BlockWeight:
    """A weight without zero points, as `bits`-wide blocks (default: its own) with integer zero
    points and no float offsets: w ~ scale * (code - zero), what MatMulNBits' prepacked kernels
    take. Not exact: per block, the fit with the least squared error among round-to-nearest over
    the block's range (and 0), the file's own codes spread over the new width with the zero
    points next to where the block's values cross 0 (_kept_codes), and the best of those
    rounded again to its fitted scale and zero point."""
    values = block_values(weight)
    bits = bits or weight.bits
    top = 2 ** bits - 1
    q, levels = _file_codes(weight)
    candidates = [_round_to_nearest(values, top), *_kept_codes(values, q * (top // (levels - 1)), top)]
    best, error = candidates[0], _squared_error(values, candidates[0])
    for other in candidates[1:]:
        best, error = _better(values, best, error, other)
    for _ in range(_REFITS):
        again = _refit(values, _codes_for(values, best[2], best[1], top), best[1])
        best, error = _better(values, best, error, again)
    return _packed_fit(weight.block, bits, *best)


def _file_codes(weight: BlockWeight) -> tuple[np.ndarray, int]:
    """The file's integer codes q and how many levels they have: 4-bit codes are q (Q4_1,
    Q4_K); 8-bit ones q + 128 with q < 32 (Q5_1, Q5_K: see _codes_on_grid)."""
    codes = unpacked_codes(weight).astype(np.float32)
    return (codes, 16) if weight.bits == 4 else (codes - 128, 32)


def unpacked_codes(weight: BlockWeight) -> np.ndarray:
    """uint8 codes [n, blocks, block] (4-bit: byte i holds values 2i and 2i+1)."""
    if weight.bits == 8:
        return weight.packed.reshape(weight.n, -1, weight.block)
    pairs = np.stack([weight.packed & 0x0F, weight.packed >> 4], axis=-1)
    return pairs.reshape(weight.n, -1, weight.block)


def block_values(weight: BlockWeight) -> np.ndarray:
    """float32 [n, blocks, block] of a weight without zero points: (code - Z) * scale + offset."""
    middle = 2 ** (weight.bits - 1)
    values = (unpacked_codes(weight).astype(np.float32) - middle) * weight.scales[..., None]
    if weight.offsets is not None:
        values += weight.offsets[..., None]
    return values


def _inverse(scale: np.ndarray) -> np.ndarray:
    return np.divide(1.0, scale, out=np.zeros_like(scale), where=scale > 0)


def _codes_for(values: np.ndarray, scale: np.ndarray, zero: np.ndarray, top: int) -> np.ndarray:
    return np.clip(np.rint(values * _inverse(scale)[..., None]) + zero[..., None], 0, top)


def _round_to_nearest(values: np.ndarray, top: int) -> tuple:
    low = np.minimum(values.min(axis=-1), 0.0)  # the range holds 0: zero points are codes
    high = np.maximum(values.max(axis=-1), 0.0)
    scale = (high - low) / top
    zero = np.clip(np.rint(-low * _inverse(scale)), 0, top)
    return _codes_for(values, scale, zero, top), zero, scale


def _kept_codes(values: np.ndarray, codes: np.ndarray, top: int) -> list[tuple]:
    """The file's codes (spread evenly over the new width): the grid keeps its spacing, only
    its zero moves, to the integer code either side of where a line fitted through the
    block's values crosses 0; each with its least-squares scale."""
    mean_code, mean_value = codes.mean(axis=-1), values.mean(axis=-1)
    centred = codes - mean_code[..., None]
    spread = (centred * centred).sum(axis=-1)
    slope = np.divide((centred * values).sum(axis=-1), spread, out=np.zeros_like(spread), where=spread > 0)
    crossing = mean_code - np.divide(mean_value, slope, out=np.zeros_like(slope), where=slope > 0)
    return [_refit(values, codes, np.clip(edge(crossing), 0, top)) for edge in (np.floor, np.ceil)]


def _refit(values: np.ndarray, codes: np.ndarray, zero: np.ndarray) -> tuple:
    """The least-squares scale of each block for these codes and zero points."""
    shifted = codes - zero[..., None]
    num, den = (values * shifted).sum(-1), (shifted * shifted).sum(-1)
    scale = np.divide(num, den, out=np.zeros_like(num), where=(den > 0) & (num > 0))
    return codes, zero, scale


def _squared_error(values: np.ndarray, fit: tuple) -> np.ndarray:
    codes, zero, scale = fit
    return ((values - scale[..., None] * (codes - zero[..., None])) ** 2).sum(-1)


def _better(values: np.ndarray, best: tuple, best_error: np.ndarray, other: tuple) -> tuple:
    """Per block, the fit (codes, zero, scale) with the lesser squared error, and that error."""
    error = _squared_error(values, other)
    better = error < best_error
    merged = (np.where(better[..., None], other[0], best[0]), np.where(better, other[1], best[1]),
              np.where(better, other[2], best[2]))
    return merged, np.minimum(error, best_error)


def _packed_fit(block: int, bits: int, codes: np.ndarray, zero: np.ndarray, scale: np.ndarray) -> BlockWeight:
    codes, zero, scale = codes.astype(np.uint8), zero.astype(np.uint8), scale.astype(np.float32)
    if bits == 4:
        return BlockWeight(4, pack_nibbles(codes), scale, _pack_zero_points(zero), None, block)
    return BlockWeight(8, codes, scale, zero, None, block)


def explicit_zero_points(weight: BlockWeight) -> np.ndarray:
    """The weight's uint8 zero points, or the op's defaults written out (128; 8 for 4 bits)."""
    if weight.zero_points is not None:
        return weight.zero_points
    blocks = weight.scales.shape[1]
    if weight.bits == 8:
        return np.full((weight.n, blocks), 128, np.uint8)
    return np.full((weight.n, (blocks + 1) // 2), 0x88, np.uint8)


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
    if any(w.bits != first.bits or w.k != first.k or w.block != first.block for w in weights):
        return None
    if len({w.zero_points is None for w in weights}) > 1:  # the others' defaults, written out
        weights = [replace(w, zero_points=explicit_zero_points(w)) for w in weights]
        first = weights[0]
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
        first.block,
    )


def summarize(record: dict[str, Conversion]) -> dict:
    """What a manifest keeps about the conversion: the GGUF types (most tensors first), the
    re-quantized ones (type -> what they became, how many tensors) and a one-line summary,
    e.g. "Q4_K kept exactly as int4 x169; Q6_K re-quantized as int8 x29"."""
    conversions = list(record.values())
    counts = Counter(c.gguf_type for c in conversions)
    lines = Counter(c.describe() for c in conversions)
    requantized: dict[str, dict] = {}
    for conversion in conversions:
        if not conversion.exact:
            entry = requantized.setdefault(conversion.gguf_type, {"to": conversion.stored, "tensors": 0})
            entry["tensors"] += 1
    return {
        "gguf_types": _most_first(counts),
        "requantized": requantized,
        "summary": "; ".join(f"{line} x{lines[line]}" for line in _most_first(lines)),
    }


def _most_first(counted: Counter) -> list[str]:
    return sorted(counted, key=lambda key: (-counted[key], key))


def embedding_bytes_per_value(kind: QT) -> float:
    """As stored_bytes_per_value, for an embedding table (embedding_weight's layout)."""
    if kind not in _PROBES:
        return stored_bytes_per_value(kind)
    return _PROBES[kind][1] / 8 + (8.0 if kind == QT.Q2_K else 4.0) / 16


def stored_bytes_per_value(kind: QT) -> float:
    """Bytes per weight once converted (codes, a float32 scale per block of 32, and an offset
    where the mapping has one); float types are stored as float32."""
    if kind in FLOAT_TYPES:
        return 4.0
    if SUB_BLOCKS_OF_16 and kind in _PROBES:
        return embedding_bytes_per_value(kind)
    bits = 4 if kind in (QT.Q4_0, QT.Q4_1, QT.Q4_K) or kind in _AT_MOST_4_BITS else 8
    extra = 4.0 if kind in (QT.Q4_1, QT.Q4_K, QT.Q5_1, QT.Q5_K) else 0.0  # offsets
    extra += 0.5 if kind in _AT_MOST_4_BITS else 0.0  # re-quantized: a 4-bit zero point
    return bits / 8 + (4.0 + extra) / BLOCK
