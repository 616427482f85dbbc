#!/usr/bin/env python
"""Lead sentences (issue 13): which weighting picks the manual's sentences that answer a question.

    python bench/bench_lead.py --data /tmp/lead-data          # index once, then the table
    python bench/bench_lead.py --data /tmp/lead-data --index-only

Indexes the manuals of the development sets (tests/qa/r_manuals_dev.jsonl, dev_mixed.jsonl)
into the data dir given (reused on later runs: the indexer skips unchanged files), then for
every answerable question whose right page was retrieved runs retrieval and the lead
selection only (no LLM) under a few weightings. lead_hit: all the question's keywords appear
in the lead sentences (case and spacing ignored); lead_any: at least one does. Also the time
of retrieval + lead, p50 and p95. Needs tests/.manuals (tests/fetch_manuals.sh).

Measured (2 shared cores; 106 questions whose right page was in the top 4), lead_hit / lead_any:
    first sentence of the top passage       0.08 / 0.16
    cosine only                             0.36 / 0.56
    terms only                              0.34 / 0.55
    cosine 1, terms 0.5, code 0.2, within 0.25 (chosen): R 0.44, docbook-xsl 0.64, gnuplot 0.50,
        kicad 0.50, lilypond 0.75; overall 0.53 / 0.75, 2.65 sentences a lead
    retrieval + lead p50 0.18-0.29 s, p95 0.32-0.68 s (the machine was shared); quiet, on 50
    questions: retrieval 0.009 s, gate 0.001 s, lead 0.159 s p50 (0.327 s p95), so the lead is
    shown 0.17 s p50 (0.34 s p95) after Enter; no reranker imported
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.answer.lead import (  # noqa: E402
    DEFAULT_WEIGHTS,
    LeadWeights,
    add_cosines,
    candidates,
    choose,
    lead_sentences,
    shortlist,
)
from engine.answer.retrieval import Retriever  # noqa: E402
from engine.evaluation.qa import load_qa  # noqa: E402
from engine.evaluation.scoring import first_hit_rank, percentile  # noqa: E402
from engine.paths import AppPaths  # noqa: E402
from engine.store.indexer import Indexer, default_embedder, open_collection  # noqa: E402

SETS = (ROOT / "tests" / "qa" / "r_manuals_dev.jsonl", ROOT / "tests" / "qa" / "dev_mixed.jsonl")
MANUALS = ROOT / "tests" / ".manuals"
PASSAGES = 4  # AssistantSettings.passages: the lead reads what the model would get


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="data dir to index into (reused)")
    parser.add_argument("--index-only", action="store_true")
    parser.add_argument("--limit", type=int, default=0, help="questions per family, 0: all")
    parser.add_argument("--verbose", action="store_true", help="print each lead (default weights)")
    args = parser.parse_args()
    items = _items(args.limit)
    paths = AppPaths(args.data).ensure()
    embedder = default_embedder(paths)
    _index(paths, embedder, items)
    if args.index_only:
        return 0
    with open_collection(paths, embedder=embedder, read_only=True) as store:
        _table(items, Retriever(store, embedder), embedder)
    return 0


def _items(limit: int) -> list[tuple[str, object]]:
    """(family, item) for every question of the sets; the R set has no family field."""
    found, counts = [], {}
    for path in SETS:
        families = [json.loads(line).get("family") for line in path.read_text().splitlines() if line.strip()]
        for family, item in zip(families, load_qa(path)):
            family = family or "R"
            counts[family] = counts.get(family, 0) + 1
            if not limit or counts[family] <= limit:
                found.append((family, item))
    return found


def _index(paths: AppPaths, embedder, items) -> None:
    manuals = sorted({MANUALS / item.doc for _, item in items if item.doc})
    start = time.perf_counter()
    with open_collection(paths, embedder=embedder) as store:
        for event in Indexer(store, embedder).run(manuals):
            if event.outcome:
                print(f"{event.outcome.status:8} {Path(event.outcome.path).name} "
                      f"({time.perf_counter() - start:.0f} s)", flush=True)


def _w(cosine, terms, rank=0.1, heading=0.1, code=0.0, within=0.08, follow=False) -> LeadWeights:
    return LeadWeights(cosine, terms, rank, heading, code, within, follow)


WEIGHTINGS = {  # cosine, terms, rank, heading, code; second and third quotes within ...
    "first sentence": None,  # the top passage's first sentence: what measuring must beat
    "cosine only": _w(1.0, 0.0, 0.0, 0.0),
    "terms only": _w(0.0, 1.0, heading=0.0),
    "c1 t0.5": _w(1.0, 0.5),
    "c0.5 t1": _w(0.5, 1.0),
    "c1 t0.5 code0.2": _w(1.0, 0.5, code=0.2),
    "c1 t0.5 code0.2 within0.15": _w(1.0, 0.5, code=0.2, within=0.15),
    "c1 t0.5 code0.2 within0.15 +next": _w(1.0, 0.5, code=0.2, within=0.15, follow=True),
    "c1 code0.2 within0.25": _w(1.0, 0.0, 0.0, 0.0, code=0.2, within=0.25),
    "c1 t0.5 r0 h0 code0.2 within0.25": _w(1.0, 0.5, 0.0, 0.0, code=0.2, within=0.25),
    "c0.5 t1 code0.2 within0.25": _w(0.5, 1.0, code=0.2, within=0.25),
    "c1 t0.5 code0.2 within0.25 (default)": DEFAULT_WEIGHTS,
}


def _table(items, retriever: Retriever, embedder) -> None:
    hits: dict[str, dict[str, list[tuple[bool, bool]]]] = {name: {} for name in WEIGHTINGS}
    times, sizes = [], []
    frequency = _cached(retriever.store.prefix_frequency)
    for family, item in items:
        if not item.answerable or not item.keywords:
            continue
        start = time.perf_counter()
        passages = retriever.search(item.question, PASSAGES)
        lead_sentences(item.question, passages, embedder=embedder,
                       frequency=retriever.store.prefix_frequency)  # timed as the product runs it
        times.append(time.perf_counter() - start)
        if first_hit_rank(item, passages) is None:
            continue  # the right page was not retrieved: no lead could quote it
        found = candidates(item.question, passages, frequency)
        add_cosines(found, item.question, None, embedder)  # all of them once; each weighting
        for name, weights in WEIGHTINGS.items():           # takes its own shortlist of them
            quotes = _first_sentence(passages) if weights is None else \
                choose(shortlist(found, weights), weights, 3)
            hits[name].setdefault(family, []).append(_hit(item, quotes))
            if weights is DEFAULT_WEIGHTS:
                sizes.append(len(quotes))
                _show(item, quotes, hits[name][family][-1])
    families = sorted({f for by_family in hits.values() for f in by_family})
    print("\nlead_hit (all keywords in the lead) / lead_any (one at least), right page retrieved")
    print(f"{'weighting':<38}" + "".join(f"{f:>16}" for f in families) + f"{'overall':>16}")
    for name, by_family in hits.items():
        cells = [_rates(by_family.get(f, [])) for f in families]
        cells.append(_rates([h for f in families for h in by_family.get(f, [])]))
        print(f"{name:<38}" + "".join(f"{c:>16}" for c in cells))
    print("questions per family: " + ", ".join(f"{f} {len(hits['terms only'].get(f, []))}" for f in families))
    print(f"retrieval + lead: p50 {percentile(times, 50):.3f} s, p95 {percentile(times, 95):.3f} s; "
          f"sentences per lead: mean {sum(sizes) / max(1, len(sizes)):.2f}")


def _cached(function):
    known: dict = {}
    return lambda key: known[key] if key in known else known.setdefault(key, function(key))


def _first_sentence(passages):
    from engine.answer.lead import _candidates

    for number, passage in enumerate(passages[:1], 1):
        return [c.quote() for c in _candidates(number, passage)[:1]]
    return []


def _hit(item, quotes) -> tuple[bool, bool]:
    text = " ".join(" ".join(q.text for q in quotes).split()).casefold()
    found = [" ".join(k.split()).casefold() in text for k in item.keywords]
    return all(found), any(found)


def _show(item, quotes, hit) -> None:
    if "--verbose" in sys.argv:
        print(f"{'HIT ' if hit[0] else 'miss'} {item.id} {item.keywords}: "
              + " | ".join(q.text[:160] for q in quotes), flush=True)


def _rates(found: list[tuple[bool, bool]]) -> str:
    if not found:
        return "-"
    return f"{sum(a for a, _ in found) / len(found):.2f} / {sum(b for _, b in found) / len(found):.2f}"


if __name__ == "__main__":
    raise SystemExit(main())
