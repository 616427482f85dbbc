"""GGUF -> ONNX GenAI folder, with numpy, onnx and gguf only (no torch).

The folder holds model.onnx (+ model.onnx.data), genai_config.json, the tokenizer files and a
manifest. It is written under a temporary name and renamed into place when complete.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from gguf import GGUFReader

from engine.errors import ModelError
from engine.hashing import sha256_file
from engine.models.chat_templates import settle_chat_template
from engine.models.decoder_graph import DecoderSpec, DecoderWeights, LayerRope, build_decoder
from engine.models.external_data import ExternalData
from engine.models.fit import folder_bytes
from engine.models.gguf_file import MAX_CONTEXT, field, open_gguf
from engine.models.gguf_weights import (
    CHUNK_VALUES,
    OFFSETS,
    BlockWeight,
    concat_rows,
    embedding_weight,
    explicit_zero_points,
    matmul_weight,
    quantize_blocks,
    recording,
    summarize,
    to_float,
)
from engine.models.manifest import atomic_folder, write_manifest
from engine.models.versions import GGUF_CONVERTER

Progress = Callable[[float, str], None]

# GGUF architecture -> rotary on adjacent pairs (llama.cpp's "normal" rope) rather than on halves
# (NeoX). "llama" covers Llama 2/3.x, Mistral and SmolLM2.
SUPPORTED_ARCHS = {"llama": True, "qwen2": False, "qwen3": False, "smollm3": True, "gemma3": False, "phi3": False}
# onnxruntime-genai's name for a plain decoder of the family ("gemma3" is its vision pipeline)
GENAI_TYPES = {"gemma3": "gemma3_text"}
SMOLLM3_NO_ROPE_STEP = 4  # llama.cpp's n_no_rope_layer_step
GEMMA3_SWA_PATTERN = 6  # llama.cpp: five sliding-window layers, then one global
GEMMA3_LOCAL_ROPE_BASE = 10000.0
# How each architecture's Q4_1/Q4_K/Q5_1/Q5_K offsets are kept by default (gguf_weights.OFFSETS;
# others: exact). Integer zero points only where their greedy agreement with llama.cpp was
# measured at least llama.cpp's own with a float32 run of the same weights (docs/benchmarks.md,
# issue 31).
DEFAULT_OFFSETS: dict[str, str] = {}


def import_gguf(
    gguf_path: Path, out_dir: Path, progress: Progress | None = None, *, accuracy_level: int = 4,
    lm_head_bits: int = 8, kv_float16: bool = False, offsets: str | None = None,
) -> Path:
    """Convert a GGUF file into an ONNX GenAI folder at `out_dir` (replaced if it exists).

    lm_head_bits 4 re-quantizes an 8-bit output layer to 4-bit blocks (faster decoding, not
    exact: see docs/benchmarks.md, issue 19); 8 keeps the file's values. kv_float16: see
    build_decoder. offsets: how per-block offsets are kept (gguf_weights.OFFSETS; "exact" is
    the exact path); None: the architecture's default (offsets_for)."""
    gguf_path, out_dir = Path(gguf_path), Path(out_dir)
    report = progress or (lambda fraction, message: None)
    report(0.0, f"reading {gguf_path.name}")
    reader = open_gguf(gguf_path)
    spec = decoder_spec(reader, gguf_path)
    tensors = {t.name: t for t in reader.tensors}
    offsets = offsets_for(spec.arch, accuracy_level, offsets)
    weights = _weights(tensors, gguf_path, lm_head_bits, offsets)
    # which tensors were kept exactly, which re-quantized
    with recording() as conversions, atomic_folder(out_dir, needed_bytes=folder_bytes(reader)) as tmp:
        report(0.02, "writing tokenizer")
        token_ids, tokens = _write_tokenizer(reader, tmp)
        with ExternalData(tmp / "model.onnx.data") as store:  # each weight written out as it is made
            model = build_decoder(spec, weights, lambda f, m: report(0.05 + 0.75 * f, m), accuracy_level,
                                  kv_float16, store=store)
        report(0.8, "writing model.onnx")
        onnx.save_model(model, str(tmp / "model.onnx"))  # the graph: its initializers point into the data
        del model
        _write_json(tmp / "genai_config.json", genai_config(spec, token_ids))
        template = settle_chat_template(tmp, tokens, str(field(reader, "general.name", gguf_path.stem)))
        report(0.95, "writing manifest")
        write_manifest(tmp, _source(reader, gguf_path, spec, conversions)
                       | {"chat_template": template, "offsets": offsets})
    report(1.0, "done")
    return out_dir


