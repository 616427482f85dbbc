"""The ONNX graph of a llama-style decoder, in the form onnxruntime-genai runs.

The families' differences are options of DecoderSpec: per-layer rotary (base, linear scaling,
none, sliding window: Gemma 3, SmolLM3), q/k head norms (Qwen3, Gemma 3), Gemma 3's extra norms,
embedding scale and GELU, Phi-3's fused projections and LongRoPE factors.

It uses ONNX Runtime's fused CPU ops: MatMulNBits (block-quantized matmuls), GroupQueryAttention
(with rotary embedding and a KV cache that can share its buffer between steps),
SimplifiedLayerNormalization and SkipSimplifiedLayerNormalization (RMS norm with the residual
add fused in). Q/K/V and gate/up projections are fused into one matmul each when their weights
share a layout, and the vocabulary projection runs only on the last position, the only one the
generator reads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from engine.models.gguf_weights import BlockWeight, concat_rows, explicit_zero_points

MS = "com.microsoft"
OPSET = 21
IR_VERSION = 10


@dataclass(frozen=True)
class DecoderSpec:
    arch: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    norm_eps: float
    rope_base: float
    rope_dim: int
    rope_interleaved: bool  # llama.cpp's "normal" rope rotates adjacent pairs; NeoX rotates halves
    context_length: int
    layer_ropes: tuple[LayerRope, ...] = ()  # one per layer; empty: rope_base everywhere, no window
    qk_norm: bool = False  # RMS norm of each query and key head before the rotary (Qwen3, Gemma 3)
    post_norms: bool = False  # RMS norms on the attention and MLP outputs (Gemma 3)
    embed_scale: float = 1.0
    activation: str = "silu"  # of the gated MLP: "silu" or "gelu_tanh"
    attn_scale: float = 0.0  # 0: head_dim ** -0.5
    rope_mscale: float = 1.0  # LongRoPE's attention factor: llama.cpp multiplies cos and sin by it
    fused_qkv: bool = False  # one attn_qkv tensor (Phi-3)
    fused_gate_up: bool = False  # ffn_up holds gate then up (Phi-3)


@dataclass(frozen=True)
class LayerRope:
    """What one layer's attention does with positions."""

    base: float
    scale: float = 1.0  # linear rope scaling: positions times this
    rotary: bool = True  # False: no rotary at all (SmolLM3's NoPE layers)
    window: int = 0  # sliding window, in llama.cpp's n_swa; 0: attend to all


@dataclass(frozen=True)
class DecoderWeights:
    """Where the graph gets its tensors. Matmul weights are [N, K] (output rows)."""

    embedding: Callable[[], BlockWeight | np.ndarray]  # [vocab, hidden]
    matmul: Callable[[str], BlockWeight | np.ndarray]  # by GGUF name, e.g. "blk.0.attn_q"
    vector: Callable[[str], np.ndarray | None]  # norms and biases, float32, None if absent
    output: Callable[[], BlockWeight | np.ndarray]  # lm head [vocab, hidden]
    rope_factors: np.ndarray | None = None


class _Graph:
    """Collects nodes and initializers, with unique names."""

    def __init__(self, accuracy_level: int, kv_float16: bool = False, store=None):
        self.accuracy_level = accuracy_level
        # (array, name) -> TensorProto: in memory, or written out at once (external_data)
        self.store = store or numpy_helper.from_array
        self.kv_type = TensorProto.FLOAT16 if kv_float16 else TensorProto.FLOAT
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._count = 0

    def name(self, base: str) -> str:
        self._count += 1
        return f"{base}_{self._count}"

    def const(self, base: str, array: np.ndarray) -> str:
        name = self.name(base)
        self.initializers.append(self.store(np.ascontiguousarray(array), name))
        return name

    def op(self, op_type: str, inputs: list[str], base: str, outputs: int = 1, domain: str = "", **attrs):
        names = [self.name(f"{base}/out{i}") for i in range(outputs)]
        self.nodes.append(helper.make_node(op_type, inputs, names, self.name(base), domain=domain, **attrs))
        return names[0] if outputs == 1 else names


