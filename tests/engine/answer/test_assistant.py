"""The Assistant: a question -> passages -> a streamed, cited answer, as typed events.

Fast tests run the whole path on real parts: the tiny embedder, a real IndexStore (SQLite,
FTS5, faiss), the real Retriever and the tiny random LLM (onnxruntime-genai). Its answers are
gibberish, so they test the plumbing: events, order, stats, gate, cancel, history. A scripted
model writes chosen answers (fence markers, loops, citations) through the same path. The slow
test runs the real built-in models through open_assistant.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

import pytest

from engine.answer.assistant import (
    NOT_FOUND,
    QUOTE_CHARS,
    AnswerGuard,
    Assistant,
    AssistantSettings,
    CitationsEvent,
    DoneEvent,
    ErrorEvent,
    LeadEvent,
    PassagesEvent,
    TextEvent,
    _citations,
    quote_text,
    refers_back,
    retrieval_query,
)
from engine.answer.grounding import Prompt, build_prompt, cited_numbers, example_turns
from engine.answer.lead import best_units
from engine.answer.query import Query
from engine.answer.retrieval import RetrievalSettings, Retriever
from engine.answer.session import open_assistant
from engine.llm.local import LocalLLM
from engine.llm.process import LLMClient
from engine.types import Citation, Passage, Span
from tests.helpers.scripted_llm import ScriptedLLM
from tests.helpers.streamed_pieces import PIECES, SIZES, feed, pieces_of
from tests.helpers.tiny_collection import fill, open_store

RETRIEVAL_STAGES = ("embed", "dense", "keyword", "fuse", "merge")
ANSWER = AssistantSettings(relevance_threshold=-10.0)  # every question passes the gate
REFUSE = AssistantSettings(relevance_threshold=10.0)  # no question passes it
QUESTION = "How do I replace the filter?"


@pytest.fixture(scope="module")
def store(tmp_path_factory, tiny_embedder):
    with open_store(tmp_path_factory.mktemp("collection") / "manuals", tiny_embedder) as opened:
        yield fill(opened, tiny_embedder)


@pytest.fixture(scope="module")
def llm(tiny_llm_dir):
    with LocalLLM(tiny_llm_dir, provider="cpu") as model:
        yield model


def make(store, tiny_embedder, llm, settings=ANSWER, retrieval=None, **kwargs) -> Assistant:
    return Assistant(Retriever(store, tiny_embedder, settings=retrieval), llm, settings, **kwargs)


def kinds(events) -> list[str]:
    return [event.kind for event in events]


def only(events, kind: type):
    found = [event for event in events if isinstance(event, kind)]
    assert len(found) == 1, kinds(events)
    return found[0]


def streamed(events) -> str:
    return "".join(event.text for event in events if isinstance(event, TextEvent))


def shows_no_marker(events, prompt: Prompt) -> bool:
    """No piece of the streamed text, nor the text as a whole, holds the prompt's fence marker."""
    texts = [event.text for event in events if isinstance(event, TextEvent)]
    return not any(prompt.marker in text for text in [*texts, "".join(texts)])


