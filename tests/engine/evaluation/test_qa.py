"""QA sets (engine.evaluation.qa) and measuring retrieval and answers on them (engine.evaluation.scoring)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from engine.answer.assistant import Assistant, AssistantSettings
from engine.answer.grounding import DEFAULT_THRESHOLD
from engine.answer.retrieval import RetrievalSettings, Retriever
from engine.errors import EngineError
from engine.evaluation.qa import QAItem, load_qa
from engine.evaluation.scoring import (
    QuestionResult,
    evaluate,
    first_hit_rank,
    latency_table,
    percentile,
    summarize,
)
from engine.llm.local import LocalLLM
from engine.types import Passage, Span
from tests.helpers.tiny_collection import fill, open_store

DEV_SET = Path(__file__).resolve().parents[2] / "qa" / "r_manuals_dev.jsonl"
# The wider set: gnuplot, KiCad, LilyPond and DocBook XSL manuals (tests/fetch_manuals.sh). Each line
# also carries a "family" (QAItem.family), so that unanswerable questions have one too.
MIXED_SET = Path(__file__).resolve().parents[2] / "qa" / "dev_mixed.jsonl"
MIXED_DOCS = {"gnuplot": {"gnuplot.pdf"}, "kicad": {"kicad-eeschema.html", "kicad-pcbnew.html"},
              "lilypond": {"lilypond-learning.pdf", "lilypond-usage.pdf"},
              "docbook-xsl": {"docbook-xsl-reference.pdf"}}
# Issues 26 and 27: UPS hardware manuals, and a XeTeX-made FAQ whose words pypdf ran together
MACHINE_SETS = {Path(__file__).resolve().parents[2] / "qa" / name: docs for name, docs in (
    ("dev_nut.jsonl", {"nut-user-manual.pdf", "nut-FAQ.pdf", "nut-cables.pdf"}),
    ("dev_debian_faq.jsonl", {"debian-faq.pdf"}))}


def write_lines(folder: Path, *lines: str | dict) -> Path:
    path = folder / "qa.jsonl"
    path.write_text("\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n",
                    encoding="utf-8")
    return path


GOOD = {"id": "filter-01", "question": "  How do I replace the filter?  ", "doc": "filter.md",
        "pages": [1], "keywords": ["F-77"], "answerable": True}


# -- loading -----------------------------------------------------------------------------------

def test_a_valid_file_loads_and_blank_lines_are_skipped(tmp_path):
    path = write_lines(tmp_path, GOOD, "", "   ",
                       {"question": "Where is the oil drained?", "doc": "oil.md", "pages": [2, 1]},
                       {"id": "none-01", "question": "What is the capital of France?", "doc": None,
                        "pages": [], "keywords": [], "answerable": False})
    first, second, third = load_qa(path)
    assert first == QAItem("filter-01", "How do I replace the filter?", "filter.md", (1,), ("F-77",), True)
    assert second == QAItem("4", "Where is the oil drained?", "oil.md", (2, 1), (), True)  # id: its line
    assert third == QAItem("none-01", "What is the capital of France?", None, (), (), False)


def test_a_family_is_kept_and_other_keys_are_ignored(tmp_path):
    first, second = load_qa(write_lines(tmp_path, {**GOOD, "family": "pumps", "note": "x"}, GOOD))
    assert (first.family, second.family) == ("pumps", None)
    assert first == QAItem("filter-01", "How do I replace the filter?", "filter.md", (1,), ("F-77",), True,
                           "pumps")


def test_an_unanswerable_question_needs_no_doc_pages_or_keywords(tmp_path):
    (item,) = load_qa(write_lines(tmp_path, {"question": "Who won the cup?", "answerable": False}))
    assert (item.doc, item.pages, item.keywords, item.answerable) == (None, (), (), False)


def test_the_projects_own_dev_set_loads():
    items = load_qa(DEV_SET)
    assert len(items) == 74 and len({item.id for item in items}) == 74
    unanswerable = [item for item in items if not item.answerable]
    assert len(unanswerable) == 14 and all(item.doc is None for item in unanswerable)
    assert all(item.doc and item.pages for item in items if item.answerable)


def test_the_mixed_dev_set_covers_four_more_families_with_a_quarter_unanswerable():
    items = load_qa(MIXED_SET)
    raw = [json.loads(line) for line in MIXED_SET.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(items) >= 100 and len({item.id for item in items}) == len(items)
    assert {r["family"] for r in raw} == set(MIXED_DOCS)
    assert [item.family for item in items] == [r["family"] for r in raw]
    for family, docs in MIXED_DOCS.items():
        mine = [item for item, r in zip(items, raw) if r["family"] == family]
        assert {item.doc for item in mine if item.answerable} <= docs, family
        assert sum(item.answerable for item in mine) >= 15 and sum(not item.answerable for item in mine) >= 8
    assert all(item.doc is None and not item.keywords for item in items if not item.answerable)
    together = items + load_qa(DEV_SET)
    assert len(together) >= 160 and sum(not item.answerable for item in together) >= len(together) / 4


@pytest.mark.slow
@pytest.mark.parametrize("qa, docs", [(MIXED_SET, set().union(*MIXED_DOCS.values())), *MACHINE_SETS.items()],
                         ids=lambda value: getattr(value, "stem", ""))
def test_every_keyword_of_the_wider_sets_is_on_its_pages(manuals_dir, qa, docs):
    import os

    from tests.qa.check_qa import check

    missing = sorted(d for d in docs if not (manuals_dir / d).is_file())
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"{missing} missing from tests/.manuals: run tests/fetch_manuals.sh")
        pytest.skip(f"{missing} are not here; run tests/fetch_manuals.sh")
    assert check(qa, manuals_dir) == []


@pytest.mark.parametrize("bad, message", [
    ('{"question": "Oops", "doc": "a.pdf", "pages": [1],', "is not JSON"),
    ('["a list, not an object"]', "needs a 'question' string"),
    ({"doc": "a.pdf", "pages": [1]}, "needs a 'question' string"),
    ({"question": "   ", "doc": "a.pdf", "pages": [1]}, "needs a 'question' string"),
    ({"question": 42, "doc": "a.pdf", "pages": [1]}, "needs a 'question' string"),
    ({"question": "Q?", "pages": [1]}, "needs 'doc'"),
    ({"question": "Q?", "doc": "", "pages": [1]}, "needs 'doc'"),
    ({"question": "Q?", "doc": None, "pages": [1], "answerable": True}, "needs 'doc'"),
    ({"question": "Q?", "doc": "a.pdf"}, "'pages' must list"),
    ({"question": "Q?", "doc": "a.pdf", "pages": [0]}, "'pages' must list"),
    ({"question": "Q?", "doc": "a.pdf", "pages": ["3"]}, "'pages' must list"),
    ({"question": "Q?", "doc": "a.pdf", "pages": [True]}, "'pages' must list"),
    ({"question": "Q?", "doc": "a.pdf", "pages": 3}, "'pages' must list"),
    ({"question": "Q?", "doc": "a.pdf", "pages": [1], "keywords": "sink"}, "'keywords' must be"),
    ({"question": "Q?", "doc": "a.pdf", "pages": [1], "keywords": ["sink", ""]}, "'keywords' must be"),
    ({"question": "Q?", "doc": "a.pdf", "pages": [1], "keywords": [3]}, "'keywords' must be"),
    ({"question": "Q?", "doc": None, "answerable": "false"}, "'answerable' must be true or false"),
    ({"question": "Q?", "doc": "a.pdf", "pages": [1], "family": ""}, "'family' must be"),
    ({"question": "Q?", "doc": "a.pdf", "pages": [1], "family": 3}, "'family' must be"),
], ids=lambda value: value if isinstance(value, str) and len(value) < 40 else None)
def test_a_bad_line_is_named_by_file_and_line(tmp_path, bad, message):
    path = write_lines(tmp_path, GOOD, "", bad, GOOD)
    with pytest.raises(EngineError) as caught:
        load_qa(path)
    assert f"'{path}' line 3" in str(caught.value)
    assert message in str(caught.value)


def test_a_missing_empty_or_undecodable_file_says_so(tmp_path):
    with pytest.raises(EngineError, match="could not be read"):
        load_qa(tmp_path / "nowhere.jsonl")
    (tmp_path / "latin1.jsonl").write_bytes('{"question": "Caf\xe9?"}\n'.encode("latin-1"))
    with pytest.raises(EngineError, match="could not be read"):
        load_qa(tmp_path / "latin1.jsonl")
    with pytest.raises(EngineError, match="has no questions"):
        load_qa(write_lines(tmp_path, "", "  "))


# -- scoring -------------------------------------------------------------------------------------

def passage(path: str, *pages: int) -> Passage:
    return Passage(document_id=1, path=path, title="", chunk_ids=tuple(range(len(pages))),
                   spans=tuple(Span(page, 0, 10) for page in pages), text="text", heading_path=(),
                   score=1.0, similarity=0.5)


def item(doc: str | None = "R-intro.pdf", pages=(12,), keywords=(), answerable=True, id="q") -> QAItem:
    return QAItem(id, "question?", doc, tuple(pages), tuple(keywords), answerable)


def test_first_hit_rank_is_the_first_passage_of_the_doc_covering_an_answer_page():
    passages = [passage("/m/R-data.pdf", 12), passage("/m/R-intro.pdf", 10, 11),
                passage("C:\\m\\r-INTRO.pdf", 11, 12), passage("/m/R-intro.pdf", 12)]
    assert first_hit_rank(item(), passages) == 3  # file name, any case, any separator
    assert first_hit_rank(item(pages=(11, 40)), passages) == 2
    assert first_hit_rank(item(pages=(40,)), passages) is None
    assert first_hit_rank(item(doc=None, pages=(), answerable=False), passages) is None
    assert first_hit_rank(item(), []) is None


def test_keyword_hits_ignore_case_and_spacing():
    found = QuestionResult(item(keywords=("sink(", "Back to  the screen")), 1, False,
                           answer="Use SINK(file), then sink() to get back\nto the screen.")
    assert found.keyword_hit is True
    assert QuestionResult(item(keywords=("sink(", "tapply")), 1, False, answer="sink(").keyword_hit is False
    assert QuestionResult(item(keywords=("sink",)), 1, False).keyword_hit is None  # no answer
    assert QuestionResult(item(), 1, False, answer="sink").keyword_hit is None  # no keywords
    assert QuestionResult(item(None, (), ("x",), False), None, True, answer="x").keyword_hit is None


def test_percentile_matches_numpy():
    values = [0.31, 0.02, 5.5, 1.25, 0.7, 0.7, 9.0]
    for q in (0, 5, 50, 90, 95, 100):
        assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)))
    assert percentile([4.0], 95) == 4.0
    assert math.isnan(percentile([], 50))


def test_latency_table_covers_each_stage_over_the_questions_that_ran_it():
    table = latency_table([{"embed": 0.01, "generate": 2.0}, {"embed": 0.03}, {"embed": 0.02}])
    assert table == {"embed": {"p50": 0.02, "p95": 0.029}, "generate": {"p50": 2.0, "p95": 2.0}}


def test_summary_of_hits_refusals_and_keywords():
    results = [
        QuestionResult(item(id="a", keywords=("k",)), 1, False, answer="k", timings_s={"embed": 0.01}),
        QuestionResult(item(id="b", keywords=("k",)), 4, False, answer="no", timings_s={"embed": 0.03}),
        QuestionResult(item(id="c"), None, True, timings_s={"embed": 0.02}),
        QuestionResult(item(None, (), (), False, "d"), None, True, timings_s={"embed": 0.02}),
    ]
    summary = summarize(results)
    assert (summary["questions"], summary["answerable"], summary["unanswerable"]) == (4, 3, 1)
    assert summary["hit@1"] == pytest.approx(1 / 3, abs=1e-4)
    assert summary["hit@3"] == pytest.approx(1 / 3, abs=1e-4)
    assert summary["hit@5"] == summary["hit@10"] == pytest.approx(2 / 3, abs=1e-4)
    assert summary["mrr@5"] == pytest.approx((1 + 1 / 4) / 3, abs=1e-4)
    assert summary["unanswerable_refused_rate"] == 1.0
    assert summary["refusal_accuracy"] == 0.75  # all but c: refused exactly when not answerable
    assert summary["false_refusal_rate"] == pytest.approx(1 / 3, abs=1e-4)
    assert summary["keyword_hit_rate"] == 0.5  # c has no answer: not counted
    assert summary["latency_s"] == {"embed": {"p50": 0.02, "p95": 0.0285}}
    json.dumps(summary, allow_nan=False)  # the CLI prints it as JSON


def test_a_summary_without_unanswerable_questions_or_answers_says_none():
    summary = summarize([QuestionResult(item(), 2, False)])
    assert summary["unanswerable_refused_rate"] is None and summary["keyword_hit_rate"] is None
    assert summary["refusal_accuracy"] == 1.0 and summary["false_refusal_rate"] == 0.0
    assert (summary["hit@1"], summary["hit@3"]) == (0.0, 1.0)


# -- evaluate on a real tiny collection --------------------------------------------------------

@pytest.fixture(scope="module")
def retriever(tmp_path_factory, tiny_embedder):
    """Keyword search only, so that the ranks below follow from the manuals' words."""
    with open_store(tmp_path_factory.mktemp("collection") / "manuals", tiny_embedder) as store:
        yield Retriever(fill(store, tiny_embedder), tiny_embedder, settings=RetrievalSettings(fusion="keyword"))


