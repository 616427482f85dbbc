"""Does a GGUF model fit this machine? Checked before importing, from the file's header alone
(no tensor is read), so that a model too big is refused with a message instead of the machine
swapping or the import dying half-way.

What a model needs is the larger of:
- running it: the converted weights, the KV cache at the model's full context (float32, as the
  decoder keeps it) and the runtime's own share (RUNTIME_BYTES);
- converting it: IMPORT_BASE_BYTES plus IMPORT_PER_MODEL_BYTE times the converted weights (each
  weight is written out as it is made; the GGUF's pages read so far count as resident too).
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from engine.errors import ModelError
from engine.models.gguf_file import MAX_CONTEXT, field, open_gguf

log = logging.getLogger(__name__)

# Peak resident memory of an import (bench/bench_import_memory.py, VmHWM), against the weights
# estimated here: SmolLM2-135M Q4_1, 320 MB for 146 MB; random Qwen2.5-0.5B Q4_K_M, 755 MB for
# 698 MB; random Qwen3-1.7B Q4_K_M, 1,724 MB for 1,890 MB. (Before weights were written as they
# were made: 760 and 2,867 MB for the first two, 5.2x and 4.1x.) Less than running the model needs.
IMPORT_BASE_BYTES = 200_000_000
IMPORT_PER_MODEL_BYTE = 1.0
# onnxruntime, onnxruntime-genai and the app itself around a loaded model (the built-in model
# peaks at 452 MiB with 150 MB of weights and a 1,500-token KV cache of 69 MB).
RUNTIME_BYTES = 300_000_000
MEMINFO = Path("/proc/meminfo")


@dataclass(frozen=True)
class ModelFit:
    """What a model file needs against what this machine has (bytes)."""

    path: Path
    weights_bytes: int  # the converted weights, in memory when the model runs
    kv_cache_bytes: int  # the KV cache at `context_length` tokens
    context_length: int
    import_bytes: int  # the peak while converting
    available_bytes: int | None  # None where the system does not say

    @property
    def needed_bytes(self) -> int:
        return max(self.weights_bytes + self.kv_cache_bytes + RUNTIME_BYTES, self.import_bytes)

    @property
    def fits(self) -> bool:
        return self.available_bytes is None or self.needed_bytes <= self.available_bytes

    def message(self) -> str:
        """Why the model does not fit, and what to do (for a person)."""
        return (
            f"'{self.path.name}' needs about {_gb(self.needed_bytes)} of memory to import and run "
            f"({_gb(self.weights_bytes)} for its weights, {_gb(self.kv_cache_bytes)} for a context "
            f"of {self.context_length:,} tokens), and this machine has {_gb(self.available_bytes or 0)} "
            "available. Choose a smaller quantization of it (Q4_K_M rather than Q8_0 or F16) or a "
            "smaller model, or close other programs; to try anyway, import it with "
            f"'offline-assistant-cli models import --force \"{self.path}\"'."
        )


def check_model_fits(gguf_path: str | Path, available_bytes: int | None = None) -> ModelFit:
    """How much memory the GGUF at `gguf_path` needs to import and run, against
    `available_bytes` (by default what this machine has free now). Read `.fits`, and show
    `.message()` when it is False. Raises ModelError for a file that is not a GGUF model."""
    path = Path(gguf_path)
    reader = open_gguf(path)
    arch = field(reader, "general.architecture")
    context = _context(reader, arch)
    weights = _weights_bytes(reader, arch, context)
    kv_cache = _kv_bytes_per_token(reader, arch) * context
    available = available_memory() if available_bytes is None else available_bytes
    return ModelFit(path, weights, kv_cache, context, import_bytes(weights), available)


def folder_bytes(reader) -> int:
    """About how many bytes the imported folder of an open GGUF takes (a full disk asks for
    this room): the converted weights, each tensor aligned to 4 KiB in the data file, and the
    tokenizer files, made from the GGUF's metadata (counted twice: JSON is wordier), with 5% to
    spare. Measured: SmolLM2-135M Q4_1 150.7 MB, random Qwen2.5-0.5B Q4_K_M 706 MB (8-bit for
    its Q5_0 and Q8_0 tensors: 1.79x the file)."""
    from engine.models.external_data import ALIGN

    arch = field(reader, "general.architecture")
    weights = _weights_bytes(reader, arch, _context(reader, arch))
    return int(1.05 * (weights + ALIGN * len(reader.tensors) + 2 * reader.data_offset))


def _context(reader, arch: str) -> int:
    return min(int(field(reader, f"{arch}.context_length", 4096)), MAX_CONTEXT)


def _weights_bytes(reader, arch: str, context: int) -> int:
    """The converted tensors and the rotary tables, as the running model holds them."""
    weights = sum(_converted_bytes(tensor, reader) for tensor in reader.tensors)
    return weights + _rotary_table_bytes(reader, arch, context)


def import_bytes(weights_bytes: int) -> int:
    """The peak memory of converting a model with this many bytes of converted weights."""
    return int(IMPORT_BASE_BYTES + weights_bytes * IMPORT_PER_MODEL_BYTE)


def refuse_if_too_big(gguf_path: str | Path, available_bytes: int | None = None) -> ModelFit:
    """check_model_fits, raising ModelError with its message when the model does not fit."""
    fit = check_model_fits(gguf_path, available_bytes)
    if fit.available_bytes is None:
        log.info("free memory is unknown on this system; '%s' is imported unchecked", fit.path.name)
    if not fit.fits:
        raise ModelError(fit.message())
    return fit


def _converted_bytes(tensor, reader) -> int:
    from engine.models.gguf_weights import embedding_bytes_per_value, stored_bytes_per_value

    values = int(tensor.n_elements)
    if len(tensor.shape) < 2 or tensor.shape[1] == 1:
        return 4 * values  # norms and biases: float32
    stored = stored_bytes_per_value(tensor.tensor_type)
    if tensor.name != "token_embd.weight":
        return int(values * stored)
    # The table is gathered from its blocks (gguf_weights.embedding_weight); a tied output
    # layer uses it a second time as a matmul weight.
    gathered = values * embedding_bytes_per_value(tensor.tensor_type)
    tied = not any(t.name == "output.weight" for t in reader.tensors)
    return int(gathered + (values * stored if tied else 0))


def _rotary_table_bytes(reader, arch: str, context: int) -> int:
    """The cos and sin tables of the rotary embedding, float32, one row per position."""
    rotary = int(field(reader, f"{arch}.rope.dimension_count", _head_dim(reader, arch)))
    return 2 * 4 * context * (rotary // 2)


def _kv_bytes_per_token(reader, arch: str) -> int:
    """Keys and values of every layer for one token, in float32."""
    layers = int(field(reader, f"{arch}.block_count", 0))
    kv_heads = field(reader, f"{arch}.attention.head_count_kv", field(reader, f"{arch}.attention.head_count", 1))
    key = int(field(reader, f"{arch}.attention.key_length", _head_dim(reader, arch)))
    value = int(field(reader, f"{arch}.attention.value_length", key))
    per_layer = kv_heads if isinstance(kv_heads, list) else [int(kv_heads)] * layers
    return sum(4 * int(n) * (key + value) for n in per_layer)


def _head_dim(reader, arch: str) -> int:
    heads = field(reader, f"{arch}.attention.head_count", 1)
    heads = max(heads) if isinstance(heads, list) else int(heads)  # some list it per layer
    return int(field(reader, f"{arch}.embedding_length", 0)) // max(heads, 1)


def available_memory(meminfo: Path = MEMINFO) -> int | None:
    """Bytes of memory available to a new program without swapping: MemAvailable on Linux,
    ullAvailPhys on Windows; None where neither is known."""
    if sys.platform == "win32":
        return _windows_available()
    try:
        for line in meminfo.read_text(encoding="ascii").splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:  # other Unix systems: free pages (no page cache counted, so on the safe side)
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _windows_available() -> int | None:
    class MemoryStatus(ctypes.Structure):
        _fields_ = [("length", ctypes.c_ulong), ("load", ctypes.c_ulong)] + [
            (name, ctypes.c_ulonglong) for name in ("total", "available", "total_page", "avail_page",
                                                    "total_virtual", "avail_virtual", "avail_extended")]

    status = MemoryStatus()
    status.length = ctypes.sizeof(MemoryStatus)
    if not ctypes.windll.kernel32.GlobalMemoryStatusEx(ctypes.byref(status)):  # type: ignore[attr-defined]
        return None
    return int(status.available)


def _gb(size: int) -> str:
    return f"{size / 1e9:.1f} GB" if size >= 1e9 else f"{size / 1e6:.0f} MB"