class RecordingLLM(LocalLLM):
    """The real tiny model, remembering the messages it was asked to answer."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.asked: list[list[dict]] = []

    def stream(self, messages, **kwargs):
        self.asked.append(list(messages))
        return super().stream(messages, **kwargs)


# -- a whole answer ------------------------------------------------------------------------

def test_events_come_as_passages_text_citations_done(store, tiny_embedder, llm):
    events = list(make(store, tiny_embedder, llm).ask(QUESTION))

    assert kinds(events)[:2] == ["passages", "lead"] and kinds(events)[-2:] == ["citations", "done"]
    assert set(kinds(events)[2:-2]) == {"text"}
    assert isinstance(events[0], PassagesEvent) and isinstance(events[-2], CitationsEvent)
    assert isinstance(events[1], LeadEvent) and isinstance(events[-1], DoneEvent)
    assert all(isinstance(e, TextEvent) and e.text for e in events[2:-2])

    passages = events[0]
    assert passages.answerable and passages.relevance.relevant
    assert {p.document for p in passages.passages} == {"filter.md", "oil.md", "pump.md"}


def test_the_answer_is_the_streamed_text_and_stats_cover_every_stage(store, tiny_embedder, llm):
    events = list(make(store, tiny_embedder, llm).ask(QUESTION))
    done = events[-1]
    stats = done.stats
    text = streamed(events).strip()

    assert text.startswith(done.answer)  # the guard may cut a loop, never add
    if stats.finish_reason in ("stop", "length"):
        assert done.answer == text
    assert stats.answerable is True
    assert stats.stages == (*RETRIEVAL_STAGES, "gate", "lead", "prompt", "generate", "check", "cite")
    assert set(stats.timings_s) == {*stats.stages, "total"}
    assert all(seconds >= 0 for seconds in stats.timings_s.values())
    assert stats.timings_s["total"] == pytest.approx(
        sum(v for k, v in stats.timings_s.items() if k != "total"))
    assert stats.prompt_tokens > 0
    assert 0 < stats.new_tokens <= ANSWER.max_new_tokens
    assert stats.time_to_first_token_s is not None and stats.time_to_first_token_s > 0
    assert stats.provider == "cpu"
    assert stats.to_dict()["stages"] == list(stats.stages)


def test_an_answer_that_cites_nothing_gets_the_passages_as_sources(store, tiny_embedder, llm):
    events = list(make(store, tiny_embedder, llm).ask(QUESTION))
    passages, citations = events[0].passages, only(events, CitationsEvent).citations
    assert not cited_numbers(events[-1].answer, len(passages))  # the random model cites nothing

    assert len(passages) >= 2  # the collection holds more than one manual
    # every retrieved passage, whole, in the retrieved order
    assert [c.passage for c in citations] == list(passages)
    assert [c.number for c in citations] == list(range(1, len(passages) + 1))
    assert not any(c.cited for c in citations)
    for c in citations:
        assert c.quote and c.quote in " ".join(c.passage.text.split())
    as_dict = citations[0].to_dict()
    assert as_dict["document"] == citations[0].passage.document
    assert as_dict["page"] == citations[0].passage.page and as_dict["cited"] is False


def test_the_lead_quotes_the_passages_before_the_model_writes(store, tiny_embedder, llm):
    events = list(make(store, tiny_embedder, llm).ask(QUESTION))
    passages, lead = events[0].passages, events[1]
    assert kinds(events).index("lead") < kinds(events).index("text")
    assert 1 <= len(lead.quotes) <= 3
    for quote in lead.quotes:
        source = passages[quote.number - 1]
        assert quote.passage == source and quote.text in " ".join(source.text.split())
        assert any(s.page == quote.span.page and s.start <= quote.span.start < quote.span.end <= s.end
                   for s in source.spans)
    assert "replace filter cartridge yearly." in lead.quotes[0].text.casefold()
    assert events[-1].lead == lead.quotes
    assert events[-1].stats.timings_s["lead"] >= 0


def test_a_refused_question_has_no_lead(store, tiny_embedder, llm):
    events = list(make(store, tiny_embedder, llm, REFUSE).ask(QUESTION))
    assert "lead" not in kinds(events) and events[-1].lead == ()
    assert "lead" not in events[-1].stats.stages


def test_a_lead_quote_as_a_citation_opens_just_that_sentence(store, tiny_embedder, llm):
    quote = list(make(store, tiny_embedder, llm).ask(QUESTION))[1].quotes[0]
    citation = Citation.of_quote(quote)
    assert (citation.number, citation.quote, citation.cited) == (quote.number, quote.text, True)
    assert citation.passage.spans == (quote.span,) and citation.passage.page == quote.page
    assert citation.passage.path == quote.passage.path


def test_the_model_runs_in_a_child_process_just_the_same(store, tiny_embedder, tiny_llm_dir):
    with LLMClient(tiny_llm_dir, provider="cpu") as client:
        events = list(make(store, tiny_embedder, client).ask(QUESTION))
    assert kinds(events)[:2] == ["passages", "lead"] and kinds(events)[-2:] == ["citations", "done"]
    assert set(kinds(events)[2:-2]) == {"text"}
    stats = events[-1].stats
    assert "generate" in stats.stages and stats.prompt_tokens > 0 and stats.new_tokens > 0


class TokenizerSpy:
    """Wraps a tokenizers.Tokenizer and remembers every text it encodes."""

    def __init__(self, tokenizer):
        self._tokenizer = tokenizer
        self.texts: list[str] = []

    def encode(self, text, *args, **kwargs):
        self.texts.append(text)
        return self._tokenizer.encode(text, *args, **kwargs)


def test_a_question_counts_each_prompt_piece_once_and_never_across_the_pipe(
        store, tiny_embedder, tiny_llm_dir, recorded_prompts, monkeypatch):
    from engine.llm.process import _Child

    history = [{"role": "user", "content": "How do I replace the filter?"},
               {"role": "assistant", "content": "Use part F-77 [1]."}]
    sent: list[dict] = []
    real_send = _Child.send
    monkeypatch.setattr(_Child, "send", lambda child, message: (sent.append(message), real_send(child, message)))
    with LLMClient(tiny_llm_dir, provider="cpu") as client:
        spy = TokenizerSpy(client.token_counter.tokenizer)
        monkeypatch.setattr(client.token_counter, "tokenizer", spy)
        # every passage offered, none shortened (grounding tests that)
        roomy = replace(ANSWER, prompt_budget_tokens=3000, prompt_passages=ANSWER.passages)
        events = list(make(store, tiny_embedder, client, roomy).ask("and the oil filter?", history))
    assert events[-1].kind == "done"
    (prompt,) = recorded_prompts
    passages = events[0].passages
    assert prompt.passages == list(passages)
    assert prompt.messages[1:3] == example_turns(prompt.marker) and prompt.messages[3:5] == history
    assert len(spy.texts) == len(set(spy.texts)), "a text was counted twice"
    # the system rules, the fenced question, the example's two turns, each turn, each source,
    # the user message as sent
    assert len(spy.texts) <= 2 + 2 + len(history) + len(passages) + 1
    assert prompt.messages[-1]["content"] in spy.texts
    assert [m["op"] for m in sent if m["op"] != "cancel"] == ["load", "generate"]  # no count_tokens


# -- the relevance gate ----------------------------------------------------------------------

def test_a_question_below_the_gate_is_refused_with_the_nearest_passages(store, tiny_embedder, llm):
    events = list(make(store, tiny_embedder, llm, REFUSE).ask("What is the capital of France?"))

    assert kinds(events) == ["passages", "text", "citations", "done"]
    gate = events[0]
    assert gate.answerable is False and gate.relevance.relevant is False
    assert gate.relevance.missing_terms == ("capital", "france")
    assert gate.passages  # the nearest ones, shown in case they help
    assert events[1].text == NOT_FOUND
    citations = events[2].citations
    assert [c.passage for c in citations] == list(gate.passages)
    assert [c.number for c in citations] == list(range(1, len(gate.passages) + 1))
    assert not any(c.cited for c in citations)

    done = events[3]
    assert done.answer == NOT_FOUND
    assert done.stats.answerable is False
    assert done.stats.stages == (*RETRIEVAL_STAGES, "gate")
    assert "generate" not in done.stats.timings_s and "total" in done.stats.timings_s
    assert done.stats.prompt_tokens == 0 and done.stats.time_to_first_token_s is None


def test_the_gate_is_judged_with_the_settings_threshold(store, tiny_embedder, llm):
    answered = list(make(store, tiny_embedder, llm, ANSWER).ask(QUESTION))[0]
    refused = list(make(store, tiny_embedder, llm, REFUSE).ask(QUESTION))[0]
    assert answered.relevance.score == pytest.approx(refused.relevance.score)
    assert answered.answerable and not refused.answerable


# -- errors ----------------------------------------------------------------------------------

@pytest.mark.parametrize("question", ["", "   \n\t"])
def test_an_empty_question_is_one_error_event(store, tiny_embedder, llm, question):
    events = list(make(store, tiny_embedder, llm).ask(question))
    assert len(events) == 1 and isinstance(events[0], ErrorEvent)
    assert events[0].kind == "error" and events[0].error == "EngineError"
    assert "question is empty" in events[0].message


def test_an_empty_collection_is_one_error_event_saying_to_add_documents(tmp_path, tiny_embedder, llm):
    with open_store(tmp_path / "empty", tiny_embedder) as empty:
        events = list(make(empty, tiny_embedder, llm).ask(QUESTION))
    assert len(events) == 1 and isinstance(events[0], ErrorEvent)
    assert "No manuals are indexed" in events[0].message
    assert "add some documents" in events[0].message


# -- cancel ------------------------------------------------------------------------------------

def test_cancel_after_the_first_piece_ends_the_answer_as_cancelled(store, tiny_embedder, llm):
    cancel = threading.Event()
    events = []
    for event in make(store, tiny_embedder, llm).ask(QUESTION, cancel=cancel):
        events.append(event)
        if event.kind == "text":
            cancel.set()

    # the piece shown, then at most the word the guard held back to check it for an address
    assert kinds(events) in (["passages", "lead", "text", "citations", "done"],
                             ["passages", "lead", "text", "text", "citations", "done"])
    done = events[-1]
    assert done.stats.finish_reason == "cancelled"
    assert done.answer == streamed(events).strip()
    assert done.stats.new_tokens < ANSWER.max_new_tokens


def test_cancel_reaches_the_model_in_a_child_process(store, tiny_embedder, tiny_llm_dir):
    cancel = threading.Event()
    with LLMClient(tiny_llm_dir, provider="cpu") as client:
        events = []
        for event in make(store, tiny_embedder, client).ask(QUESTION, cancel=cancel):
            events.append(event)
            if event.kind == "text":
                cancel.set()
    assert kinds(events)[-2:] == ["citations", "done"]
    assert events[-1].stats.finish_reason == "cancelled"
    assert kinds(events).count("text") < ANSWER.max_new_tokens


# -- history -----------------------------------------------------------------------------------

def test_a_short_follow_up_is_searched_with_the_previous_question():
    history = [{"role": "user", "content": "How do I replace the filter?"},
               {"role": "assistant", "content": "Use part F-77 [1]."}]
    assert retrieval_query("and oil?", history) == "How do I replace the filter? and oil?"
    assert retrieval_query("and oil?", []) == "and oil?"
    assert retrieval_query("and oil?", history[1:]) == "and oil?"  # no earlier question
    standalone = "How do I drain the old engine oil?"  # nothing in it points back
    assert retrieval_query(standalone, history) == standalone


PREVIOUS = [{"role": "user", "content": "How do I attach a package?"},
            {"role": "assistant", "content": "Use library() [1]."}]


@pytest.mark.parametrize("question", [
    "What does the attach function do?",  # short, but whole: searched alone
    "How do I detach a package?",
    "Is it possible to read an Excel file?",  # "it" that points at nothing
    "Is there a function for reading Excel files?",  # so does this "there"
    "How do I make sure that the workspace is saved?",  # and this "that"
    "Explain the search path.",
    "How can I read fixed-width files with read.fwf?",
])
def test_a_question_that_stands_alone_is_not_merged_however_short(question):
    assert not refers_back(question)
    assert retrieval_query(question, PREVIOUS) == question


@pytest.mark.parametrize("question", [
    "And how do I undo it?",
    "What about on Windows?",
    "How about the library folder?",
    "Does that work on Windows?",
    "Can I load them all at once?",
    "What do I do then?",
    "Is the same true for data frames?",
    "Where do I find those?",
    "Can I also do it from the menu?",
    "On Windows?",  # a fragment without a verb
    "Which one?",
    "...and for the site library?",
])
def test_a_question_that_refers_back_is_searched_with_the_previous_one(question):
    assert refers_back(question)
    assert retrieval_query(question, PREVIOUS) == f"How do I attach a package? {question}"


def test_a_follow_up_finds_the_manual_of_the_previous_question(store, tiny_embedder, llm):
    keyword_only = RetrievalSettings(fusion="keyword")  # finds exactly the manuals named
    history = [{"role": "user", "content": "How do I replace the filter?"},
               {"role": "assistant", "content": "Use part F-77 [1]."}]
    alone = list(make(store, tiny_embedder, llm, retrieval=keyword_only).ask("and oil?"))[0]
    followed = list(make(store, tiny_embedder, llm, retrieval=keyword_only).ask("and oil?", history))[0]
    assert {p.document for p in alone.passages} == {"oil.md"}
    assert {p.document for p in followed.passages} == {"filter.md", "oil.md"}


@pytest.mark.parametrize("question, with_history", [("and oil?", True), ("How do I change the oil?", False)])
def test_history_goes_into_the_prompt_of_a_question_that_refers_back(store, tiny_embedder, tiny_llm_dir,
                                                                      question, with_history):
    """A question that stands alone is answered from the sources alone: the earlier turns would
    take their room, and the small model copied sentences from them."""
    history = [{"role": "user", "content": "How do I replace the filter?"},
               {"role": "assistant", "content": "Use part F-77 [1]."}]
    with RecordingLLM(tiny_llm_dir, provider="cpu") as recording:
        events = list(make(store, tiny_embedder, recording).ask(question, history))
    assert events[-1].kind == "done"
    (messages,) = recording.asked
    turns = history if with_history else []
    assert [m["role"] for m in messages] == ["system", *(t["role"] for t in turns), "user"]
    assert messages[1:-1] == turns  # the tiny model's context has no room for the worked example
    assert messages[-1]["content"].endswith(f"Question: {question}")


# -- the guard ---------------------------------------------------------------------------------

MARKER = "c0ffee"
FENCE = Prompt([], [], 0, MARKER)  # the hidden and stop strings of a prompt fenced by MARKER
OPENING, CLOSING = f"<<{MARKER}>>", f"<</{MARKER}>>"


def fenced(cancel=None) -> AnswerGuard:
    return AnswerGuard(cancel, hidden=FENCE.hidden_strings, stop_strings=FENCE.stop_strings)


def test_plain_text_is_shown_as_it_comes():
    guard = fenced()
    assert guard.feed("Prime the pump ") == "Prime the pump "
    assert guard.feed("with water [1].") == "with water [1]."
    assert guard.flush() == ""
    assert not guard.is_set() and guard.answer() == "Prime the pump with water [1]."


@pytest.mark.parametrize("pieces", [*SIZES, "tokens"])
@pytest.mark.parametrize("opening", [OPENING, f"<<{MARKER}"], ids=["marker", "unclosed marker"])
def test_the_opening_fence_is_removed_and_the_text_after_it_kept(opening, pieces):
    guard = fenced()
    shown = feed(guard, f"{opening}\n[1] Prime the pump with water before the first start.", pieces)
    assert "".join(shown) == "\n[1] Prime the pump with water before the first start."
    assert not guard.is_set() and guard.reason == ""  # generation goes on
    assert guard.answer() == "[1] Prime the pump with water before the first start."


@pytest.mark.parametrize("pieces", [*SIZES, "tokens"])
@pytest.mark.parametrize("leak", [MARKER, f"<{MARKER}>"], ids=["bare", "mangled"])
def test_the_marker_alone_or_mangled_is_never_shown(leak, pieces):
    # Seen: a real answer on R-data wrote "f7ca6670" on its own, another "<b4ca9759>".
    guard = fenced()
    shown = feed(guard, f"Use read.csv {leak}to read the file [1].", pieces)
    assert "".join(shown) == "Use read.csv to read the file [1]."
    assert guard.answer() == "Use read.csv to read the file [1]."


@pytest.mark.parametrize("pieces", [*SIZES, "tokens"])
def test_a_marker_that_ends_as_it_begins_is_never_shown(pieces):
    # One marker in 16 ends with the digit it begins with: its end could begin it again, and the
    # guard let "e1f2a3b" through, holding back only "e".
    prompt = Prompt([], [], 0, "e1f2a3be")
    guard = AnswerGuard(None, hidden=prompt.hidden_strings, stop_strings=prompt.stop_strings)
    assert "".join(feed(guard, "Use e1f2a3beto read <e1f2a3be>it [1].", pieces)) == "Use to read it [1]."


@pytest.mark.parametrize("size", SIZES)
def test_a_marker_split_across_pieces_is_never_shown(size):
    for lead in ["", "A", "An", "And", "And "]:  # a piece boundary at every place in each marker
        guard = fenced()
        text = (f"{lead}{OPENING}\nPrime the pump [1].<<{MARKER} Fill it with water [1].\n"
                f"{CLOSING}\n[2] made-up.md, page 9:\nA made-up source.")
        shown = feed(guard, text, size)
        assert not any(mark in piece for piece in shown for mark in "<>"), shown
        assert "".join(shown) == f"{lead}\nPrime the pump [1]. Fill it with water [1].\n"
        assert guard.reason == "stop string"


@pytest.mark.parametrize("pieces", [*SIZES, "tokens"])
def test_the_closing_fence_ends_the_answer(pieces):
    guard = fenced()
    text = f"Fill the housing with water [1].\n{CLOSING}\n\n[2] made-up.md, page 9:\nA made-up source."
    shown = feed(guard, text, pieces)
    assert "".join(shown) == "Fill the housing with water [1].\n"
    assert guard.is_set() and guard.reason == "stop string"
    assert guard.answer() == "Fill the housing with water [1]."
    assert guard.feed(" More made-up text.") == "" and guard.flush() == ""  # nothing more is shown
    assert guard.answer() == "Fill the housing with water [1]."


def test_text_that_only_begins_like_a_marker_is_held_back_then_shown():
    guard = fenced()
    assert guard.feed("Shift it: x <") == "Shift it: x "  # "<" may begin a marker
    assert guard.feed("< 2") == "<< 2"  # "<< " begins none
    assert guard.feed(" or press <") == " or press "
    assert not guard.is_set()  # "<" alone closes nothing
    assert guard.flush() == "<"  # the stream ended there: it was not a marker
    assert not guard.is_set() and guard.reason == ""
    assert guard.answer() == "Shift it: x << 2 or press <"


def test_any_closing_fence_stops_even_with_the_marker_miscopied():
    guard = fenced()
    assert guard.feed("Fill it. <</2019e43d>> and more") == "Fill it. "
    assert guard.is_set() and guard.reason == "stop string"


def test_a_question_of_the_models_own_stops_the_answer():
    guard = fenced()
    assert guard.feed("Prime it first.\nQuestion: how do I") == "Prime it first."
    assert guard.reason == "stop string"


@pytest.mark.parametrize("echo", ["\n\nmanual-1.pdf, page 2:\n# Pump", "\n\n manual-1.pdf, page 2:",
                                  "\n[3] manual-1.pdf, page 2:"])
def test_a_source_header_on_a_line_of_its_own_stops_the_answer(echo):
    # Seen: the built-in model answered, then began to copy its source out again under its header.
    prompt = Prompt([], [passage(1, "Prime the pump.", 2)], 0, MARKER)
    guard = AnswerGuard(None, hidden=prompt.hidden_strings, stop_strings=prompt.stop_strings)
    assert guard.feed(f"Prime it first [1].{echo}").rstrip() == "Prime it first [1]."
    assert guard.reason == "stop string" and guard.answer() == "Prime it first [1]."


def test_an_opening_marker_at_the_end_of_the_stream_is_not_flushed():
    guard = fenced()
    assert guard.feed(f"Fill it with water. <<{MARKER}") == "Fill it with water. "
    assert guard.flush() == ""
    assert guard.answer() == "Fill it with water."


PRIMING = "Prime the pump with water. "
SHORT_LOOP = "Then open the valve and wait. "
LONG_LOOP = "Close the inlet valve, then unscrew the filter bowl with both hands and lift it out. "
SEVERAL = "Note: open the valve! Wait a minute. Close the lid again. "
WHOLE = "It is recommended to replace the filter every 500 operating hours. Use a pump replacement filter.\n\n"
LOOPS = {  # what the model writes -> the answer: up to the sentence end after the first copy
    "short sentence": (PRIMING + SHORT_LOOP * 8, PRIMING + SHORT_LOOP.strip()),
    "long sentence": ("Prime the pump first. " + LONG_LOOP * 3, "Prime the pump first. " + LONG_LOOP.strip()),
    "several sentences": (PRIMING + SEVERAL * 6, PRIMING + SEVERAL.strip()),
    "whole answer": (WHOLE * 3, WHOLE.strip()),  # a paragraph's end is a sentence end
}


@pytest.mark.parametrize("pieces", PIECES)
def test_a_looping_answer_is_stopped_and_keeps_one_copy(pieces):
    guard = AnswerGuard(None)
    looping = PRIMING + SHORT_LOOP * 8
    shown = "".join(feed(guard, looping, pieces))

    assert guard.is_set() and guard.reason == "repetition"
    assert len(shown) < len(looping)  # generation stopped early
    answer = guard.answer()
    assert looping.startswith(answer) and shown.startswith(answer)
    assert answer.startswith(PRIMING + SHORT_LOOP.strip())
    assert answer.count(SHORT_LOOP.strip()) == 1


def test_a_phrase_said_twice_is_not_a_loop():
    guard = AnswerGuard(None)
    said_twice = ("Use sink() to send the output to a file, and sink() again to end it. "
                  "Use sink() to send the output to a file.")
    feed(guard, said_twice)
    assert not guard.is_set() and guard.answer() == said_twice


@pytest.mark.parametrize("pieces", PIECES)
@pytest.mark.parametrize("loop", LOOPS)
def test_a_loop_is_cut_at_the_sentence_end_nearest_the_end_of_its_first_copy(loop, pieces):
    looping, kept = LOOPS[loop]
    guard = AnswerGuard(None)
    feed(guard, looping, pieces)
    assert guard.reason == "repetition"
    assert guard.answer() == kept


FROM_THE_START = "Yes. Prime the pump with clean water before the first start. "

@pytest.mark.parametrize("looping, kept, pieces", [
    pytest.param(FROM_THE_START * 5, FROM_THE_START.strip(), "tokens", id="a loop from the first word"),
    pytest.param(PRIMING + SHORT_LOOP * 8, PRIMING + SHORT_LOOP.strip(), 13, id="13-character pieces"),
    pytest.param(PRIMING + SEVERAL * 6, PRIMING + SEVERAL.strip(), 15, id="15-character pieces"),
])
def test_a_loop_noticed_a_piece_late_still_keeps_one_copy(looping, kept, pieces):
    guard = AnswerGuard(None)
    feed(guard, looping, pieces)
    assert guard.reason == "repetition"
    assert guard.answer() == kept


def test_the_users_cancel_passes_through_the_guard():
    cancel = threading.Event()
    guard = fenced(cancel)
    assert guard.feed("Prime the pump. ") == "Prime the pump. "
    assert not guard.is_set()
    cancel.set()
    assert guard.is_set()
    assert guard.reason == ""  # not the guard's own cut: the stream reports "cancelled"
    assert guard.flush() == ""
    assert guard.answer() == "Prime the pump."


def test_without_a_cancel_flag_the_guard_is_set_only_by_its_own_cuts():
    guard = AnswerGuard(None)
    guard.feed("A short answer that does not repeat itself.")
    assert not guard.is_set() and guard.answer() == "A short answer that does not repeat itself."


# -- a scripted model through the whole path -------------------------------------------------

@pytest.mark.parametrize("size", SIZES)
def test_the_fence_never_reaches_the_screen_and_its_closing_ends_the_answer(store, tiny_embedder, recorded_prompts, size):
    script = ("<<{marker}>>\n[1] Replace filter cartridge yearly.\n<</{marker}>>\n\n"
              "[4] made-up.md, page 9:\nA source the model made up.")
    model = ScriptedLLM(script, size)
    events = list(make(store, tiny_embedder, model).ask(QUESTION))

    assert kinds(events)[0] == "passages" and kinds(events)[-2:] == ["citations", "done"]
    (prompt,) = recorded_prompts
    assert shows_no_marker(events, prompt)
    assert not any("<" in event.text for event in events if isinstance(event, TextEvent))
    assert streamed(events) == "\n[1] Replace filter cartridge yearly.\n"
    done = events[-1]
    assert done.answer == "[1] Replace filter cartridge yearly."
    assert done.stats.finish_reason == "stop string"
    assert model.written < len(pieces_of(script.replace("{marker}", prompt.marker), size))  # stopped
    citations = only(events, CitationsEvent).citations
    assert [(c.number, c.passage, c.cited) for c in citations] == [(1, events[0].passages[0], True)]


def test_a_looping_model_is_stopped_and_its_answer_keeps_one_copy(store, tiny_embedder):
    model = ScriptedLLM(PRIMING + SHORT_LOOP * 20)
    events = list(make(store, tiny_embedder, model).ask(QUESTION))
    done = events[-1]
    assert done.stats.finish_reason == "repetition"
    assert done.answer == PRIMING + SHORT_LOOP.strip()
    assert streamed(events).startswith(done.answer)  # the screen may show a bit of the second copy
    assert model.written < len(pieces_of(PRIMING + SHORT_LOOP * 20, 3)) // 2


def test_text_held_back_at_the_end_of_the_stream_is_shown(store, tiny_embedder):
    script = "Shift it: x << 2, then press <"
    events = list(make(store, tiny_embedder, ScriptedLLM(script)).ask(QUESTION))
    assert streamed(events) == script and events[-1].answer == script
    assert events[-1].stats.finish_reason == "stop"


def with_a_prompt_that(store, tiny_embedder, fits) -> tuple[AssistantSettings, list[Passage]]:
    """Settings whose prompt budget gives QUESTION a prompt for which `fits(prompt, passages)`,
    and the passages that are retrieved for it."""
    passages = Retriever(store, tiny_embedder).retrieve(retrieval_query(QUESTION, []), ANSWER.passages).passages
    count = ScriptedLLM("").count_tokens
    for budget in range(100, 3000):
        prompt = build_prompt(QUESTION, passages, [], count, budget, ANSWER.history_tokens)
        if fits(prompt, passages):
            return replace(ANSWER, prompt_budget_tokens=budget), passages
    raise AssertionError("no prompt budget gives such a prompt")


def test_a_cited_passage_comes_whole_though_the_prompt_shortened_it(store, tiny_embedder, recorded_prompts):
    settings, passages = with_a_prompt_that(
        store, tiny_embedder, lambda prompt, passages: len(passages) == 3 and len(prompt.passages) == 2
        and prompt.passages[1].text.endswith(" ..."))
    script = "Prime it first [2][1][3], set x[3] to 1 and read m[1][2]."
    events = list(make(store, tiny_embedder, ScriptedLLM(script), settings).ask(QUESTION))

    (prompt,) = recorded_prompts
    assert prompt.passages[1] != passages[1]  # the prompt numbered a shortened copy
    # [3] points at no source of the prompt; code indexing is not a citation
    assert events[-1].answer == "Prime it first [2][1], set x[3] to 1 and read m[1][2]."
    citations = only(events, CitationsEvent).citations
    assert [(c.number, c.passage, c.cited) for c in citations] == [(2, passages[1], True),
                                                                    (1, passages[0], True)]
    assert citations[0].quote in " ".join(passages[1].text.split())


def test_an_answer_citing_nothing_gets_every_retrieved_passage_even_those_left_out_of_the_prompt(
        store, tiny_embedder, recorded_prompts):
    settings, passages = with_a_prompt_that(
        store, tiny_embedder, lambda prompt, passages: len(passages) == 3 and len(prompt.passages) == 1)
    # it cites no [n], and no passage supports it: nothing to map it to
    events = list(make(store, tiny_embedder, ScriptedLLM("Call the dealer hotline for advice."),
                       settings).ask(QUESTION))

    (prompt,) = recorded_prompts
    assert len(prompt.passages) == 1
    assert [c.supported for c in events[-1].sentences] == [False]
    citations = only(events, CitationsEvent).citations
    assert [(c.number, c.passage, c.cited) for c in citations] == \
        [(n, p, False) for n, p in enumerate(passages, 1)]


# -- each sentence checked against the passages ------------------------------------------------

def numbered(events, document: str) -> int:
    """The [n] of the retrieved passage from `document`."""
    return next(n for n, p in enumerate(events[0].passages, 1) if p.document == document)


def test_each_sentence_is_checked_and_one_the_passages_say_cites_its_passage_without_a_mark(store, tiny_embedder):
    script = ("Replace the filter cartridge yearly, part F-77. Ask the dealer hotline for advice. "
              "Then reboot the controller twice.")
    events = list(make(store, tiny_embedder, ScriptedLLM(script)).ask(QUESTION))
    done, filter_ = events[-1], numbered(events, "filter.md")

    assert [done.answer[c.start:c.end] for c in done.sentences] == \
        ["Replace the filter cartridge yearly, part F-77.", "Ask the dealer hotline for advice.",
         "Then reboot the controller twice."]
    assert [(c.supported, c.source) for c in done.sentences] == [(True, filter_), (False, None), (False, None)]
    citations = only(events, CitationsEvent).citations
    assert [(c.number, c.passage, c.cited) for c in citations] == [(filter_, events[0].passages[filter_ - 1], True)]
    stats = done.stats
    assert (stats.checked, stats.unsupported, stats.sentence_support) == (3, 2, pytest.approx(1 / 3))
    assert stats.to_dict()["checked"] == 3 and stats.to_dict()["sentence_support"] == 0.3333
    assert stats.support is not None  # the old measure stays
    # the two sentences the manuals do not say are marked; the caution is for an answer that
    # does not say what the lead quotes, and this one says its "cartridge yearly"
    assert stats.lead_words == 2 and stats.well_supported and stats.to_dict()["lead_words"] == 2


def test_an_answer_the_passages_mostly_say_is_well_supported(store, tiny_embedder):
    events = list(make(store, tiny_embedder, ScriptedLLM("Replace the filter cartridge yearly.")).ask(QUESTION))
    stats = events[-1].stats
    assert (stats.checked, stats.unsupported) == (1, 0) and stats.well_supported
    script = "Replace the filter cartridge yearly. Ask the dealer hotline for advice."
    stats = list(make(store, tiny_embedder, ScriptedLLM(script)).ask(QUESTION))[-1].stats
    assert (stats.checked, stats.unsupported) == (2, 1) and stats.well_supported  # half: SUPPORTED_SHARE


@pytest.mark.parametrize("script", ["You can replace the filter when it needs replacing.",
                                    "Replace the filter with a new filter, then restart the pump."])
def test_an_answer_that_says_little_of_the_lead_beyond_the_question_needs_the_caution(store, tiny_embedder, script):
    """The question turned round, or words of its own: every sentence may pass the sentence
    check, but the reader learns nothing the lead's quote holds."""
    done = list(make(store, tiny_embedder, ScriptedLLM(script)).ask(QUESTION))[-1]
    assert done.stats.lead_words < 2 and not done.stats.well_supported


