"""SQLite on a full disk (issue 14): "database or disk is full" (SQLITE_FULL) while creating a
collection, adding a document or recording a failure becomes DiskFullError naming the
collection's folder, and what was stored stays. The full disk is real to SQLite: PRAGMA
max_page_count caps the database at the pages it has, so the next page it needs fails with
SQLITE_FULL, as on a full disk."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from engine.errors import DiskFullError, disk_full_as_error, is_disk_full
from engine.store import index_store
from engine.store.index_store import IndexStore
from engine.types import Chunk

DIM = 8


def capped(db: sqlite3.Connection) -> None:
    """No page more than the database has now (at least one)."""
    pages = db.execute("PRAGMA page_count").fetchone()[0]
    db.execute(f"PRAGMA max_page_count = {max(pages, 1)}")


def full_message(folder) -> str:
    return f"The disk holding {folder} is full: free at least 1 MB and try again."


def add(store: IndexStore, name: str, words: int) -> int:
    chunks = [Chunk(page=1, start=0, end=5, text="pump " * words)]
    return store.add_document(f"/{name}.txt", name, size=10, mtime=1.0, title=name, page_count=1,
                              chunks=chunks, embeddings=np.eye(DIM, dtype=np.float32)[:1])


def test_sqlite_full_is_a_full_disk_and_other_sqlite_errors_are_not(tmp_path):
    db = sqlite3.connect(":memory:")
    capped(db)
    with pytest.raises(sqlite3.OperationalError) as caught:
        db.execute("CREATE TABLE t (x)")
        db.executemany("INSERT INTO t VALUES (?)", [("x" * 5000,)] * 10)
    assert caught.value.sqlite_errorcode == sqlite3.SQLITE_FULL and is_disk_full(caught.value)
    assert not is_disk_full(sqlite3.OperationalError("database is locked"))
    with pytest.raises(DiskFullError, match="free at least 1 MB"), disk_full_as_error(tmp_path, at_least=True):
        raise caught.value
    with pytest.raises(sqlite3.OperationalError, match="no such table"), disk_full_as_error(tmp_path):
        db.execute("SELECT * FROM missing")


def test_creating_a_collection_on_a_full_disk_names_its_folder(tmp_path, monkeypatch):
    real = index_store._connect

    def full(db_path, read_only):
        db = real(db_path, read_only)
        capped(db)
        return db

    monkeypatch.setattr(index_store, "_connect", full)
    folder = tmp_path / "collections" / "default"
    with pytest.raises(DiskFullError) as caught:
        IndexStore.open(folder, embedder_id="test", dimension=DIM)
    assert str(caught.value) == full_message(folder)
    assert isinstance(caught.value.__cause__, sqlite3.OperationalError)
    assert sorted(p.name for p in folder.parent.iterdir()) == ["default"]  # nothing set aside
    assert [p.name for p in folder.iterdir()] == [index_store.LOCK_NAME]  # no half database
    monkeypatch.undo()  # room made: the same folder opens (the lock was released)
    with IndexStore.open(folder, embedder_id="test", dimension=DIM) as store:
        assert store.stats()["documents"] == 0


def test_a_document_added_on_a_full_disk_names_the_folder_and_the_others_stay(tmp_path):
    folder = tmp_path / "collection"
    with IndexStore.open(folder, embedder_id="test", dimension=DIM) as store:
        add(store, "small", 3)
        capped(store._db)
        for write in (lambda: add(store, "big", 20_000),
                      lambda: store.record_failure("/bad.pdf", "x" * 200_000, 1, 1.0, error="e" * 200_000)):
            with pytest.raises(DiskFullError) as caught:
                write()
            assert str(caught.value) == full_message(folder)
        assert [d.path for d in store.list_documents()] == ["/small.txt"]
        assert store.search_keyword("pump", 5) != []
        store._db.execute("PRAGMA max_page_count = 1073741823")  # room made
        add(store, "big", 20_000)
    with IndexStore.open(folder, embedder_id="test", dimension=DIM, read_only=True) as again:
        assert [d.path for d in again.list_documents()] == ["/big.txt", "/small.txt"]
