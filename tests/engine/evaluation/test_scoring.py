"""What eval reports (engine.evaluation.scoring): each measure of the summary, on hand-made results,
split by document and by family; and how evaluate reads the lead sentences, the timings and a
second asking from the assistant's events."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from engine.answer.assistant import (
    AnswerStats,
    AssistantSettings,
    CitationsEvent,
    DoneEvent,
    PassagesEvent,
    TextEvent,
)
from engine.answer.grounding import Relevance
from engine.answer.retrieval import RetrievalSettings, Retriever
from engine.evaluation.qa import QAItem
from engine.evaluation.scoring import (
    NO_DOCUMENT,
    QuestionResult,
    evaluate,
    summarize,
)
from engine.types import CheckedSentence
from tests.helpers.tiny_collection import fill, open_store

LOOP = "1. Open the PDF in Acrobat.\n2. Open the PDF in Acrobat.\n3. Open the PDF in Acrobat."
NOT_FOUND = "The manuals do not say."


def item(id="q", doc="a.pdf", keywords=("alpha",), answerable=True, family=None) -> QAItem:
    if not answerable:
        return QAItem(id, "question?", None, (), (), False, family)
    return QAItem(id, "question?", doc, (1,), tuple(keywords), True, family)


def answered(id="q", answer="", lead=None, **fields) -> QuestionResult:
    return QuestionResult(item(id, **{k: fields.pop(k) for k in ("doc", "family") if k in fields}),
                          1, False, answer=answer, lead=lead, **fields)


# -- the summary's measures --------------------------------------------------------------------

def test_keywords_are_counted_in_the_whole_answer_the_models_text_and_the_lead_apart():
    results = [answered("lead-only", "Something else.", "Use alpha here."),
               answered("text-only", "Alpha is it.", "Nothing."),
               answered("neither", "No.", "Nothing."),
               answered("no-lead", "Not that.", ""),
               QuestionResult(item("unanswerable", answerable=False), None, True, answer=NOT_FOUND, lead="")]
    summary = summarize(results)
    assert summary["keyword_hit_rate"] == 0.5  # lead-only and text-only: the whole answer has it
    assert summary["keyword_hit_generated"] == 0.25  # text-only
    assert summary["lead_hit_rate"] == 0.25  # lead-only
    assert summary["keyword_any_rate"] == 0.25  # the model's text, as keyword_hit_generated
    assert results[0].shown == "Use alpha here.\nSomething else." and results[3].shown == "Not that."


def test_without_lead_sentences_the_whole_answer_is_the_models_text():
    results = [answered("a", "alpha"), answered("b", "beta")]
    summary = summarize(results)
    assert summary["lead_hit_rate"] is None
    assert summary["keyword_hit_rate"] == summary["keyword_hit_generated"] == 0.5


def test_refusal_accuracy_counts_every_question_and_false_refusals_the_answerable_ones():
    results = [QuestionResult(item("answered"), 1, False),
               QuestionResult(item("refused"), 2, True),
               QuestionResult(item("u1", answerable=False), None, True),
               QuestionResult(item("u2", answerable=False), None, False),
               QuestionResult(item("u3", answerable=False), None, True)]
    summary = summarize(results)
    assert summary["refusal_accuracy"] == 0.6  # answered, u1, u3
    assert summary["false_refusal_rate"] == 0.5
    assert summary["unanswerable_refused_rate"] == pytest.approx(2 / 3, abs=1e-4)


def test_hits_and_mrr_count_answerable_questions_only():
    results = [QuestionResult(item("first"), 1, False), QuestionResult(item("sixth"), 6, False),
               QuestionResult(item("third"), 3, False), QuestionResult(item("missed"), None, False),
               QuestionResult(item("u", answerable=False), None, True)]
    summary = summarize(results)
    assert (summary["hit@1"], summary["hit@5"], summary["hit@10"]) == (0.25, 0.5, 0.75)
    assert summary["mrr@5"] == pytest.approx((1 + 1 / 3) / 4, abs=1e-4)


def test_loop_rate_counts_written_answers_with_a_repeated_sentence():
    results = [answered("loop", LOOP), answered("fine", "Set the option to two. Then restart the pump."),
               answered("also-fine", "Press the red button."),
               QuestionResult(item("refused"), 1, True, answer=NOT_FOUND),  # nothing written
               QuestionResult(item("retrieval-only"), 1, False)]
    assert [r.looped for r in results] == [True, False, False, None, None]
    assert summarize(results)["loop_rate"] == pytest.approx(1 / 3, abs=1e-4)


def test_streamed_beyond_rate_counts_written_answers_whose_screen_showed_more_than_the_answer():
    results = [answered("cut", "Open it.", streamed="Open it. Open it."),
               answered("same", "Open it.", streamed="Open it.\n"),
               QuestionResult(item("refused"), 1, True, answer=NOT_FOUND, streamed=NOT_FOUND),
               QuestionResult(item("retrieval-only"), 1, False)]
    assert [r.streamed_beyond for r in results] == [True, False, None, None]
    assert summarize(results)["streamed_beyond_rate"] == 0.5


def test_deterministic_rate_is_the_share_of_repeated_answers_that_came_back_the_same():
    results = [answered("a", "x", repeat_identical=True), answered("b", "y", repeat_identical=False),
               answered("c", "z", repeat_identical=True), answered("d", "w")]
    assert summarize(results)["deterministic_rate"] == pytest.approx(2 / 3, abs=1e-4)
    assert summarize(results[3:])["deterministic_rate"] is None  # none asked twice


def test_latency_has_p50_and_p95_of_each_stage_lead_and_first_token_included():
    results = [answered(str(n), "x", timings_s={"embed": 0.01 * n, "lead": 0.1 * n, "first_token": 1.0 * n})
               for n in (1, 2, 3)]
    latency = summarize(results)["latency_s"]
    assert latency["lead"] == {"p50": 0.2, "p95": 0.29}
    assert latency["first_token"] == {"p50": 2.0, "p95": 2.9}
    assert latency["embed"]["p50"] == 0.02


def test_the_caution_is_measured_over_written_answers_and_apart_on_wrong_and_right_ones():
    results = [answered("right-cautioned", "Use alpha.", cautioned=True),
               answered("right", "Alpha it is.", cautioned=False),
               answered("wrong-cautioned", "Use beta.", cautioned=True),
               answered("wrong-cautioned-too", "Use gamma.", cautioned=True),
               answered("wrong", "Use delta.", cautioned=False),
               QuestionResult(item("refused"), 1, True, answer=NOT_FOUND),  # no caution either way
               QuestionResult(item("u", answerable=False), None, False, answer="Paris.", cautioned=True)]
    summary = summarize(results)
    assert summary["caution_rate"] == 0.6  # of the five written answers with keywords to judge
    assert summary["caution_on_wrong"] == pytest.approx(2 / 3, abs=1e-4)
    assert summary["caution_on_right"] == 0.5
    assert summarize(results[:1])["caution_on_wrong"] is None  # no wrong answer to judge
    assert results[0].to_dict()["cautioned"] is True


def test_keywords_with_the_unsupported_sentences_left_out():
    results = [answered("kept", "Use alpha. Made up.", supported_only="Use alpha."),
               answered("lost", "Use alpha. Fine.", supported_only="Fine."),
               answered("unchecked", "Use alpha.")]
    assert [r.keyword_hit_supported_only for r in results] == [True, False, None]
    assert summarize(results)["keyword_hit_supported_only"] == 0.5


# -- by document and by family -----------------------------------------------------------------

def split_results() -> list[QuestionResult]:
    return [QuestionResult(item("a1", "a.pdf", family="one"), 1, False, answer="alpha"),
            QuestionResult(item("a2", "a.pdf", family="one"), None, True, answer=NOT_FOUND),
            QuestionResult(item("b1", "b.pdf", family="two"), 2, False, answer="beta"),
            QuestionResult(item("u1", answerable=False, family="one"), None, True, answer=NOT_FOUND),
            QuestionResult(item("u2", answerable=False, family="two"), None, False, answer="made up")]


def test_by_doc_splits_by_document_file_name_and_keeps_unanswerable_ones_apart():
    by_doc = summarize(split_results())["by_doc"]
    assert list(by_doc) == [NO_DOCUMENT, "a.pdf", "b.pdf"]
    assert (by_doc["a.pdf"]["questions"], by_doc["a.pdf"]["hit@1"], by_doc["a.pdf"]["false_refusal_rate"]) \
        == (2, 0.5, 0.5)
    assert (by_doc["b.pdf"]["hit@1"], by_doc["b.pdf"]["hit@5"], by_doc["b.pdf"]["keyword_hit_rate"]) \
        == (0.0, 1.0, 0.0)
    assert (by_doc[NO_DOCUMENT]["unanswerable"], by_doc[NO_DOCUMENT]["refusal_accuracy"]) == (2, 0.5)
    assert by_doc[NO_DOCUMENT]["hit@5"] is None


def test_by_family_splits_by_the_items_family_with_the_same_measures():
    summary = summarize(split_results())
    one, two = summary["by_family"]["one"], summary["by_family"]["two"]
    assert list(summary["by_family"]) == ["one", "two"]
    assert (one["questions"], one["answerable"], one["refusal_accuracy"], one["keyword_hit_rate"]) \
        == (3, 2, pytest.approx(2 / 3, abs=1e-4), 0.5)
    assert (two["questions"], two["refusal_accuracy"], two["unanswerable_refused_rate"]) == (2, 0.5, 0.0)
    assert set(one) == set(two) == {k for k in summary if not k.startswith("by_")}
    json.dumps(summary, allow_nan=False)


def test_no_by_family_when_no_item_names_one():
    assert "by_family" not in summarize([QuestionResult(item(), 1, False)])


# -- evaluate, reading the assistant's events --------------------------------------------------

RELEVANT = Relevance(0.9, 1.0, 0.9, True, ())


class Scripted:
    """The assistant's events for each question, one list per asking, with an optional lead."""

    settings = AssistantSettings(relevance_threshold=-10)

    def __init__(self, answers: dict[str, list[str | None]], leads: dict[str, str] | None = None,
                 lead_stage=False):
        self.answers, self.leads, self.lead_stage = answers, leads or {}, lead_stage
        self.asked: list[str] = []

    def ask(self, question: str):
        self.asked.append(question)
        text = self.answers[question][self.asked.count(question) - 1]
        if text is None:  # refused
            yield PassagesEvent((), False, RELEVANT)
            yield DoneEvent(NOT_FOUND, AnswerStats(False, RELEVANT, ("gate",), {"gate": 0.01}))
            return
        yield PassagesEvent((), True, RELEVANT)
        if question in self.leads:
            yield SimpleNamespace(kind="lead", quotes=(SimpleNamespace(text=self.leads[question]),))
        yield TextEvent(text)
        yield CitationsEvent(())
        timings = {"gate": 0.01, "generate": 0.5, **({"lead": 0.002} if self.lead_stage else {})}
        yield DoneEvent(text, AnswerStats(True, RELEVANT, tuple(timings), timings, time_to_first_token_s=0.3))