def test_the_model_reads_only_the_best_of_the_retrieved_passages(store, tiny_embedder, recorded_prompts):
    settings = replace(ANSWER, prompt_budget_tokens=5000, prompt_passages=2)
    events = list(make(store, tiny_embedder, ScriptedLLM("Replace the filter cartridge yearly."),
                       settings).ask(QUESTION))
    (prompt,) = recorded_prompts
    retrieved = events[0].passages
    assert len(retrieved) > 2 and prompt.passages == list(retrieved[:2])


def test_a_made_up_address_makes_an_otherwise_supported_answer_need_the_caution(store, tiny_embedder):
    supported = "Replace the filter cartridge yearly, part F-77. "
    made_up = "Download the new firmware from http://evil.example/firmware.exe today."
    plain = list(make(store, tiny_embedder, ScriptedLLM(supported + "Ask the dealer.")).ask(QUESTION))[-1]
    done = list(make(store, tiny_embedder, ScriptedLLM(supported + made_up)).ask(QUESTION))[-1]
    assert plain.stats.well_supported and plain.stats.unsupported_actions == 0
    assert (done.stats.checked, done.stats.unsupported) == (2, 1)  # half supported: enough on its own
    assert done.stats.unsupported_actions == 1 and not done.stats.well_supported
    assert done.stats.to_dict()["unsupported_actions"] == 1


