"""Format 2 of a collection: FTS5 indexes each chunk's heading path beside its text. A format 1
collection keeps working as it was built until the indexer upgrades it, losing nothing."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np

from engine.paths import DB_NAME, AppPaths
from engine.store.index_store import SCHEMA_VERSION, IndexStore
from engine.store.indexer import Indexer, IndexSettings, embedded_text, open_collection
from engine.types import Chunk
from tests.engine.store.test_index_store import open_store, vectors

# The FTS index as format 1 shipped it: the text alone.
FORMAT_1_FTS = """
DROP TRIGGER chunks_fts_insert; DROP TRIGGER chunks_fts_delete; DROP TABLE chunks_fts;
CREATE VIRTUAL TABLE chunks_fts USING fts5(
    text, content='chunks', content_rowid='id', tokenize='unicode61 remove_diacritics 2'
);
CREATE TRIGGER chunks_fts_insert AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_fts(rowid, text) VALUES (new.id, new.text);
END;
CREATE TRIGGER chunks_fts_delete AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_fts(chunks_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;
INSERT INTO chunks_fts(chunks_fts) VALUES ('rebuild');
UPDATE meta SET value = '1' WHERE key = 'schema_version';
"""

SECTIONS = [
    Chunk(1, 0, 40, "Syntax: set the base of the axes to ten.", ("Commands", "Set-show", "Logscale")),
    Chunk(2, 0, 44, "The logscale attribute also applies to tics.", ("Commands", "Set-show", "Xtics")),
    Chunk(3, 0, 35, "Mount the pump on a level base plate.", ("Installation",)),
]


def fill(store: IndexStore) -> list[int]:
    store.add_document("manual.pdf", "sha", size=1, mtime=1.0, title="Manual", page_count=3,
                       chunks=SECTIONS, embeddings=vectors(len(SECTIONS), 7))
    return [c["id"] for c in store.neighbours(store.search_keyword("pump", 1)[0][0], before=5, after=5)]


def as_format_1(folder: Path) -> None:
    db = sqlite3.connect(folder / DB_NAME)
    db.executescript(FORMAT_1_FTS)
    db.close()


def stored_rows(folder: Path) -> list[tuple]:
    db = sqlite3.connect(folder / DB_NAME)
    rows = db.execute('SELECT id, document_id, page, start, "end", text, heading_path, embedding '
                      "FROM chunks ORDER BY id").fetchall()
    db.close()
    return rows


def test_a_chunk_is_found_by_the_words_of_its_heading(tmp_path):
    with open_store(tmp_path / "c") as store:
        ids = fill(store)
        assert [i for i, _ in store.search_keyword("", 5, ["installation"])] == [ids[2]]


def test_the_heading_weight_decides_between_a_heading_and_a_text_match(tmp_path):
    with open_store(tmp_path / "c") as store:
        ids = fill(store)
        store.heading_weight = 0.0
        assert store.search_keyword("logscale", 5)[0][0] == ids[1]  # the word in the text
        store.heading_weight = 5.0
        assert store.search_keyword("logscale", 5)[0][0] == ids[0]  # the section's name


def test_heading_words_do_not_count_as_words_of_the_manuals_text(tmp_path):
    with open_store(tmp_path / "c") as store:
        fill(store)
        assert store.prefix_frequency("installation") == 0.0  # the relevance gate reads this
        assert store.prefix_frequency("pump") == 1 / 3


def test_a_format_1_collection_keeps_working_until_upgraded_and_loses_nothing(tmp_path):
    folder = tmp_path / "c"
    with open_store(folder) as store:
        ids = fill(store)
    as_format_1(folder)
    before = stored_rows(folder)
    with open_store(folder, read_only=True) as old:
        assert old.stats()["schema_version"] == 1
        assert [i for i, _ in old.search_keyword("pump", 5)] == [ids[2]]
        assert old.search_keyword("", 5, ["installation"]) == []  # headings not indexed yet
        assert old.prefix_frequency("pump") == 1 / 3
    with open_store(folder) as writer:
        assert writer.stats()["schema_version"] == 1  # opening alone changes nothing
        assert writer.upgrade() is True and writer.upgrade() is False
        assert writer.stats()["schema_version"] == SCHEMA_VERSION == 2
        assert [i for i, _ in writer.search_keyword("", 5, ["installation"])] == [ids[2]]
    assert stored_rows(folder) == before
    with open_store(folder, read_only=True) as reopened:
        assert np.array_equal(reopened.vector_ids(), np.array(ids))


def test_the_indexer_upgrades_a_format_1_collection(tmp_path, tiny_embedder):
    paths = AppPaths(tmp_path / "data").ensure()
    with open_collection(paths, "default", tiny_embedder):
        pass
    folder = paths.collection("default")
    as_format_1(folder)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "pump.md").write_text("# Priming\n\nFill the housing with water first.\n", encoding="utf-8")
    with open_collection(paths, "default", tiny_embedder) as store:
        list(Indexer(store, tiny_embedder, IndexSettings(parse_time_limit_s=30)).run([docs]))
        assert store.stats()["schema_version"] == 2
        assert store.list_documents()[0].chunk_count == 1


def test_the_vector_of_a_chunk_reads_its_two_nearest_headings_first(tmp_path, tiny_embedder):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "pump.md").write_text("# Pump\n\n## Priming\n\n### Water\n\nFill the housing first.\n",
                                  encoding="utf-8")
    paths = AppPaths(tmp_path / "data").ensure()
    with open_collection(paths, "default", tiny_embedder) as store:
        list(Indexer(store, tiny_embedder, IndexSettings(parse_time_limit_s=30)).run([docs]))
        (chunk_id, _), = store.search_keyword("housing", 5)
        chunk = store.chunk(chunk_id)
        assert chunk["heading_path"] == ("Pump", "Priming", "Water")
        assert "Priming" not in chunk["text"].split("\n")[-1]  # the text stays the page's own
        expected = tiny_embedder.encode_documents(["Priming > Water\n" + chunk["text"]])[0]
        np.testing.assert_allclose(store.embeddings([chunk_id])[chunk_id], expected, atol=1e-6)


def test_a_chunk_without_headings_is_embedded_as_its_text():
    assert embedded_text(Chunk(1, 0, 4, "Text")) == "Text"
    assert embedded_text(Chunk(1, 0, 4, "Text", ("A", "B", "C"))) == "B > C\nText"
