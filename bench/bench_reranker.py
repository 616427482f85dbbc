#!/usr/bin/env python
"""The reranker's speed/quality curve on the development sets (issue 28).

    .venv/bin/python bench/bench_reranker.py --data-dir DIR --collection NAME \
        --model FOLDER --candidates 0 10 20 30 --tokens 128 256 [--json OUT]

For each token limit and each number of fused candidates reranked (0: no reranker), runs the
QA sets through the app's own Retriever and prints MRR@5 and hit@5 overall and per family,
and the rerank stage's p50/p95 on this machine. Scores are cached per (question, passage) for
one token limit, so the candidate counts after the largest cost little more; the latency is
measured separately, on every question, with fresh calls.

`--blend W` adds rows where the reranker's logit is blended with the fused order
(logit + W / (1 + fused position)): measured here only, the Retriever uses the logit alone.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.answer.retrieval import RetrievalSettings, Retriever  # noqa: E402
from engine.encoders.reranker import CrossEncoder  # noqa: E402
from engine.evaluation.qa import load_qa  # noqa: E402
from engine.evaluation.scoring import evaluate, percentile, summarize  # noqa: E402
from engine.paths import AppPaths  # noqa: E402
from engine.store.indexer import default_embedder, open_collection  # noqa: E402

QA = [ROOT / "tests/qa" / name for name in
      ("r_manuals_dev.jsonl", "dev_mixed.jsonl", "dev_nut.jsonl", "dev_debian_faq.jsonl")]


class CachedScores:
    """A reranker that asks the real one only for pairs it has not scored yet (the curve's
    points share most of their pairs). With `blend`, each score also gets blend / (1 + the
    pair's position), the fused order the Retriever hands the head in."""

    def __init__(self, reranker: CrossEncoder, blend: float = 0.0, scores: dict | None = None):
        self.reranker = reranker
        self.blend = blend
        self.scores: dict[tuple[str, str], float] = {} if scores is None else scores  # shared

    def predict(self, pairs):
        pairs = list(pairs)
        missing = [p for p in dict.fromkeys(pairs) if p not in self.scores]
        for pair, score in zip(missing, self.reranker.predict(missing)):
            self.scores[pair] = float(score)
        return np.array([self.scores[p] + self.blend / (1 + i) for i, p in enumerate(pairs)], np.float32)


def figures(summary: dict) -> dict:
    row = {"mrr@5": summary["mrr@5"], "hit@5": summary["hit@5"]}
    row["by_family"] = {name: {"mrr@5": f["mrr@5"], "hit@5": f["hit@5"], "answerable": f["answerable"]}
                        for name, f in summary.get("by_family", {}).items()}
    return row


def rerank_latency(store, embedder, reranker: CrossEncoder, items, candidates: int) -> dict:
    """p50/p95 of the rerank stage as the Retriever runs it, fresh calls (no cache)."""
    settings = RetrievalSettings(rerank_candidates=candidates)
    retriever = Retriever(store, embedder, reranker, settings)
    seconds = [retriever.retrieve(item.question, 5).timings_s["rerank"] for item in items]
    return {"p50_ms": round(1000 * percentile(seconds, 50)), "p95_ms": round(1000 * percentile(seconds, 95))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--collection", required=True)
    parser.add_argument("--model", type=Path, required=True, help="a cross-encoder folder")
    parser.add_argument("--candidates", type=int, nargs="+", default=[0, 10, 20, 30])
    parser.add_argument("--tokens", type=int, nargs="+", default=[128, 256])
    parser.add_argument("--blend", type=float, nargs="*", default=[])
    parser.add_argument("--latency", type=int, default=60, help="questions timed per point (0: none)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)

    paths = AppPaths.from_arg(args.data_dir)
    items = [item for path in QA for item in load_qa(path)]
    embedder = default_embedder(paths)
    rows = []
    with open_collection(paths, args.collection, embedder, read_only=True) as store:
        plain = summarize(evaluate(items, Retriever(store, embedder)))
        rows.append({"tokens": 0, "candidates": 0, "blend": 0.0, **figures(plain)})
        print(json.dumps(rows[-1]), flush=True)
        for tokens in args.tokens:
            reranker = CrossEncoder.from_folder(args.model, max_tokens=tokens, threads=args.threads).load()
            scores: dict = {}  # one token limit's scores serve every blend
            for blend in [0.0, *args.blend]:
                cached = CachedScores(reranker, blend, scores)
                for candidates in sorted((c for c in args.candidates if c), reverse=True):
                    settings = RetrievalSettings(rerank_candidates=candidates)
                    started = time.monotonic()
                    summary = summarize(evaluate(items, Retriever(store, embedder, cached, settings)))
                    row = {"tokens": tokens, "candidates": candidates, "blend": blend, **figures(summary),
                           "seconds": round(time.monotonic() - started)}
                    if args.latency and blend == 0.0:
                        row.update(rerank_latency(store, embedder, reranker, items[:args.latency], candidates))
                    rows.append(row)
                    print(json.dumps(row), flush=True)
            reranker.close()
    if args.json:
        args.json.write_text(json.dumps({"model": str(args.model), "rows": rows}, indent=1) + "\n")
    print_table(rows)
    return 0


def print_table(rows: list[dict]) -> None:
    families = sorted({name for row in rows for name in row["by_family"]})
    print("| tokens | candidates | blend | MRR@5 | hit@5 | " + " | ".join(families) + " | p50 ms | p95 ms |")
    print("|---" * (7 + len(families)) + "|")
    for row in rows:
        per = " | ".join(f"{row['by_family'][f]['mrr@5']:.3f}" for f in families)
        print(f"| {row['tokens'] or '-'} | {row['candidates'] or 'off'} | {row['blend']:g} | {row['mrr@5']:.3f} | "
              f"{row['hit@5']:.3f} | {per} | {row.get('p50_ms', '')} | {row.get('p95_ms', '')} |")


if __name__ == "__main__":
    sys.exit(main())