@pytest.fixture(scope="module")
def retriever(tmp_path_factory, tiny_embedder):
    with open_store(tmp_path_factory.mktemp("collection") / "manuals", tiny_embedder) as store:
        yield Retriever(fill(store, tiny_embedder), tiny_embedder, settings=RetrievalSettings(fusion="keyword"))


ITEMS = [QAItem("filter", "How do I replace the filter?", "filter.md", (1,), ("F-77",), True, "pumps"),
         QAItem("drain", "Where do I drain old oil?", "oil.md", (2,), ("tray",), True, "oil"),
         QAItem("prime", "How do I prime the pump?", "pump.md", (1,), ("water",), True, "pumps")]


def test_evaluate_reads_the_lead_and_times_it_from_the_question(retriever):
    assistant = Scripted({"How do I replace the filter?": ["Fit a new one."],
                          "Where do I drain old oil?": ["Into a tray."],
                          "How do I prime the pump?": ["Fill it."]},
                         leads={"How do I replace the filter?": "Use part F-77 only.",
                                "Where do I drain old oil?": "Drain old oil."}, lead_stage=True)
    filter_, drain, prime = evaluate(ITEMS, retriever, assistant)
    assert (filter_.lead, filter_.answer, filter_.lead_hit, filter_.keyword_hit_generated) == \
        ("Use part F-77 only.", "Fit a new one.", True, False)
    assert filter_.keyword_hit is True
    assert (drain.lead_hit, drain.keyword_hit) == (False, True)
    assert prime.lead == "" and prime.lead_hit is False  # no lead shown where others had one: a miss
    assert 0 < filter_.timings_s["lead"] < 1 and filter_.timings_s["lead_stage"] == 0.002
    assert filter_.timings_s["first_token"] == 0.3 and "lead" not in prime.timings_s
    summary = summarize([filter_, drain, prime])
    assert summary["lead_hit_rate"] == pytest.approx(1 / 3, abs=1e-4)
    assert {"lead", "first_token", "generate"} <= summary["latency_s"].keys()