def build_decoder(spec: DecoderSpec, weights: DecoderWeights, progress=None, accuracy_level: int = 4,
                  kv_float16: bool = False, store=None) -> onnx.ModelProto:
    """accuracy_level 4 quantizes activations to int8 per block inside MatMulNBits: the fastest
    CPU kernels. 0 keeps float32 activations (used by tests that compare exact arithmetic).
    kv_float16: attention in float16 with a float16 KV cache (half its memory; not exact).
    store: how each initializer is kept (see _Graph)."""
    g = _Graph(accuracy_level, kv_float16, store)
    hidden = _embed(g, weights.embedding())
    if spec.embed_scale != 1.0:
        hidden = g.op("Mul", [hidden, g.const("embed_scale", np.array(spec.embed_scale, np.float32))], "embed_scaled")
    seqlens, total = _sequence_lengths(g)
    caches = _RotaryCaches(g, spec, weights.rope_factors)
    normed = _rms_norm(g, spec, hidden, weights.vector("blk.0.attn_norm"), "blk.0/attn_norm")
    residual = hidden
    for layer in range(spec.layers):
        normed, residual = _block(g, spec, weights, layer, normed, residual, (seqlens, total, caches))
        if progress:
            progress((layer + 1) / spec.layers, f"layer {layer + 1} of {spec.layers}")
    last = g.op("Slice", [normed, g.const("minus1", np.array([-1], np.int64)),
                          g.const("big", np.array([np.iinfo(np.int64).max], np.int64)),
                          g.const("axis1", np.array([1], np.int64))], "last_position")
    logits = _matmul(g, last, weights.output(), "lm_head")
    return _model(g, spec, logits)


def _block(g, spec, weights, layer, normed, residual, positions) -> tuple[str, str]:
    """One decoder layer; returns the next layer's normed input (the output norm's after the
    last) and the residual stream."""
    prefix = f"blk.{layer}"
    attn = _attention(g, spec, weights, prefix, normed, *positions, layer)
    if spec.post_norms:
        attn = _rms_norm(g, spec, attn, weights.vector(f"{prefix}.post_attention_norm"), f"{prefix}/post_attn")
    normed, _, _, residual = g.op(
        "SkipSimplifiedLayerNormalization", [attn, residual, g.const("ffn_norm", weights.vector(f"{prefix}.ffn_norm"))],
        f"{prefix}/ffn_norm", outputs=4, domain=MS, epsilon=spec.norm_eps)
    mlp = _mlp(g, spec, weights, prefix, normed)
    if spec.post_norms:
        mlp = _rms_norm(g, spec, mlp, weights.vector(f"{prefix}.post_ffw_norm"), f"{prefix}/post_ffw")
    next_norm = f"blk.{layer + 1}.attn_norm" if layer + 1 < spec.layers else "output_norm"
    normed, _, _, residual = g.op(
        "SkipSimplifiedLayerNormalization", [mlp, residual, g.const("norm", weights.vector(next_norm))],
        f"{next_norm}", outputs=4, domain=MS, epsilon=spec.norm_eps)
    return normed, residual


def _embed(g: _Graph, table: BlockWeight | np.ndarray) -> str:
    if isinstance(table, np.ndarray):
        return g.op("Gather", [g.const("embed", table.astype(np.float32)), "input_ids"], "embed")
    # The table stays quantized; only the rows of the tokens asked for are dequantized.
    rows = g.op(
        "GatherBlockQuantized",
        [g.const("embed_q", _dense_codes(table)), "input_ids", g.const("embed_scales", table.scales),
         g.const("embed_zp", explicit_zero_points(table))],
        "embed", domain=MS, gather_axis=0, quantize_axis=1, block_size=table.block, bits=table.bits)
    return rows if table.offsets is None else g.op("Add", [rows, _gathered_offsets(g, table)], "embed_plus_offsets")


