"""Index kinds side by side on derived vectors, in memory (bench_scale.py --sweep N): what the
approximate index is and why. Each kind is trained, filled, and searched one query at a time;
its candidates (2 x 10) are re-scored exactly from the float vectors, as IndexStore does from
SQLite, and compared with exact search's top 10. HNSW cannot remove vectors (faiss has no
remove_ids for it), which a collection needs when a manual is replaced; it is measured for
the record. Sizes are faiss's serialized bytes (what the app holds in memory).
"""

from __future__ import annotations

import math
import sys
import time

import faiss
import numpy as np

K = 10
CANDIDATES = 2 * K
ADDED = 3_000


def sweep(derived, size: int, queries: np.ndarray) -> str:
    vectors = _vectors(derived, size)
    truth = _exact_top(vectors, queries)
    root = int(math.sqrt(size))
    rows = [_flat(vectors, queries)]
    for spec, probes in ((f"IVF{root},SQ8", (8, 16, 32, 64)), (f"IVF{4 * root},SQ8", (16, 32, 64, 128, 256)),
                         (f"IVF{4 * root},PQ48", (64, 128)), ("HNSW32,SQ8", (64, 128))):
        if spec.startswith("HNSW") and size > 300_000:
            continue  # hours to build on 2 cores; measured at a smaller size
        rows += _approximate(spec, probes, vectors, queries, truth, derived)
        print("\n".join(rows), file=sys.stderr, flush=True)  # progress: a kind takes minutes
    header = (f"Index kinds on {size:,} derived vectors (384-d), {len(queries)} real questions, one at a time, "
              f"{faiss.omp_get_max_threads()} threads; recall@10 after re-scoring {CANDIDATES} candidates exactly\n\n"
              "| index | search | p50 ms | p95 ms | recall@10 | MB | train s | fill s | add 3,000 s |\n"
              "|---|---|---|---|---|---|---|---|---|\n")
    return header + "\n".join(rows) + "\n"


def _vectors(derived, size: int) -> np.ndarray:
    parts, count, number = [], 0, 0
    while count < size:
        _, block = derived.manual(number, min(650, size - count))
        parts.append(block.astype(np.float32))
        count += len(block)
        number += 1
    return np.ascontiguousarray(np.concatenate(parts))


def _exact_top(vectors: np.ndarray, queries: np.ndarray) -> np.ndarray:
    scores = np.concatenate([queries @ vectors[i:i + 200_000].T for i in range(0, len(vectors), 200_000)], axis=1)
    return np.argsort(-scores, axis=1)[:, :K]


def _flat(vectors: np.ndarray, queries: np.ndarray) -> str:
    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(vectors)
    times = _timed(lambda q: index.search(q, K), queries)
    mb = vectors.nbytes / 1e6
    return f"| exact (flat) | all | {times[0]:.1f} | {times[1]:.1f} | 1.000 | {mb:.0f} | - | - | - |"


def _approximate(spec, probes, vectors, queries, truth, derived) -> list[str]:
    index = faiss.index_factory(vectors.shape[1], spec, faiss.METRIC_INNER_PRODUCT)
    ivf = faiss.try_extract_index_ivf(index)
    training = min(len(vectors), 40 * ivf.nlist if ivf else 100_000)
    started = time.perf_counter()
    if not index.is_trained:
        index.train(vectors[np.random.default_rng(0).choice(len(vectors), training, replace=False)])
    train_s = time.perf_counter() - started
    started = time.perf_counter()
    index.add(vectors)
    fill_s = time.perf_counter() - started
    mb = len(faiss.serialize_index(index)) / 1e6
    _, extra = derived.manual(10**6, ADDED)
    started = time.perf_counter()
    index.add(extra.astype(np.float32))
    add_s = time.perf_counter() - started
    if ivf:
        index.remove_ids(faiss.IDSelectorRange(len(vectors), len(vectors) + ADDED))
    rows = []
    for probe in probes:
        params = (faiss.SearchParametersHNSW(efSearch=probe) if spec.startswith("HNSW")
                  else faiss.SearchParametersIVF(nprobe=probe))
        found = []

        def search(q):
            _, ids = index.search(q, CANDIDATES, params=params)
            ids = ids[0][(ids[0] >= 0) & (ids[0] < len(vectors))]
            found.append(ids[np.argsort(-(vectors[ids] @ q[0]))][:K])

        times = _timed(search, queries)
        recall = np.mean([len(set(f[:K]) & set(t)) / K for f, t in zip(found[-len(queries):], truth)])
        what = f"efSearch {probe}" if spec.startswith("HNSW") else f"nprobe {probe}"
        rows.append(f"| {spec} | {what} | {times[0]:.1f} | {times[1]:.1f} | {recall:.3f} | {mb:.0f} | "
                    f"{train_s:.0f} | {fill_s:.0f} | {add_s:.2f} |")
    return rows


def _timed(search, queries: np.ndarray) -> tuple[float, float]:
    for q in queries[:10]:
        search(q.reshape(1, -1))
    times = []
    for q in queries:
        started = time.perf_counter()
        search(q.reshape(1, -1))
        times.append(1000 * (time.perf_counter() - started))
    return float(np.percentile(times, 50)), float(np.percentile(times, 95))