def test_evaluate_without_lead_events_leaves_the_lead_out(retriever):
    assistant = Scripted({item.question: ["Use F-77."] for item in ITEMS})
    results = evaluate(ITEMS, retriever, assistant)
    assert all(r.lead is None and r.lead_hit is None for r in results)
    assert summarize(results)["lead_hit_rate"] is None


class Checked(Scripted):
    """An assistant whose answers come checked: `unsupported` names each answer's sentences the
    passages do not say (the others are supported by passage 1)."""

    def __init__(self, unsupported: dict[str, set[str]]):
        super().__init__({item.question: ["x"] for item in ITEMS})
        self.unsupported = unsupported

    def ask(self, question: str):
        yield PassagesEvent((), True, RELEVANT)
        text = "Fit part F-77. Use water. Drain it."
        spans = [(0, 14), (15, 25), (26, 35)]
        sentences = tuple(CheckedSentence(s, e, text[s:e] not in self.unsupported.get(question, ()),
                                          None if text[s:e] in self.unsupported.get(question, ()) else 1, 0.5)
                          for s, e in spans)
        yield TextEvent(text)
        yield CitationsEvent(())
        bad = sum(not c.supported for c in sentences)
        yield DoneEvent(text, AnswerStats(True, RELEVANT, ("generate",), {"generate": 0.5}, support=0.25,
                                          checked=3, unsupported=bad), sentences=sentences)