def test_an_answer_with_nothing_to_check_is_not_well_supported(store, tiny_embedder):
    events = list(make(store, tiny_embedder, ScriptedLLM("The answer is:")).ask(QUESTION))
    assert [(c.supported, c.source) for c in events[-1].sentences] == [(True, None)]
    assert events[-1].stats.checked == 0 and not events[-1].stats.well_supported


def test_citations_are_the_cited_numbers_and_the_sentences_sources_in_order_of_first_use(store, tiny_embedder):
    script = ("Check the oil level weekly with a dipstick. Replace the filter cartridge yearly [{filter}]. "
              "Check the dipstick weekly for the oil level.")
    roomy = replace(ANSWER, prompt_budget_tokens=5000, prompt_passages=ANSWER.passages)  # every passage in the prompt
    first = list(make(store, tiny_embedder, ScriptedLLM("x"), roomy).ask(QUESTION))
    filter_, oil = numbered(first, "filter.md"), numbered(first, "oil.md")
    model = ScriptedLLM(script.replace("{filter}", str(filter_)))
    events = list(make(store, tiny_embedder, model, roomy).ask(QUESTION))
    assert [(c.supported, c.source) for c in events[-1].sentences] == [(True, oil), (True, filter_), (True, oil)]
    assert [c.number for c in only(events, CitationsEvent).citations] == [oil, filter_]


