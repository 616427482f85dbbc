"""Answer metrics in the Prometheus text exposition format (version 0.0.4), for a /metrics page.

    metrics = Metrics()
    assistant = Assistant(retriever, llm, metrics=metrics)
    ...
    print(metrics.render())

A server makes it with its LLM pool, `Metrics(pool=state.pool)`: then the server's families are
shown too (requests by route and status, their latency, the queue's length and the busy LLM
processes, read from the pool when the page is rendered, and the retrieval scores).

The histograms, counters and the text come from prometheus_client, each Metrics in its own
registry (no global state). Thread-safe: the GUI's worker records while a server thread may
render, and a render is one snapshot (an answer is never half counted in it).
"""

from __future__ import annotations

import threading

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily

# Seconds: from a 1 ms keyword search up to a long answer on a slow CPU.
STAGE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
PREFIX = "offline_assistant"
CONTENT_TYPE = CONTENT_TYPE_LATEST  # what render()'s text is served as
# The gate's score and the cosine similarity: a similarity is -1..1, a score mostly 0..2.
SCORE_BUCKETS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0)


class Metrics:
    def __init__(self, pool=None):
        """`pool`: the server's LLMPool (anything with .waiting, .running and .workers); with
        it, the server's families are registered too."""
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
        families = [self._stages, self._first_token, self._answers, self._errors, self._tokens]
        self._add_server_families(pool, families)
        self._registry = CollectorRegistry()
        self._registry.register(_WithoutCreated(families))

    def _add_server_families(self, pool, families: list) -> None:
        self._requests = Counter(f"{PREFIX}_http_requests_total",
                                 "HTTP requests answered, by route (its path template) and status code.",
                                 ["route", "status"], registry=None)
        self._latency = Histogram(f"{PREFIX}_http_request_seconds",
                                  "From a request's arrival to its reply's last byte (a stream's end), by route.",
                                  ["route"], buckets=STAGE_BUCKETS, registry=None)
        self._retrieval = Histogram(
            f"{PREFIX}_retrieval_score",
            'The top passages\' relevance per question: measure="similarity" (the best cosine), '
            'measure="gate" (the relevance gate\'s score).', ["measure"], buckets=SCORE_BUCKETS, registry=None)
        if pool is not None:
            families += [self._requests, self._latency, self._retrieval, _PoolGauges(pool)]

    def record_request(self, route: str, status: int, seconds: float) -> None:
        with self._lock:
            self._requests.labels(route, str(status)).inc()
            self._latency.labels(route).observe(seconds)

    def record_retrieval(self, relevance) -> None:
        """Takes the engine.answer.grounding.Relevance of a PassagesEvent."""
        with self._lock:
            self._retrieval.labels("similarity").observe(relevance.similarity)
            self._retrieval.labels("gate").observe(relevance.score)

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

    def record_generation(self, stats) -> None:
        """Takes the engine.types.GenerationStats of a generation without manuals (the
        server's /generate and /v1/chat/completions): its tokens count too."""
        with self._lock:
            self._tokens.labels("prompt").inc(stats.prompt_tokens)
            self._tokens.labels("generated").inc(stats.new_tokens)

    def record_error(self, kind: str) -> None:
        with self._lock:
            self._errors.labels(kind).inc()

    def render(self) -> str:
        with self._lock:
            return generate_latest(self._registry).decode("utf-8")


class _PoolGauges:
    """The queue's length and the busy LLM processes, read from the pool at each render."""

    def __init__(self, pool):
        self._pool = pool

    def collect(self):
        for name, text, read in (
                ("queue_length", "Requests waiting for a free LLM process.", lambda p: p.waiting),
                ("llm_busy", "Requests the LLM processes answer now (each takes up to --llm-streams).", lambda p: p.running),
                ("llm_workers", "LLM processes the server runs (--llm-workers).", lambda p: p.workers)):
            yield GaugeMetricFamily(f"{PREFIX}_{name}", text, value=read(self._pool))


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
