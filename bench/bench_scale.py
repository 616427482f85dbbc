#!/usr/bin/env python
"""A plant's manuals in one collection (issue 32): dense search, keyword search and the store's
reads at 100k, 1M (and 3M) chunks, side by side with exact search.

    python bench/bench_scale.py                       # 100k and 1M: table on stdout, section in docs/benchmarks.md
    python bench/bench_scale.py --sizes 100000,1000000,3000000
    python bench/bench_scale.py --sweep 1000000       # index kinds side by side, vectors only (why IVF-SQ8)
    python bench/bench_scale.py --no-doc
    python bench/bench_scale.py --report --sizes 100000,1000000   # the last run's figures again

The collections are made by bench/scale_data.py (real manual text, real embeddings for the seed
manuals, a sample of shuffled variants and the questions; the rest derived: read its docstring).
Each is built through IndexStore.add_document, manual by manual, so its dense index is the one
the app would have built (exact, then approximate from the policy's size, retrained as it grew),
and kept in bench/.cache/scale/n<N> (about 3 GB a million chunks; delete it to build again).
Each measurement runs in a child process, so that its RSS is its own:
  search   the collection opened read-only as the app opens it: open time, RSS, dense search
           (k=10 and k=40, one query at a time), recall@10 against exact, keyword search and
           the store's reads for fusion (the Retriever's stages), docs list
  exact    the same collection with an exact (flat) index built from SQLite: what it was before
  rebuild  the approximate index trained and filled from SQLite (the cost of a retrain)
  add      a writer adds one 200-page manual (3,000 chunks, vectors ready), flushes, removes it
The machine is shared and noisy: read the columns of one run as ratios.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import scale_data  # noqa: E402
from benchdoc import update_section  # noqa: E402

CACHE = ROOT / "bench" / ".cache" / "scale"
DOC = ROOT / "docs" / "benchmarks.md"
HEADING = "## A plant's manuals in one collection (issue 32)"
SIZES = (100_000, 1_000_000)
ADDED_CHUNKS = 3_000  # a 200-page manual is ~650 chunks at the seed manuals' 3.3 a page: 3,000 is a dense one
WARM_UP = 10


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--sweep", type=int, help="compare index kinds on this many derived vectors")
    parser.add_argument("--sample", type=int, default=scale_data.SAMPLE, help="shuffled variants embedded for real")
    parser.add_argument("--keyword-questions", type=int, default=0,
                        help="time keyword search and the Retriever on the first N questions only (0: all)")
    parser.add_argument("--no-doc", action="store_true", help="print only; leave docs/benchmarks.md alone")
    parser.add_argument("--report", action="store_true", help="render the figures the last run left in the cache")
    parser.add_argument("--children", default="search,exact,rebuild,add",
                        help="which measurements to run again (the others' last figures are reported)")
    parser.add_argument("--budget-shares", help="retrieval quality on the seed manuals with the keyword "
                        "budget at these shares of the collection, e.g. 0,0.06 (0: no budget)")
    parser.add_argument("--child", nargs=3, metavar=("KIND", "FOLDER", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return _child(*args.child, sample=args.sample, keyword_questions=args.keyword_questions)
    if args.budget_shares:
        print(_budget_quality([float(share) for share in args.budget_shares.split(",")]))
        return 0
    derived = _derived(args.sample)
    if args.sweep:
        from scale_sweep import sweep

        table = sweep(derived, args.sweep, _queries()[1])
        (CACHE / f"sweep-{args.sweep}-s{args.sample}.md").write_text(table)
        print(table)
        return 0
    sizes = [int(size) for size in args.sizes.split(",")]
    if args.report:
        results = [_assembled(CACHE / f"n{size}-s{args.sample}", size) for size in sizes]
    else:
        results = [_measure(derived, size, args.keyword_questions, args.children.split(",")) for size in sizes]
    text = _render(results, derived)
    print(text)
    if not args.no_doc:
        update_section(DOC, HEADING, text)
    return 0


def _budget_quality(shares: list[float]) -> str:
    """hit@5 and MRR@5 of the 268 questions over the 15 seed manuals, with the keyword search's
    row budget (RetrievalSettings.keyword_rows) set to each share of the collection: what the
    budget costs in ranking where it binds at the same share of a larger collection."""
    from engine.answer.retrieval import RetrievalSettings, Retriever
    from engine.evaluation.qa import load_qa
    from engine.evaluation.scoring import evaluate, summarize
    from engine.paths import AppPaths
    from engine.store.indexer import default_embedder, open_collection

    items = [item for path in sorted((ROOT / "tests" / "qa").glob("*.jsonl")) for item in load_qa(path)]
    paths = AppPaths(CACHE / "seed").ensure()
    embedder = default_embedder(paths)
    out = ["| keyword budget, share of the chunks | rows | hit@5 | MRR@5 |", "|---|---|---|---|"]
    with open_collection(paths, embedder=embedder, read_only=True) as store:
        total = store.counted_chunks()
        for share in shares:
            rows = int(share * total) if share else 10**12
            retriever = Retriever(store, embedder, settings=RetrievalSettings(keyword_rows=rows))
            summary = summarize(evaluate(items, retriever))
            out.append(f"| {share or 'none'} | {rows if share else '-'} | {summary['hit@5']:.3f} | "
                       f"{summary['mrr@5']:.3f} |")
    return "\n".join(out)


def _derived(size: int) -> scale_data.Derived:
    from engine.paths import AppPaths
    from engine.store.indexer import default_embedder

    CACHE.mkdir(parents=True, exist_ok=True)
    embedder = default_embedder(AppPaths(CACHE / "models").ensure())
    seed = scale_data.seed(CACHE, embedder)
    sample = scale_data.sample(CACHE, seed, size, embedder)
    scale_data.queries(CACHE, embedder)
    embedder.close()
    return scale_data.Derived(seed, sample, scale_data.Noise(seed, sample))


def _queries() -> tuple[list[str], np.ndarray]:
    return scale_data.queries(CACHE, None)


# -- building ----------------------------------------------------------------------------------


def _collection(derived: scale_data.Derived, size: int) -> tuple[Path, dict]:
    """The collection of `size` chunks, built once (its build figures kept beside it); a build
    that was stopped carries on from its last manual."""
    folder = CACHE / f"n{size}-s{len(derived.sample.base)}"
    record = folder / "built.json"
    if not record.is_file():
        record.write_text(json.dumps(_build(derived, folder, size)))
    return folder, json.loads(record.read_text())


def _build(derived: scale_data.Derived, folder: Path, size: int) -> dict:
    import logging

    from engine.store.index_store import IndexStore

    rebuilds = _rebuild_log()
    logging.getLogger("engine.store.index_store").addHandler(rebuilds)
    logging.getLogger("engine.store.index_store").setLevel(logging.INFO)
    progress = folder / "building.json"
    done = json.loads(progress.read_text()) if progress.is_file() else {"build_s": 0.0, "rebuilds": []}
    started = time.perf_counter() - done["build_s"]
    with IndexStore.open(folder, embedder_id=scale_data.embedder_id(CACHE), dimension=derived.seed.vectors.shape[1]) as store:
        count, number = store.stats()["chunks"], len(store.list_documents())
        resumed_at = count
        while count < size:
            count += scale_data.add_manual(store, derived, number, min(scale_data.CHUNKS_PER_MANUAL, size - count))
            number += 1
            if number % 100 == 0:
                done = {"build_s": time.perf_counter() - started, "rebuilds": done["rebuilds"] + rebuilds.take()}
                progress.write_text(json.dumps(done))
                print(f"  n{size}: {count} chunks, {done['build_s']:.0f} s", flush=True)
    return {"chunks": count, "manuals": number, "build_s": time.perf_counter() - started, "resumed_at": resumed_at,
            "rebuilds": done["rebuilds"] + rebuilds.take(), "database_bytes": _size(folder / "collection.sqlite3")}


def _rebuild_log():
    """A logging handler keeping the store's "dense index ... rebuilt" lines."""
    import logging

    class Lines(logging.Handler):
        def __init__(self):
            super().__init__()
            self.lines: list[str] = []

        def emit(self, record) -> None:
            if "rebuilt as" in record.msg:
                self.lines.append(record.getMessage())

        def take(self) -> list[str]:
            taken, self.lines = self.lines, []
            return taken

    return Lines()


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