# -- quotes and citations ----------------------------------------------------------------------

def best_quote(text: str, question: str, limit: int = QUOTE_CHARS) -> str:
    """A citation's quote of a passage holding `text`, as the assistant picks it."""
    found = passage(1, text, 1)
    return quote_text(best_units(Query.of(question), [found]).get(1), found, limit)


def test_best_quote_is_the_unit_sharing_most_words_with_the_question():
    text = ("Open the lid. Prime the pump with water before the first start.\n\n"
            "Close the valve when the pump runs.")
    assert best_quote(text, "How do I prime the pump with water?") == \
        "Prime the pump with water before the first start."
    assert best_quote(text, "When must the valve be closed?") == "Close the valve when the pump runs."
    # no word in common: the first unit that reads on its own, not a fragment such as "Open the lid."
    assert best_quote(text, "Something else entirely") == "Prime the pump with water before the first start."


def test_best_quote_is_prose_not_a_heading_or_a_fragment():
    text = "# Pump P-200: the pump\n\nPump P-200.\n\nBefore the first start, fill the pump with water."
    # each shares one word ("pump"): the prose sentence, not the heading nor the fragment
    assert best_quote(text, "How do I prime the pump?") == "Before the first start, fill the pump with water."
    # a heading that shares more words than any sentence is still not a fact to quote
    headed = "## Prime the pump\n\nFill the housing with water before the first start."
    assert best_quote(headed, "How do I prime the pump?") == "Fill the housing with water before the first start."


