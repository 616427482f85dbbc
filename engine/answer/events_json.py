"""The answer's typed events as JSON and back: what a server's /v1/ask sends (engine.server), and
what a thin kiosk reads from it (engine.answer.central). An error event's JSON is the server's
error body, {"error": {"message", "type", "code"}}, as every other failed request's."""

from __future__ import annotations

from engine.answer.assistant import (
    AnswerStats,
    CitationsEvent,
    DoneEvent,
    ErrorEvent,
    LeadEvent,
    PassagesEvent,
    TextEvent,
)
from engine.answer.grounding import Relevance
from engine.types import CheckedSentence, Citation, Passage, Quote


def event_data(event) -> dict:
    """One event (not an error) as JSON, in the engine's own serialisations."""
    if event.kind == "passages":
        return {"answerable": event.answerable, "relevance": event.relevance.to_dict(),
                "passages": [p.to_dict() for p in event.passages]}
    if event.kind == "lead":
        return {"quotes": [_quote(q) for q in event.quotes]}
    if event.kind == "text":
        return {"text": event.text}
    if event.kind == "citations":
        return {"citations": [_citation(c) for c in event.citations]}
    if event.kind == "done":
        return {"answer": event.answer, "answerable": event.stats.answerable,
                "lead": [_quote(q) for q in event.lead],
                "sentences": [_sentence(event.answer, s) for s in event.sentences],
                "stats": event.stats.to_dict()}
    raise ValueError(f"no JSON for an event of kind {event.kind!r}")


def event_of(kind: str, data: dict):
    """The event back from its kind and event_data() (or an error body); KeyError, TypeError or
    ValueError when the JSON is not such an event."""
    if kind == "passages":
        return PassagesEvent(tuple(Passage.from_dict(p) for p in data["passages"]), bool(data["answerable"]),
                             relevance_of(data["relevance"]))
    if kind == "lead":
        return LeadEvent(tuple(Quote.from_dict(q) for q in data["quotes"]))
    if kind == "text":
        return TextEvent(str(data["text"]))
    if kind == "citations":
        return CitationsEvent(tuple(Citation.from_dict(c) for c in data["citations"]))
    if kind == "done":
        return DoneEvent(str(data["answer"]), stats_of(data["stats"]), tuple(Quote.from_dict(q) for q in data["lead"]),
                         tuple(CheckedSentence.from_dict(s) for s in data["sentences"]))
    if kind == "error":
        error = data["error"]
        return ErrorEvent(str(error["message"]), _class_name(str(error.get("code") or "server_error")))
    raise ValueError(f"unknown event {kind!r}")


def relevance_of(data: dict) -> Relevance:
    return Relevance(float(data["similarity"]), float(data["coverage"]), float(data["score"]), bool(data["relevant"]),
                     tuple(data.get("missing_terms") or ()), tuple(data.get("unknown_names") or ()))


def stats_of(data: dict) -> AnswerStats:
    """AnswerStats back from to_dict(): its own fields; what to_dict() derives is derived again."""
    first = data.get("time_to_first_token_s")
    return AnswerStats(bool(data["answerable"]), relevance_of(data["relevance"]), tuple(data.get("stages") or ()),
                       {str(k): float(v) for k, v in (data.get("timings_s") or {}).items()},
                       int(data.get("prompt_tokens") or 0), int(data.get("new_tokens") or 0),
                       None if first is None else float(first), str(data.get("finish_reason") or "stop"),
                       str(data.get("provider") or ""), data.get("support"), float(data.get("tokens_per_s") or 0.0),
                       data.get("checked"), int(data.get("unsupported") or 0),
                       int(data.get("unsupported_actions") or 0), data.get("lead_words"))


def _class_name(code: str) -> str:
    """An error body's code as the error class's name: queue_full -> QueueFull."""
    return "".join(part[:1].upper() + part[1:] for part in code.split("_"))


def _quote(quote) -> dict:
    return {**quote.to_dict(), "title": quote.passage.title}


def _citation(citation) -> dict:
    return {**citation.to_dict(), "title": citation.passage.title}


def _sentence(answer: str, sentence) -> dict:
    return {**sentence.to_dict(), "text": answer[sentence.start:sentence.end]}