# -- measuring ---------------------------------------------------------------------------------


def _measure(derived: scale_data.Derived, size: int, keyword_questions: int, children: list[str]) -> dict:
    folder, built = _collection(derived, size)
    print(f"n{size}: built ({built['build_s']:.0f} s); measuring", flush=True)
    options = ["--sample", str(len(derived.sample.base)), "--keyword-questions", str(keyword_questions)]
    for kind in children:
        if kind in ("exact", "rebuild"):
            with _hidden_index(folder):
                _run_child(kind, folder, options)
        else:
            _run_child(kind, folder, options)
    return _assembled(folder, size)


def _assembled(folder: Path, size: int) -> dict:
    """One size's figures from what its build and its children wrote."""
    result = {"size": size, "built": json.loads((folder / "built.json").read_text())}
    for kind in ("search", "exact", "rebuild", "add"):
        path = CACHE / f"{folder.name}-{kind}.json"
        result[kind] = json.loads(path.read_text()) if path.is_file() else {}
    for k in (10, 40):
        pairs = zip(result["search"][f"top{k}"], result["exact"][f"top{k}"])
        result[f"recall{k}"] = float(np.mean([len(set(a) & set(b)) / max(1, len(b)) for a, b in pairs]))
    return result


class _hidden_index:
    """The faiss file renamed for a while: a reader then builds its index from SQLite."""

    def __init__(self, folder: Path):
        self.files = list(folder.glob("vectors-*.faiss"))

    def __enter__(self):
        for path in self.files:
            path.rename(path.with_name(path.name + ".hidden"))

    def __exit__(self, *exc):
        for path in self.files:
            path.with_name(path.name + ".hidden").rename(path)


