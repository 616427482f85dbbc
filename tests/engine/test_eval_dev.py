"""The development QA sets end to end on the built-in models: the quality floor CI holds.

The sets (tests/qa/*.jsonl: 268 questions over seven families of manuals) go through retrieval
and the relevance gate; a sample spread over the families also gets full answers from the
built-in LLM. Issue 27's targets are printed beside what was measured. Where a target is met,
the floor is the target. Where it is not met yet, the floor sits one question under what was
measured (docs/benchmarks.md), so that a change that makes retrieval, the gate or the answers
worse fails here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.evaluation.qa import QAItem, load_qa
from engine.paths import AppPaths
from tests.helpers import dev_index

SETS, COLLECTION = dev_index.SETS, dev_index.COLLECTION
SAMPLE_ANSWERABLE, SAMPLE_UNANSWERABLE = 4, 1  # per family, for the full answers
# The index of the 15 manuals (6,603 chunks) takes 240 s on a quiet machine with VNNI and 770 s
# on a 2-core AVX2 one (no VNNI: 10 chunks/s). It is built while the rest of the suite runs, but
# where these tests run alone the first one waits for all of it: a guard sized for that.
pytestmark = pytest.mark.timeout(1800)

# Issue 27's targets, for the report; the floors below are what CI holds.
TARGETS = {"hit@5": 0.93, "lowest family hit@5": 0.85, "mrr@5": 0.80, "refusal_accuracy": 0.90,
           "false_refusal_rate": 0.05, "unanswerable_refused_rate": 0.90, "lead_hit_rate": 0.65,
           "keyword_hit_rate": 0.70, "keyword_hit_generated": 0.20, "caution_on_wrong": 0.70,
           "caution_on_right": 0.10, "loop_rate": 0.0, "deterministic_rate": 1.0}
# Measured (docs/benchmarks.md, "Short words and repeated passages (issue 27)"; this test's run of
# 2026-12-05), on all 268: hit@5 0.847, hit@10 0.934, MRR@5 0.670, lowest family hit@5 0.708
# (gnuplot), refusal accuracy 0.903, false refusals 0.015, unanswerable refused 0.681; on the
# sample (4 answerable and 1 unanswerable question per family, 35): keyword hit 0.500, the model's
# text alone 0.107, lead hit 0.464, caution on wrong answers 0.760 and on right ones 0, no loops,
# every repeat identical. Each floor not at its target sits one question under that (1/196 of the
# answerable, 1/72 of the unanswerable, 1/24 of gnuplot's, 1/28 of the sample's). The caution
# (2026-12-07, docs/benchmarks.md "The caution on what the lead says"): on all 268 it fires on
# 0.760 of wrong answers and 3 of 19 right ones; on the sample on 22 of 24 wrong and 0 of 3 right.
RETRIEVAL_FLOORS = {"hit@5": 0.84, "hit@10": 0.92, "mrr@5": 0.66, "refusal_accuracy": 0.89,
                    "unanswerable_refused_rate": 0.66}
LOWEST_FAMILY_HIT5 = 0.66
MAX_FALSE_REFUSALS = 0.05  # the target
ANSWER_FLOORS = {"keyword_hit_rate": 0.46, "keyword_hit_generated": 0.07, "lead_hit_rate": 0.42,
                 "caution_on_wrong": 0.70, "deterministic_rate": 1.0}  # the last two: the targets
# The sample writes 3-6 right answers, so one cautioned is 0.17-0.33 of them: the ceiling is a
# count, one answer over what was measured (0).
MAX_CAUTIONED_RIGHT = 1
MAX_LOOP_RATE = 0.0  # the target
# Written answers whose screen showed text the answer then left out (a loop cut after it streamed):
# 28 of 32 before each sentence after the first was held until checked, 9 after (2026-12-06);
# the ceiling one answer over.
MAX_STREAMED_BEYOND = 0.32


def all_items() -> list[QAItem]:
    return [item for path in SETS for item in load_qa(path)]


def sample(items: list[QAItem]) -> list[QAItem]:
    """The first few answerable and unanswerable questions of each family, in set order."""
    taken, counts = [], {}
    for item in items:
        key = (item.family, item.answerable)
        counts[key] = counts.get(key, 0) + 1
        if counts[key] <= (SAMPLE_ANSWERABLE if item.answerable else SAMPLE_UNANSWERABLE):
            taken.append(item)
    return taken


@pytest.fixture(scope="module")
def dev_data_dir(request, manuals_dir) -> Path:
    """Every manual the sets ask about, in one collection, indexed with the default settings while
    the rest of the suite runs (tests/helpers/dev_index.py); the built-in LLM prepared too."""
    return dev_index.built(request.config)


@pytest.mark.slow
def test_every_keyword_of_the_r_set_is_on_its_pages(manuals_dir):
    from tests.qa.check_qa import check  # the mixed set's: tests/engine/evaluation/test_qa.py

    assert check(SETS[0], manuals_dir) == []


def test_the_sets_are_as_large_as_promised():
    items = all_items()
    answerable = [i for i in items if i.answerable]
    families = {i.family for i in items}
    assert len(items) >= 160 and len(families) >= 4 and None not in families
    assert len(items) - len(answerable) >= len(items) / 4  # a quarter the manuals cannot answer
    assert {i.doc for i in answerable} >= {"R-intro.pdf", "R-admin.pdf", "R-data.pdf", "R-exts.pdf", "R-FAQ.pdf"}


def test_the_answer_sample_covers_every_family():
    taken = sample(all_items())
    for family in {i.family for i in all_items()}:
        mine = [i for i in taken if i.family == family]
        assert sum(i.answerable for i in mine) == SAMPLE_ANSWERABLE
        assert sum(not i.answerable for i in mine) == SAMPLE_UNANSWERABLE


def report(summary: dict, keys) -> None:
    print("\nmeasure                  measured   target")
    for key in keys:
        value = summary.get(key)
        shown = "-" if value is None else f"{value:.3f}"
        print(f"{key:24} {shown:>8}   {TARGETS.get(key, '-')}")


@pytest.mark.slow
def test_retrieval_and_the_gate_on_both_sets_meet_the_floors(dev_data_dir):
    from engine.answer.retrieval import Retriever
    from engine.evaluation.scoring import evaluate, summarize
    from engine.store.indexer import default_embedder, open_collection

    paths = AppPaths(dev_data_dir)
    embedder = default_embedder(paths)
    with open_collection(paths, COLLECTION, embedder, read_only=True) as store:
        summary = summarize(evaluate(all_items(), Retriever(store, embedder)))
    lowest = min(group["hit@5"] for group in summary["by_family"].values())
    summary["lowest family hit@5"] = lowest
    report(summary, ["hit@1", "hit@5", "hit@10", "mrr@5", "lowest family hit@5", "refusal_accuracy",
                     "false_refusal_rate", "unanswerable_refused_rate"])
    for family, group in sorted(summary["by_family"].items()):
        print(f"  {family:12} hit@5 {group['hit@5']:.3f} mrr@5 {group['mrr@5']:.3f} "
              f"refusal accuracy {group['refusal_accuracy']:.3f} false refusals {group['false_refusal_rate']:.3f}")
    for metric, floor in RETRIEVAL_FLOORS.items():
        assert summary[metric] >= floor, (metric, summary[metric])
    assert lowest >= LOWEST_FAMILY_HIT5, summary["by_family"]
    assert summary["false_refusal_rate"] <= MAX_FALSE_REFUSALS, summary["false_refusal_rate"]


@pytest.mark.slow
def test_answers_on_a_sample_of_every_family_meet_the_floors(dev_data_dir):
    from engine.answer.session import open_assistant
    from engine.evaluation.scoring import evaluate, summarize

    with open_assistant(AppPaths(dev_data_dir), COLLECTION) as assistant:
        results = evaluate(sample(all_items()), assistant.retriever, assistant, repeat_sample=5)
    summary = summarize(results)
    report(summary, ["keyword_hit_rate", "keyword_hit_generated", "lead_hit_rate", "lead_chars", "loop_rate",
                     "streamed_beyond_rate", "deterministic_rate", "caution_on_wrong", "caution_on_right"])
    latency = summary["latency_s"]
    print(f"lead p50 {latency['lead']['p50']:.3f} s, first token p50 {latency['first_token']['p50']:.3f} s")
    for metric, floor in ANSWER_FLOORS.items():
        assert summary[metric] >= floor, (metric, summary[metric])
    assert summary["loop_rate"] <= MAX_LOOP_RATE, summary["loop_rate"]
    assert summary["streamed_beyond_rate"] <= MAX_STREAMED_BEYOND, summary["streamed_beyond_rate"]
    cautioned_right = [r.item.id for r in results if r.cautioned and r.keyword_hit_generated]
    assert len(cautioned_right) <= MAX_CAUTIONED_RIGHT, cautioned_right
    # the prompt's worked example is never shown as an answer (the guard cuts a copy of it)
    assert not [r.item.id for r in results if "FEED key" in (r.streamed or "") + (r.answer or "")]
    assert set(latency) >= {"embed", "dense", "keyword", "gate", "lead", "generate", "first_token"}
