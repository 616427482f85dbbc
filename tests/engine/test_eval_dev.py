"""The development QA sets end to end on the built-in models: the quality floor CI holds.

Both sets (tests/qa/r_manuals_dev.jsonl and dev_mixed.jsonl: 202 questions over five families
of manuals) go through retrieval and the relevance gate; a sample spread over the families also
gets full answers from the built-in LLM. Issue 13's targets are printed beside what was measured.
Where a target is met, the floor is the target. Where it is not met yet, the floor sits a
little under what was measured (docs/benchmarks.md), so that a change that makes retrieval,
the gate or the answers worse fails here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.evaluation.qa import QAItem, load_qa
from engine.paths import AppPaths

QA_DIR = Path(__file__).resolve().parents[1] / "qa"
SETS = (QA_DIR / "r_manuals_dev.jsonl", QA_DIR / "dev_mixed.jsonl")
COLLECTION = "dev-sets"
SAMPLE_ANSWERABLE, SAMPLE_UNANSWERABLE = 4, 1  # per family, for the full answers

# Issue 13's targets, for the report; the floors below are what CI holds.
TARGETS = {"hit@5": 0.92, "lowest family hit@5": 0.85, "mrr@5": 0.80, "refusal_accuracy": 0.90,
           "false_refusal_rate": 0.05, "keyword_hit_rate": 0.85, "keyword_hit_generated": 0.40,
           "loop_rate": 0.0, "deterministic_rate": 1.0}
# Measured (docs/benchmarks.md, "Issue 13: before and after"): hit@5 0.865, hit@10 0.912, MRR@5
# 0.653, lowest family hit@5 0.762, refusal accuracy 0.896, false refusals 0.027; on the sample,
# keyword hit (whole answer) 0.475, lead hit 0.450, no loops, every repeat identical. With the
# worked example and 2 passages for the model: keyword hit 0.500, model text alone 0.075 (was 0.025).
# The sample CI answers is now 4 answerable and 1 unanswerable question per family (it was 8 and
# 2: half the time); on it: keyword hit 0.600, model text alone 0.100, lead hit 0.500, no loops,
# every repeat identical. Each answer floor sits one question (0.05) under that.
RETRIEVAL_FLOORS = {"hit@5": 0.84, "hit@10": 0.89, "mrr@5": 0.63, "refusal_accuracy": 0.88}
LOWEST_FAMILY_HIT5 = 0.72
MAX_FALSE_REFUSALS = 0.05  # the target
ANSWER_FLOORS = {"keyword_hit_rate": 0.55, "keyword_hit_generated": 0.05, "lead_hit_rate": 0.45,
                 "deterministic_rate": 1.0}  # the last: the target
MAX_LOOP_RATE = 0.0  # the target


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
def dev_data_dir(builtin_data_dir, manuals_dir) -> Path:
    """Every manual the sets ask about, in one collection, indexed with the default settings."""
    from engine.store.indexer import Indexer, default_embedder, open_collection

    paths = AppPaths(builtin_data_dir)
    embedder = default_embedder(paths)
    manuals = sorted({manuals_dir / item.doc for item in all_items() if item.doc})
    with open_collection(paths, COLLECTION, embedder) as store:
        outcomes = [e.outcome for e in Indexer(store, embedder).run(manuals) if e.outcome]
    assert [o.status for o in outcomes] == ["ready"] * len(manuals), outcomes
    return builtin_data_dir


@pytest.mark.slow
def test_every_keyword_of_the_r_set_is_on_its_pages(manuals_dir):
    from tests.qa.check_qa import check  # the mixed set's: tests/engine/test_qa.py

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
    from engine.answer.assistant import open_assistant
    from engine.evaluation.scoring import evaluate, summarize

    with open_assistant(AppPaths(dev_data_dir), COLLECTION) as assistant:
        summary = summarize(evaluate(sample(all_items()), assistant.retriever, assistant, repeat_sample=5))
    report(summary, ["keyword_hit_rate", "keyword_hit_generated", "lead_hit_rate", "loop_rate",
                     "deterministic_rate", "caution_on_wrong", "caution_on_right"])
    latency = summary["latency_s"]
    print(f"lead p50 {latency['lead']['p50']:.3f} s, first token p50 {latency['first_token']['p50']:.3f} s")
    for metric, floor in ANSWER_FLOORS.items():
        assert summary[metric] >= floor, (metric, summary[metric])
    assert summary["loop_rate"] <= MAX_LOOP_RATE, summary["loop_rate"]
    assert set(latency) >= {"embed", "dense", "keyword", "gate", "lead", "generate", "first_token"}
