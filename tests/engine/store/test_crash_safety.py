"""kill -9 a writing process at random moments; the collection must always come back whole.

tests/helpers/crash_writer.py adds, replaces, removes and fails documents and flushes faiss now and
then, printing a line before and after each step. Each round waits for a random number of
those lines (a condition, not a sleep), SIGKILLs the writer, and checks the collection.
"""

from __future__ import annotations

import random
import re
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from engine.paths import DB_NAME
from engine.store.index_store import IndexStore
from tests.helpers import crash_writer

REPO = Path(__file__).resolve().parents[3]
KILLS = 30
DOCS = 400  # far more steps than 30 short runs get through, so every run is killed mid-plan
WATCHDOG_S = 30


def start_writer(folder: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tests.helpers.crash_writer", str(folder), "--docs", str(DOCS)],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def run_and_kill(folder: Path, lines_before_kill: int) -> tuple[int, int]:
    """Start a writer, let it print some lines, kill -9 it. Returns (resume step, return code)."""
    writer = start_writer(folder)
    watchdog = threading.Timer(WATCHDOG_S, writer.kill)  # a hung writer fails the test, not hangs it
    watchdog.start()
    try:
        first = writer.stdout.readline()
        for _ in range(lines_before_kill):
            if writer.stdout.readline() in ("", "done\n"):
                break
        writer.send_signal(signal.SIGKILL)
        _, errors = writer.communicate(timeout=WATCHDOG_S)
    finally:
        watchdog.cancel()
        writer.kill()
        writer.wait()
    assert first.startswith("resume "), f"the writer did not start: {first!r} {errors}"
    return int(first.split()[1]), writer.returncode


def run_to_the_end(folder: Path) -> list[str]:
    result = subprocess.run([sys.executable, "-m", "tests.helpers.crash_writer", str(folder), "--docs", str(DOCS)],
                            cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def stored_chunks(folder: Path) -> tuple[dict[int, np.ndarray], set[int]]:
    """Straight from SQLite: embeddings of ready documents' chunks, and all chunk ids."""
    db = sqlite3.connect(folder / DB_NAME)
    try:
        ready = db.execute("SELECT c.id, c.embedding FROM chunks c JOIN documents d ON d.id = c.document_id"
                           " WHERE d.status != 'failed'").fetchall()
        every = {row[0] for row in db.execute("SELECT id FROM chunks")}
        db.execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('integrity-check')")  # raises if corrupt
    finally:
        db.close()
    return {i: np.frombuffer(blob, dtype=np.float32) for i, blob in ready}, every


def check_document(doc: dict) -> None:
    number = int(re.search(r"doc-(\d+)", doc.path).group(1))
    if doc.status == "failed":
        assert doc.chunk_count == 0 and "broken on purpose" in doc.error
        return
    version = int(re.search(r" v(\d+) ", doc.title).group(1))
    intended = crash_writer.document(number, version)
    assert doc.sha256 == intended.sha256
    in_title = int(re.search(r"chunks=(\d+)", doc.title).group(1))
    assert doc.chunk_count == len(intended.chunks) == in_title


def check_collection(folder: Path, rng: random.Random) -> tuple[int, dict]:
    """All the promises after a crash. Returns where the next writer will resume, and what
    opening had to do to the faiss cache."""
    with IndexStore.open(folder, embedder_id=crash_writer.EMBEDDER, dimension=crash_writer.DIM,
                         read_only=True) as store:
        assert store.quick_check() == "ok"
        documents = store.list_documents()
        for doc in documents:
            check_document(doc)
        ready, every = stored_chunks(folder)
        assert set(ready) == every  # no chunk without a ready document
        assert set(store.vector_ids().tolist()) == every
        for chunk_id in rng.sample(sorted(ready), min(3, len(ready))):
            assert store.search_dense(ready[chunk_id], 1)[0][0] == chunk_id
            code = store.chunk(chunk_id)["text"].split()[-1]
            hits = [store.chunk(i)["path"] for i, _ in store.search_keyword(code, 50)]
            assert set(hits) == {store.chunk(chunk_id)["path"]}
        return crash_writer.resume_step(store), store.open_report


@pytest.mark.slow  # 31 writer processes (about 15 s on 2 cores); `make test` runs it
def test_kill_minus_nine_at_random_moments_never_breaks_the_collection(tmp_path):
    folder = tmp_path / "collection"
    rng = random.Random(20240611)
    kills = caught_up = 0
    resume_at = 0
    for _ in range(KILLS):
        started_at, code = run_and_kill(folder, lines_before_kill=rng.randint(1, 12))
        assert started_at == resume_at  # the new run resumed exactly after the last committed step
        kills += code == -signal.SIGKILL
        next_resume, report = check_collection(folder, rng)
        caught_up += report["added"] > 0 or report["removed"] > 0
        assert next_resume >= started_at
        resume_at = next_resume
    assert kills >= 25
    assert resume_at > 0 and caught_up > 0  # some kills left faiss behind SQLite, and open fixed it

    lines = run_to_the_end(folder)
    assert lines[0] == f"resume {resume_at}" and lines[-1] == "done"
    check_collection(folder, rng)
    with IndexStore.open(folder, embedder_id=crash_writer.EMBEDDER, dimension=crash_writer.DIM) as store:
        assert store.open_report["faiss"] == "loaded" and store.open_report["added"] == 0
        faiss_file = store.stats()["faiss_file"]
        got = {d.path: (d.status, 0 if d.status == "failed" else int(d.title.split()[1][1:]))
               for d in store.list_documents()}
    assert got == crash_writer.final_state(DOCS)
    assert [p.name for p in folder.glob("vectors-*")] == [faiss_file]  # no leftovers
