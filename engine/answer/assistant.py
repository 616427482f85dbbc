"""Assistant: a question -> passages -> a grounded, cited answer, as a stream of typed events.

    for event in assistant.ask("How do I ...?", history, cancel):
        PassagesEvent   what was retrieved, and whether it is relevant enough to answer from
        LeadEvent       the manual's own sentences that best answer it, each cited (only when
                        it is answerable; before the model starts)
        TextEvent       a piece of the answer, as the model writes it (DoneEvent.answer is
                        the final text: a loop's repeated tail, if shown, is cut from it)
        CitationsEvent  the sources, each with its document, pages and the passage's own words:
                        the [n] the model wrote and the passages its sentences came from
        DoneEvent       the answer's sentences, each checked against the passages (marked
                        when they do not say it), timings per stage, tokens, which stages ran
        ErrorEvent      an EngineError, in words a person can act on (nothing follows it)

It is the one API that the CLI, the GUI and a server use. The model runs wherever `llm` runs
(LocalLLM in-process, LLMClient in a child process, RemoteLLM on an engine: any
engine.types.LanguageModel); the retriever in this thread.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from engine.answer.answer_guard import AnswerGuard
from engine.answer.grounding import (
    DEFAULT_THRESHOLD,
    Relevance,
    build_prompt,
    cited_numbers,
    judge_relevance,
    strip_invalid_citations,
    support,
)
from engine.answer.lead import DEFAULT_WEIGHTS, best_units, choose, marked, scored
from engine.answer.metrics import Metrics
from engine.answer.query import Query
from engine.answer.retrieval import Retriever
from engine.answer.sentence_check import (
    LEAD_WORDS,
    SUPPORTED_SHARE,
    check_sentences,
    has_content,
    lead_words,
    unsupported_actions,
)
from engine.answer.timing import StageTimes
from engine.errors import EngineError
from engine.paths import AppPaths
from engine.types import CancelFlag, CheckedSentence, Citation, LanguageModel, Passage, Quote

log = logging.getLogger(__name__)

LEAD_QUOTES = 3
NOT_FOUND = ("I could not find this in the indexed manuals. "
             "The nearest passages are listed below, in case they help.")
QUOTE_CHARS = 240
SUPPORT_FLOOR = 0.5


@dataclass(frozen=True)
class AssistantSettings:
    passages: int = 4  # retrieved: the gate and the lead read them all
    prompt_passages: int = 2  # the best of them offered to the model, within the prompt budget
    # Prefill runs ~3.6 ms/token on 2 cores: first token < 3 s. The worked example takes ~200
    # of these, the sources what is left after the rules, the turns and the question.
    prompt_budget_tokens: int = 840
    history_tokens: int = 160
    max_new_tokens: int = 192
    temperature: float = 0.0
    relevance_threshold: float = DEFAULT_THRESHOLD
    worked_example: bool = True  # grounding.EXAMPLE_*: the small built-in model needs it


@dataclass(frozen=True)
class AnswerStats:
    answerable: bool
    relevance: Relevance
    stages: tuple[str, ...]
    timings_s: dict[str, float]
    prompt_tokens: int = 0
    new_tokens: int = 0
    time_to_first_token_s: float | None = None  # from the question, retrieval included
    finish_reason: str = "stop"
    provider: str = ""
    support: float | None = None  # share of the answer's own words found in the sources
    tokens_per_s: float = 0.0  # the model's writing speed, after its first token
    checked: int | None = None  # the answer's sentences with content, checked; None: no check ran
    unsupported: int = 0  # of those, the ones the passages do not support
    unsupported_actions: int = 0  # addresses (removed), phone numbers, commands the passages do not hold
    lead_words: int | None = None  # the answer's topic words beyond the question's that the lead shows

    @property
    def sentence_support(self) -> float | None:
        """The share of the checked sentences that the passages support; None: none checked."""
        return (self.checked - self.unsupported) / self.checked if self.checked else None

    @property
    def well_supported(self) -> bool:
        """False when the view says to check the sources: the answer holds an address, command
        or value the passages do not, or fewer than LEAD_WORDS of the lead's words beyond the
        question's (sentence_check.lead_words). Stats without that count (from an older server)
        are judged on the sentence checks, and without those on the words."""
        if self.unsupported_actions:
            return False  # a made-up address or command is never "well supported"
        if self.lead_words is not None:
            return self.lead_words >= LEAD_WORDS
        if self.checked is None:
            return self.support is not None and self.support >= SUPPORT_FLOOR
        return self.checked > 0 and self.sentence_support >= SUPPORTED_SHARE

    def to_dict(self) -> dict:
        return {"answerable": self.answerable, "relevance": self.relevance.to_dict(),
                "stages": list(self.stages), "timings_s": {k: round(v, 4) for k, v in self.timings_s.items()},
                "prompt_tokens": self.prompt_tokens, "new_tokens": self.new_tokens,
                "time_to_first_token_s": None if self.time_to_first_token_s is None
                else round(self.time_to_first_token_s, 4),
                "finish_reason": self.finish_reason, "provider": self.provider,
                "support": None if self.support is None else round(self.support, 4),
                "tokens_per_s": self.tokens_per_s, "checked": self.checked, "unsupported": self.unsupported,
                "unsupported_actions": self.unsupported_actions, "lead_words": self.lead_words,
                "sentence_support": None if self.sentence_support is None else round(self.sentence_support, 4),
                "well_supported": self.well_supported}


@dataclass(frozen=True)
class PassagesEvent:
    passages: tuple[Passage, ...]
    answerable: bool
    relevance: Relevance
    kind: str = field(default="passages", init=False)


@dataclass(frozen=True)
class LeadEvent:
    quotes: tuple[Quote, ...]  # best first; empty when no sentence qualifies
    kind: str = field(default="lead", init=False)


@dataclass(frozen=True)
class TextEvent:
    text: str
    kind: str = field(default="text", init=False)


@dataclass(frozen=True)
class CitationsEvent:
    citations: tuple[Citation, ...]
    kind: str = field(default="citations", init=False)


@dataclass(frozen=True)
class DoneEvent:
    answer: str
    stats: AnswerStats
    kind: str = field(default="done", init=False)
    lead: tuple[Quote, ...] = ()  # the LeadEvent's quotes again, for whoever keeps the answer
    sentences: tuple[CheckedSentence, ...] = ()  # the answer's sentences, each checked against the passages


@dataclass(frozen=True)
class ErrorEvent:
    message: str
    error: str  # the EngineError subclass's name
    kind: str = field(default="error", init=False)


Event = PassagesEvent | LeadEvent | TextEvent | CitationsEvent | DoneEvent | ErrorEvent


class Assistant:
    def __init__(self, retriever: Retriever, llm: LanguageModel, settings: AssistantSettings | None = None,
                 metrics=None):
        self.retriever = retriever
        self.llm = llm  # LocalLLM, LLMClient or RemoteLLM, loaded
        self.settings = settings or AssistantSettings()
        self.metrics = metrics if metrics is not None else Metrics()  # render() for /metrics

    def ask(self, question: str, history: Sequence[dict] = (), cancel: CancelFlag | None = None,
            ) -> Iterator[Event]:
        try:
            yield from self._ask(question.strip(), list(history), cancel)
        except EngineError as exc:
            self.metrics.record_error(type(exc).__name__)
            yield ErrorEvent(str(exc), type(exc).__name__)

    def _ask(self, question: str, history: list[dict], cancel) -> Iterator[Event]:
        if not question:
            raise EngineError("The question is empty; type a question about your manuals.")
        run = _Run()
        if not refers_back(question):
            # Searched and answered alone: earlier turns would take the sources' room in the
            # prompt, and the small model copied their sentences (docs/benchmarks.md, issue 27).
            history = []
        with run.timed("embed"):  # once: a follow-up is searched and judged with its question
            query = self.retriever.query(retrieval_query(question, history))
        retrieved = self.retriever.retrieve(query, self.settings.passages)
        run.merge(retrieved)
        with run.timed("gate"):
            relevance = judge(self.retriever, query, retrieved.passages, self.settings.relevance_threshold)
        passages = retrieved.passages
        if not passages and self.retriever.store.stats()["chunks"] == 0:
            raise EngineError("No manuals are indexed yet; add some documents first.")
        yield PassagesEvent(tuple(passages), relevance.relevant, relevance)
        if not relevance.relevant:
            yield from self._refuse(query, passages, relevance, run)
            return
        with run.timed("lead"):
            units = scored(query, passages, self.retriever.embedder)
            lead = tuple(marked(choose(units, DEFAULT_WEIGHTS, LEAD_QUOTES), query))
        yield LeadEvent(lead)
        yield from self._answer(question, query, passages, history, relevance, run, cancel, lead, units)

    def _refuse(self, query: Query, passages, relevance, run: "_Run") -> Iterator[Event]:
        yield TextEvent(NOT_FOUND)
        yield CitationsEvent(tuple(_sources(best_units(query, passages), passages)))
        yield self._done(NOT_FOUND, AnswerStats(False, relevance, tuple(run.stages), run.timings_s))

    def _answer(self, question, query: Query, passages, history, relevance, run: "_Run", cancel,
                lead: tuple[Quote, ...] = (), units=()) -> Iterator[Event]:
        s = self.settings
        budget = min(s.prompt_budget_tokens, self.llm.context_length - s.max_new_tokens)
        with run.timed("prompt"):
            offered = passages[:s.prompt_passages]
            prompt = build_prompt(question, offered, history, self.llm.count_tokens, budget, s.history_tokens,
                                  template_tokens=self.llm.template_tokens, example=s.worked_example)
        # The prompt numbers a prefix of the passages, maybe shortened: check and cite the full ones.
        numbered = passages[:len(prompt.passages)]
        guard = AnswerGuard(cancel, hidden=prompt.hidden_strings, stop_strings=prompt.stop_strings,
                            known=[p.text for p in numbered], echoes=prompt.echoes)
        stream = self.llm.stream(prompt.messages, max_new_tokens=s.max_new_tokens,
                                 temperature=s.temperature, cancel=guard)
        yield from _shown_text(stream, guard, run)
        answer = strip_invalid_citations(guard.answer(), len(prompt.passages)).strip()
        with run.timed("check"):
            sentences = check_sentences(answer, numbered, self.retriever.embedder)
        with run.timed("cite"):
            cited = cited_and_sources(answer, sentences, len(numbered))
            citations = tuple(_citations(best_units(query, passages, units), passages, cited))
        yield CitationsEvent(citations)
        g = stream.stats
        content = [c for c in sentences if has_content(c)]
        stats = AnswerStats(True, relevance, tuple(run.stages), run.timings_s, g.prompt_tokens, g.new_tokens,
                            run.first_token_s(), guard.reason or g.finish_reason, g.provider,
                            support(answer, query, passages), g.tokens_per_s,
                            len(content), sum(not c.supported for c in content),
                            len(unsupported_actions(answer, sentences)) + len(guard.removed),
                            lead_words(answer, query.terms, "\n".join(q.text for q in lead)))
        yield self._done(answer, stats, lead, sentences)

    def _done(self, answer: str, stats: AnswerStats, lead: tuple[Quote, ...] = (),
              sentences: tuple[CheckedSentence, ...] = ()) -> DoneEvent:
        stats.timings_s["total"] = sum(v for k, v in stats.timings_s.items() if k != "total")
        self.metrics.record_answer(stats)
        return DoneEvent(answer, stats, lead=lead, sentences=sentences)


def imported_reranker(paths: AppPaths):
    """The reranker, loaded and warmed up: the latest imported one; None when none is, or when it
    cannot be loaded. Answers then keep the fused ranking, and the log says why, once per load
    (a damaged reranker should not stop answers). None is shipped: the one trained here lowered
    MRR@5 (docs/reranker.md)."""
    from engine.encoders.reranker import CrossEncoder
    from engine.models.registry import resolve_reranker

    try:
        folder = resolve_reranker(paths)
        return CrossEncoder.from_folder(folder).load() if folder is not None else None
    except (EngineError, OSError) as exc:
        log.warning("answering without a reranker: %s", exc)
        return None


def judge(retriever: Retriever, query: Query | str, passages: Sequence[Passage],
          threshold: float = DEFAULT_THRESHOLD) -> Relevance:
    """The relevance gate on the retriever's collection (its word frequencies) and embedder
    (its vocabulary, for telling names from common words)."""
    if isinstance(query, str):
        query = Query.of(query, retriever.frequency)
    return judge_relevance(query, passages, threshold, common_word=retriever.embedder.is_common_word)


def retrieval_query(question: str, history: Sequence[dict]) -> str:
    """A follow-up that refers back ("And how do I undo it?", "What about on Windows?") is
    searched together with the previous question; any other question alone, however short."""
    if not refers_back(question):
        return question
    earlier = [t["content"] for t in history if t.get("role") == "user" and t.get("content")]
    return f"{earlier[-1]} {question}" if earlier else question


# English only: words that point back at what was said, and the verbs that make a question whole.
_POINTERS = frozenset("it its they them their this that these those there then also".split())
_VERBS = frozenset("""am is are was were be been do does did can could should would will shall may
might must has have had need show tell explain list give describe compare define""".split())
_LEADS_BACK = re.compile(r"\s*(?:and\b|what about\b|how about\b|\.\.\.|…)")
# Uses of "it", "there" and "that" that point at nothing: "is it possible to", "is there a",
# "make sure that the".
_POINTS_AT_NOTHING = re.compile(r"\b(?:is|was) it \w+ to\b|\bit(?:'s| is| was) \w+ to\b"
                                r"|\b(?:is|are|was|were) there\b|\bthere(?:'s| is| are| was| were)\b"
                                r"|\bthat (?=(?:the|a|an|i|you|we|my|your|our|all|every|no)\b)")
FRAGMENT_WORDS = 4  # "On Windows?", "Which one?": without a verb, an elliptic fragment


def refers_back(question: str) -> bool:
    """Whether the question leans on the one before: it opens with "and", "what about", "how
    about" or an ellipsis, points back (it, that, this, they, them, those, these, there, then,
    also, the same), or is a fragment of a few words without a verb. English only."""
    text = question.casefold()
    if _LEADS_BACK.match(text):
        return True
    words = re.findall(r"\w+", _POINTS_AT_NOTHING.sub(" is ", text))  # the verb stays
    if _POINTERS.intersection(words) or "the same" in " ".join(words):
        return True
    return 0 < len(words) <= FRAGMENT_WORDS and not _VERBS.intersection(words)


def _shown_text(stream, guard: AnswerGuard, run: "_Run") -> Iterator[TextEvent]:
    """The model's pieces as the guard lets them through; "generate" is timed as the person
    sees it, the wall time of the whole stream."""
    with run.timed("generate"):
        for piece in stream:
            if run.first_token_at is None:
                run.first_token_at = time.perf_counter()
            shown = guard.feed(piece)
            if shown:
                yield TextEvent(shown)
        shown = guard.flush()
    if shown:
        yield TextEvent(shown)


def cited_and_sources(answer: str, sentences: Sequence[CheckedSentence], count: int) -> list[int]:
    """The [n] the answer cites and the sources of its supported sentences, in order of first
    use, once each: within a sentence, what it cites, then where it came from."""
    numbers: list[int] = []
    for s in sentences:
        numbers += cited_numbers(answer[s.start:s.end], count)
        if s.supported and s.source is not None:
            numbers.append(s.source)
    numbers += cited_numbers(answer, count)  # any outside a sentence
    return list(dict.fromkeys(numbers))


def _citations(best: dict, passages: Sequence[Passage], cited: list[int]) -> list[Citation]:
    """The passages the answer cites; when it cites none, all retrieved passages as sources.
    Each quotes its best unit by the lead's scores (`best`: engine.answer.lead.best_units)."""
    if cited:
        return [Citation(n, passages[n - 1], quote_text(best.get(n), passages[n - 1]), True) for n in cited]
    return _sources(best, passages)


def _sources(best: dict, passages: Sequence[Passage]) -> list[Citation]:
    return [Citation(n, p, quote_text(best.get(n), p), False) for n, p in enumerate(passages, 1)]


def quote_text(unit, passage: Passage, limit: int = QUOTE_CHARS) -> str:
    """A citation's quote: its passage's best unit as the lead shows it (the passage's start
    when none qualifies), cut to `limit`."""
    text = unit.text if unit is not None else " ".join(passage.text.split())
    return text if len(text) <= limit else text[:limit - 1].rsplit(" ", 1)[0] + "…"


class _Run(StageTimes):
    """Timings of one answer, from the moment the question came."""

    def __init__(self):
        super().__init__()
        self.start = time.perf_counter()
        self.first_token_at: float | None = None

    def first_token_s(self) -> float | None:
        return None if self.first_token_at is None else self.first_token_at - self.start
