"""The language models a person can choose from, with what a model picker shows of each.

    for entry in llm_entries(paths):          # the built-in model first, then the imported ones
        print(entry.name, entry.architecture, entry.quantization, entry.context, entry.tokens_per_s)
    record_speed(paths, folder, tokens_per_s=41.7, new_tokens=120, provider="cpu")  # an answer's
    engine.llm.speed.measure_speed(paths, "qwen2.5-0.5b-instruct-q4_k_m")  # a measure on request

Speeds are measured, never estimated: an answer of at least MIN_TOKENS tokens (or a measure a
person asks for) records how fast its model wrote on this machine after its first token; a
model neither used nor measured since it was imported has none yet.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path

from engine.atomic_file import write_atomic
from engine.models.manifest import read_manifest
from engine.models.registry import BUILTIN_LLM, ModelInfo, list_models
from engine.paths import MANIFEST, AppPaths

log = logging.getLogger(__name__)

MIN_TOKENS = 16  # a shorter answer's speed is mostly noise
MEASURE_TOKENS = 64  # a measure's length: a few seconds for a 1-4B model on a laptop's CPU
MEASURE_PROMPT = "Count from one to one hundred in words, separated by commas."
UNKNOWN = "unknown"
# the built-in GGUF's own header says so; read from it, it takes seconds (its 49,152-token vocabulary)
BUILTIN_SHAPE = ("llama", 8192)
# as GGUF files are named by convention: model.Q4_K_M.gguf, model-q8_0.gguf, model-f16.gguf
_QUANT_IN_NAME = re.compile(r"(?i)(?:^|[-_.])(i?q\d(?:_[a-z0-9]+)*|bf16|f16|f32)(?=[-_.]|$)")


@dataclass(frozen=True)
class LLMEntry:
    name: str
    built_in: bool
    status: str  # as list_models says: "ready", "needs preparation", "missing", "invalid"
    architecture: str
    size_bytes: int
    quantization: str  # a short label: "Q4_K_M", "Q8_0"
    quantization_detail: str  # the tensor types and which were re-quantized, or "" when not recorded
    context: int | None  # tokens
    tokens_per_s: float | None  # measured here; None until an answer has measured it
    speed_provider: str  # where it was measured ("cpu", "cuda"); "" when not measured
    path: Path | None


def llm_entries(paths: AppPaths) -> list[LLMEntry]:
    """Every installed language model, the built-in one first."""
    speeds = _read_speeds(paths)
    return [_entry(info, speeds) for info in list_models(paths, "cpu") if info.kind == "llm"]


def _entry(info: ModelInfo, speeds: dict) -> LLMEntry:
    built_in = info.name == BUILTIN_LLM.name
    folder = info.path if info.path is not None and info.path.is_dir() else None
    config = _genai_model_config(folder)  # also for models imported before the manifest said
    architecture = info.architecture or config.get("type")
    context = info.context_length or config.get("context_length")
    if built_in and not (architecture and context):  # not prepared yet
        architecture, context = BUILTIN_SHAPE
    source = ((read_manifest(folder) if folder else None) or {}).get("source") or {}
    file_name = BUILTIN_LLM.files[0].relpath if built_in else str(source.get("file") or "")
    speed = speeds.get(info.name)
    speed = speed if isinstance(speed, dict) else {}
    measured = folder is not None and speed.get("identity") == _identity(folder)
    return LLMEntry(
        name=info.name,
        built_in=built_in,
        status=info.status,
        architecture=str(architecture or UNKNOWN),
        size_bytes=info.size_bytes,
        quantization=_quantization_label(info, file_name),
        quantization_detail=_quantization_detail(info),
        context=int(context) if isinstance(context, int) and context > 0 else None,
        tokens_per_s=float(speed["tokens_per_s"]) if measured else None,
        speed_provider=str(speed.get("provider", "")) if measured else "",
        path=info.path,
    )


def size_text(size_bytes: int) -> str:
    """A model's size as people read it, in decimal units: "98.4 MB"."""
    size = float(size_bytes)
    for unit in ("B", "kB", "MB"):
        if size < 1000:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} GB"


def _genai_model_config(folder: Path | None) -> dict:
    if folder is None:
        return {}
    try:
        config = json.loads((folder / "genai_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    model = config.get("model") if isinstance(config, dict) else None
    return model if isinstance(model, dict) else {}


def _quantization_label(info: ModelInfo, file_name: str) -> str:
    """What the file's name says by the usual convention (Q4_K_M names a mix of types), else
    the type most of its tensors have."""
    found = _QUANT_IN_NAME.search(Path(file_name).stem)
    if found:
        return found.group(1).upper()
    return info.quantization.split(",")[0].strip() or UNKNOWN


def _quantization_detail(info: ModelInfo) -> str:
    if not info.quantization:
        return ""
    kept = (f"re-quantized: {info.requantized}; every other tensor kept exactly" if info.requantized
            else "every tensor kept exactly")
    return f"{info.quantization}: {kept}"


# -- measured speeds ----------------------------------------------------------------------------
def record_speed(paths: AppPaths, folder: Path, tokens_per_s: float, new_tokens: int,
                 provider: str) -> bool:
    """Keeps the speed an answer of the model in `folder` was written at; False when the answer
    was too short to say (fewer than MIN_TOKENS tokens) or the speed could not be stored."""
    if new_tokens < MIN_TOKENS or not tokens_per_s > 0:
        return False
    speeds = _read_speeds(paths)
    speeds[Path(folder).name] = {"tokens_per_s": round(float(tokens_per_s), 2),
                                 "provider": provider, "identity": _identity(Path(folder))}
    try:
        write_atomic(paths.model_speeds_file, json.dumps(speeds, indent=1, sort_keys=True))
    except OSError as exc:
        log.warning("the model's speed could not be kept: %s", exc)
        return False
    return True


def _identity(folder: Path | None) -> int | None:
    """Changes when the folder is replaced (imported again): the old speed no longer holds."""
    try:
        return (folder / MANIFEST).stat().st_mtime_ns if folder else None
    except OSError:
        return None


def _read_speeds(paths: AppPaths) -> dict:
    try:
        speeds = json.loads(paths.model_speeds_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return speeds if isinstance(speeds, dict) else {}
