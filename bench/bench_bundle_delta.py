"""Bundles of a plant-sized collection (issue 32): what a kiosk downloads, and how long it takes
to install, the first time and after one manual is added.

    python bench/bench_bundle_delta.py --size 1000000 [--work /work/scratch/bundle-bench]

Copies bench_scale.py's collection of SIZE chunks (bench/.cache/scale) into WORK as an
administrator's and gives each of its manuals a file (they are derived text with none). Then:
version 1 is built, published to a folder source and installed by a kiosk's BundleWatcher; one
manual is added (3,000 chunks, as bench_scale's add, with a real PDF as its file), version 2 is
built and published, and the kiosk's watcher takes it. The kiosk's collection is then compared
with the administrator's (documents, dense and keyword hits). Prints the figures as JSON and
writes WORK/result.json; the bulky files are removed at the end unless --keep.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import shutil
import sqlite3
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import scale_data  # noqa: E402

from engine.paths import DB_NAME, AppPaths  # noqa: E402

NAME = "plant"
ADDED_CHUNKS = 3_000  # bench_scale's added manual
ADDED_FILE = ROOT / "tests" / ".manuals" / "gnuplot.pdf"  # 1.3 MB, ~270 pages


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--sample", type=int, default=scale_data.SAMPLE)
    parser.add_argument("--work", type=Path, default=Path("/work/scratch/bundle-bench"))
    parser.add_argument("--keep", action="store_true", help="leave WORK's files for a look")
    args = parser.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    admin = AppPaths(args.work / "admin").ensure()
    kiosk = AppPaths(args.work / "kiosk").ensure()
    source = args.work / "source"
    result = {"size": args.size, "load_before": _load()}
    try:
        result["copy_s"] = _copy_collection(scale_data_folder(args), admin.collection(NAME), args.work / "files")
        key = _keys(args.work)
        result["v1"] = _version(admin, key, source, kiosk, 1)
        result["added"] = _add_manual(admin, args)
        result["v2"] = _version(admin, key, source, kiosk, 2)
        result["same_answers"] = _view(kiosk.collection(NAME)) == _view(admin.collection(NAME))
        result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
        result["load_after"] = _load()
    finally:
        if not args.keep:
            shutil.rmtree(args.work, ignore_errors=True)
    text = json.dumps(result, indent=1)
    print(text)
    if args.keep:
        (args.work / "result.json").write_text(text)
    return 0 if result["same_answers"] else 1


def scale_data_folder(args) -> Path:
    folder = ROOT / "bench" / ".cache" / "scale" / f"n{args.size}-s{args.sample}"
    if not (folder / DB_NAME).is_file():
        sys.exit(f"{folder} is missing: build it first (python bench/bench_scale.py --sizes {args.size}).")
    return folder


def _copy_collection(cache: Path, dest: Path, files: Path) -> float:
    """The collection copied (the cache is never written), each manual given a small file."""
    started = time.perf_counter()
    shutil.copytree(cache, dest, ignore=shutil.ignore_patterns("*-wal", "*-shm", "writer.lock", "*.json"))
    files.mkdir(parents=True)
    with sqlite3.connect(dest / DB_NAME) as db:
        updates = []
        for document_id, path in db.execute("SELECT id, path FROM documents").fetchall():
            file = files / Path(path).name
            file.write_text(f"{path}\n")
            updates.append((str(file), hashlib.sha256(file.read_bytes()).hexdigest(), document_id))
        db.executemany("UPDATE documents SET path = ?, sha256 = ? WHERE id = ?", updates)
    db.close()
    _open_writer(dest).close()  # the copy's checks (and its stamp), not counted in the build
    return time.perf_counter() - started


def _open_writer(folder: Path):
    from engine.store.index_store import IndexStore

    return IndexStore.open(folder, embedder_id=None, dimension=None, create=False)


def _keys(work: Path):
    from engine.fleet.bundle import generate_keys

    return generate_keys(work / "fleet.pem")


def _version(admin: AppPaths, key, source: Path, kiosk: AppPaths, version: int) -> dict:
    """Builds, publishes and has the kiosk's watcher install `version`: the figures of each step."""
    from engine.fleet.bundle import build_bundle, public_key_text, publish_bundle
    from engine.fleet.source import open_source
    from engine.fleet.watcher import BundleWatcher

    out = admin.root / f"{NAME}-{version}.tar"
    started = time.perf_counter()
    manifest = build_bundle(admin, NAME, key, out, version=version)
    figures = {"build_s": time.perf_counter() - started, "bundle_bytes": out.stat().st_size,
               "objects": len(manifest.objects())}
    started = time.perf_counter()
    publish_bundle(out, source)
    figures["publish_s"] = time.perf_counter() - started
    out.unlink()
    watcher = BundleWatcher(kiosk, open_source(str(source)), [public_key_text(key)])
    started = time.perf_counter()
    polled = watcher.poll_once()
    watcher.close()
    if polled.outcome != "installed":
        raise SystemExit(f"version {version}: {polled}")
    folder = kiosk.collection(NAME)
    figures.update(poll_s=time.perf_counter() - started, bytes_moved=polled.bytes_moved,
                   objects_moved=polled.objects_moved, database_bytes=(folder / DB_NAME).stat().st_size,
                   install_s=_installed_seconds(kiosk))
    print(version, figures, flush=True)
    return figures


def _installed_seconds(kiosk: AppPaths) -> float:
    from engine.fleet.records import read_records

    return next(r["seconds"] for r in reversed(read_records(kiosk)) if r["action"] == "installed")


def _add_manual(admin: AppPaths, args) -> dict:
    derived = scale_data.load(ROOT / "bench" / ".cache" / "scale", args.sample)
    records, vectors = derived.manual(10**6, ADDED_CHUNKS)
    file = admin.root / ADDED_FILE.name
    shutil.copyfile(ADDED_FILE, file)
    started = time.perf_counter()
    with _open_writer(admin.collection(NAME)) as store:
        store.add_document(str(file), hashlib.sha256(file.read_bytes()).hexdigest(), file.stat().st_size,
                           0.0, "Added manual", records[-1].page, records, vectors)
    return {"chunks": len(records), "file_bytes": file.stat().st_size, "add_s": time.perf_counter() - started}


def _view(folder: Path) -> tuple:
    """Documents (file name, sha256, chunks), and the hits of 20 stored vectors and 5 words."""
    from engine.store.index_store import IndexStore

    with IndexStore.open(folder, embedder_id=None, dimension=None, read_only=True) as store:
        documents = sorted((Path(d.path).name, d.sha256, d.chunk_count) for d in store.list_documents())
        ids = store.vector_ids()
        picked = np.random.default_rng(0).choice(ids, 20, replace=False).tolist()
        vectors = store.embeddings(picked)
        dense = [store.search_dense(vectors[i], 10) for i in picked]
        keyword = [store.search_keyword(word, 10) for word in ("voltage", "battery", "driver", "plot", "error")]
    return documents, dense, keyword


def _load() -> float:
    return round(float(Path("/proc/loadavg").read_text().split()[0]), 2)


if __name__ == "__main__":
    raise SystemExit(main())