def _run_child(kind: str, folder: Path, options: list[str]) -> None:
    out = CACHE / f"{folder.name}-{kind}.json"
    out.unlink(missing_ok=True)
    subprocess.run([sys.executable, __file__, *options, "--child", kind, str(folder), str(out)], check=True)


def _child(kind: str, folder: str, out: str, sample: int, keyword_questions: int) -> int:
    from engine.store.index_store import IndexStore
    from engine.store.vectors import IndexPolicy

    folder = Path(folder)
    started = time.perf_counter()
    if kind == "add":
        result = _adding(folder, sample)
    else:
        policy = IndexPolicy(approximate_from=10**12) if kind == "exact" else None
        with IndexStore.open(folder, embedder_id=None, dimension=None, read_only=True, policy=policy) as store:
            result = {"open_s": time.perf_counter() - started, "open_report": store.open_report,
                      "stats": {k: v for k, v in store.stats().items() if k != "open_report"},
                      "rss_open": _rss("VmRSS")}
            if kind != "rebuild":
                result.update(_searching(store, kind == "search", keyword_questions))
    result["rss"], result["rss_peak"] = _rss("VmRSS"), _rss("VmHWM")
    if kind == "search":  # after the RSS: the first open after a change checks the database, the next not
        started = time.perf_counter()
        IndexStore.open(folder, embedder_id=None, dimension=None, read_only=True).close()
        result["reopen_s"] = time.perf_counter() - started
    Path(out).write_text(json.dumps(result))
    return 0