def test_evaluate_reads_the_caution_and_the_sentence_checks(retriever):
    assistant = Checked({"How do I replace the filter?": {"Fit part F-77.", "Drain it."},
                         "Where do I drain old oil?": {"Use water.", "Drain it."}})
    filter_, drain, prime = evaluate(ITEMS, retriever, assistant)
    assert (filter_.cautioned, drain.cautioned, prime.cautioned) == (True, True, False)
    assert filter_.support == 0.25 and filter_.to_dict()["support"] == 0.25
    assert filter_.supported_only == "Use water." and filter_.keyword_hit_supported_only is False
    assert prime.supported_only == prime.answer and prime.keyword_hit_supported_only is True
    assert (filter_.keyword_hit_generated, prime.keyword_hit_generated) == (True, True)
    summary = summarize([filter_, drain, prime])
    assert (summary["caution_on_right"], summary["caution_on_wrong"]) == (0.5, 1.0)


def test_a_sample_is_asked_twice_and_compared_byte_for_byte(retriever):
    assistant = Scripted({"How do I replace the filter?": ["Fit F-77.", "Fit F-77."],
                          "Where do I drain old oil?": ["Into a tray."],
                          "How do I prime the pump?": ["Fill it.", "Fill it!"]})
    results = evaluate(ITEMS, retriever, assistant, repeat_sample=2)
    assert [r.repeat_identical for r in results] == [True, None, False]  # the first and the last
    assert assistant.asked.count("How do I replace the filter?") == 2
    assert summarize(results)["deterministic_rate"] == 0.5
    assert all(r.repeat_identical is None for r in evaluate(ITEMS, retriever, Scripted(
        {item.question: ["x"] for item in ITEMS})))  # repeat_sample 0: nothing asked twice


def test_the_repeated_sample_spreads_over_the_set_and_skips_refusals(retriever):
    items = [QAItem(f"q{n}", f"Question {n}?", "filter.md", (1,), (), True) for n in range(8)]
    refused = {"Question 0?", "Question 5?"}
    assistant = Scripted({"Capital?": ["Paris."],
                          **{i.question: [None] if i.question in refused else ["x", "x"] for i in items}})
    results = evaluate([*items[:4], QAItem("u", "Capital?", None, (), (), False), *items[4:]],
                       retriever, assistant, repeat_sample=4)
    assert [r.item.id for r in results if r.repeat_identical] == ["q1", "q2", "q4", "q6"]
    assert summarize(results)["deterministic_rate"] == 1.0
