"""The collection store: documents, chunks, keyword and dense search, and its faiss cache."""

from __future__ import annotations

import dataclasses
import hashlib
import random
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from engine.errors import EngineError
from engine.paths import DB_NAME, AppPaths
from engine.store.index_store import IndexStore, fts_query
from engine.types import Chunk, StoredDocument

EMBEDDER = "test-embedder"
DIM = 16
REPO = Path(__file__).resolve().parents[3]


def vectors(count: int, seed: int) -> np.ndarray:
    matrix = np.random.default_rng(seed).standard_normal((count, DIM)).astype(np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def chunks(*texts: str) -> list[Chunk]:
    return [Chunk(page=i + 1, start=0, end=len(t), text=t, heading_path=("Manual", f"Part {i}"))
            for i, t in enumerate(texts)]


def add(store: IndexStore, path: str, texts: list[str], seed: int, sha: str | None = None) -> np.ndarray:
    embeddings = vectors(len(texts), seed)
    store.add_document(path, sha or f"sha-{path}-{seed}", size=100, mtime=1.5, title=f"Title of {path}",
                       page_count=len(texts), chunks=chunks(*texts), embeddings=embeddings)
    return embeddings


def open_store(folder: Path, **kwargs) -> IndexStore:
    return IndexStore.open(folder, embedder_id=EMBEDDER, dimension=DIM, **kwargs)


@pytest.fixture
def folder(tmp_path) -> Path:
    return tmp_path / "collection"


@pytest.fixture
def store(folder):
    with open_store(folder) as opened:
        yield opened


MANUAL = [
    "To install packages in your home, set R_LIBS_USER to a folder you own.",
    "Error E-1234 means the pump pressure sensor is disconnected; check connector X12.",
    "Part number 4711-B is the replacement filter for the well-known model R2.",
    "Résumé of the calibration procedure: zero the scale, then span it.",
    "The NEAR field and the AND gate are described in chapter 7 (see figure *3*).",
]


# -- documents --------------------------------------------------------------------------------


def test_add_find_and_list(store):
    add(store, "/docs/a.pdf", MANUAL, seed=1)
    found = store.find_document("/docs/a.pdf")
    assert found.status == "ready" and found.chunk_count == len(MANUAL)
    assert found.title == "Title of /docs/a.pdf" and found.page_count == len(MANUAL)
    assert found.size == 100 and found.mtime == 1.5
    assert store.find_document("/docs/none.pdf") is None
    assert [d.path for d in store.list_documents()] == ["/docs/a.pdf"]
    first = store.chunk(store.search_keyword("E-1234", 1)[0][0])
    assert first["path"] == "/docs/a.pdf" and first["page"] == 2
    assert first["heading_path"] == ("Manual", "Part 1") and first["text"] == MANUAL[1]


def test_documents_come_back_as_frozen_records_of_the_stored_columns(store):
    add(store, "/docs/a.pdf", MANUAL, seed=1, sha="abc")
    [listed] = store.list_documents()
    assert isinstance(listed, StoredDocument) and listed == store.find_document("/docs/a.pdf")
    with pytest.raises(dataclasses.FrozenInstanceError):
        listed.status = "failed"
    assert list(listed.to_dict()) == ["id", "path", "sha256", "size", "mtime", "status", "error",
                                      "page_count", "title", "added_at", "chunk_count"]
    assert listed.to_dict()["sha256"] == "abc" and listed.name == "a.pdf" and listed.pages_done is None
    assert listed.path == "/docs/a.pdf" and listed.status == "ready"


def test_replacing_a_document_replaces_its_chunks_everywhere(store):
    old = add(store, "/docs/a.pdf", MANUAL, seed=1, sha="v1")
    old_ids = [i for i, _ in store.search_keyword("pump", 10)]
    new = add(store, "/docs/a.pdf", ["A new pump manual with error E-9999."], seed=2, sha="v2")
    assert len(store.list_documents()) == 1
    assert store.find_document("/docs/a.pdf").chunk_count == 1
    assert store.search_keyword("E-1234", 10) == []
    assert store.search_keyword("R_LIBS_USER", 10) == []
    new_ids = [i for i, _ in store.search_keyword("E-9999", 10)]
    assert len(new_ids) == 1 and new_ids[0] > max(old_ids)  # ids are never reused
    assert [i for i, _ in store.search_dense(old[1], 10)] == new_ids
    assert store.search_dense(new[0], 1)[0][0] == new_ids[0]
    assert set(store.vector_ids()) == set(new_ids)


def test_remove_by_path_and_by_id(store):
    add(store, "/docs/a.pdf", MANUAL[:2], seed=1)
    add(store, "/docs/b.pdf", MANUAL[2:], seed=2)
    assert store.remove_document("/docs/a.pdf") is True
    assert store.remove_document("/docs/a.pdf") is False
    b_id = store.find_document("/docs/b.pdf").id
    assert store.remove_document(b_id) is True
    assert store.list_documents() == []
    assert store.search_keyword("filter", 5) == []
    assert store.search_dense(vectors(1, 3)[0], 5) == []
    assert store.stats()["chunks"] == 0 and store.stats()["vectors"] == 0


def test_unchanged_detection(store):
    add(store, "/docs/a.pdf", MANUAL, seed=1, sha="abc")
    assert store.is_unchanged("/docs/a.pdf", "abc")
    assert not store.is_unchanged("/docs/a.pdf", "abd")
    assert not store.is_unchanged("/docs/other.pdf", "abc")


def test_failed_documents_are_listed_with_their_reason_until_replaced(store):
    store.record_failure("/docs/locked.pdf", sha256="s1", size=10, mtime=2.0, status="failed",
                         error="The file is encrypted; enter its password or remove it")
    listed = store.list_documents()
    assert [(d.path, d.status, d.chunk_count) for d in listed] == [
        ("/docs/locked.pdf", "failed", 0)]
    assert "encrypted" in listed[0].error
    add(store, "/docs/locked.pdf", MANUAL[:1], seed=1, sha="s2")
    again = store.find_document("/docs/locked.pdf")
    assert again.status == "ready" and again.error == "" and again.chunk_count == 1


def test_a_failure_replaces_an_earlier_ready_copy(store):
    add(store, "/docs/a.pdf", MANUAL, seed=1)
    store.record_failure("/docs/a.pdf", sha256="s9", size=10, mtime=2.0, error="not a valid PDF")
    assert store.find_document("/docs/a.pdf").chunk_count == 0
    assert store.search_keyword("pump", 5) == [] and store.stats()["vectors"] == 0


def test_warnings_are_kept_with_a_ready_document(store):
    store.add_document("/docs/w.pdf", "s", 1, 1.0, "W", 3, chunks("text"), vectors(1, 1),
                       status="ready_with_warnings", error="page 2 skipped: no text")
    assert store.find_document("/docs/w.pdf").error == "page 2 skipped: no text"


def test_a_failed_add_leaves_the_previous_copy_untouched(store):
    add(store, "/docs/a.pdf", MANUAL, seed=1, sha="v1")
    broken = chunks("fine", "also fine") + [Chunk(page="three", start=0, end=1, text="x")]  # fails midway
    with pytest.raises(ValueError):
        store.add_document("/docs/a.pdf", "v2", 1, 1.0, "T", 3, broken, vectors(3, 9))
    with pytest.raises(ValueError):
        store.add_document("/docs/a.pdf", "v2", 1, 1.0, "T", 1, chunks("x"), vectors(2, 9))
    assert store.find_document("/docs/a.pdf").sha256 == "v1"
    assert store.find_document("/docs/a.pdf").chunk_count == len(MANUAL)
    assert len(store.vector_ids()) == len(MANUAL)
    assert store.quick_check() == "ok"


def test_neighbours_stay_inside_the_document(store):
    add(store, "/docs/a.pdf", MANUAL, seed=1)
    add(store, "/docs/b.pdf", ["other"], seed=2)
    ids = [c["id"] for c in store.neighbours(store.search_keyword("E-1234", 1)[0][0], before=5, after=1)]
    assert len(ids) == 3 and ids == sorted(ids)
    last = store.search_keyword("NEAR field", 1)[0][0]
    assert [c["path"] for c in store.neighbours(last, before=0, after=3)] == ["/docs/a.pdf"]


# -- keyword search ---------------------------------------------------------------------------


@pytest.mark.parametrize("query, expected", [
    ("E-1234", 1), ("e-1234", 1), ("1234", 1), ("error E-1234", 1),
    ("R_LIBS_USER", 0), ("r_libs_user", 0), ("LIBS_USER", 0),
    ("4711-B", 2), ("X12", 1), ("well-known", 2), ("known", 2),
    ("resume calibration", 3), ("NEAR", 4), ("AND gate", 4),
])
def test_keyword_search_finds_codes_and_words(store, query, expected):
    add(store, "/docs/a.pdf", MANUAL, seed=1)
    hits = store.search_keyword(query, 3)
    assert hits and store.chunk(hits[0][0])["text"] == MANUAL[expected]
    assert all(score > 0 for _, score in hits)


def test_keyword_codes_do_not_match_their_neighbours(store):
    add(store, "/docs/a.pdf", MANUAL, seed=1)
    assert store.search_keyword("E-1235", 5) == []
    assert store.search_keyword("R_LIBS_SITE", 5) == []


def test_keyword_scores_rank_the_better_match_first(store):
    add(store, "/docs/a.pdf", ["pump pump pump pressure", "pump once", "nothing relevant"], seed=1)
    hits = store.search_keyword("pump pressure", 5)
    assert [store.chunk(i)["text"] for i, _ in hits] == ["pump pump pump pressure", "pump once"]
    assert hits[0][1] > hits[1][1]


HOSTILE = ['"', '""', '"E-1234', 'NEAR(pump sensor', 'pump NEAR/2 sensor', '*', 'pump*', '(((', ')',
           'AND', 'OR NOT', 'pump AND', '', '   ', '\x00', 'a\x00b', '\ud800', 'text:pump', '^pump',
           '-pump', '+', 'a"b"c', '{text}: pump', "'; DROP TABLE chunks; --", '\\', '\u200b', '()',
           'NOT pump', '"pump" "', 'pump OR', 'x' * 10000, ' '.join(['word'] * 500)]


FIND_PUMP = {'NEAR(pump sensor', 'pump NEAR/2 sensor', 'pump*', 'pump AND', '^pump', '-pump',
             '{text}: pump', 'NOT pump', '"pump" "', 'pump OR'}


@pytest.mark.parametrize("query", HOSTILE)
def test_hostile_keyword_queries_never_raise(store, query):
    add(store, "/docs/a.pdf", MANUAL, seed=1)
    hits = store.search_keyword(query, 5)
    assert isinstance(hits, list)
    if query in FIND_PUMP:
        assert MANUAL[1] in [store.chunk(i)["text"] for i, _ in hits]
    assert store.quick_check() == "ok"


def test_random_keyword_queries_never_raise(store):
    add(store, "/docs/a.pdf", MANUAL, seed=1)
    alphabet = 'aE1-_"*()^:+{}. \'\\\t\nNEARORANDNOT\u00e9\u4e2d\u0301'
    rng = random.Random(7)
    for _ in range(500):
        store.search_keyword("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30))), 5)


def test_fts_query_quotes_every_word():
    assert fts_query('pump "NEAR" (x*') == '"pump" OR """NEAR""" OR "(x*"'
    assert fts_query("* ( ) -") == ""


# -- dense search -----------------------------------------------------------------------------


def test_dense_search_returns_the_nearest_chunks_best_first(store):
    embeddings = add(store, "/docs/a.pdf", MANUAL, seed=1)
    ids = store.vector_ids().tolist()
    for row, chunk_id in enumerate(ids):
        hits = store.search_dense(embeddings[row], 3)
        assert hits[0][0] == chunk_id and hits[0][1] == pytest.approx(1.0, abs=1e-5)
        assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
    assert len(store.search_dense(embeddings[0], 100)) == len(MANUAL)
    assert store.search_dense(embeddings[0] * 7.0, 1)[0][1] == pytest.approx(1.0, abs=1e-5)  # normalised
    with pytest.raises(ValueError):
        store.search_dense(np.ones(DIM + 1), 3)


def test_dense_search_on_an_empty_collection(store):
    assert store.search_dense(vectors(1, 1)[0], 5) == []
    assert store.search_keyword("pump", 5) == []


# -- embedder identity ------------------------------------------------------------------------


def test_another_embedder_is_refused_for_writing_and_dense_search(folder):
    with open_store(folder) as store:
        add(store, "/docs/a.pdf", MANUAL, seed=1)
    for embedder_id, dimension in [("other-embedder", DIM), (EMBEDDER, DIM * 2)]:
        with pytest.raises(EngineError, match="re-embed"):
            IndexStore.open(folder, embedder_id=embedder_id, dimension=dimension)
    with IndexStore.open(folder, embedder_id="other-embedder", dimension=DIM, read_only=True) as reader:
        assert [d.path for d in reader.list_documents()] == ["/docs/a.pdf"]
        assert reader.search_keyword("E-1234", 3)
        with pytest.raises(EngineError, match="re-embed"):
            reader.search_dense(vectors(1, 1)[0], 3)
        with pytest.raises(EngineError):
            add(reader, "/docs/b.pdf", MANUAL, seed=2)


@pytest.mark.parametrize("dense", [True, False])
def test_read_only_listing_without_knowing_the_embedder(folder, dense):
    with open_store(folder) as store:
        vectors = add(store, "/docs/a.pdf", MANUAL, seed=1)
    with IndexStore.open(folder, embedder_id=None, dimension=None, read_only=True, dense=dense) as reader:
        assert reader.embedder_id == EMBEDDER and reader.dimension == DIM
        assert len(reader.list_documents()) == 1 and reader.search_keyword("pump", 1)
        assert reader.stats()["vectors"] == (len(MANUAL) if dense else 0)  # a listing holds no dense index
        with pytest.raises(EngineError, match="read-only"):
            reader.remove_document("/docs/a.pdf")
        if not dense:
            with pytest.raises(EngineError, match="without its dense index"):
                reader.search_dense(vectors[0], 1)


def test_opening_a_missing_collection_without_create(folder):
    with pytest.raises(EngineError, match="no collection"):
        open_store(folder, create=False)
    with pytest.raises(EngineError, match="no collection"):
        open_store(folder, read_only=True)


def test_collection_names_cannot_escape_the_collections_folder(tmp_path):
    assert AppPaths(tmp_path).collection("default") == tmp_path / "collections" / "default"
    for bad in ["", "..", "a/b", "a\\b", "C:x", " x"]:
        with pytest.raises(EngineError):
            AppPaths(tmp_path).collection(bad)


# -- the faiss cache --------------------------------------------------------------------------


def faiss_file(folder: Path) -> Path:
    files = sorted(folder.glob("vectors-*.faiss"))
    assert len(files) == 1
    return files[0]


def assert_dense_correct(store: IndexStore, expected: dict[int, np.ndarray]) -> None:
    assert store.vector_ids().tolist() == sorted(expected)
    for chunk_id, embedding in expected.items():
        assert store.search_dense(embedding, 1)[0][0] == chunk_id


def stored_embeddings(folder: Path) -> dict[int, np.ndarray]:
    with sqlite3.connect(folder / DB_NAME) as db:
        rows = db.execute("SELECT id, embedding FROM chunks").fetchall()
    db.close()
    return {i: np.frombuffer(blob, dtype=np.float32) for i, blob in rows}


def rewind_faiss(folder: Path, old_file: Path, old_bytes: bytes, max_id: int) -> None:
    """Put back an older faiss file and its meta, as a crash before the next flush would leave it."""
    old_file.write_bytes(old_bytes)
    with sqlite3.connect(folder / DB_NAME) as db:
        db.executemany("UPDATE meta SET value = ? WHERE key = ?", [
            (old_file.name, "faiss_file"), (hashlib.sha256(old_bytes).hexdigest(), "faiss_sha256"),
            (str(max_id), "faiss_max_chunk_id")])
    db.close()


def test_a_clean_reopen_loads_the_file_without_catching_up(folder):
    with open_store(folder) as store:
        add(store, "/docs/a.pdf", MANUAL, seed=1)
    with open_store(folder) as store:
        assert store.open_report["faiss"] == "loaded"
        assert store.open_report["added"] == store.open_report["removed"] == 0
        assert store.stats()["faiss_max_chunk_id"] == len(MANUAL)


@pytest.mark.parametrize("damage", ["deleted", "corrupted", "truncated", "garbage"])
def test_a_damaged_faiss_file_is_rebuilt_from_sqlite(folder, damage):
    with open_store(folder) as store:
        add(store, "/docs/a.pdf", MANUAL, seed=1)
        add(store, "/docs/b.pdf", MANUAL[:2], seed=2)
    path = faiss_file(folder)
    data = bytearray(path.read_bytes())
    if damage == "deleted":
        path.unlink()
    elif damage == "corrupted":
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(data)
    elif damage == "truncated":
        path.write_bytes(data[: len(data) // 3])
    else:
        path.write_bytes(b"not a faiss index at all")
    with open_store(folder) as store:
        assert store.open_report["faiss"].startswith("rebuilt")
        assert_dense_correct(store, stored_embeddings(folder))
    with open_store(folder) as store:  # the rebuilt file was saved
        assert store.open_report["faiss"] == "loaded"


def test_a_stale_faiss_file_is_caught_up(folder):
    with open_store(folder) as store:
        add(store, "/docs/a.pdf", MANUAL, seed=1)
        store.flush()
        old_file, old_bytes = faiss_file(folder), faiss_file(folder).read_bytes()
        add(store, "/docs/b.pdf", MANUAL[:3], seed=2)
    rewind_faiss(folder, old_file, old_bytes, max_id=len(MANUAL))
    with IndexStore.open(folder, embedder_id=EMBEDDER, dimension=DIM, read_only=True) as reader:
        assert reader.open_report == {**reader.open_report, "faiss": "loaded", "added": 3, "removed": 0}
        assert_dense_correct(reader, stored_embeddings(folder))
    with open_store(folder) as store:
        assert store.open_report["added"] == 3
        assert_dense_correct(store, stored_embeddings(folder))


def test_vectors_of_removed_documents_never_come_back(folder):
    with open_store(folder) as store:
        first = add(store, "/docs/a.pdf", MANUAL, seed=1)
        add(store, "/docs/b.pdf", MANUAL[:2], seed=2)
        store.flush()
        old_file, old_bytes = faiss_file(folder), faiss_file(folder).read_bytes()
        store.remove_document("/docs/a.pdf")
    rewind_faiss(folder, old_file, old_bytes, max_id=len(MANUAL) + 2)
    with open_store(folder) as store:
        assert store.open_report["removed"] == len(MANUAL)
        assert len(store.vector_ids()) == 2
        for embedding in first:
            hits = store.search_dense(embedding, 10)
            assert all(store.chunk(i)["path"] == "/docs/b.pdf" for i, _ in hits)


def test_old_and_temporary_faiss_files_are_cleaned_up(folder):
    with open_store(folder) as store:
        add(store, "/docs/a.pdf", MANUAL, seed=1)
        store.flush()
        add(store, "/docs/b.pdf", MANUAL, seed=2)
        store.flush()
        (folder / "vectors-000099.faiss.tmp").write_bytes(b"half written")
    with open_store(folder):
        pass
    assert [p.name for p in folder.glob("vectors-*")] == ["vectors-000002.faiss"]


def test_flush_only_writes_when_something_changed(store):
    add(store, "/docs/a.pdf", MANUAL, seed=1)
    assert store.flush() is True
    assert store.flush() is False
    store.remove_document("/docs/missing.pdf")
    assert store.flush() is False


def test_a_reader_sees_what_a_writer_commits(folder):
    with open_store(folder) as writer:
        add(writer, "/docs/a.pdf", MANUAL[:2], seed=1)
        writer.flush()
        with open_store(folder, read_only=True) as reader:
            new = add(writer, "/docs/b.pdf", MANUAL[2:], seed=2)
            b_ids = set(writer.vector_ids().tolist()) - {1, 2}
            assert reader.search_dense(new[0], 1)[0][0] in b_ids
            writer.remove_document("/docs/b.pdf")
            assert all(i not in b_ids for i, _ in reader.search_dense(new[0], 10))
            assert reader.search_keyword("filter", 5) == []


def test_readers_of_one_file_share_its_dense_index_until_one_must_change_it(folder):
    """A server's sessions (one per model process) hold one dense index, not one each; a reader
    that sees a writer's commit changes a copy, and the other readers keep theirs."""
    with open_store(folder) as writer:
        first = add(writer, "/docs/a.pdf", MANUAL[:2], seed=1)
        writer.flush()
        with open_store(folder, read_only=True) as one, open_store(folder, read_only=True) as two:
            assert one._vectors is two._vectors and two.open_report["faiss"] == "shared"
            new = add(writer, "/docs/b.pdf", MANUAL[2:], seed=2)
            b_ids = set(writer.vector_ids().tolist()) - {1, 2}
            assert one.search_dense(new[0], 1)[0][0] in b_ids  # one took a copy with b's vectors
            assert one._vectors is not two._vectors
            assert two._vectors.ntotal == 2 and two.search_dense(first[0], 1)[0][0] == 1  # two's untouched
            assert two.search_dense(new[0], 1)[0][0] in b_ids  # and follows the commit on its own copy


def test_readers_opened_at_once_on_threads_share_one_dense_index(folder):
    from concurrent.futures import ThreadPoolExecutor

    with open_store(folder) as writer:
        add(writer, "/docs/a.pdf", MANUAL, seed=1)
    with ThreadPoolExecutor(4) as pool:
        readers = list(pool.map(lambda _: open_store(folder, read_only=True), range(4)))
    try:
        assert len({id(reader._vectors) for reader in readers}) == 1
        assert sorted(reader.open_report["faiss"] for reader in readers) == ["loaded", "shared", "shared", "shared"]
    finally:
        for reader in readers:
            reader.close()


def test_word_frequencies_follow_commits_here_and_on_another_connection(folder):
    with open_store(folder) as writer, open_store(folder, read_only=True) as reader:
        add(writer, "/docs/a.pdf", MANUAL, seed=1)
        assert writer.prefix_frequency("pump") == reader.prefix_frequency("pump") == 1 / 5
        add(writer, "/docs/b.pdf", MANUAL[:3], seed=2)
        assert writer.prefix_frequency("pump") == reader.prefix_frequency("pump") == 2 / 8
        writer.remove_document("/docs/a.pdf")
        assert writer.prefix_frequency("pump") == reader.prefix_frequency("pump") == 1 / 3


def test_stats_and_quick_check(store):
    add(store, "/docs/a.pdf", MANUAL, seed=1)
    store.record_failure("/docs/b.pdf", "s", 1, 1.0, error="too large")
    stats = store.stats()
    assert stats["documents"] == 2 and stats["documents_by_status"] == {"ready": 1, "failed": 1}
    assert stats["chunks"] == stats["vectors"] == len(MANUAL)
    assert stats["embedder_id"] == EMBEDDER and stats["dimension"] == DIM
    assert store.quick_check() == "ok"


# -- one writer -------------------------------------------------------------------------------


def test_a_second_writer_in_this_process_is_refused(store, folder):
    with pytest.raises(EngineError, match="being indexed by another process"):
        open_store(folder)
    with open_store(folder, read_only=True) as reader:  # readers are welcome
        assert reader.list_documents() == []


def test_a_second_writer_process_is_refused_until_the_first_ends(folder):
    with open_store(folder):
        pass
    holder = subprocess.Popen([sys.executable, "-m", "tests.helpers.crash_writer", str(folder), "--hold"],
                              cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        with pytest.raises(EngineError, match="being indexed by another process"):
            open_store(folder)
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
        holder.stdout.close()
    with open_store(folder) as store:
        assert store.quick_check() == "ok"


def test_a_damaged_database_gives_an_actionable_error(folder):
    folder.mkdir()
    (folder / DB_NAME).write_bytes(b"this is not an SQLite database" * 200)
    with pytest.raises(EngineError, match="damaged .*Index the manuals again"):
        open_store(folder)  # issue 14: the damaged files are set aside, never replaced silently
    with pytest.raises(EngineError, match="was damaged: its files were moved to .*Index the manuals again"):
        open_store(folder, read_only=True)  # says what happened, not only "there is no collection"
    with open_store(folder) as store:  # and the writer lock was released
        assert store.stats()["documents"] == 0


def test_a_document_without_chunks(store):
    store.add_document("/docs/empty.pdf", "s", 1, 1.0, "E", 1, [], [], status="ready_with_warnings",
                       error="no text was found to index")
    assert store.find_document("/docs/empty.pdf").chunk_count == 0
    assert store.stats()["vectors"] == 0