def test_best_quote_joins_lines_and_respects_the_limit():
    assert best_quote("Prime the\n   pump with    water.", "prime pump") == "Prime the pump with water."
    long = "Prime the pump " + "with clean and cold water " * 20 + "before starting."
    quote = best_quote(long, "prime pump")
    assert len(quote) <= QUOTE_CHARS and quote.endswith("…")
    assert long.startswith(quote[:-1]) and long[len(quote) - 1] == " "  # cut between words
    short = best_quote(long, "prime pump", limit=40)
    assert len(short) <= 40 and short == "Prime the pump with clean and cold…"


def passage(number: int, text: str, page: int) -> Passage:
    return Passage(document_id=number, path=f"/manuals/manual-{number}.pdf", title=f"Manual {number}",
                   chunk_ids=(number,), spans=(Span(page, 0, len(text)),), text=text,
                   heading_path=(), score=1.0 / number, similarity=0.5)


PASSAGES = [passage(1, "Open the lid. Check the oil.", 3),
            passage(2, "Prime the pump with water. Then start it.", 7),
            passage(3, "Error E-12 means the motor overheated.", 9)]


def test_cited_numbers_become_citations_of_those_passages():
    citations = _citations(best_units(Query.of("How do I prime the pump?"), PASSAGES), PASSAGES, [2])
    assert len(citations) == 1
    (cited,) = citations
    assert (cited.number, cited.passage, cited.cited) == (2, PASSAGES[1], True)
    assert cited.quote == "Prime the pump with water."
    assert cited.to_dict()["document"] == "manual-2.pdf" and cited.to_dict()["page"] == 7


def test_citations_keep_the_order_the_answer_cites_them_in():
    citations = _citations(best_units(Query.of("What does E-12 mean?"), PASSAGES), PASSAGES, [3, 1])
    assert [(c.number, c.passage.page, c.cited) for c in citations] == [(3, 9, True), (1, 3, True)]


def test_no_cited_number_lists_every_passage_as_a_plain_source():
    citations = _citations(best_units(Query.of("How do I prime the pump?"), PASSAGES), PASSAGES, [])
    assert [(c.number, c.passage, c.cited) for c in citations] == \
        [(1, PASSAGES[0], False), (2, PASSAGES[1], False), (3, PASSAGES[2], False)]


# -- the real built-in models: slow ------------------------------------------------------------

@pytest.mark.slow
def test_open_assistant_answers_from_an_indexed_manual(builtin_data_dir, tmp_path, recorded_prompts):
    from engine.cli.main import main
    from engine.paths import AppPaths

    manual = tmp_path / "pump.md"
    manual.write_text("# Pump P-200\n\n## Priming\n\nBefore the first start, prime the pump: open "
                      "the filler plug and fill the housing with clean water until it overflows.\n",
                      encoding="utf-8")
    collection = "assistant-open"
    assert main(["index", str(manual), "--data-dir", str(builtin_data_dir),
                 "--collection", collection]) == 0

    paths = AppPaths(builtin_data_dir)
    with open_assistant(paths, collection, provider="cpu", use_reranker=False) as assistant:
        events = list(assistant.ask("How do I prime the pump?"))
        client = assistant.llm
        assert client.pid is not None
    assert client.pid is None  # the model's process ends with the context

    assert kinds(events)[0] == "passages" and kinds(events)[-2:] == ["citations", "done"]
    assert events[0].answerable
    done = events[-1]
    assert done.stats.new_tokens > 0 and "generate" in done.stats.stages
    assert done.stats.finish_reason in ("stop", "length", "repetition", "stop string")
    # SmolLM2 opens this answer with the fence marker: it is hidden, and the answer goes on
    (prompt,) = recorded_prompts
    assert done.answer.strip() and streamed(events).strip()
    assert shows_no_marker(events, prompt)
    assert {Path(c.passage.path).name for c in events[-2].citations} == {"pump.md"}
    # each sentence checked, spans of the answer; those with content supported have their source
    assert done.sentences and done.sentences[-1].end <= len(done.answer)
    assert all(0 <= c.start < c.end for c in done.sentences)
    assert all(c.source is not None for c in done.sentences if c.supported and c.score >= 0.5)
    assert done.stats.checked == sum(not c.supported or c.source is not None for c in done.sentences)