def _gathered_offsets(g: _Graph, table: BlockWeight) -> str:
    """Each block's float offset (Q4_1, Q4_K, Q5_K...: w = (code - Z) * scale + offset), which
    integer zero points cannot hold exactly: gathered per token and repeated over its block."""
    per_block = g.op("Gather", [g.const("embed_offsets", table.offsets), "input_ids"], "embed_offsets")
    column = g.op("Unsqueeze", [per_block, g.const("last", np.array([-1], np.int64))], "embed_offsets_col")
    spread = g.op("Expand", [column, g.const("block", np.array([1, 1, 1, table.block], np.int64))], "embed_offsets_block")
    return g.op("Reshape", [spread, g.const("row_shape", np.array([0, 0, -1], np.int64))], "embed_offsets_row")


def _dense_codes(table: BlockWeight) -> np.ndarray:
    """GatherBlockQuantized wants codes as [vocab, hidden] (4-bit: two per byte)."""
    return table.packed.reshape(table.n, -1)


def _sequence_lengths(g: _Graph) -> tuple[str, str]:
    """GroupQueryAttention wants (tokens so far - 1) per row and the total length, as int32."""
    summed = g.op("ReduceSum", ["attention_mask", g.const("axis", np.array([1], np.int64))], "mask_sum", keepdims=0)
    minus = g.op("Sub", [summed, g.const("one", np.array(1, np.int64))], "seqlens")
    seqlens = g.op("Cast", [minus], "seqlens_i32", to=TensorProto.INT32)
    shape = g.op("Shape", ["attention_mask"], "mask_shape")
    total = g.op("Gather", [shape, g.const("idx1", np.array(1, np.int64))], "total_len", axis=0)
    return seqlens, g.op("Cast", [total], "total_len_i32", to=TensorProto.INT32)


def layer_rope(spec: DecoderSpec, layer: int) -> LayerRope:
    return spec.layer_ropes[layer] if spec.layer_ropes else LayerRope(spec.rope_base)


def rotary_tables(spec: DecoderSpec, factors: np.ndarray | None, rope: LayerRope | None = None):
    rope = rope or LayerRope(spec.rope_base)
    inv_freq = 1.0 / (rope.base ** (np.arange(0, spec.rope_dim, 2, dtype=np.float64) / spec.rope_dim))
    if factors is not None:
        inv_freq = inv_freq / factors.astype(np.float64)
    positions = np.arange(spec.context_length, dtype=np.float64) * rope.scale
    angles = np.outer(positions, inv_freq)
    cos, sin = np.cos(angles) * spec.rope_mscale, np.sin(angles) * spec.rope_mscale
    return cos.astype(np.float32), sin.astype(np.float32)


class _RotaryCaches:
    """One cos/sin pair per distinct rope of the layers (Gemma 3's local and global layers differ)."""

    def __init__(self, g: _Graph, spec: DecoderSpec, factors):
        self.g, self.spec, self.factors, self.made = g, spec, factors, {}

    def __call__(self, rope: LayerRope) -> tuple[str, str]:
        key = (rope.base, rope.scale)
        if key not in self.made:
            cos, sin = rotary_tables(self.spec, self.factors, rope)
            if self.g.kv_type == TensorProto.FLOAT16:
                cos, sin = cos.astype(np.float16), sin.astype(np.float16)
            self.made[key] = (self.g.const("cos_cache", cos), self.g.const("sin_cache", sin))
        return self.made[key]


def _rms_norm(g: _Graph, spec: DecoderSpec, x: str, weight: np.ndarray, base: str) -> str:
    return g.op("SimplifiedLayerNormalization", [x, g.const(f"{base}.weight", weight)], base,
                axis=-1, epsilon=spec.norm_eps, stash_type=1)


