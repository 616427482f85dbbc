#!/usr/bin/env python
"""The lead (issues 13, 27): which units and weighting show the manual's words that answer a question.

    python bench/bench_lead.py --data DIR --collection NAME        # the table (an indexed collection)
    python bench/bench_lead.py --data DIR --collection NAME --verbose

For every answerable question of the development sets (tests/qa/*.jsonl) whose right page was
retrieved, runs retrieval and the lead only (no LLM) under a few weightings and budgets of what
is shown with a unit (sentences.SHOW_CHARS). lead_hit: all the question's keywords appear in
what the lead shows (case and spacing ignored); lead_any: at least one does; chars: the
characters the lead shows (all its quotes), mean; first: lead_hit of the first quote alone.
Also the time of retrieval + lead, p50 and p95. Build the collection with `offline-assistant-cli
index --data-dir DIR --collection NAME` over the manuals the sets name (tests/fetch_manuals.sh).

Measured: docs/benchmarks.md, "The lead from units" (issue 27).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.answer import sentences  # noqa: E402
from engine.answer.lead import DEFAULT_WEIGHTS, LeadWeights, add_cosines, candidates, choose, shortlist  # noqa: E402
from engine.answer.retrieval import Retriever  # noqa: E402
from engine.evaluation.qa import load_qa  # noqa: E402
from engine.evaluation.scoring import first_hit_rank, percentile  # noqa: E402
from engine.paths import AppPaths  # noqa: E402
from engine.store.indexer import default_embedder, open_collection  # noqa: E402

SETS = sorted((ROOT / "tests" / "qa").glob("*.jsonl"))
PASSAGES = 4  # AssistantSettings.passages: the lead reads what the model would get


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="the data dir of the collection")
    parser.add_argument("--collection", default="default")
    parser.add_argument("--limit", type=int, default=0, help="questions per family, 0: all")
    parser.add_argument("--verbose", action="store_true", help="print each lead (default weights)")
    parser.add_argument("--sets", type=Path, nargs="+", default=SETS,
                        help="question sets (default: the development sets, tests/qa/*.jsonl)")
    args = parser.parse_args()
    items = _items(args.sets, args.limit)
    paths = AppPaths(args.data)
    embedder = default_embedder(paths)
    with open_collection(paths, args.collection, embedder, read_only=True) as store:
        _table(items, Retriever(store, embedder), embedder, args.verbose)
    return 0


def _items(sets: list[Path], limit: int) -> list[tuple[str, object]]:
    """(family, item) for every question of the sets; the R set has no family field."""
    found, counts = [], {}
    for path in sets:
        families = [json.loads(line).get("family") for line in path.read_text().splitlines() if line.strip()]
        for family, item in zip(families, load_qa(path)):
            family = family or "r"
            counts[family] = counts.get(family, 0) + 1
            if not limit or counts[family] <= limit:
                found.append((family, item))
    return found


def _w(cosine, terms, rank=0.1, heading=0.1, code=0.2, within=0.25) -> LeadWeights:
    return LeadWeights(cosine, terms, rank, heading, code, within)


WEIGHTINGS = {  # (weights, quotes at most, SHOW_CHARS)
    "terms only": (_w(0.0, 1.0, heading=0.0), 3, 320),
    "cosine only": (_w(1.0, 0.0, 0.0, 0.0, 0.0), 3, 320),
    "default, 1 quote": (DEFAULT_WEIGHTS, 1, 320),
    "default, 2 quotes": (DEFAULT_WEIGHTS, 2, 320),
    "default, within 0.15": (_w(1.0, 0.5, within=0.15), 3, 320),
    "default, shown alone (0)": (DEFAULT_WEIGHTS, 3, 0),
    "default, shown within 480": (DEFAULT_WEIGHTS, 3, 480),
    "default (3 quotes, 320)": (DEFAULT_WEIGHTS, 3, 320),
}


def _table(items, retriever: Retriever, embedder, verbose: bool) -> None:
    rows: dict[str, dict[str, list[tuple[bool, bool, int, bool]]]] = {name: {} for name in WEIGHTINGS}
    times = []
    for family, item in items:
        if not item.answerable or not item.keywords:
            continue
        start = time.perf_counter()
        query = retriever.query(item.question)
        passages = retriever.search(query, PASSAGES)
        cached = _Cached(embedder)
        _lead(query, passages, cached, DEFAULT_WEIGHTS, 3, 320)  # timed as the product runs it
        times.append(time.perf_counter() - start)
        if first_hit_rank(item, passages) is None:
            continue  # the right page was not retrieved: no lead could quote it
        for name, (weights, limit, show) in WEIGHTINGS.items():
            quotes = _lead(query, passages, cached, weights, limit, show)
            rows[name].setdefault(family, []).append(_hit(item, quotes))
            if verbose and name.startswith("default (3"):
                _show(item, quotes, rows[name][family][-1])
    families = sorted({f for by_family in rows.values() for f in by_family})
    print("\nlead_hit / lead_any / chars shown (mean) / first quote's lead_hit; right page retrieved")
    print(f"{'lead':<28}" + "".join(f"{f:>24}" for f in families) + f"{'overall':>24}")
    for name, by_family in rows.items():
        cells = [_rates(by_family.get(f, [])) for f in families]
        cells.append(_rates([h for f in families for h in by_family.get(f, [])]))
        print(f"{name:<28}" + "".join(f"{c:>24}" for c in cells))
    print("questions per family: " + ", ".join(f"{f} {len(rows['terms only'].get(f, []))}" for f in families))
    print(f"retrieval + lead: p50 {percentile(times, 50):.3f} s, p95 {percentile(times, 95):.3f} s")


class _Cached:
    """The embedder, each text embedded once for all the weightings of a run."""

    def __init__(self, embedder):
        self.embedder, self.known = embedder, {}

    def encode_documents(self, texts):
        import numpy as np

        new = [t for t in dict.fromkeys(texts) if t not in self.known]
        if new:
            self.known.update(zip(new, self.embedder.encode_documents(new)))
        return np.stack([self.known[t] for t in texts])


def _lead(query, passages, embedder, weights: LeadWeights, limit: int, show: int):
    saved, sentences.SHOW_CHARS = sentences.SHOW_CHARS, show
    try:
        found = shortlist(candidates(query, passages), weights)
        if weights.cosine:
            add_cosines(found, query.vector, embedder)
        return choose(found, weights, limit)
    finally:
        sentences.SHOW_CHARS = saved


def _hit(item, quotes) -> tuple[bool, bool, int, bool]:
    def has(text: str) -> list[bool]:
        text = " ".join(text.split()).casefold()
        return [" ".join(k.split()).casefold() in text for k in item.keywords]

    found = has(" ".join(q.text for q in quotes))
    first = has(quotes[0].text) if quotes else [False]
    return all(found), any(found), sum(len(q.text) for q in quotes), all(first)


def _show(item, quotes, hit) -> None:
    print(f"{'HIT ' if hit[0] else 'miss'} {item.id} {item.keywords}: "
          + " || ".join(f"[{q.kind}] {q.text[:200]}" for q in quotes), flush=True)


def _rates(found: list[tuple[bool, bool, int, bool]]) -> str:
    if not found:
        return "-"
    n = len(found)
    return (f"{sum(h[0] for h in found) / n:.2f}/{sum(h[1] for h in found) / n:.2f}/"
            f"{sum(h[2] for h in found) / n:.0f}/{sum(h[3] for h in found) / n:.2f}")


if __name__ == "__main__":
    raise SystemExit(main())
