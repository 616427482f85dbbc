"""Answer metrics in the Prometheus text exposition format (version 0.0.4), for a /metrics page.

    metrics = Metrics()
    assistant = Assistant(retriever, llm, metrics=metrics)
    ...
    print(metrics.render())

The histograms, counters and the text come from prometheus_client, each Metrics in its own
registry (no global state). Thread-safe: the GUI's worker records while a server thread may
render, and a render is one snapshot (an answer is never half counted in it).
"""

from __future__ import annotations

import threading

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

# Seconds: from a 1 ms keyword search up to a long answer on a slow CPU.
STAGE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
PREFIX = "offline_assistant"


class Metrics:
    def __init__(self):
        self._lock = threading.Lock()
        self._stages = Histogram(f"{PREFIX}_stage_seconds", "Time spent in each stage of answering a question.",
                                 ["stage"], buckets=STAGE_BUCKETS, registry=None)
        self._first_token = Histogram(
            f"{PREFIX}_time_to_first_token_seconds",
            "From the question to the answer's first token, retrieval included.",
            buckets=STAGE_BUCKETS, registry=None)
        self._answers = Counter(
            f"{PREFIX}_answers_total",
            'Questions answered; answerable="false" when the manuals did not cover it.',
            ["answerable"], registry=None)
        self._errors = Counter(f"{PREFIX}_errors_total", "Questions that ended in an error, by kind.",
                               ["kind"], registry=None)
        self._tokens = Counter(f"{PREFIX}_tokens_total", "Tokens the model read and wrote.", ["kind"],
                               registry=None)
        for label, counter in (("true", self._answers), ("false", self._answers),
                               ("prompt", self._tokens), ("generated", self._tokens)):
            counter.labels(label)  # shown as 0 before the first answer
        self._registry = CollectorRegistry()
        self._registry.register(_WithoutCreated(
            (self._stages, self._first_token, self._answers, self._errors, self._tokens)))

    def record_answer(self, stats) -> None:
        """Takes an engine.answer.assistant.AnswerStats."""
        with self._lock:
            for stage, seconds in stats.timings_s.items():
                self._stages.labels(stage).observe(seconds)
            if stats.time_to_first_token_s is not None:
                self._first_token.observe(stats.time_to_first_token_s)
            self._answers.labels("true" if stats.answerable else "false").inc()
            self._tokens.labels("prompt").inc(stats.prompt_tokens)
            self._tokens.labels("generated").inc(stats.new_tokens)

    def record_error(self, kind: str) -> None:
        with self._lock:
            self._errors.labels(kind).inc()

    def render(self) -> str:
        with self._lock:
            return generate_latest(self._registry).decode("utf-8")


class _WithoutCreated:
    """The metrics' families without their `_created` series: those are OpenMetrics
    timestamps, which the 0.0.4 text would show as extra gauge families."""

    def __init__(self, metrics):
        self._metrics = metrics

    def collect(self):
        for metric in self._metrics:
            for family in metric.collect():
                family.samples = [s for s in family.samples if not s.name.endswith("_created")]
                yield family
