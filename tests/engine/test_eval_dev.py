"""The development QA set end to end on the built-in models: the quality floor CI holds.

The floors sit a little under what was measured (docs/retrieval.md), so that a change that
makes retrieval, the gate or the answers worse fails here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.evaluation.qa import load_qa
from engine.paths import AppPaths

QA = Path(__file__).resolve().parents[1] / "qa" / "r_manuals_dev.jsonl"
COLLECTION = "r-manuals-dev"

# Measured: hit@5 0.900, hit@10 0.933, MRR@5 0.752, unanswerable questions refused 0.929, false
# refusals 0, sources shown containing all keywords 0.833, answers with a keyword 0.15 (a 135M
# model). refusal_accuracy now counts every question (refused exactly when not answerable);
# the share of unanswerable questions refused, which it used to be, keeps its own floor.
FLOORS = {"hit@5": 0.85, "hit@10": 0.88, "mrr@5": 0.70, "refusal_accuracy": 0.8,
          "unanswerable_refused_rate": 0.8, "evidence_hit_rate": 0.70, "keyword_any_rate": 0.05}
MAX_FALSE_REFUSALS = 0.10


@pytest.fixture(scope="module")
def dev_data_dir(builtin_data_dir, manuals_dir) -> Path:
    """The five manuals the set asks about, indexed with the default settings."""
    from engine.store.indexer import Indexer, default_embedder, open_collection

    paths = AppPaths(builtin_data_dir)
    embedder = default_embedder(paths)
    manuals = sorted({manuals_dir / item.doc for item in load_qa(QA) if item.doc})
    with open_collection(paths, COLLECTION, embedder) as store:
        outcomes = [e.outcome for e in Indexer(store, embedder).run(manuals) if e.outcome]
    assert [o.status for o in outcomes] == ["ready"] * len(manuals)
    return builtin_data_dir


@pytest.mark.slow
def test_every_keyword_is_on_its_pages(manuals_dir):
    from tests.qa.check_qa import check

    assert check(QA, manuals_dir) == []


def test_the_set_is_as_large_as_promised():
    items = load_qa(QA)
    answerable = [i for i in items if i.answerable]
    assert len(answerable) >= 50
    assert len(items) - len(answerable) >= 10
    assert {i.doc for i in answerable} >= {"R-intro.pdf", "R-admin.pdf", "R-data.pdf", "R-exts.pdf", "R-FAQ.pdf"}


@pytest.mark.slow
def test_answers_on_the_development_set_meet_the_floors(dev_data_dir):
    from engine.answer.assistant import open_assistant
    from engine.evaluation.scoring import evaluate, summarize

    with open_assistant(AppPaths(dev_data_dir), COLLECTION) as assistant:
        summary = summarize(evaluate(load_qa(QA), assistant.retriever, assistant))
    print(summary)
    for metric, floor in FLOORS.items():
        assert summary[metric] >= floor, (metric, summary)
    assert summary["false_refusal_rate"] <= MAX_FALSE_REFUSALS, summary
    assert set(summary["latency_s"]) >= {"embed", "dense", "keyword", "gate", "generate", "first_token"}