def _head_norm(g: _Graph, spec: DecoderSpec, x: str, weight: np.ndarray, base: str) -> str:
    """RMS norm over each head of [B, S, heads * head_dim]."""
    heads = g.op("Reshape", [x, g.const("head_shape", np.array([0, 0, -1, spec.head_dim], np.int64))], f"{base}/heads")
    normed = _rms_norm(g, spec, heads, weight, base)
    return g.op("Reshape", [normed, g.const("flat_shape", np.array([0, 0, -1], np.int64))], f"{base}/flat")


def _qkv(g, spec, weights, prefix, x) -> tuple[str, str, str]:
    """Queries, keys and values; k and v are "" when packed in q (GroupQueryAttention splits them)."""
    if spec.fused_qkv:
        return _matmul(g, x, weights.matmul(f"{prefix}.attn_qkv"), f"{prefix}/qkv"), "", ""
    parts = [weights.matmul(f"{prefix}.attn_{p}") for p in ("q", "k", "v")]
    fused = concat_rows(parts)
    if fused is not None:
        qkv = _matmul(g, x, fused, f"{prefix}/qkv")
        return _add_bias(g, qkv, [weights.vector(f"{prefix}.attn_{p}.bias") for p in ("q", "k", "v")], prefix), "", ""
    q, k, v = (_matmul(g, x, w, f"{prefix}/{p}") for w, p in zip(parts, "qkv"))
    return tuple(_add_bias(g, t, [weights.vector(f"{prefix}.attn_{p}.bias")], prefix) for t, p in zip((q, k, v), "qkv"))


def _normed_heads(g, spec, weights, prefix, q, k, v) -> tuple[str, str, str]:
    if k == "":  # unpack: the norms need queries and keys apart
        sizes = [spec.heads * spec.head_dim, spec.kv_heads * spec.head_dim, spec.kv_heads * spec.head_dim]
        q, k, v = g.op("Split", [q, g.const("qkv_sizes", np.array(sizes, np.int64))], f"{prefix}/split_qkv",
                       outputs=3, axis=-1)
    q = _head_norm(g, spec, q, weights.vector(f"{prefix}.attn_q_norm"), f"{prefix}/q_norm")
    k = _head_norm(g, spec, k, weights.vector(f"{prefix}.attn_k_norm"), f"{prefix}/k_norm")
    return q, k, v


def _attention(g, spec, weights, prefix, x, seqlens, total, caches, layer) -> str:
    q, k, v = _qkv(g, spec, weights, prefix, x)
    if spec.qk_norm:
        q, k, v = _normed_heads(g, spec, weights, prefix, q, k, v)
    rope = layer_rope(spec, layer)
    if g.kv_type != TensorProto.FLOAT:
        q, k, v = (g.op("Cast", [t], f"{prefix}/to_kv_type", to=g.kv_type) if t else t for t in (q, k, v))
    inputs = [q, k, v, f"past_key_values.{layer}.key", f"past_key_values.{layer}.value", seqlens, total]
    if rope.rotary:
        inputs += caches(rope)
    out, _, _ = g.op(
        "GroupQueryAttention", inputs, f"{prefix}/attn", outputs=3, domain=MS, num_heads=spec.heads,
        kv_num_heads=spec.kv_heads, do_rotary=int(rope.rotary), rotary_interleaved=int(spec.rope_interleaved),
        scale=float(spec.attn_scale or spec.head_dim ** -0.5),
        # the same tokens as llama.cpp's n_swa (checked against it: one less or more is 10% off)
        local_window_size=rope.window if rope.window else -1)
    g.nodes[-1].output[1] = f"present.{layer}.key"
    g.nodes[-1].output[2] = f"present.{layer}.value"
    if g.kv_type != TensorProto.FLOAT:
        out = g.op("Cast", [out], f"{prefix}/to_float", to=TensorProto.FLOAT)
    return _matmul(g, out, weights.matmul(f"{prefix}.attn_output"), f"{prefix}/o")


def _add_bias(g: _Graph, x: str, biases: list[np.ndarray | None], prefix: str) -> str:
    if all(b is None for b in biases):
        return x
    return g.op("Add", [x, g.const("bias", np.concatenate(biases).astype(np.float32))], f"{prefix}/bias")