ITEMS = [
    QAItem("filter", "How do I replace the filter?", "filter.md", (1,), ("F-77",), True),
    QAItem("drain", "Where do I drain old oil?", "oil.md", (2,), (), True),
    QAItem("wrong-page", "What does error E-12 mean?", "pump.md", (1,), (), True),  # it is on page 2
    QAItem("france", "What is the capital of France?", None, (), (), False),
]


def test_evaluate_retrieval_only_ranks_and_gates_each_question(retriever):
    reported = []
    results = evaluate(ITEMS, retriever, on_result=reported.append)
    assert reported == results
    assert [r.item.id for r in results] == ["filter", "drain", "wrong-page", "france"]
    assert [r.rank for r in results] == [1, 1, None, None]
    assert all(r.answer is None and r.keyword_hit is None for r in results)
    for r in results:
        assert r.refused == (r.relevance < DEFAULT_THRESHOLD)
        assert {"embed", "keyword", "fuse", "merge"} <= set(r.timings_s)
    record = results[3].to_dict()
    assert (record["id"], record["answerable"], record["rank"], record["answer"]) == ("france", False, None, None)
    summary = summarize(results)
    assert summary["hit@1"] == pytest.approx(2 / 3, abs=1e-4)


def test_evaluate_with_the_assistant_answers_each_question(retriever, tiny_llm_dir):
    with LocalLLM(tiny_llm_dir, provider="cpu") as llm:
        assistant = Assistant(retriever, llm, AssistantSettings(relevance_threshold=-10))
        results = evaluate(ITEMS[:2], retriever, assistant)
    assert [r.rank for r in results] == [1, 1]
    for r in results:
        assert r.refused is False and isinstance(r.answer, str)
        assert {"gate", "prompt", "generate", "cite", "total", "first_token"} <= set(r.timings_s)
    assert isinstance(results[0].keyword_hit, bool) and results[1].keyword_hit is None
    assert summarize(results)["latency_s"]["generate"]["p50"] > 0


def test_an_error_in_an_answer_names_the_question(tmp_path, tiny_embedder, tiny_llm_dir):
    with open_store(tmp_path / "empty", tiny_embedder) as empty, \
            LocalLLM(tiny_llm_dir, provider="cpu") as llm:
        retriever = Retriever(empty, tiny_embedder)
        with pytest.raises(EngineError, match="Question 'filter' failed: No manuals are indexed"):
            evaluate(ITEMS[:1], retriever, Assistant(retriever, llm))