@pytest.mark.slow
def test_temperature_0_gives_the_same_answer_across_runs_and_model_processes(builtin_data_dir, tmp_path):
    from engine.cli.main import main
    from engine.paths import AppPaths

    manual = tmp_path / "pump.md"
    manual.write_text("# Pump P-200\n\n## Priming\n\nBefore the first start, prime the pump: open "
                      "the filler plug and fill the housing with clean water until it overflows.\n\n"
                      "## Filter\n\nReplace the filter cartridge once a year, or when the pressure "
                      "drops below 2 bar.\n", encoding="utf-8")
    collection = "assistant-deterministic"
    assert main(["index", str(manual), "--data-dir", str(builtin_data_dir),
                 "--collection", collection]) == 0

    paths, question = AppPaths(builtin_data_dir), "When do I replace the filter cartridge?"
    answers, pids = [], []
    for _ in range(2):  # a fresh model process each time
        with open_assistant(paths, collection, provider="cpu", use_reranker=False) as assistant:
            assert assistant.settings.temperature == 0
            pids.append(assistant.llm.pid)
            for _ in range(2):  # and two runs on one process
                events = list(assistant.ask(question))
                answers.append((streamed(events), events[-1].answer))
    assert pids[0] != pids[1]
    assert answers[0][1].strip() and events[0].answerable
    assert answers == [answers[0]] * 4