def _gate_up(g: _Graph, spec: DecoderSpec, weights: DecoderWeights, prefix: str, x: str) -> tuple[str, str]:
    if spec.fused_gate_up:
        fused = weights.matmul(f"{prefix}.ffn_up")
    else:
        gate_w, up_w = weights.matmul(f"{prefix}.ffn_gate"), weights.matmul(f"{prefix}.ffn_up")
        fused = concat_rows([gate_w, up_w])
        if fused is None:
            return _matmul(g, x, gate_w, f"{prefix}/gate"), _matmul(g, x, up_w, f"{prefix}/up")
    both = _matmul(g, x, fused, f"{prefix}/gate_up")
    return g.op("Split", [both], f"{prefix}/split", outputs=2, axis=-1, num_outputs=2)


def _mlp(g: _Graph, spec: DecoderSpec, weights: DecoderWeights, prefix: str, x: str) -> str:
    gate, up = _gate_up(g, spec, weights, prefix, x)
    if spec.activation == "gelu_tanh":
        active = g.op("FastGelu", [gate], f"{prefix}/gelu", domain=MS)
    else:
        active = g.op("Mul", [gate, g.op("Sigmoid", [gate], f"{prefix}/sigmoid")], f"{prefix}/silu")
    return _matmul(g, g.op("Mul", [active, up], f"{prefix}/gated"), weights.matmul(f"{prefix}.ffn_down"), f"{prefix}/down")


def _matmul(g: _Graph, x: str, weight: BlockWeight | np.ndarray, base: str) -> str:
    if isinstance(weight, np.ndarray):
        return g.op("MatMul", [x, g.const(f"{base}.weight", weight.T.astype(np.float32))], base)
    inputs = [x, g.const(f"{base}.qweight", weight.packed), g.const(f"{base}.scales", weight.scales.reshape(-1))]
    if weight.zero_points is not None:
        inputs.append(g.const(f"{base}.zp", weight.zero_points.reshape(-1)))
    y = g.op("MatMulNBits", inputs, base, domain=MS, K=weight.k, N=weight.n, bits=weight.bits,
             block_size=weight.block, accuracy_level=g.accuracy_level)
    if weight.offsets is None:
        return y
    sums = _block_sums(g, x, weight.k, weight.block)
    correction = g.op("MatMul", [sums, g.const(f"{base}.offsets", weight.offsets.T)],
                      f"{base}/offsets")
    return g.op("Add", [y, correction], f"{base}/plus_offsets")


def _block_sums(g: _Graph, x: str, k: int, block: int) -> str:
    """[..., K] -> [..., K/block]: the sum of each block of inputs."""
    blocks = g.op("Reshape", [x, g.const("block_shape", np.array([0, 0, k // block, block], np.int64))],
                  "to_blocks")
    return g.op("ReduceSum", [blocks, g.const("last_axis", np.array([-1], np.int64))], "block_sums", keepdims=0)


def _model(g: _Graph, spec: DecoderSpec, logits: str) -> onnx.ModelProto:
    g.nodes[-1].output[0] = "logits"
    kv_shape = ["batch_size", spec.kv_heads, "past_sequence_length", spec.head_dim]
    present_shape = ["batch_size", spec.kv_heads, "total_sequence_length", spec.head_dim]
    inputs = [
        helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch_size", "sequence_length"]),
        helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch_size", "total_sequence_length"]),
    ]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch_size", 1, spec.vocab])]
    for layer in range(spec.layers):
        for kind in ("key", "value"):
            inputs.append(helper.make_tensor_value_info(f"past_key_values.{layer}.{kind}", g.kv_type, kv_shape))
            outputs.append(helper.make_tensor_value_info(f"present.{layer}.{kind}", g.kv_type, present_shape))
    graph = helper.make_graph(g.nodes, "decoder", inputs, outputs, g.initializers)
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid(MS, 1)],
        producer_name="offline-assistant")
    model.ir_version = IR_VERSION
    return model
