"""GGUF -> ONNX GenAI folder, with numpy, onnx and gguf only (no torch).

The folder holds model.onnx (+ model.onnx.data), genai_config.json, the tokenizer files and a
manifest. It is written under a temporary name and renamed into place when complete.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import onnx
from gguf import GGMLQuantizationType as QT
from gguf import GGUFReader

from engine.errors import ModelError
from engine.models.chat_templates import settle_chat_template
from engine.models.decoder_graph import DecoderSpec, DecoderWeights, build_decoder
from engine.models.gguf_weights import matmul_weight, recording, summarize, to_float
from engine.models.manifest import atomic_folder, sha256_file, write_manifest
from engine.models.versions import GGUF_CONVERTER

Progress = Callable[[float, str], None]

SUPPORTED_ARCHS = {"llama": True, "qwen2": False}  # arch -> rotary on adjacent pairs
MAX_CONTEXT = 32768  # beyond this a small CPU model is of no use and the rotary tables grow
_GATHERABLE = {QT.Q8_0, QT.Q4_0}
# The folder a GGUF becomes, over the GGUF's size: 150.2 MB from SmolLM2-135M's 98.4 MB Q4_1
# (x1.53, measured; a Q4_1 embedding table is stored as floats). A full disk asks for this room.
FOLDER_PER_GGUF_BYTE = 1.55


def import_gguf(
    gguf_path: Path, out_dir: Path, progress: Progress | None = None, *, accuracy_level: int = 4
) -> Path:
    """Convert a GGUF file into an ONNX GenAI folder at `out_dir` (replaced if it exists)."""
    gguf_path, out_dir = Path(gguf_path), Path(out_dir)
    report = progress or (lambda fraction, message: None)
    report(0.0, f"reading {gguf_path.name}")
    reader = open_gguf(gguf_path)
    spec = decoder_spec(reader, gguf_path)
    tensors = {t.name: t for t in reader.tensors}
    weights = _weights(tensors, gguf_path)
    with recording() as conversions:  # which tensors were kept exactly, which re-quantized
        model = build_decoder(spec, weights, lambda f, m: report(0.05 + 0.75 * f, m), accuracy_level)
    with atomic_folder(out_dir, needed_bytes=folder_bytes(gguf_path)) as tmp:
        report(0.8, "writing model.onnx")
        onnx.save_model(model, str(tmp / "model.onnx"), save_as_external_data=True,
                        all_tensors_to_one_file=True, location="model.onnx.data", size_threshold=1024)
        del model
        report(0.9, "writing tokenizer")
        from engine.models.gguf_tokenizer import write_tokenizer_files

        token_ids = write_tokenizer_files(reader, tmp)
        _write_json(tmp / "genai_config.json", genai_config(spec, token_ids))
        template = settle_chat_template(tmp, field(reader, "tokenizer.ggml.tokens") or [],
                                        str(field(reader, "general.name", gguf_path.stem)))
        report(0.95, "writing manifest")
        write_manifest(tmp, _source(reader, gguf_path, spec, conversions) | {"chat_template": template})
    report(1.0, "done")
    return out_dir


def folder_bytes(gguf_path: Path) -> int:
    """About how many bytes the converted folder of this GGUF takes."""
    return int(Path(gguf_path).stat().st_size * FOLDER_PER_GGUF_BYTE)


def open_gguf(path: Path) -> GGUFReader:
    try:
        return GGUFReader(path)
    except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:
        raise ModelError(f"'{path}' is not a readable GGUF file ({exc}); download it again.") from exc


def field(reader: GGUFReader, key: str, default=None):
    entry = reader.fields.get(key)
    return default if entry is None else entry.contents()


def decoder_spec(reader: GGUFReader, path: Path) -> DecoderSpec:
    arch = field(reader, "general.architecture")
    if arch not in SUPPORTED_ARCHS:
        raise ModelError(
            f"'{path.name}' is a '{arch}' model; only {', '.join(SUPPORTED_ARCHS)} GGUF models "
            "can be imported. Choose a model of one of those architectures."
        )
    _refuse_unsupported(reader, arch, path)
    hidden = int(field(reader, f"{arch}.embedding_length"))
    heads = int(field(reader, f"{arch}.attention.head_count"))
    head_dim = int(field(reader, f"{arch}.attention.key_length", hidden // heads))
    embed = next(t for t in reader.tensors if t.name == "token_embd.weight")
    return DecoderSpec(
        arch=arch,
        layers=int(field(reader, f"{arch}.block_count")),
        hidden=hidden,
        heads=heads,
        kv_heads=int(field(reader, f"{arch}.attention.head_count_kv", heads)),
        head_dim=head_dim,
        ffn=int(field(reader, f"{arch}.feed_forward_length")),
        vocab=int(embed.shape[1]),
        norm_eps=float(field(reader, f"{arch}.attention.layer_norm_rms_epsilon", 1e-6)),
        rope_base=float(field(reader, f"{arch}.rope.freq_base", 10000.0)),
        rope_dim=int(field(reader, f"{arch}.rope.dimension_count", head_dim)),
        rope_interleaved=SUPPORTED_ARCHS[arch],
        context_length=min(int(field(reader, f"{arch}.context_length", 4096)), MAX_CONTEXT),
    )


def _refuse_unsupported(reader: GGUFReader, arch: str, path: Path) -> None:
    if field(reader, f"{arch}.expert_count"):
        raise ModelError(f"'{path.name}' is a mixture-of-experts model, which cannot be imported yet.")
    scaling = field(reader, f"{arch}.rope.scaling.type", "none")
    if scaling not in ("none", None):
        raise ModelError(
            f"'{path.name}' uses '{scaling}' rotary scaling, which cannot be imported yet; "
            "choose a build of the model without context extension."
        )


def _weights(tensors: dict, path: Path) -> DecoderWeights:
    def tensor(name: str):
        try:
            return tensors[name]
        except KeyError:
            raise ModelError(f"'{path.name}' has no tensor '{name}'; the file is incomplete.") from None

    def embedding():
        table = tensor("token_embd.weight")
        return matmul_weight(table) if table.tensor_type in _GATHERABLE else to_float(table)

    def vector(name: str):
        found = tensors.get(f"{name}.weight") or tensors.get(name)
        return None if found is None else to_float(found).reshape(-1)

    def output():
        # Many small models tie the output projection to the token embedding.
        return matmul_weight(tensors.get("output.weight") or tensor("token_embd.weight"))

    factors = tensors.get("rope_freqs.weight")
    return DecoderWeights(
        embedding=embedding,
        matmul=lambda name: matmul_weight(tensor(f"{name}.weight")),
        vector=vector,
        output=output,
        rope_factors=None if factors is None else to_float(factors).reshape(-1),
    )


def genai_config(spec: DecoderSpec, token_ids: dict) -> dict:
    return {
        "model": {
            "bos_token_id": token_ids["bos_token_id"],
            "eos_token_id": token_ids["eos_token_id"],
            "pad_token_id": token_ids["pad_token_id"],
            "context_length": spec.context_length,
            "vocab_size": spec.vocab,
            "type": spec.arch,
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


