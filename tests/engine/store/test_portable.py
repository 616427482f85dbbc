"""A document's rows as a bundle carries them (engine/store/portable.py): the same bytes for the
same rows, put into another collection with their ids, and malformed rows refused by name."""

from __future__ import annotations

import gzip
import json
import sqlite3

import numpy as np
import pytest

from engine.paths import DB_NAME
from engine.store import portable
from engine.store.index_store import IndexStore
from engine.types import Chunk, PageOcr

PAGES = ["Torque\tM6\t9 Nm", "Close the valve before removing the strainer."]


def stored(tmp_path, name: str, embedder) -> IndexStore:
    return IndexStore.open(tmp_path / name, embedder_id=embedder.model_id, dimension=embedder.dimension)


def export(store: IndexStore, document_id: int) -> bytes:
    with sqlite3.connect(store.folder / DB_NAME) as db:
        return portable.export_rows(db, document_id)


def test_rows_move_to_another_collection_with_their_ids_labels_and_ocr(tmp_path, tiny_embedder):
    chunks = [Chunk(page=n, start=0, end=len(text), text=text, heading_path=("Valves",))
              for n, text in enumerate(PAGES, 1)]
    ocr = PageOcr(confidence=0.9, engine="tiny", width=100.0, height=200.0, words=())
    with stored(tmp_path, "admin", tiny_embedder) as admin:
        admin.add_document("/m/filter.md", "f" * 64, 1, 1.0, "Filter", 1, chunks[:1],
                           tiny_embedder.encode_documents(PAGES[:1]))
        document_id = admin.add_document("/m/valve.pdf", "a" * 64, 10, 1.0, "Valve", 2, chunks,
                                         tiny_embedder.encode_documents(PAGES), page_labels={1: "iv"},
                                         ocr_pages={2: ocr}, text_version=2)
        data = export(admin, document_id)
        assert export(admin, document_id) == data  # deterministic: an unchanged document is not moved again
        expected_ids = admin.vector_ids().tolist()[1:]
        expected = admin.embeddings(expected_ids)
    with stored(tmp_path, "kiosk", tiny_embedder) as kiosk:
        kiosk.put_rows(portable.read_rows(data, "valve rows"), "/kiosk/valve.pdf")
        [document] = kiosk.list_documents()
        assert (document.id, document.path, document.chunk_count, document.text_version) == (
            document_id, "/kiosk/valve.pdf", 2, 2)
        assert kiosk.vector_ids().tolist() == expected_ids  # faiss followed, with the admin's ids
        assert all(np.array_equal(kiosk.embeddings(expected_ids)[i], expected[i]) for i in expected_ids)
        assert kiosk.page_labels([(document_id, 1)]) == {(document_id, 1): "iv"}
        assert kiosk.page_ocr(document_id, 2).engine == "tiny"
        assert kiosk.search_keyword("strainer", 1)[0][0] == expected_ids[1]
        with pytest.raises(sqlite3.IntegrityError):  # its ids are taken: rows that do not belong here
            kiosk.put_rows(portable.read_rows(data, "valve rows"), "/kiosk/other.pdf")


def rows_with(change) -> bytes:
    lines = [{"format": 1, "document_id": 7},
             {"table": "documents", "columns": ["id", "path"], "rows": [[7, "/m"]]},
             {"table": "chunks", "columns": ["id", "document_id", "embedding"],
              "rows": [[1, 7, {"base64": "AAAA"}]]}]
    change(lines)
    return gzip.compress("\n".join(json.dumps(line) for line in lines).encode())


@pytest.mark.parametrize("change, message", [
    (lambda lines: lines.__setitem__(0, {"format": 9, "document_id": 7}), "format 9"),
    (lambda lines: lines[1].__setitem__("table", "sqlite_master"), "unknown table"),
    (lambda lines: lines[2]["rows"][0].__setitem__(1, 8), "another document"),
    (lambda lines: lines[2]["rows"][0].__setitem__(2, {"base64": "not base64!"}), "not base64"),
    (lambda lines: lines[2].__setitem__("columns", ["id", "document_id", "x; DROP TABLE chunks"]), "not valid"),
    (lambda lines: lines.pop(1), "exactly one row of documents"),
])
def test_malformed_rows_are_refused_naming_what_is_wrong(change, message):
    with pytest.raises(ValueError, match=message) as caught:
        portable.read_rows(rows_with(change), "rows/m.pdf")
    assert "rows/m.pdf" in str(caught.value)


def test_rows_that_are_not_gzip_are_refused():
    with pytest.raises(ValueError, match="rows/m.pdf: not a document's rows"):
        portable.read_rows(b"PK\x03\x04 a zip, say", "rows/m.pdf")
