"""The dense index by size (issue 32): exact below a size, approximate (IVF) above it with its
candidates re-scored exactly; rebuilt by the writer as the collection grows and shrinks, and
never left half-written by a crash. The threshold is made small here (IndexPolicy)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from engine.store.index_store import IndexStore
from engine.store.vectors import APPROXIMATE, EXACT, IndexPolicy
from engine.types import Chunk

EMBEDDER = "test-embedder"
DIM = 16
SMALL = IndexPolicy(approximate_from=200)  # approximate from 200 chunks, exact again under 100
REPO = Path(__file__).resolve().parents[3]


def vectors(count: int, seed: int) -> np.ndarray:
    matrix = np.random.default_rng(seed).standard_normal((count, DIM)).astype(np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def add(store: IndexStore, number: int, count: int = 50) -> None:
    """Document `number` with `count` chunks and random vectors (the same for the same number)."""
    chunks = [Chunk(page=i + 1, start=0, end=9, text=f"chunk {i} of {number}") for i in range(count)]
    store.add_document(f"/docs/{number}.pdf", f"sha-{number}", size=1, mtime=1.0, title=str(number),
                       page_count=count, chunks=chunks, embeddings=vectors(count, number))


def open_store(folder: Path, policy: IndexPolicy = SMALL, **kwargs) -> IndexStore:
    return IndexStore.open(folder, embedder_id=EMBEDDER, dimension=DIM, policy=policy, **kwargs)


def exact_top(store: IndexStore, query: np.ndarray, k: int) -> list[int]:
    """The k nearest chunk ids by brute force over the stored vectors."""
    stored = store.embeddings(store.vector_ids().tolist())
    ids = np.array(list(stored))
    scores = np.stack(list(stored.values())) @ query
    return ids[np.lexsort((ids, -scores))][:k].tolist()


def assert_exact_ranking(store: IndexStore, queries: int = 20, k: int = 10) -> None:
    for query in vectors(queries, seed=999):
        assert [i for i, _ in store.search_dense(query, k)] == exact_top(store, query, k)


@pytest.fixture
def folder(tmp_path) -> Path:
    return tmp_path / "collection"


def test_the_index_turns_approximate_at_the_size_and_exact_again_when_documents_go(folder):
    with open_store(folder) as store:
        for number in range(3):
            add(store, number)
        assert store.stats()["index"] == EXACT
        add(store, 3)  # 200 chunks
        assert store.stats()["index"] == APPROXIMATE and store.stats()["vectors_unsaved"] is False
        assert_exact_ranking(store)
    with open_store(folder) as store:
        assert store.open_report["faiss"] == "loaded" and store.stats()["index"] == APPROXIMATE
        store.remove_document("/docs/0.pdf")
        store.remove_document("/docs/1.pdf")
        assert store.stats()["index"] == APPROXIMATE  # 100 chunks: not yet back
        store.remove_document("/docs/2.pdf")
        assert store.stats()["index"] == EXACT
        assert_exact_ranking(store)
    with open_store(folder) as store:
        assert store.open_report["faiss"] == "loaded" and store.stats()["index"] == EXACT


def test_forced_approximate_ranks_as_exact_search_does(folder, tmp_path):
    with open_store(folder, IndexPolicy(approximate_from=100)) as approximate, \
            open_store(tmp_path / "exact", IndexPolicy()) as exact:
        for number in range(12):
            add(approximate, number)
            add(exact, number)
        assert approximate.stats()["index"] == APPROXIMATE and exact.stats()["index"] == EXACT
        for query in vectors(30, seed=7):
            found, expected = approximate.search_dense(query, 10), exact.search_dense(query, 10)
            assert [i for i, _ in found] == [i for i, _ in expected]
            assert np.allclose([s for _, s in found], [s for _, s in expected], atol=1e-5)


def test_new_chunks_join_the_trained_lists_until_the_collection_outgrows_them(folder):
    with open_store(folder) as store:
        for number in range(4):
            add(store, number)
        lists = store.stats()["index_lists"]
        assert lists == SMALL.lists_for(200)
        add(store, 4)
        assert store.stats()["index_lists"] == lists and store.stats()["vectors_unsaved"]
        store.flush()
    with open_store(folder) as store:
        assert store.open_report == {**store.open_report, "faiss": "loaded", "added": 0}
        number = 5
        while SMALL.lists_for(store.stats()["chunks"] + 50) < 2 * lists:
            add(store, number)
            number += 1
        assert store.stats()["index_lists"] == lists
        add(store, number)
        assert store.stats()["index_lists"] == SMALL.lists_for(store.stats()["chunks"]) >= 2 * lists
        assert_exact_ranking(store)


def test_a_reader_takes_the_index_a_writer_rebuilt(folder):
    with open_store(folder) as writer:
        add(writer, 0)
        with open_store(folder, read_only=True) as reader:
            assert reader.stats()["index"] == EXACT
            for number in range(1, 5):
                add(writer, number)
            assert_exact_ranking(reader)
            assert reader.stats()["index"] == APPROXIMATE


def test_a_damaged_approximate_file_is_rebuilt_approximate_from_sqlite(folder):
    with open_store(folder) as store:
        for number in range(5):
            add(store, number)
    [path] = folder.glob("vectors-*.faiss")
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(data)
    with open_store(folder, read_only=True) as reader:
        assert reader.open_report["faiss"].startswith("rebuilt") and reader.stats()["index"] == APPROXIMATE
        assert_exact_ranking(reader)


CRASH = textwrap.dedent("""
    import os, sys
    from engine.store import vectors
    from tests.engine.store.test_dense_index import add, open_store

    def half_then_die(self, write):
        write(b"x" * 1000)  # part of the rebuilt index is on disk, then the process dies
        os._exit(9)

    store = open_store(__import__("pathlib").Path(sys.argv[1]))
    for number in range(3):
        add(store, number)
    store.flush()
    vectors.DenseIndex.write = half_then_die
    add(store, 3)  # crosses the size: rebuilt as approximate, then written