def _rss(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    return 0


def _searching(store, everything: bool, keyword_questions: int) -> dict:
    texts, vectors = _queries()
    result = {}
    for k in (10, 40):
        for vector in vectors[:WARM_UP]:
            store.search_dense(vector, k)
        times, tops = [], []
        for vector in vectors:
            started = time.perf_counter()
            hits = store.search_dense(vector, k)
            times.append(time.perf_counter() - started)
            tops.append([chunk_id for chunk_id, _ in hits])
        result[f"dense{k}_ms"], result[f"top{k}"] = _percentiles(times), tops
    if everything:
        count = keyword_questions or len(texts)
        result.update(_retrieving(store, texts[:count], vectors[:count]))
        result["keyword_questions"] = count
        started = time.perf_counter()
        documents = store.list_documents()
        result["list_documents_ms"], result["documents"] = 1000 * (time.perf_counter() - started), len(documents)
    return result


def _retrieving(store, texts: list[str], vectors: np.ndarray) -> dict:
    """The Retriever's stages on each question (no reranker), and FTS5 alone."""
    from engine.answer.query import Query
    from engine.answer.retrieval import PREFIX_MIN, Retriever

    retriever = Retriever(store, embedder=None)
    stages: dict[str, list[float]] = {"terms": [], "fts5": []}
    for text, vector in zip(texts, vectors):
        started = time.perf_counter()
        query = replace(Query.of(text, store.prefix_frequency), vector=vector)
        stages["terms"].append(time.perf_counter() - started)
        exact = list(query.code) + [t for t in query.terms if len(t) < PREFIX_MIN]
        started = time.perf_counter()
        store.search_keyword(" ".join(exact), 40, [t for t in query.terms if len(t) >= PREFIX_MIN])
        stages["fts5"].append(time.perf_counter() - started)
        result = retriever.retrieve(query, k=5)
        for stage, seconds in result.timings_s.items():
            stages.setdefault(stage, []).append(seconds)
        stages.setdefault("retrieve", []).append(sum(result.timings_s.values()) + stages["terms"][-1])
    return {f"{stage}_ms": _percentiles(times) for stage, times in stages.items()}


def _adding(folder: Path, sample: int) -> dict:
    from engine.store.index_store import IndexStore

    derived = scale_data.load(CACHE, sample)
    records, vectors = derived.manual(10**6, ADDED_CHUNKS)
    started = time.perf_counter()
    with IndexStore.open(folder, embedder_id=None, dimension=None) as store:
        result = {"open_s": time.perf_counter() - started, "lists_before": store.stats()["index_lists"]}
        path = "/plant/added-manual.pdf"
        started = time.perf_counter()
        store.add_document(path, "added", 1, 0.0, "Added manual", records[-1].page, records, vectors)
        result["add_s"] = time.perf_counter() - started
        started = time.perf_counter()
        store.flush()
        result["flush_s"] = time.perf_counter() - started
        result["lists_after"] = store.stats()["index_lists"]
        started = time.perf_counter()
        store.remove_document(path)
        store.flush()
        result["remove_s"] = time.perf_counter() - started
    return result


def _percentiles(seconds: list[float]) -> dict:
    ms = 1000 * np.asarray(seconds)
    return {"p50": float(np.percentile(ms, 50)), "p95": float(np.percentile(ms, 95))}


# -- the report -------------------------------------------------------------------------------


def _render(results: list[dict], derived: scale_data.Derived) -> str:
    from scale_report import render

    sweeps = sorted(CACHE.glob("sweep-*.md"), key=lambda path: path.stat().st_mtime)
    sweep = ""
    if sweeps:
        sample = sweeps[-1].stem.rsplit("-s", 1)[-1]
        sweep = f"(bench_scale.py --sweep, run with a noise model from {int(sample):,} real variants)\n\n"
        sweep += sweeps[-1].read_text()
    return render(results, derived, ADDED_CHUNKS, sweep)


if __name__ == "__main__":
    sys.exit(main())