def offsets_for(arch: str, accuracy_level: int, asked: str | None) -> str:
    """The offsets asked for, else the architecture's default; exact whenever activations stay
    float (accuracy_level below 4: exact arithmetic is what that level is for)."""
    if asked is not None:
        if asked not in OFFSETS:
            raise ValueError(f"offsets must be one of {', '.join(OFFSETS)}, not {asked!r}")
        return asked
    return DEFAULT_OFFSETS.get(arch, "exact") if accuracy_level >= 4 else "exact"


def _write_tokenizer(reader: GGUFReader, folder: Path) -> tuple[dict, list]:
    """Writes the tokenizer files; returns their special token ids and the vocabulary. The
    reader's vocabulary and merges are then dropped: it keeps numpy views of every entry (86 MB
    for SmolLM2's 49k tokens), which would otherwise stay through the weights' conversion."""
    from engine.models.gguf_tokenizer import write_tokenizer_files

    token_ids = write_tokenizer_files(reader, folder)
    tokens = field(reader, "tokenizer.ggml.tokens") or []
    for key in [k for k, f in reader.fields.items() if k.startswith("tokenizer.ggml.") and len(f.data) > 1000]:
        del reader.fields[key]
    return token_ids, tokens


def decoder_spec(reader: GGUFReader, path: Path) -> DecoderSpec:
    arch = field(reader, "general.architecture")
    if arch not in SUPPORTED_ARCHS:
        raise ModelError(
            f"'{path.name}' is a '{arch}' model, which cannot be imported; the supported GGUF "
            f"architectures are {', '.join(SUPPORTED_ARCHS)}. Choose a model of one of those."
        )
    _refuse_unsupported(reader, arch, path)
    meta = lambda key, default=None: field(reader, f"{arch}.{key}", default)  # noqa: E731
    hidden, heads = int(meta("embedding_length")), int(meta("attention.head_count"))
    head_dim = int(meta("attention.key_length", hidden // heads))
    names = {t.name for t in reader.tensors}
    embed = next(t for t in reader.tensors if t.name == "token_embd.weight")
    common = dict(
        arch=arch,
        layers=int(meta("block_count")),
        hidden=hidden,
        heads=heads,
        kv_heads=int(meta("attention.head_count_kv", heads)),
        head_dim=head_dim,
        ffn=int(meta("feed_forward_length")),
        vocab=int(embed.shape[1]),
        norm_eps=float(meta("attention.layer_norm_rms_epsilon", 1e-6)),
        rope_base=float(meta("rope.freq_base", 10000.0)),
        rope_dim=int(meta("rope.dimension_count", head_dim)),
        rope_interleaved=SUPPORTED_ARCHS[arch],
        context_length=_context_length(meta, names),
    )
    if common["rope_dim"] // 2 % 8:  # GroupQueryAttention's rotary works on multiples of 16
        raise ModelError(f"'{path.name}' rotates {common['rope_dim']} dimensions per head, which cannot be "
                         "imported yet; choose another model.")
    return DecoderSpec(**common, **_FAMILY.get(arch, _no_extras)(meta, names, common))


def _context_length(meta, names: set[str]) -> int:
    context = int(meta("context_length", 4096))
    if "rope_factors_short.weight" in names:
        # LongRoPE (Phi-3.5, Phi-4-mini): llama.cpp takes the short factors while its context is
        # within the original one, the long ones beyond. We keep to the original context (4096)
        # with the short factors: the model as trained for the prompts this app sends, rather
        # than every position rotated for a long context it never uses.
        context = min(context, int(meta("rope.scaling.original_context_length", context)))
    return min(context, MAX_CONTEXT)


def _rope_scale(meta) -> float:
    """Linear rope scaling multiplies positions by 1/factor (llama.cpp's freq_scale)."""
    if meta("rope.scaling.type", "linear") != "linear":
        return 1.0
    return 1.0 / float(meta("rope.scaling.factor", 1.0) or 1.0)


def _no_extras(meta, names, common) -> dict:
    scale = _rope_scale(meta)
    return {} if scale == 1.0 else {"layer_ropes": (LayerRope(common["rope_base"], scale),) * common["layers"]}


def _qwen3(meta, names, common) -> dict:
    return {**_no_extras(meta, names, common), "qk_norm": True}


def _smollm3(meta, names, common) -> dict:
    # llama.cpp: layer il has no rotary when (il + 1) % 4 == 0; the GGUF carries no key for it
    rope = LayerRope(common["rope_base"], _rope_scale(meta))
    nope = LayerRope(common["rope_base"], rotary=False)
    return {"layer_ropes": tuple(nope if (i + 1) % SMOLLM3_NO_ROPE_STEP == 0 else rope for i in range(common["layers"]))}


def _gemma3(meta, names, common) -> dict:
    window = int(meta("attention.sliding_window", 0) or 0)
    full = LayerRope(common["rope_base"], _rope_scale(meta))
    local_base = float(meta("rope.freq_base_swa", GEMMA3_LOCAL_ROPE_BASE))
    local = LayerRope(local_base, window=window)  # local layers: their own base, unscaled
    ropes = tuple(local if window and i % GEMMA3_SWA_PATTERN < GEMMA3_SWA_PATTERN - 1 else full
                  for i in range(common["layers"]))
    # query_pre_attn_scalar is not in the GGUF: llama.cpp takes hidden / heads for the 27B
    # (62 layers) and head_dim for the others, as the model configs do
    scalar = common["hidden"] / common["heads"] if common["layers"] == 62 else common["head_dim"]
    return {"layer_ropes": ropes, "qk_norm": True, "post_norms": True, "embed_scale": math.sqrt(common["hidden"]),
            "activation": "gelu_tanh", "attn_scale": scalar ** -0.5}


def _phi3(meta, names, common) -> dict:
    # Phi-3's sliding window is ignored by llama.cpp too (its conversion writes it wrongly)
    return {"fused_qkv": "blk.0.attn_qkv.weight" in names, "fused_gate_up": "blk.0.ffn_gate.weight" not in names,
            "rope_mscale": float(meta("rope.scaling.attn_factor", 1.0))}


_FAMILY = {"qwen3": _qwen3, "smollm3": _smollm3, "gemma3": _gemma3, "phi3": _phi3}


def _refuse_unsupported(reader: GGUFReader, arch: str, path: Path) -> None:
    if field(reader, f"{arch}.expert_count"):
        raise ModelError(f"'{path.name}' is a mixture-of-experts model, which cannot be imported yet.")
    scaling = field(reader, f"{arch}.rope.scaling.type", "none")
    known = ("none", "linear", "longrope") if arch == "phi3" else ("none", "linear")
    if scaling not in (*known, None):
        raise ModelError(
            f"'{path.name}' uses '{scaling}' rotary scaling, which cannot be imported yet; "
            "choose a build of the model without context extension."
        )


def _weights(tensors: dict, path: Path, lm_head_bits: int = 8, offsets: str = "exact") -> DecoderWeights:
    def tensor(name: str):
        try:
            return tensors[name]
        except KeyError:
            raise ModelError(f"'{path.name}' has no tensor '{name}'; the file is incomplete.") from None

    def embedding():
        # Quantized tables are gathered from their blocks (float ones stay float32): a float32
        # copy of Qwen2.5's 151k x 896 table would take 545 MB.
        return embedding_weight(tensor("token_embd.weight"))

    def vector(name: str):
        found = tensors.get(f"{name}.weight") or tensors.get(name)
        return None if found is None else to_float(found).reshape(-1)

    def output():
        # Many small models tie the output projection to the token embedding.
        weight = matmul_weight(tensors.get("output.weight") or tensor("token_embd.weight"), offsets)
        return to_four_bits(weight) if lm_head_bits == 4 else weight

    # Llama 3.x's rope_freqs, or LongRoPE's short factors (see _context_length)
    factors = tensors.get("rope_freqs.weight") or tensors.get("rope_factors_short.weight")
    return DecoderWeights(
        embedding=embedding,
        matmul=lambda name: matmul_weight(tensor(f"{name}.weight"), offsets),
        vector=vector,
        output=output,
        rope_factors=None if factors is None else to_float(factors).reshape(-1),
    )


def to_four_bits(weight: BlockWeight | np.ndarray) -> BlockWeight | np.ndarray:
    """An 8-bit block weight re-quantized to 4-bit blocks, a slice of rows at a time."""
    if not isinstance(weight, BlockWeight) or weight.bits != 8:
        return weight
    step = max(1, CHUNK_VALUES // weight.k)
    return concat_rows([quantize_blocks(dequantized_rows(weight, i, i + step), 4)
                        for i in range(0, weight.n, step)])


def dequantized_rows(weight: BlockWeight, start: int, stop: int) -> np.ndarray:
    """float32 rows [start:stop] of an 8-bit block weight: (code - zero) * scale (+ offset)."""
    codes = weight.packed[start:stop].reshape(-1, weight.k // weight.block, weight.block)
    zero = explicit_zero_points(weight)[start:stop, :, None].astype(np.float32)
    values = (codes.astype(np.float32) - zero) * weight.scales[start:stop, :, None]
    if weight.offsets is not None:
        values += weight.offsets[start:stop, :, None]
    return values.reshape(values.shape[0], weight.k)


def genai_config(spec: DecoderSpec, token_ids: dict) -> dict:
    return {
        "model": {
            "bos_token_id": token_ids["bos_token_id"],
            "eos_token_id": token_ids["eos_token_id"],
            "pad_token_id": token_ids["pad_token_id"],
            "context_length": spec.context_length,
            "vocab_size": spec.vocab,
            "type": GENAI_TYPES.get(spec.arch, spec.arch),
            "decoder": {
                "session_options": {"log_id": "onnxruntime-genai", "provider_options": []},
                "filename": "model.onnx",
                "head_size": spec.head_dim,
                "hidden_size": spec.hidden,
                "num_attention_heads": spec.heads,
                "num_key_value_heads": spec.kv_heads,
                "num_hidden_layers": spec.layers,
                "inputs": {
                    "input_ids": "input_ids",
                    "attention_mask": "attention_mask",
                    "past_key_names": "past_key_values.%d.key",
                    "past_value_names": "past_key_values.%d.value",
                },
                "outputs": {
                    "logits": "logits",
                    "present_key_names": "present.%d.key",
                    "present_value_names": "present.%d.value",
                },
            },
        },
        "search": {
            "do_sample": False,
            "max_length": spec.context_length,
            "num_beams": 1,
            "num_return_sequences": 1,
            "past_present_share_buffer": True,
            "repetition_penalty": 1.0,
            "temperature": 1.0,
            "top_k": 50,
            "top_p": 1.0,
        },
    }


def _source(reader: GGUFReader, path: Path, spec: DecoderSpec, conversions: dict) -> dict:
    stat = path.stat()
    return {
        "kind": "llm",
        "format": "gguf",
        "converter": GGUF_CONVERTER,
        "file": path.name,
        "size": stat.st_size,
        "sha256": sha256_file(path),
        "architecture": spec.arch,
        "name": field(reader, "general.name", path.stem),
        "license": field(reader, "general.license", "unknown"),
        "context_length": spec.context_length,
        "quantization": summarize(conversions),
        "weights": {name: c.describe() for name, c in sorted(conversions.items())},
    }


def _write_json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")