""")


def test_a_crash_while_the_rebuilt_index_is_written_leaves_the_old_one_in_use(folder):
    result = subprocess.run([sys.executable, "-c", CRASH, str(folder)], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 9, result.stderr
    assert list(folder.glob("vectors-*.faiss.tmp"))  # the half-written file the crash left
    with open_store(folder) as store:
        assert store.open_report == {**store.open_report, "faiss": "loaded", "added": 50, "removed": 0}
        assert store.stats()["index"] == EXACT  # the old file, caught up from SQLite
        assert_exact_ranking(store)
        assert not list(folder.glob("vectors-*.faiss.tmp"))
        add(store, 4)  # the next change rebuilds it
        assert store.stats()["index"] == APPROXIMATE
    with open_store(folder) as store:
        assert store.open_report["faiss"] == "loaded" and store.stats()["index"] == APPROXIMATE


def test_a_failed_write_of_the_rebuilt_index_keeps_the_old_file(folder, monkeypatch):
    from engine.store import vectors as module

    with open_store(folder) as store:
        for number in range(3):
            add(store, number)
        store.flush()
        old = store.stats()["faiss_file"]

        def half_then_fail(self, write):
            write(b"x" * 1000)
            raise OSError("the disk went away")

        monkeypatch.setattr(module.DenseIndex, "write", half_then_fail)
        with pytest.raises(OSError, match="went away"):
            add(store, 3)
        assert store.stats()["faiss_file"] == old and not list(folder.glob("*.tmp"))
        assert store.stats()["documents"] == 4  # the document itself was committed
        monkeypatch.undo()
    with open_store(folder) as store:
        assert store.stats()["index"] == APPROXIMATE  # close() wrote it once writing worked again
        assert_exact_ranking(store)
