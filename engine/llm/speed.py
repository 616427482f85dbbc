"""How fast a model writes on this machine, measured on request; engine.models.catalog keeps
what is measured (here, not there: the models package sits below the LLM that runs them).

    measure_speed(paths, "qwen2.5-0.5b-instruct-q4_k_m")   # tokens per second, or None
"""

from __future__ import annotations

from engine.models.catalog import MEASURE_PROMPT, MEASURE_TOKENS, record_speed
from engine.models.registry import resolve_llm
from engine.paths import AppPaths


def measure_speed(paths: AppPaths, name: str | None, provider: str = "auto",
                  cancel=None) -> float | None:
    """Has the model `name` (None: the built-in one) write MEASURE_TOKENS tokens in a process of
    its own, as answers do, and records how fast it wrote; None when it stopped too soon to say
    or `cancel` (a threading.Event) was set. Raises ModelError when it cannot be opened."""
    from engine.llm.process import LLMClient  # numpy and onnxruntime: only when measuring

    folder = resolve_llm(paths, name)
    with LLMClient(folder, provider) as llm:
        stats = llm.generate([{"role": "user", "content": MEASURE_PROMPT}],
                             max_new_tokens=MEASURE_TOKENS, cancel=cancel).stats
    if cancel is not None and cancel.is_set():
        return None
    if not record_speed(paths, folder, stats.tokens_per_s, stats.new_tokens, stats.provider):
        return None
    return stats.tokens_per_s
