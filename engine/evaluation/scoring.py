"""Measuring retrieval and answers on a QA set (engine.evaluation.qa): hit@k, MRR, refusals,
keywords in what is shown, loops, what streamed to the screen beyond the answer, determinism, how
the "check the sources" caution relates to right answers, and latency per stage; overall, per
document and per family of manuals."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from engine.errors import EngineError
from engine.evaluation.qa import QAItem
from engine.types import Passage

HIT_AT = (1, 3, 5, 10)
MRR_AT = 5
REPEAT_SAMPLE = 10  # answers asked a second time to measure determinism
NO_DOCUMENT = "(no document)"  # by_doc's group for questions that name none (unanswerable ones)
NO_FAMILY = "(no family)"

# summary key -> the QuestionResult flag it is the share of (over the results where it is not None)
RATES = {"keyword_hit_rate": "keyword_hit", "keyword_hit_generated": "keyword_hit_generated",
         "lead_hit_rate": "lead_hit", "keyword_any_rate": "keyword_any", "evidence_hit_rate": "evidence_hit",
         "loop_rate": "looped", "streamed_beyond_rate": "streamed_beyond", "deterministic_rate": "repeat_identical",
         "keyword_hit_supported_only": "keyword_hit_supported_only"}


@dataclass
class QuestionResult:
    item: QAItem
    rank: int | None  # 1-based rank of the first passage that covers an answer page
    refused: bool  # the relevance gate said the manuals do not answer it
    answer: str | None = None  # the model's text; None when generation was skipped
    evidence: str | None = None  # the sources' text shown with the answer
    timings_s: dict[str, float] = field(default_factory=dict)
    relevance: float = 0.0  # the gate's score
    lead: str | None = None  # the manual's sentences shown before the model's text; None: no lead
    repeat_identical: bool | None = None  # asked again, the same lead and text; None: not asked again
    cautioned: bool | None = None  # the answer carried "check the sources"; None: no answer written
    support: float | None = None  # the share of the answer's own words in the sources (AnswerStats)
    supported_only: str | None = None  # the model's text with its unsupported sentences left out
    streamed: str | None = None  # the model's text as it streamed to the screen

    @property
    def shown(self) -> str | None:
        """The whole answer as a person reads it: the lead sentences, then the model's text."""
        if self.answer is None or not self.lead:
            return self.answer
        return f"{self.lead}\n{self.answer}"

    @property
    def keyword_hit(self) -> bool | None:
        """All keywords in the whole answer as shown (case and spacing ignored); None when not applicable."""
        return self._keywords_in(self.shown, all)

    @property
    def keyword_hit_generated(self) -> bool | None:
        """All keywords in the model's text alone."""
        return self._keywords_in(self.answer, all)

    @property
    def lead_hit(self) -> bool | None:
        """All keywords in the lead sentences alone."""
        return self._keywords_in(self.lead, all)

    @property
    def keyword_hit_supported_only(self) -> bool | None:
        """All keywords in the model's text once its unsupported sentences are left out."""
        return self._keywords_in(self.supported_only, all)

    @property
    def keyword_any(self) -> bool | None:
        """At least one keyword in the model's text."""
        return self._keywords_in(self.answer, any)

    @property
    def evidence_hit(self) -> bool | None:
        """All keywords in the sources' text shown with the answer: what the person can read."""
        return self._keywords_in(self.evidence, all)

    @property
    def streamed_beyond(self) -> bool | None:
        """The screen showed text the answer then left out (a loop cut after it streamed);
        None when no answer was written."""
        if self.answer is None or self.refused or self.streamed is None:
            return None
        return self.streamed.strip() != self.answer.strip()

    @property
    def looped(self) -> bool | None:
        """A repeated sentence or long n-gram in the model's text; None when it wrote none."""
        if self.answer is None or self.refused:
            return None
        from engine.answer.answer_guard import has_loop  # the rules the guard cuts loops by

        return has_loop(self.answer)

    def _keywords_in(self, text: str | None, combine) -> bool | None:
        if text is None or not self.item.answerable or not self.item.keywords:
            return None
        text = _normalised(text)
        return combine(_normalised(k) in text for k in self.item.keywords)

    def to_dict(self) -> dict:
        return {"id": self.item.id, "family": self.item.family, "answerable": self.item.answerable,
                "rank": self.rank, "refused": self.refused, "keyword_hit": self.keyword_hit,
                "keyword_hit_generated": self.keyword_hit_generated, "lead_hit": self.lead_hit,
                "keyword_any": self.keyword_any, "evidence_hit": self.evidence_hit, "looped": self.looped,
                "streamed_beyond": self.streamed_beyond,
                "repeat_identical": self.repeat_identical, "relevance": round(self.relevance, 4),
                "cautioned": self.cautioned, "support": None if self.support is None else round(self.support, 4),
                "keyword_hit_supported_only": self.keyword_hit_supported_only,
                "lead": self.lead, "answer": self.answer,
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


# -- the summary -------------------------------------------------------------------------------

def summarize(results: Sequence[QuestionResult]) -> dict:
    """The figures over all questions, then the same under by_doc (per document file name) and,
    when the items name one, by_family."""
    summary = figures(results)
    summary["by_doc"] = {doc: figures(group) for doc, group in
                         _grouped(results, lambda r: r.item.doc or NO_DOCUMENT).items()}
    if any(r.item.family for r in results):
        summary["by_family"] = {family: figures(group) for family, group in
                                _grouped(results, lambda r: r.item.family or NO_FAMILY).items()}
    return summary


def figures(results: Sequence[QuestionResult]) -> dict:
    """Counts, hit@k, MRR, refusals, the RATES and latency of one group of results."""
    answerable = [r for r in results if r.item.answerable]
    unanswerable = [r for r in results if not r.item.answerable]
    summary = {"questions": len(results), "answerable": len(answerable),
               "unanswerable": len(unanswerable)}
    for k in HIT_AT:
        summary[f"hit@{k}"] = _mean(r.rank is not None and r.rank <= k for r in answerable)
    summary[f"mrr@{MRR_AT}"] = _mean(1.0 / r.rank if r.rank and r.rank <= MRR_AT else 0.0
                                     for r in answerable)
    summary["refusal_accuracy"] = _mean(r.refused != r.item.answerable for r in results)
    summary["false_refusal_rate"] = _mean(r.refused for r in answerable)
    summary["unanswerable_refused_rate"] = _mean(r.refused for r in unanswerable)
    for key, flag in RATES.items():
        summary[key] = _mean(v for v in (getattr(r, flag) for r in results) if v is not None)
    # what the lead shows (characters, its quotes joined), over the answers that have one
    summary["lead_chars"] = _mean(len(r.lead) for r in results if r.lead)
    summary.update(caution_figures(results))
    summary["latency_s"] = latency_table(r.timings_s for r in results)
    return summary


def caution_figures(results: Sequence[QuestionResult]) -> dict:
    """How often written answers carry the caution: all of them, the wrong ones, the right ones
    (right: the model's text holds all the keywords, keyword_hit_generated)."""
    judged = [r for r in results if r.cautioned is not None and r.keyword_hit_generated is not None]
    return {"caution_rate": _mean(r.cautioned for r in judged),
            "caution_on_wrong": _mean(r.cautioned for r in judged if not r.keyword_hit_generated),
            "caution_on_right": _mean(r.cautioned for r in judged if r.keyword_hit_generated)}


def _grouped(results: Iterable[QuestionResult], key) -> dict[str, list[QuestionResult]]:
    groups: dict[str, list[QuestionResult]] = {}
    for result in results:
        groups.setdefault(key(result), []).append(result)
    return dict(sorted(groups.items()))


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


# -- running the questions ---------------------------------------------------------------------

def evaluate(items: Sequence[QAItem], retriever, assistant=None, k: int = max(HIT_AT),
             on_result: Callable[[QuestionResult], None] | None = None,
             repeat_sample: int = 0) -> list[QuestionResult]:
    """Each question through retrieval (top k, for hit@k) and, with an assistant, through the
    whole answer; `repeat_sample` written answers, spread over the set, are asked for twice.
    Without an assistant, the relevance gate is judged on the retrieved passages alone."""
    repeats = RepeatPlan(items, repeat_sample if assistant is not None else 0)
    results = []
    for item in items:
        result = _retrieval_result(item, retriever, assistant, k)
        if assistant is not None:
            _answer_into(result, assistant)
            if repeats.wanted(result):
                _ask_again(result, assistant)
        results.append(result)
        if on_result is not None:
            on_result(result)
    _no_lead_is_an_empty_lead(results)
    return results


class RepeatPlan:
    """Which answers are asked for again: n spread evenly over the answerable questions; where the
    one due was refused (no text to compare), the next written answer takes its turn."""

    def __init__(self, items: Sequence[QAItem], n: int):
        answerable = sum(item.answerable for item in items)
        self.step = answerable / n if n > 0 and answerable else math.inf
        self.due = 0.0 if n > 0 else math.inf  # the answerable question's position next in turn
        self.position = 0

    def wanted(self, result: QuestionResult) -> bool:
        if not result.item.answerable:
            return False
        self.position += 1
        if self.position - 1 < self.due or result.refused or result.answer is None:
            return False
        self.due += self.step
        return True


def _retrieval_result(item: QAItem, retriever, assistant, k: int) -> QuestionResult:
    from engine.answer.assistant import AssistantSettings, judge

    settings = assistant.settings if assistant is not None else AssistantSettings()
    retrieved = retriever.retrieve(item.question, k)
    shown = retrieved.passages[:settings.passages]
    relevance = judge(retriever, item.question, shown, settings.relevance_threshold)
    return QuestionResult(item, first_hit_rank(item, retrieved.passages), not relevance.relevant,
                          timings_s=dict(retrieved.timings_s), relevance=relevance.score)


@dataclass
class _Answer:
    """One answer as the assistant's events told it."""
    refused: bool = False
    lead: str | None = None
    lead_s: float | None = None  # from the question to the lead sentences
    evidence: str | None = None
    text: str | None = None
    streamed: str = ""  # the text events, joined
    stats: object = None  # AnswerStats
    sentences: tuple = ()  # CheckedSentence


def _read_answer(assistant, item: QAItem) -> _Answer:
    read = _Answer()
    start = time.perf_counter()
    for event in assistant.ask(item.question):
        if event.kind == "passages":
            read.refused = not event.answerable
        elif event.kind == "lead":  # duck-typed: an event with quotes, each with its text
            read.lead = "\n".join(quote.text for quote in event.quotes)
            read.lead_s = time.perf_counter() - start
        elif event.kind == "text":
            read.streamed += event.text
        elif event.kind == "citations":
            read.evidence = "\n".join(c.passage.text for c in event.citations)
        elif event.kind == "done":
            read.text, read.stats = event.answer, event.stats
            read.sentences = getattr(event, "sentences", ())
        elif event.kind == "error":
            raise EngineError(f"Question '{item.id}' failed: {event.message}")
    return read


def _answer_into(result: QuestionResult, assistant) -> None:
    """Fills in the answer, the gate's verdict and the timings of a full answer."""
    read = _read_answer(assistant, result.item)
    result.refused, result.lead, result.evidence = read.refused, read.lead, read.evidence
    if read.stats is None:
        return
    result.answer, result.streamed = read.text, read.streamed
    result.timings_s = _timings_of(read)
    if read.stats.answerable:
        from engine.answer.sentence_check import without_unsupported

        # an answer the guard cut to nothing was not written: its caution is not judged
        result.cautioned = not read.stats.well_supported if read.text.strip() else None
        result.support = read.stats.support
        result.supported_only = without_unsupported(read.text, read.sentences)


def _timings_of(read: _Answer) -> dict[str, float]:
    """The stages, plus first_token and lead, both counted from the question."""
    timings = dict(read.stats.timings_s)
    if "lead" in timings:  # the stage that chose the sentences: kept, under its own name
        timings["lead_stage"] = timings.pop("lead")
    if read.stats.time_to_first_token_s is not None:
        timings["first_token"] = read.stats.time_to_first_token_s
    if read.lead_s is not None:
        timings["lead"] = read.lead_s
    return timings


def _ask_again(result: QuestionResult, assistant) -> None:
    """Whether a second asking shows byte-identical lead and text."""
    again = _read_answer(assistant, result.item)
    result.repeat_identical = (again.lead, again.text) == (result.lead, result.answer)


def _no_lead_is_an_empty_lead(results: Sequence[QuestionResult]) -> None:
    """Where the assistant shows lead sentences, an answer without them showed none: a lead miss."""
    if any(r.lead is not None for r in results):
        for r in results:
            if r.lead is None and r.answer is not None:
                r.lead = ""


def _mean(values: Iterable) -> float | None:
    values = [float(v) for v in values]
    return round(sum(values) / len(values), 4) if values else None


def _normalised(text: str) -> str:
    return " ".join(text.split()).casefold()
