"""Execution-provider choice: CUDA -> DirectML -> CoreML -> CPU, overridable."""

from __future__ import annotations

from engine.errors import EngineError

PROVIDERS = ("cuda", "dml", "coreml", "cpu")
PROVIDER_CHOICES = ("auto",) + PROVIDERS


def genai_providers() -> list[str]:
    """Providers the installed onnxruntime-genai can use on this machine, best first."""
    import onnxruntime_genai as og

    found = []
    if og.is_cuda_available():
        found.append("cuda")
    if og.is_dml_available():
        found.append("dml")
    if _coreml_available():
        found.append("coreml")
    found.append("cpu")
    return found


def _coreml_available() -> bool:
    import onnxruntime as ort

    return "CoreMLExecutionProvider" in ort.get_available_providers()


def choose_provider(requested: str = "auto", available: list[str] | None = None) -> str:
    """The provider to run on: the best available for 'auto', else the one asked for."""
    requested = (requested or "auto").lower()
    if requested not in PROVIDER_CHOICES:
        raise EngineError(
            f"Unknown execution provider '{requested}'; choose one of {', '.join(PROVIDER_CHOICES)}."
        )
    available = genai_providers() if available is None else available
    if requested == "auto":
        return next(p for p in PROVIDERS if p in available)
    if requested not in available:
        raise EngineError(
            f"The execution provider '{requested}' is not available on this machine "
            f"(available: {', '.join(available)}); use --provider auto or cpu."
        )
    return requested