@pytest.mark.slow
def test_a_short_fact_a_table_row_and_a_procedure_lead_on_the_real_models(builtin_data_dir, tmp_path):
    """Issue 27's cases: a one-line fact ("Door code: 7731.") beside a longer manual that does
    not hold it, a value in a table, a procedure under the sentence that introduces it (a list
    Word numbers), a troubleshooting entry's solution under its problem, an HTML directive's
    entry with its default, a FAQ's answer under its question heading, an option's default
    under the heading that names the option (a Markdown heading), a configuration file's
    lines under the sentence that introduces them, a function's forms over its description
    (texinfo's PDF), a remedy read with the sentence before it ("Download the data using the USB
    cable instead."), a log message the question quotes, and a table's row named by its symbol
    (Asciidoctor's cells of paragraphs), each leads on the built-in models, and a pin table is
    shown under the sentence before it; the model's text never repeats a sentence, and a
    sentence marked supported has its source."""
    from engine.answer.answer_guard import has_loop
    from engine.cli.main import main
    from engine.paths import AppPaths
    from tests.helpers.hostile_files import docx_numbering, docx_paragraph, table_pdf, write_docx

    folder = tmp_path / "manuals"
    folder.mkdir()
    (folder / "door.txt").write_text("Door code: 7731.\n", encoding="utf-8")
    (folder / "x200.md").write_text("# X200 login\n\nThe X200 login uses the badge reader 8, next to the "
                                    "main door of the hall. Hold the badge flat against the reader until "
                                    "the green light comes on.\n", encoding="utf-8")
    table_pdf(folder / "clamping.pdf", "Tightening torques of the clamping unit",
              [["Part", "Thread", "Torque"], ["Clamping bolts", "M12", "35 Nm"], ["Cover screws", "M6", "9 Nm"],
               ["Spindle nut", "M30", "120 Nm"]])
    steps = [("To set the origin with zero rotation:", ["Click the LASER button.", "Jog until the cross hairs are "
              "on the origin point.", "Press SET ORIGIN."]), ("To turn the laser off and cancel an alignment:", [
              "Press the LASER button and hold it for longer than 750 ms.", "Release the LASER button."])]
    write_docx(folder / "plasma.docx", docx_paragraph("Alignment laser") + "".join(  # Word's own step numbers
        docx_paragraph(intro) + "".join(docx_paragraph(step, number=(list_id, 0)) for step in items)
        for list_id, (intro, items) in enumerate(steps, 1)), numbering=docx_numbering({1: [("decimal", "%1.")],
                                                                                      2: [("decimal", "%1.")]}))
    (folder / "drive.txt").write_text(
        "Troubleshooting\n\n• Problem: The spindle drive trips with fault E-07 when it starts.\n"
        "Solution: Raise the ramp time in parameter P21 to 2 s. The drive then needs a minute to cool down "
        "before it can be started again, and its fault log keeps the last ten trips with their times and the "
        "motor current at each trip. Each trip also goes to the controller's alarm history.\n"
        "• Problem: The coolant pump is noisy.\nSolution: Bleed the air from the pump.\n", encoding="utf-8")
    (folder / "ups.html").write_text(
        "<html><body><h1>UPS daemon</h1><h2>Directives used during power failures</h2>"
        "<pre># Now halt or reboot.\nhalt -p</pre><dl><dt><strong>MINUTES</strong> <em>battery runtime in "
        "minutes</em></dt><dd><p>If MINUTES is specified, during a power failure, the daemon shuts the system "
        "down when the remaining runtime on batteries falls below the time specified. The default is 3. This "
        "directive is ignored for dumb UPSes.</p></dd></dl></body></html>", encoding="utf-8")
    (folder / "radio-faq.md").write_text(
        "# Radio FAQ\n\n## How should I set the gain controls for RX?\n\nA good default setting to start with is "
        "RF=0 (off), IF=16, baseband=16. Increase or decrease the IF and baseband gain controls roughly equally to "
        "find the best settings for your situation. If your gain settings are too low, your signal may be buried "
        "in the noise.\n", encoding="utf-8")
    (folder / "gps-options.md").write_text(
        "# GPX options\n\n## gpxver option\n\nTarget GPX version for output.\n\nThis option specifies the version of "
        "the GPX specification to write. The default version is 1.0 unless an input file is GPX 1.1.\n\n"
        "## urlbase option\n\nThe value of this option is put in front of every link in the output.\n",
        encoding="utf-8")
    (folder / "redundant.txt").write_text(
        "Redundant power\n\nTwo UPSes, Alpha and Beta, each drive two of the server's four power supplies.\n"
        "The upsmon.conf configuration which reflects this is the following:\nMONITOR ups-alpha@myhost 2 monuser "
        "mypass primary\nMONITOR ups-beta@myhost\t2 monuser mypass primary\nMINSUPPLIES 2\nWith such "
        "configuration, upsmon only shuts down when both UPSes reach a critical condition.\n", encoding="utf-8")
    (folder / "octave-io.txt").write_text(
        "Simple File I/O\n\nSee also: [dlmwrite], page 284.\nx = csvread (filename)\nx = csvread (filename, dlm_opt1, "
        ". . .)\nRead the comma-separated-value (CSV) file filename into the matrix x.\ncsvwrite (filename, x)\n"
        "csvwrite (filename, x, dlm_opt1, . . .)\nWrite the numeric matrix x to the file filename in "
        "comma-separated-value (CSV) format.\n", encoding="utf-8")
    (folder / "logger.md").write_text(
        "# MTK loggers\n\nThe iBlue 747 and other loggers with an MTK chip record a track point every second and "
        "keep about 100,000 points. Reading these loggers over Bluetooth does not work with this program. Download "
        "the data using the USB cable instead. The memory can be erased after the download.\n", encoding="utf-8")
    (folder / "cables.txt").write_text(
        "Network card cable\n\nThe following applies to the MGE 66102 network management card. The card's "
        "connection is an 8P8C RJ45-style jack.\nSignal\tPC\tCard\nTxD\t2\t3\nRxD\t3\t6\nGND\t5\t4\n\n"
        "This cable is used on the newer models too.\n", encoding="utf-8")
    (folder / "gps-driver.html").write_text(  # Asciidoctor's HTML: a synopsis, cells of paragraphs
        "<html><body><h1>GPS receiver driver</h1><h2>1. Synopsis</h2><pre>Name: gpsclock\nSerial Port: "
        "/dev/gpsclock0; 9600 bps 8N1\nFeatures: tty_clk\nRequires: a serial port with its DCD line wired to the "
        "PPS output.</pre><h2>2. Data items</h2><table><caption>Table 2. Data items of the $GPZDG sentence</caption>"
        "<thead><tr><th>Symbol</th><th>Meaning</th></tr></thead><tbody><tr><td><p>UTC</p></td><td><p>Time of day on "
        "the UTC timescale.</p></td></tr><tr><td><p>AA.BB</p></td><td><p>Signal strength (should be below 05.00)"
        "</p></td></tr><tr><td><p>V</p></td><td><p>GPS sync status: 0 invalid time, 1 accuracy of 20 ms, 2 "
        "accuracy of 100 ns</p></td></tr></tbody></table><h2>3. Initial setup</h2><p>Run the daemon with debug "
        "level 2 and watch its log while the receiver starts.</p><p>The driver prints gps_poll: unit 0: packets "
        "found but none were usable if flag3 is incorrect, and also when the host is connected to port B of the "
        "receiver.</p><p>Check the serial connection if the log shows that no packets were found at all.</p>"
        "</body></html>", encoding="utf-8")
    collection = "assistant-short-facts"
    assert main(["index", str(folder), "--data-dir", str(builtin_data_dir), "--collection", collection]) == 0
    with open_assistant(AppPaths(builtin_data_dir), collection, provider="cpu", use_reranker=False) as assistant:
        door = list(assistant.ask("What is the door code?"))
        torque = list(assistant.ask("What torque do the cover screws need?"))
        laser = list(assistant.ask("How do I turn off the alignment laser?"))
        trip = list(assistant.ask("My spindle drive trips with E-07 when it starts. What should I do?"))
        runtime = list(assistant.ask("At how many minutes of battery runtime left does the UPS daemon shut the "
                                     "system down by default?"))
        gain = list(assistant.ask("What gain settings should I start from when receiving?"))
        gpx = list(assistant.ask("Which GPX version is written by default?"))
        redundant = list(assistant.ask("What goes in upsmon.conf for a server fed by the two UPSes Alpha and Beta?"))
        csv = list(assistant.ask("Which function reads a CSV file into a matrix?"))
        pins = list(assistant.ask("How are the pins of the network card's RJ45 jack wired?"))
        logger = list(assistant.ask("I can't download my iBlue 747 logger over Bluetooth. How do I get my data off "
                                    "it?"))
        usable = list(assistant.ask('The GPS driver logs "packets found but none were usable". What should I check?'))
        field = list(assistant.ask("In the GPS data items, what does the V field mean?"))
    for events, document, text in [(door, "door.txt", "Door code: 7731."),
                                   (runtime, "ups.html", None),
                                   (torque, "clamping.pdf", "Cover screws | M6 | 9 Nm"),
                                   (laser, "plasma.docx", "To turn the laser off and cancel an alignment:"),
                                   (trip, "drive.txt", None),
                                   (gain, "radio-faq.md", "A good default setting to start with is RF=0 (off), "
                                                          "IF=16, baseband=16."),
                                   (logger, "logger.md", "Download the data using the USB cable instead."),
                                   (usable, "gps-driver.html", "The driver prints gps_poll: unit 0: packets found "
                                                               "but none were usable if flag3 is incorrect, and also "
                                                               "when the host is connected to port B of the receiver."),
                                   (field, "gps-driver.html", "V: GPS sync status: 0 invalid time, 1 accuracy of "
                                                              "20 ms, 2 accuracy of 100 ns")]:
        lead = only(events, LeadEvent).quotes
        focus = lead[0].text[slice(*lead[0].focus)] if lead and lead[0].focus else lead and lead[0].text
        assert lead and (lead[0].document, focus if text else None) == (document, text), lead
        done = events[-1]
        assert not has_loop(done.answer), done.answer
        assert all(s.source is not None for s in done.sentences if s.supported and s.score > 0), done.sentences
    assert only(torque, LeadEvent).quotes[0].text.startswith("Part | Thread | Torque\n")  # under its header
    assert "\n1. Press the LASER button and hold it for longer than 750 ms.\n2." in only(laser, LeadEvent).quotes[0].text
    trip_lead = only(trip, LeadEvent).quotes
    assert trip_lead[0].text.startswith("• Problem: The spindle drive trips") and trip_lead[0].kind == "answer"
    assert any("Raise the ramp time in parameter P21 to 2 s." in q.text for q in trip_lead)  # the solution, led
    entry = only(runtime, LeadEvent).quotes[0]  # a directive in capitals over its description, its default with it
    assert entry.text.startswith("MINUTES battery runtime in minutes") and "The default is 3." in entry.text, entry
    assert entry.passage.heading_path[-1] == "Directives used during power failures"  # '#' in <pre>: no heading
    faq = only(gain, LeadEvent).quotes[0]  # the manual's question heading shown over its answer
    assert faq.kind == "answer" and faq.text.startswith("How should I set the gain controls for RX?\n"), faq
    named = only(gpx, LeadEvent).quotes[0]  # a sentence under the heading that names its option
    assert named.text.startswith("gpxver option\n") and "The default version is 1.0" in named.text, named
    config = [q.text for q in only(redundant, LeadEvent).quotes]  # the file's lines, one to a line
    assert any(":\nMONITOR ups-alpha@myhost 2 monuser mypass primary\nMONITOR ups-beta@myhost 2 monuser mypass "
               "primary\nMINSUPPLIES 2" in text for text in config), config
    table = [q.text for q in only(pins, LeadEvent).quotes]  # the table under the sentence before it
    rows = "RJ45-style jack.\nSignal | PC | Card\nTxD | 2 | 3\nRxD | 3 | 6\nGND | 5 | 4"
    assert any(rows in text for text in table), table
    forms = only(csv, LeadEvent).quotes[0]  # a function's forms over its description, one to a line
    assert forms.text.startswith("x = csvread (filename)\nx = csvread (filename, dlm_opt1, . . .)\nRead the "), forms
