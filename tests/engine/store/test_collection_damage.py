"""A damaged collection database (issue 14): an empty or foreign file is set aside, never
replaced silently; bytes changed inside the rows are repaired from what is intact; a read that
meets damage raises CollectionDamagedError, never a bare sqlite3 or decode error."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from engine.cli.main import main
from engine.errors import CollectionDamagedError
from engine.paths import DB_NAME, AppPaths
from engine.store import health
from engine.store.index_store import IndexStore, _take_writer_lock
from engine.store.indexer import Indexer, IndexSettings, open_collection
from engine.types import Chunk, OcrWord, PageOcr
from tests.helpers.damaged_collection import damage_collection
from tests.helpers.tiny_collection import fill, open_store

SETTINGS = IndexSettings(parse_time_limit_s=30, parse_memory_limit_mb=1024)


@pytest.fixture
def built(tmp_path, tiny_embedder) -> Path:
    """A collection folder with the three tiny manuals and its faiss file on disk."""
    folder = tmp_path / "collections" / "default"
    with open_store(folder, tiny_embedder) as store:
        fill(store, tiny_embedder)
    assert list(folder.glob("vectors-*.faiss"))
    return folder


def _aside(folder: Path) -> list[Path]:
    return sorted(folder.parent.glob(folder.name + health.ASIDE_MARK + "*"))


def _fts_sound(folder: Path) -> bool:
    db = sqlite3.connect(folder / DB_NAME)
    try:
        db.execute("INSERT INTO chunks_fts(chunks_fts, rank) VALUES ('integrity-check', 1)")
        return True
    except sqlite3.DatabaseError:
        return False
    finally:
        db.close()


@pytest.mark.parametrize("content", [b"", b"PK\x03\x04 a zip file, not a database" * 40],
                         ids=["zero-bytes", "not-sqlite"])
@pytest.mark.parametrize("read_only", [False, True], ids=["writer", "reader"])
def test_an_empty_or_foreign_database_is_set_aside_and_named(built, tiny_embedder, content, read_only):
    faiss_before = {p.name: p.read_bytes() for p in built.glob("vectors-*")}
    (built / DB_NAME).write_bytes(content)
    with pytest.raises(CollectionDamagedError) as raised:
        if read_only:
            IndexStore.open(built, embedder_id=None, dimension=None, read_only=True)
        else:
            open_store(built, tiny_embedder)
    message = str(raised.value)
    [aside] = _aside(built)
    assert str(built / DB_NAME) in message and str(aside) in message
    assert "Index the manuals again" in message and "backup" in message
    assert raised.value.moved_to == str(aside)
    # nothing deleted: the damaged database and the faiss file are in the folder set aside
    assert (aside / DB_NAME).read_bytes() == content
    assert {p.name: p.read_bytes() for p in aside.glob("vectors-*")} == faiss_before
    assert not (built / DB_NAME).exists() and not list(built.glob("vectors-*"))
    # and only now, said and set aside, can a new collection be made in its place
    with open_store(built, tiny_embedder) as fresh:
        assert fresh.stats()["documents"] == 0


def test_a_database_that_never_got_a_table_is_still_a_new_collection(tmp_path, tiny_embedder):
    folder = tmp_path / "new"
    folder.mkdir()
    (folder / DB_NAME).write_bytes(b"")  # a creation that stopped at once: nothing to lose
    with open_store(folder, tiny_embedder) as store:
        fill(store, tiny_embedder)
    assert not _aside(folder)


def test_the_cli_says_what_happened_and_what_to_do(built, capsys):
    paths = AppPaths(built.parent.parent)
    (built / DB_NAME).write_bytes(b"")
    assert main(["docs", "list", "--data-dir", str(paths.root)]) == 1
    err = capsys.readouterr().err
    assert "no such table" not in err
    assert "is damaged" in err and "moved to" in err and "Index the manuals again" in err


@pytest.mark.parametrize("seed", [14, 7])
def test_bytes_changed_in_the_rows_are_repaired_on_open(built, tiny_embedder, seed):
    damage_collection(built, seed=seed)
    db = sqlite3.connect(built / DB_NAME)
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"  # SQLite alone sees nothing
    db.close()
    assert not _fts_sound(built)
    with open_store(built, tiny_embedder) as store:
        repaired = store.open_report["repaired"]
        assert any("keyword index" in line for line in repaired), repaired
        assert any("filter.md" in line for line in repaired), repaired  # its text was changed
        filter_doc = store.find_document("/manuals/filter.md")
        assert filter_doc.status == "failed" and filter_doc.error == health.REREAD_REASON
        assert filter_doc.chunk_count == 0 and filter_doc.sha256 == ""
        hits = store.search_keyword("motor overheated", 3)
        assert [store.chunk(i)["path"] for i, _ in hits][0] == "/manuals/pump.md"
        dense = store.search_dense(tiny_embedder.encode_queries("dipstick"), 10)
        assert {store.chunk(i)["path"] for i, _ in dense} == {"/manuals/oil.md", "/manuals/pump.md"}
        assert store.remove_document("/manuals/oil.md")
    assert _fts_sound(built) and not _aside(built)


def test_a_reader_repairs_when_no_writer_is_at_work(built):
    damage_collection(built)
    with IndexStore.open(built, embedder_id=None, dimension=None, read_only=True) as store:
        assert store.open_report["repaired"]
        assert store.search_keyword("pump", 5)
    assert _fts_sound(built)


def test_reads_beside_a_writer_meet_damage_as_a_clear_error(built):
    damage_collection(built)
    lock = _take_writer_lock(built)  # a writer at work: the reader may not repair
    try:
        with IndexStore.open(built, embedder_id=None, dimension=None, read_only=True) as store:
            assert store.open_report["repaired"] == []
            with pytest.raises(CollectionDamagedError, match="Index the manuals again"):
                store.search_keyword("pump", 5)
            with pytest.raises(CollectionDamagedError, match="could not be read"):
                store.chunks(range(1, 6))
    finally:
        lock.close()


def test_a_document_with_damaged_rows_is_read_again_from_its_file(tmp_path, tiny_embedder):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "pump.md").write_text("# Pump\n\nPrime the pump with water before starting.\n", encoding="utf-8")
    (docs / "oil.txt").write_text("Check the oil level every week with the dipstick.\n", encoding="utf-8")
    paths = AppPaths(tmp_path / "data").ensure()
    with open_collection(paths, "default", tiny_embedder) as store:
        list(Indexer(store, tiny_embedder, SETTINGS).run([docs]))
    damage_collection(paths.collection("default"))
    with open_collection(paths, "default", tiny_embedder) as store:
        assert store.open_report["repaired"]
        events = list(Indexer(store, tiny_embedder, SETTINGS).run([docs]))
        again = {Path(e.outcome.path).name: (e.outcome.status, e.outcome.reason) for e in events if e.outcome}
        assert again["oil.txt"] == ("ready", "")  # its first chunk was damaged: read again
        assert again["pump.md"][1] == "unchanged"  # intact, left as it was
        assert [d.status for d in store.list_documents()] == ["ready", "ready"]
        assert store.search_keyword("prime", 3)


def test_damaged_word_boxes_of_a_scanned_page_have_it_read_again(tmp_path, tiny_embedder):
    """The source view reads a recognised page's word boxes: rows that no longer decode empty
    the document (it is read again, and recognised again, from its file), and go with it."""
    folder = tmp_path / "collections" / "default"
    text = "Prime pump with water before start."
    ocr = PageOcr(0.97, 612.0, 792.0, (OcrWord(0, 5, (72.0, 90.0, 110.0, 102.0), 0.99),), "test-engine")
    with open_store(folder, tiny_embedder) as store:
        fill(store, tiny_embedder)
        scanned = store.add_document("/manuals/scan.pdf", "sha-scan", size=10, mtime=1.0, title="scan",
                                     page_count=1, chunks=[Chunk(1, 0, len(text), text)],
                                     embeddings=tiny_embedder.encode_documents([text]), ocr_pages={1: ocr})
        assert store.page_ocr(scanned, 1) == ocr
    db = sqlite3.connect(folder / DB_NAME)
    with db:
        db.execute("UPDATE ocr_pages SET words = CAST(? AS BLOB)", (b"[[0, 5, \xff\xfe",))
    db.close()
    with open_store(folder, tiny_embedder) as store:
        assert store.open_report["repaired"]
        (document,) = [d for d in store.list_documents() if d.path == "/manuals/scan.pdf"]
        assert document.status == "failed" and document.error == health.REREAD_REASON
        assert store.page_ocr(scanned, 1) is None
        assert sorted(d.status for d in store.list_documents()) == ["failed", "ready", "ready", "ready"]


@pytest.fixture
def counted_checks(monkeypatch) -> list[bool]:
    """Every database is stamped and the stamp read, whatever its size; each full check run is
    counted (its can_repair). Ask for it before the collection it concerns."""
    monkeypatch.setattr(health, "STAMPED_FROM", 0)
    runs: list[bool] = []
    inspect = health._inspect

    def counted(db_path, connect, can_repair):
        runs.append(can_repair)
        return inspect(db_path, connect, can_repair)

    monkeypatch.setattr(health, "_inspect", counted)
    return runs


def _open_reader(folder: Path) -> IndexStore:
    return IndexStore.open(folder, embedder_id=None, dimension=None, read_only=True)


def test_a_large_collection_as_it_was_left_is_not_checked_again(counted_checks, built, tiny_embedder):
    with _open_reader(built) as store:  # the writer that built it left the stamp
        assert store.search_keyword("pump", 5)
    with open_store(built, tiny_embedder) as store:
        store.remove_document("/manuals/oil.md")
    with _open_reader(built):
        pass
    assert counted_checks == []
    damage_collection(built)  # any change but a writer's through SQLite: checked again and repaired
    with _open_reader(built) as store:
        assert store.open_report["repaired"]
    assert counted_checks == [True] and _fts_sound(built)


def test_a_readers_check_without_fts5s_does_not_spare_a_writers(counted_checks, built, tiny_embedder):
    (built / health.STAMP_NAME).unlink()
    lock = _take_writer_lock(built)  # a writer at work: the reader checks without FTS5's check
    try:
        _open_reader(built).close()
        _open_reader(built).close()
    finally:
        lock.close()
    open_store(built, tiny_embedder).close()
    assert counted_checks == [False, True]


class _MalformedDatabase:
    """A connection whose every read meets a damaged page."""

    def execute(self, *args):
        raise sqlite3.DatabaseError("database disk image is malformed")


def test_damage_met_in_a_read_has_the_next_open_check_everything(counted_checks, built, tiny_embedder):
    damage_collection(built)
    lock = _take_writer_lock(built)
    try:
        with _open_reader(built):  # cannot repair beside a writer: no stamp
            assert not (built / health.STAMP_NAME).exists()
    finally:
        lock.close()
    with open_store(built, tiny_embedder) as writer:  # checked, repaired and stamped
        assert (built / health.STAMP_NAME).exists()
        db, writer._db = writer._db, _MalformedDatabase()
        with pytest.raises(CollectionDamagedError):
            writer.search_keyword("pump", 5)
        writer._db = db
        assert not (built / health.STAMP_NAME).exists()
    assert not (built / health.STAMP_NAME).exists()  # a writer that met damage leaves none at close
    open_store(built, tiny_embedder).close()
    assert counted_checks == [False, True, True]
