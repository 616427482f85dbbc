"""Measuring retrieval and answers on a QA set (engine.evaluation.qa): hit@k, MRR, keywords, refusals, latency."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from engine.errors import EngineError
from engine.evaluation.qa import QAItem
from engine.types import Passage

HIT_AT = (1, 3, 5, 10)
MRR_AT = 5


@dataclass
class QuestionResult:
    item: QAItem
    rank: int | None  # 1-based rank of the first passage that covers an answer page
    refused: bool  # the relevance gate said the manuals do not answer it
    answer: str | None = None  # None when generation was skipped
    evidence: str | None = None  # the sources' text shown with the answer
    timings_s: dict[str, float] = field(default_factory=dict)
    relevance: float = 0.0  # the gate's score

    @property
    def keyword_hit(self) -> bool | None:
        """All keywords in the answer (case and spacing ignored); None when not applicable."""
        return self._keywords_in(self.answer, all)

    @property
    def keyword_any(self) -> bool | None:
        """At least one keyword in the answer."""
        return self._keywords_in(self.answer, any)

    @property
    def evidence_hit(self) -> bool | None:
        """All keywords in the sources' text shown with the answer: what the person can read."""
        return self._keywords_in(self.evidence, all)

    def _keywords_in(self, text: str | None, combine) -> bool | None:
        if text is None or not self.item.answerable or not self.item.keywords:
            return None
        text = _normalised(text)
        return combine(_normalised(k) in text for k in self.item.keywords)

    def to_dict(self) -> dict:
        return {"id": self.item.id, "answerable": self.item.answerable, "rank": self.rank,
                "refused": self.refused, "keyword_hit": self.keyword_hit, "keyword_any": self.keyword_any,
                "evidence_hit": self.evidence_hit,
                "relevance": round(self.relevance, 4), "answer": self.answer,
                "timings_s": {k: round(v, 4) for k, v in self.timings_s.items()}}


def first_hit_rank(item: QAItem, passages: Sequence[Passage]) -> int | None:
    """A hit is a passage from the item's document that covers one of its pages."""
    if not item.answerable:
        return None
    wanted = set(item.pages)
    for rank, passage in enumerate(passages, 1):
        if passage.document.casefold() == (item.doc or "").casefold() and wanted & set(passage.pages):
            return rank
    return None


def summarize(results: Sequence[QuestionResult]) -> dict:
    answerable = [r for r in results if r.item.answerable]
    unanswerable = [r for r in results if not r.item.answerable]
    summary = {"questions": len(results), "answerable": len(answerable),
               "unanswerable": len(unanswerable)}
    for k in HIT_AT:
        summary[f"hit@{k}"] = _mean(r.rank is not None and r.rank <= k for r in answerable)
    summary[f"mrr@{MRR_AT}"] = _mean(1.0 / r.rank if r.rank and r.rank <= MRR_AT else 0.0
                                     for r in answerable)
    summary["refusal_accuracy"] = _mean(r.refused for r in unanswerable)
    summary["false_refusal_rate"] = _mean(r.refused for r in answerable)
    for name in ("keyword_hit", "keyword_any", "evidence_hit"):
        flags = [getattr(r, name) for r in answerable if getattr(r, name) is not None]
        summary[f"{name}_rate"] = _mean(flags)
    summary["latency_s"] = latency_table(r.timings_s for r in results)
    return summary


def latency_table(timings: Iterable[dict[str, float]]) -> dict[str, dict[str, float]]:
    """p50 and p95 of each stage over all questions that ran it."""
    by_stage: dict[str, list[float]] = {}
    for timing in timings:
        for stage, seconds in timing.items():
            by_stage.setdefault(stage, []).append(seconds)
    return {stage: {"p50": round(percentile(values, 50), 4), "p95": round(percentile(values, 95), 4)}
            for stage, values in by_stage.items()}


def percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    position = (len(ordered) - 1) * q / 100
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def evaluate(items: Sequence[QAItem], retriever, assistant=None, k: int = max(HIT_AT),
             on_result: Callable[[QuestionResult], None] | None = None) -> list[QuestionResult]:
    """Each question through retrieval (top k, for hit@k) and, with an assistant, through the
    whole answer. Without one, the relevance gate is judged on the retrieved passages alone."""
    results = []
    for item in items:
        result = _retrieval_result(item, retriever, assistant, k)
        if assistant is not None:
            _answer_into(result, assistant)
        results.append(result)
        if on_result is not None:
            on_result(result)
    return results


def _retrieval_result(item: QAItem, retriever, assistant, k: int) -> QuestionResult:
    from engine.answer.assistant import AssistantSettings
    from engine.answer.grounding import judge_relevance

    settings = assistant.settings if assistant is not None else AssistantSettings()
    retrieved = retriever.retrieve(item.question, k)
    shown = retrieved.passages[:settings.passages]
    relevance = judge_relevance(item.question, shown, retriever.store.prefix_frequency,
                                settings.relevance_threshold)
    return QuestionResult(item, first_hit_rank(item, retrieved.passages), not relevance.relevant,
                          timings_s=dict(retrieved.timings_s), relevance=relevance.score)


def _answer_into(result: QuestionResult, assistant) -> None:
    """Fills in the answer, the gate's verdict and the timings of a full answer."""
    for event in assistant.ask(result.item.question):
        if event.kind == "passages":
            result.refused = not event.answerable
        elif event.kind == "citations":
            result.evidence = "\n".join(c.passage.text for c in event.citations)
        elif event.kind == "done":
            result.answer = event.answer
            result.timings_s = dict(event.stats.timings_s)
            if event.stats.time_to_first_token_s is not None:
                result.timings_s["first_token"] = event.stats.time_to_first_token_s
        elif event.kind == "error":
            raise EngineError(f"Question '{result.item.id}' failed: {event.message}")


def _mean(values: Iterable) -> float | None:
    values = [float(v) for v in values]
    return round(sum(values) / len(values), 4) if values else None


def _normalised(text: str) -> str:
    return " ".join(text.split()).casefold()
