"""A collection on disk: SQLite is the source of truth, faiss a cache derived from it.

One folder per collection:
  collection.sqlite3   documents, chunks (with their float32 embeddings), FTS5 over chunk text
                       and heading path, meta
  vectors-NNNNNN.faiss the dense index, named in meta together with its SHA-256: exact below a
                       size, approximate (IVF) above it, re-scored exactly from SQLite's vectors
                       (engine/store/vectors.py)
  writer.lock          held (OS lock) by the one process allowed to write

Formats (meta schema_version): 1 indexed the text alone in FTS5; 2 adds the heading path as a
second FTS5 column. A format 1 collection opens and answers as before (keyword search on the
text); upgrade(), which the indexer calls, rebuilds its FTS index from the chunks table in one
transaction, so nothing stored is rewritten and nothing is lost.

page_labels holds the printed page labels of PDFs ("5" on physical page 10). It needs no
format of its own: a writer creates it when missing, and a reader takes a collection without
it as one whose pages have no labels (documents indexed before it have none until indexed
again). An older app ignores the table, and deleting a document cascades to it.

ocr_pages holds, the same way, how each searched page of a scanned PDF was recognised: its
confidence, the OCR engine, the page's size in points and its words' boxes (JSON
[[start, end, x0, y0, x1, y1, confidence], ...], characters of the page's text and PDF points
from the top left), so that the source view can highlight a passage where the PDF has no text.

Durability:
- WAL with synchronous=FULL: every committed document survives a power cut. This matters
  beyond losing work: a faiss file may only cover chunk ids that SQLite will still have after
  a crash, or a rolled-back id could later be given to another chunk. It costs one fsync per
  document, small next to embedding that document.
- Each document goes in with one transaction (its row, chunks, FTS rows), so it is either all
  there or not there at all. Chunk ids come from AUTOINCREMENT and are never reused, so a
  faiss id always means the same chunk, or a chunk that is gone.
- faiss is persisted by flush() (the indexer calls it at the end of a run) and by close(), not
  per document: writing it is O(all vectors), so per-document writes would be quadratic, while
  catching up after a crash costs only reading the unflushed embeddings back from SQLite.
  A flush writes a new file, fsyncs it, renames it, fsyncs the folder, and only then records
  it in meta; the older file is deleted after that commit.
- open() compares the ids in the faiss file with the chunk ids in SQLite: missing vectors are
  added from SQLite, vectors of removed chunks are dropped. A missing, unreadable or
  mismatching (checksum) file is rebuilt from SQLite. Dense hits are also checked against
  SQLite before they are returned.
- When a change makes the collection cross the size where the index changes kind, or outgrow
  what its lists were trained on, the writer rebuilds the index from SQLite and flushes it at
  once (a rebuild is costly; readers then load the new file instead of repeating it). Until
  the new file's name is committed in meta, the old file stays the one used; a crash in between
  leaves the old file and a stale one, deleted on the next open.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from engine.atomic_file import fsync_folder
from engine.errors import CollectionDamagedError, DiskFullError, EngineError, disk_full_as_error, is_disk_full
from engine.paths import DB_NAME
from engine.store import health, portable
from engine.store.vectors import EXACT, DenseIndex, IndexPolicy
from engine.types import Chunk, PageOcr, StoredDocument

log = logging.getLogger(__name__)

SCHEMA_VERSION = 2  # 2: FTS5 also indexes each chunk's heading path (1 is upgraded on open)
READABLE_VERSIONS = (1, 2)  # 1 opened read-only keeps working, keyword search on text alone
HEADING_WEIGHT = 1.0  # BM25 weight of the heading-path column beside the text's 1.0
LOCK_NAME = "writer.lock"
VECTORS_GLOB = "vectors-*.faiss*"
READY_STATUSES = ("ready", "ready_with_warnings")
FAILED_STATUS = "failed"
_ID_BATCH = 500  # ids per "IN (...)" query, well under SQLite's variable limit
# Read-only stores of one faiss file share its index (a server's sessions, one per model process,
# would each hold 0.4 GB at a million chunks); a store that must change it takes a copy first.
_SHARED: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # (file, sha256) -> DenseIndex
_SHARED_LOCK = threading.Lock()  # held by a reader while it loads: others of the same file then share
_MAX_QUERY_TERMS = 64  # bounds the cost of a pasted paragraph as a keyword query

# Default separators: "E-1234" and "R_LIBS_USER" are queried as phrases ("e" "1234"), which
# also finds "1234" or "LIBS_USER" alone and keeps hyphenated words ("well-known") findable
# by their parts; tokenchars '-_' would make each code one opaque token. The heading path is
# indexed as stored (a JSON list: its brackets and quotes are separators), so that a chunk in
# the middle of a section is found by the section's name too.
_FTS_SCHEMA = """
CREATE VIRTUAL TABLE chunks_fts USING fts5(
    text, heading_path, content='chunks', content_rowid='id',
    tokenize='unicode61 remove_diacritics 2'
);
CREATE TRIGGER chunks_fts_insert AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_fts(rowid, text, heading_path) VALUES (new.id, new.text, new.heading_path);
END;
CREATE TRIGGER chunks_fts_delete AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_fts(chunks_fts, rowid, text, heading_path)
        VALUES ('delete', old.id, old.text, old.heading_path);
END;
"""

_DROP_FTS_V1 = """
DROP TRIGGER chunks_fts_insert;
DROP TRIGGER chunks_fts_delete;
DROP TABLE chunks_fts;
"""

_SCHEMA = """
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE documents (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    path       TEXT NOT NULL UNIQUE,
    sha256     TEXT NOT NULL,
    size       INTEGER NOT NULL,
    mtime      REAL NOT NULL,
    status     TEXT NOT NULL CHECK (status IN ('ready', 'ready_with_warnings', 'failed')),
    error      TEXT NOT NULL DEFAULT '',
    page_count INTEGER NOT NULL DEFAULT 0,
    title      TEXT NOT NULL DEFAULT '',
    added_at   REAL NOT NULL
);

CREATE TABLE chunks (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    document_id  INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    page         INTEGER NOT NULL,
    start        INTEGER NOT NULL,
    "end"        INTEGER NOT NULL,
    text         TEXT NOT NULL,
    heading_path TEXT NOT NULL DEFAULT '[]',
    embedding    BLOB NOT NULL
);
CREATE INDEX chunks_by_document ON chunks(document_id);
""" + _FTS_SCHEMA

_LABELS_SCHEMA = """
CREATE TABLE IF NOT EXISTS page_labels (
    document_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    page        INTEGER NOT NULL,
    label       TEXT NOT NULL,
    PRIMARY KEY (document_id, page)
) WITHOUT ROWID;
"""

_OCR_SCHEMA = """
CREATE TABLE IF NOT EXISTS ocr_pages (
    document_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    page        INTEGER NOT NULL,
    confidence  REAL NOT NULL,
    engine      TEXT NOT NULL,
    width       REAL NOT NULL,
    height      REAL NOT NULL,
    words       TEXT NOT NULL,
    PRIMARY KEY (document_id, page)
) WITHOUT ROWID;
"""

# Which reading of its format a document's text comes from (engine.ingest.text_version): a PDF
# indexed before PDFium read PDFs has no row (version 1), and is read again by the next run.
_TEXT_VERSIONS_SCHEMA = """
CREATE TABLE IF NOT EXISTS text_versions (
    document_id INTEGER PRIMARY KEY REFERENCES documents(id) ON DELETE CASCADE,
    version     INTEGER NOT NULL
);
"""

_DOCUMENT_COLUMNS = """d.id, d.path, d.sha256, d.size, d.mtime, d.status, d.error, d.page_count,
    d.title, d.added_at, (SELECT count(*) FROM chunks c WHERE c.document_id = d.id) AS chunk_count"""
# StoredDocument.ocr_pages and .ocr_confidence (the mean of its pages' confidences)
_OCR_COLUMNS = """, (SELECT count(*) FROM ocr_pages o WHERE o.document_id = d.id) AS ocr_pages,
    (SELECT avg(o.confidence) FROM ocr_pages o WHERE o.document_id = d.id) AS ocr_confidence"""
_TEXT_VERSION_COLUMN = ", (SELECT version FROM text_versions t WHERE t.document_id = d.id) AS text_version"

_CHUNK_COLUMNS = """c.id, c.document_id, d.path, d.title, c.page, c.start, c."end", c.text,
    c.heading_path"""


def _damage_is_engine_error(method):
    """A read or write that meets damaged data raises CollectionDamagedError, saying what to do,
    and one that meets a full disk DiskFullError naming the folder, instead of a bare sqlite3
    or decode error."""
    @functools.wraps(method)
    def guarded(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except (sqlite3.DatabaseError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            error = _engine_error(self.folder, exc)
            if isinstance(error, CollectionDamagedError):
                self._sound = False  # no stamp at close: the next open checks everything
            if error is exc:
                raise
            raise error from exc
    return guarded


def _engine_error(folder: Path, exc: BaseException) -> BaseException:
    """What a person is told for an error from SQLite or a stored row: a full disk, damage, or
    `exc` itself when it is neither."""
    if is_disk_full(exc):
        return DiskFullError(folder, at_least=True)  # SQLite does not say how much it needed
    if health.is_damage(exc) and not isinstance(exc, EngineError):
        return health.read_error(folder, exc)
    return exc


_FREQUENCIES_KEPT = 4096  # prefixes whose counts are kept between commits


class IndexStore:
    """One collection. Use from one thread at a time; open it with IndexStore.open()."""

    def __init__(self, folder: Path, db: sqlite3.Connection, lock, meta: dict, mismatch: str,
                 policy: IndexPolicy | None = None):
        self.folder = folder
        self.policy = policy or IndexPolicy()
        self._db = db
        self._lock = lock  # None when read-only
        self._meta = meta
        self._mismatch = mismatch  # why adding and dense search are refused; "" when allowed
        self._dimension = int(meta["dimension"])
        self._vectors: DenseIndex | None = None
        self._shared = False  # _vectors is _SHARED's: copied before it is changed
        self._dirty = False
        self._data_version = 0
        self._chunk_total: tuple[tuple[int, int], int] = ((-1, -1), 0)  # (state counted at, count)
        self._frequencies: dict[str, int] = {}  # prefix -> chunks holding it, at that state
        self._has_heading_column = int(meta["schema_version"]) >= 2
        self.heading_weight = HEADING_WEIGHT
        self.open_report: dict = {}
        self._sound = True  # no damage met since open (see health.py's stamp)

    # -- opening and closing ---------------------------------------------------------------

    @classmethod
    def open(cls, folder: Path, *, embedder_id: str | None, dimension: int | None, create: bool = True,
             read_only: bool = False, policy: IndexPolicy | None = None, dense: bool = True) -> "IndexStore":
        """Open (or create) the collection in `folder`. embedder_id and dimension may be None
        to take whatever the collection was built with (no new collection, then).

        A writer holds the collection's lock until close(); a second writer gets an EngineError.
        A collection built with another embedder cannot be opened for writing; read-only it
        can be listed and keyword-searched, but dense search is refused until re-embedded.
        `policy` says when the dense index is approximate (tests make it small). `dense=False`
        (read-only) does not load the dense index (0.4 GB at a million chunks): for listing
        documents and reading pages, not for dense search.
        """
        folder = Path(folder)
        db_path = folder / DB_NAME
        if health.is_fresh(db_path) and (read_only or not create):
            raise health.missing_error(folder)
        lock = None if read_only else _take_writer_lock(folder)
        creating = lock is not None and health.is_fresh(db_path)
        try:
            repaired = _check_on_open(folder, db_path, lock)
            db = _connect(db_path, read_only)
            try:
                store = cls._from_connection(folder, db, lock, embedder_id, dimension, read_only, policy,
                                             dense or not read_only)
            except BaseException:
                db.close()
                raise
        except BaseException as exc:
            if creating:  # half a new database (a full disk) would be taken for a damaged one
                _remove_database(db_path)
            if lock is not None:
                lock.close()
            error = _engine_error(folder, exc)  # creating it, or repairing it, on a full disk too
            if error is not exc:
                raise error from exc
            raise
        store.open_report["repaired"] = repaired
        return store

    @classmethod
    def _from_connection(cls, folder, db, lock, embedder_id, dimension, read_only, policy, dense) -> "IndexStore":
        if not read_only and not _has_schema(db):
            if not embedder_id or not dimension:
                raise ValueError("a new collection needs embedder_id and dimension")
            _create_schema(db, embedder_id, dimension)
        meta = _read_meta(db, folder)
        mismatch = _embedder_mismatch(meta, embedder_id, dimension, folder)
        if mismatch and not read_only:
            raise EngineError(mismatch)
        if not read_only:
            db.execute(_LABELS_SCHEMA)
            db.execute(_OCR_SCHEMA)
            db.execute(_TEXT_VERSIONS_SCHEMA)
        store = cls(folder, db, lock, meta, mismatch, policy)
        if not mismatch and dense:
            store._load_vectors()
        if lock is not None:
            store._remove_stale_vector_files()
        return store

    def upgrade(self) -> bool:
        """Bring an older collection to this format (the indexer does, before adding); until
        then it keeps working as it was built. True when something changed."""
        self._require_writer()
        if not _upgrade(self._db, self.folder):
            return False
        self._meta = _read_meta(self._db, self.folder)
        self._has_heading_column = True
        return True

    def close(self) -> None:
        """Persist the faiss cache if it changed, then release the database and the lock."""
        if self._db is None:
            return
        flushed = False
        try:
            if self._lock is not None:
                self.flush()
            flushed = True
        finally:
            self._db.close()
            self._db = None
            if self._lock is not None:
                if flushed and self._sound:  # what it wrote went through SQLite: as sound as it found it
                    health.stamp(self.folder / DB_NAME, with_fts=True)
                self._lock.close()
                self._lock = None

    def __enter__(self) -> "IndexStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def read_only(self) -> bool:
        return self._lock is None

    @property
    def embedder_id(self) -> str:
        return self._meta["embedder_id"]

    @property
    def dimension(self) -> int:
        return self._dimension

    # -- documents ---------------------------------------------------------------------------

    @_damage_is_engine_error
    def find_document(self, path: str | Path) -> StoredDocument | None:
        row = self._db.execute(f"SELECT {self._document_columns()} FROM documents d WHERE d.path = ?",
                               (str(path),)).fetchone()
        return StoredDocument(**row) if row else None

    def is_unchanged(self, path: str | Path, sha256: str) -> bool:
        """True when this path is stored with this content (whatever its status was)."""
        known = self.find_document(path)
        return known is not None and known.sha256 == sha256

    @_damage_is_engine_error
    def documents_with_content(self, sha256: str) -> list[StoredDocument]:
        """The stored documents whose file had these bytes (a copy elsewhere, or a moved file)."""
        rows = self._db.execute(f"SELECT {self._document_columns()} FROM documents d WHERE d.sha256 = ?"
                                " ORDER BY d.id", (sha256,))
        return [StoredDocument(**row) for row in rows]

    @_damage_is_engine_error
    def move_document(self, old_path: str | Path, new_path: str | Path, size: int, mtime: float) -> None:
        """A stored document's file was moved: it is stored under its new path, its chunks and
        vectors as they were. ValueError when the new path is stored already."""
        self._require_writer()
        with self._write_transaction():
            if self.find_document(new_path) is not None:
                raise ValueError(f"{new_path} is in the collection already")
            self._db.execute("UPDATE documents SET path = ?, size = ?, mtime = ? WHERE path = ?",
                             (str(new_path), int(size), float(mtime), str(old_path)))

    @_damage_is_engine_error
    def list_documents(self) -> list[StoredDocument]:
        rows = self._db.execute(f"SELECT {self._document_columns()} FROM documents d ORDER BY d.path")
        return [StoredDocument(**row) for row in rows]

    def _document_columns(self) -> str:
        """A read-only collection from before OCR has no ocr_pages table: no page was recognised;
        one from before text versions has no text_versions table: every text is version 1."""
        return (_DOCUMENT_COLUMNS + (_OCR_COLUMNS if self._has_table("ocr_pages") else "")
                + (_TEXT_VERSION_COLUMN if self._has_table("text_versions") else ""))

    def _has_table(self, name: str) -> bool:
        return portable.has_table(self._db, name)

    @_damage_is_engine_error
    def add_document(self, path: str | Path, sha256: str, size: int, mtime: float, title: str,
                     page_count: int, chunks: list[Chunk], embeddings: np.ndarray,
                     status: str = "ready", error: str = "",
                     page_labels: dict[int, str] | None = None,
                     ocr_pages: dict[int, PageOcr] | None = None, text_version: int = 1) -> int:
        """Store a document with its chunks (and the printed labels of its pages, {physical
        page: label}, how its scanned pages were recognised, {physical page: PageOcr}, and
        which reading of its format its text is) in one transaction, replacing any document
        with the same path. Returns the new document id."""
        self._require_writable()
        if status not in READY_STATUSES:
            raise ValueError(f"status must be one of {READY_STATUSES}, not {status!r}")
        vectors = _normalised(_as_matrix(embeddings, len(chunks), self._dimension))
        with self._write_transaction():
            removed = self._delete_document_rows(path)
            document_id = self._insert_document(path, sha256, size, mtime, status, error, page_count, title)
            self._db.executemany(
                'INSERT INTO chunks (document_id, page, start, "end", text, heading_path, embedding)'
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                _chunk_rows(document_id, chunks, vectors))
            self._db.executemany("INSERT INTO page_labels (document_id, page, label) VALUES (?, ?, ?)",
                                 [(document_id, int(page), _clean(str(label)))
                                  for page, label in sorted((page_labels or {}).items()) if label])
            self._db.executemany(
                "INSERT INTO ocr_pages (document_id, page, confidence, engine, width, height, words)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                [_ocr_row(document_id, page, ocr) for page, ocr in sorted((ocr_pages or {}).items())])
            self._db.execute("INSERT INTO text_versions (document_id, version) VALUES (?, ?)",
                             (document_id, int(text_version)))
            new_ids = self._chunk_ids_of(document_id)
        self._after_commit(removed, new_ids, vectors)
        return document_id

    @_damage_is_engine_error
    def record_failure(self, path: str | Path, sha256: str, size: int, mtime: float,
                       status: str = FAILED_STATUS, error: str = "") -> int:
        """Keep a document that could not be indexed listed with its reason (no chunks)."""
        self._require_writer()
        if status != FAILED_STATUS:
            raise ValueError(f"a failure's status is {FAILED_STATUS!r}, not {status!r}")
        with self._write_transaction():
            removed = self._delete_document_rows(path)
            document_id = self._insert_document(path, sha256, size, mtime, status, error, 0, "")
        self._after_commit(removed, [], None)
        return document_id

    @_damage_is_engine_error
    def put_rows(self, rows: portable.DocumentRows, path: str | Path) -> int:
        """Store a document exported from another collection (a bundle's rows) with the ids it
        has there, at `path`, replacing any document with that path; faiss follows. Returns its
        id. sqlite3.IntegrityError when one of its ids is taken here."""
        self._require_writable()
        with self._write_transaction():
            removed = self._delete_document_rows(path)
            added, vectors = portable.insert_rows(self._db, rows, str(path), self._dimension)
        self._after_commit(removed, added, vectors)
        return rows.document_id

    @_damage_is_engine_error
    def remove_document(self, path_or_id: str | Path | int) -> bool:
        """Remove a document, its chunks and their vectors. False when there was none."""
        self._require_writer()
        if isinstance(path_or_id, int):
            row = self._db.execute("SELECT path FROM documents WHERE id = ?", (path_or_id,)).fetchone()
            if row is None:
                return False
            path_or_id = row["path"]
        with self._write_transaction():
            existed = self.find_document(path_or_id) is not None
            removed = self._delete_document_rows(path_or_id)
        self._after_commit(removed, [], None)
        return existed

    # -- chunks and search -------------------------------------------------------------------

    def chunk(self, chunk_id: int) -> dict:
        found = self.chunks([chunk_id])
        if not found:
            raise KeyError(f"no chunk {chunk_id} in this collection")
        return found[0]

    @_damage_is_engine_error
    def chunks(self, chunk_ids: Iterable[int]) -> list[dict]:
        """The chunks that exist among these ids, in the order asked, with their document."""
        wanted = [int(i) for i in chunk_ids]
        found = {}
        for batch in _batches(wanted):
            marks = ",".join("?" * len(batch))
            sql = (f"SELECT {_CHUNK_COLUMNS} FROM chunks c JOIN documents d ON d.id = c.document_id"
                   f" WHERE c.id IN ({marks})")
            found.update((row["id"], _chunk_dict(row)) for row in self._db.execute(sql, batch))
        return [found[i] for i in wanted if i in found]

    @_damage_is_engine_error
    def neighbours(self, chunk_id: int, before: int = 1, after: int = 1) -> list[dict]:
        """The chunk and up to before/after chunks next to it in the same document, in order."""
        rows = self._db.execute(
            f"""SELECT * FROM (
                    SELECT {_CHUNK_COLUMNS} FROM chunks c JOIN documents d ON d.id = c.document_id
                    WHERE c.document_id = (SELECT document_id FROM chunks WHERE id = :id) AND c.id < :id
                    ORDER BY c.id DESC LIMIT :before)
                UNION ALL
                SELECT * FROM (
                    SELECT {_CHUNK_COLUMNS} FROM chunks c JOIN documents d ON d.id = c.document_id
                    WHERE c.document_id = (SELECT document_id FROM chunks WHERE id = :id) AND c.id >= :id
                    ORDER BY c.id LIMIT :after + 1)""",
            {"id": chunk_id, "before": before, "after": after})
        return sorted((_chunk_dict(row) for row in rows), key=lambda c: c["id"])

    @_damage_is_engine_error
    def page_labels(self, pages: Iterable[tuple[int, int]]) -> dict[tuple[int, int], str]:
        """{(document id, physical page): printed label} for those of these pages that have
        one. A collection from before labels were kept has none."""
        wanted = sorted({(int(d), int(p)) for d, p in pages})
        found: dict[tuple[int, int], str] = {}
        for start in range(0, len(wanted), _ID_BATCH // 2):
            batch = wanted[start:start + _ID_BATCH // 2]
            rows = ",".join("(?, ?)" for _ in batch)
            sql = f"SELECT document_id, page, label FROM page_labels WHERE (document_id, page) IN (VALUES {rows})"
            try:
                result = self._db.execute(sql, [v for pair in batch for v in pair]).fetchall()
            except sqlite3.OperationalError as exc:
                if "no such table" not in str(exc):
                    raise
                return {}  # read-only and older than the table
            found.update(((row[0], row[1]), row[2]) for row in result)
        return found

    @_damage_is_engine_error
    def recognised_pages(self, pages: Iterable[tuple[int, int]]) -> set[tuple[int, int]]:
        """Those of these (document id, physical page) whose text was recognised by OCR. A
        collection from before OCR has none."""
        if not self._has_table("ocr_pages"):
            return set()
        wanted = sorted({(int(d), int(p)) for d, p in pages})
        found: set[tuple[int, int]] = set()
        for start in range(0, len(wanted), _ID_BATCH // 2):
            batch = wanted[start:start + _ID_BATCH // 2]
            rows = ",".join("(?, ?)" for _ in batch)
            sql = f"SELECT document_id, page FROM ocr_pages WHERE (document_id, page) IN (VALUES {rows})"
            found.update((row[0], row[1]) for row in self._db.execute(sql, [v for pair in batch for v in pair]))
        return found

    @_damage_is_engine_error
    def page_ocr(self, document_id: int, page: int) -> PageOcr | None:
        """How a page was recognised (its words' boxes, for highlighting), or None when its text
        came from the PDF's text layer (or the collection is from before OCR)."""
        if not self._has_table("ocr_pages"):
            return None
        row = self._db.execute("SELECT confidence, engine, width, height, words FROM ocr_pages"
                               " WHERE document_id = ? AND page = ?", (int(document_id), int(page))).fetchone()
        return _page_ocr(row) if row else None

    @_damage_is_engine_error
    def page_ocr_by_path(self, path: str | Path, page: int) -> PageOcr | None:
        """page_ocr of the document stored under `path` (as a citation names it)."""
        row = self._db.execute("SELECT id FROM documents WHERE path = ?", (str(path),)).fetchone()
        return self.page_ocr(row[0], page) if row else None

    @_damage_is_engine_error
    def search_dense(self, query_vector: np.ndarray, k: int) -> list[tuple[int, float]]:
        """Chunk ids and cosine scores (inner product of normalised vectors), best first."""
        self._require_embedder()
        if self._vectors is None:
            raise EngineError(f"The collection '{self.folder.name}' was opened without its dense index.")
        query = _normalised(_as_matrix(query_vector, 1, self._dimension))
        self._refresh_if_changed_elsewhere()
        hits = self._vectors.search(query, k, self.policy)
        if self._vectors.kind != EXACT:
            return self._rescored(query[0], [chunk_id for chunk_id, _ in hits], k)
        existing = self._existing_chunk_ids([chunk_id for chunk_id, _ in hits])
        return [(chunk_id, score) for chunk_id, score in hits if chunk_id in existing]

    def _rescored(self, query: np.ndarray, chunk_ids: list[int], k: int) -> list[tuple[int, float]]:
        """The approximate index's candidates scored exactly from their stored vectors (a
        removed chunk has none left), best first: the exact search's order."""
        scored = []
        for batch in _batches(chunk_ids):
            ids, matrix = self._embeddings_of(batch)
            scored += zip((matrix @ query).tolist(), ids)
        scored.sort(key=lambda pair: (-pair[0], pair[1]))
        return [(chunk_id, score) for score, chunk_id in scored[:k]]

    @_damage_is_engine_error
    def embeddings(self, chunk_ids: Iterable[int]) -> dict[int, np.ndarray]:
        """The stored (normalised) embeddings of the chunks that exist among these ids."""
        found: dict[int, np.ndarray] = {}
        for batch in _batches([int(i) for i in chunk_ids]):
            ids, vectors = self._embeddings_of(batch)
            found.update(zip(ids, vectors))
        return found

    @_damage_is_engine_error
    def search_keyword(self, query: str, k: int, prefixes: Iterable[str] = ()) -> list[tuple[int, float]]:
        """Chunk ids and BM25 scores (higher is better), best first. Any text is a safe query:
        each word is searched as a quoted phrase, so FTS5 syntax in it means nothing.
        `prefixes` also match any word they begin (stems: 'print' finds 'printing')."""
        match = fts_query(query, prefixes)
        if not match or k <= 0:
            return []
        if self._has_heading_column:
            rank, weights = "bm25(chunks_fts, 1.0, ?)", (float(self.heading_weight),)
        else:
            rank, weights = "bm25(chunks_fts)", ()
        rows = self._db.execute(
            f"SELECT rowid, {rank} AS score FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY score LIMIT ?",
            (*weights, match, int(k)))
        return [(row[0], -row[1]) for row in rows]  # FTS5's bm25 is negative: lower is better

    @_damage_is_engine_error
    def prefix_frequency(self, prefix: str, whole_word: bool = False) -> float:
        """The fraction of chunks with a word that starts with `prefix` (0 for an empty one);
        whole_word: with that word itself. Kept until the next commit: a common prefix takes
        50-250 ms to count at a million chunks, and a kiosk's questions share their words."""
        match = fts_query(prefix)
        total = self.counted_chunks()
        if not match or " OR " in match or total == 0:
            return 0.0
        key = (prefix, whole_word)
        found = self._frequencies.get(key)
        if found is None:
            found = self._db.execute("SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?",
                                     ("text : " + match + ("" if whole_word else "*"),)).fetchone()[0]
            if len(self._frequencies) >= _FREQUENCIES_KEPT:
                self._frequencies.clear()
            self._frequencies[key] = found
        return found / total

    @_damage_is_engine_error
    def counted_chunks(self) -> int:
        """The number of chunks, counted again only after a commit (here or elsewhere): a count
        reads a whole index, ~20 ms at a million chunks, and a question asks once per word."""
        state = (self._current_data_version(), self._db.total_changes)
        if self._chunk_total[0] != state:
            self._chunk_total = (state, self._chunk_count())
            self._frequencies = {}
        return self._chunk_total[1]

    # -- state -------------------------------------------------------------------------------

    def vector_ids(self) -> np.ndarray:
        """The chunk ids the in-memory faiss index holds (sorted), for checks and stats."""
        self._require_embedder()
        return np.sort(self._vectors.ids())

    @_damage_is_engine_error
    def stats(self) -> dict:
        counts = dict(self._db.execute("SELECT status, count(*) FROM documents GROUP BY status").fetchall())
        chunks = self._db.execute("SELECT count(*) FROM chunks").fetchone()[0]
        return {
            "folder": str(self.folder),
            "schema_version": int(self._meta["schema_version"]),
            "embedder_id": self.embedder_id,
            "dimension": self._dimension,
            "documents": sum(counts.values()),
            "documents_by_status": counts,
            "chunks": chunks,
            "vectors": self._vectors.ntotal if self._vectors else 0,
            "index": self._vectors.kind if self._vectors else "",
            "index_lists": self._vectors.lists if self._vectors else 0,
            "vectors_unsaved": self._dirty,
            "faiss_file": self._meta.get("faiss_file", ""),
            "faiss_max_chunk_id": int(self._meta.get("faiss_max_chunk_id", 0)),
            "database_bytes": _file_size(self.folder / DB_NAME),
            "read_only": self.read_only,
            "embedder_mismatch": self._mismatch,
            "open_report": dict(self.open_report),
        }

    def refuse_if_emptied(self) -> None:
        """Raise CollectionDamagedError, saying what happened and what to do, when damage left
        this collection with nothing to answer from (see health.emptied_error); else nothing."""
        error = health.emptied_error(self.folder, self.list_documents(), self.stats()["chunks"])
        if error is not None:
            error.repaired = list(self.open_report.get("repaired") or [])
            raise error

    def quick_check(self) -> str:
        """SQLite's PRAGMA quick_check: "ok", or what is wrong."""
        return "\n".join(row[0] for row in self._db.execute("PRAGMA quick_check"))

    @_damage_is_engine_error
    def flush(self) -> bool:
        """Persist the faiss cache if it changed. True when a file was written."""
        self._require_writer()
        if not self._dirty or self._vectors is None:
            return False
        generation = int(self._meta.get("faiss_generation", 0)) + 1
        name = f"vectors-{generation:06d}.faiss"
        sha256 = _write_index_durably(self.folder / name, self._vectors)
        covered = self._vectors.max_id()
        with self._write_transaction():
            _set_meta(self._db, faiss_file=name, faiss_sha256=sha256, faiss_max_chunk_id=covered,
                      faiss_generation=generation, faiss_lists=self._vectors.lists)
        self._meta = _read_meta(self._db, self.folder)
        self._dirty = False
        self._remove_stale_vector_files()
        return True

    # -- internals: writing ----------------------------------------------------------------

    @contextmanager
    def _write_transaction(self) -> Iterator[None]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
            self._db.execute("COMMIT")
        except BaseException:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise

    def _insert_document(self, path, sha256, size, mtime, status, error, page_count, title) -> int:
        cursor = self._db.execute(
            "INSERT INTO documents (path, sha256, size, mtime, status, error, page_count, title, added_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (str(path), sha256, int(size), float(mtime), status, _clean(error), int(page_count),
             _clean(title), time.time()))
        return cursor.lastrowid

    def _delete_document_rows(self, path) -> list[int]:
        """Delete a document and its chunks (the FTS trigger follows); returns the chunk ids."""
        row = self._db.execute("SELECT id FROM documents WHERE path = ?", (str(path),)).fetchone()
        if row is None:
            return []
        chunk_ids = self._chunk_ids_of(row["id"])
        self._db.execute("DELETE FROM chunks WHERE document_id = ?", (row["id"],))
        self._db.execute("DELETE FROM documents WHERE id = ?", (row["id"],))
        return chunk_ids

    def _chunk_ids_of(self, document_id: int) -> list[int]:
        rows = self._db.execute("SELECT id FROM chunks WHERE document_id = ? ORDER BY id", (document_id,))
        return [row[0] for row in rows]

    def _after_commit(self, removed: list[int], added: list[int], vectors: np.ndarray | None) -> None:
        """Mirror a committed change in faiss. If this process dies first, open() catches up."""
        if self._vectors is None:
            return
        if removed:
            self._vectors.remove(removed)
        if added:
            self._vectors.add(added, vectors)
        self._dirty = self._dirty or bool(removed or added)
        self._follow_size()

    def _follow_size(self) -> None:
        """Rebuild the index from SQLite when the collection's size calls for the other kind,
        or for more lists than it was trained with, and save it at once."""
        kind = self.policy.rebuild_as(self._vectors)
        if kind is None:
            return
        started = time.perf_counter()
        with self._read_snapshot():
            self._vectors = self._fresh_index(kind)
            self._reconcile()
        self._dirty = True
        log.info("dense index of %s rebuilt as %s (%d vectors, %d lists) in %.1f s", self.folder, kind,
                 self._vectors.ntotal, self._vectors.lists, time.perf_counter() - started)
        self.flush()

    def _require_writer(self) -> None:
        if self._lock is None:
            raise EngineError("This collection was opened read-only; it cannot be changed.")

    def _require_embedder(self) -> None:
        if self._mismatch:
            raise EngineError(self._mismatch)

    def _require_writable(self) -> None:
        self._require_writer()
        self._require_embedder()

    # -- internals: the faiss cache --------------------------------------------------------

    def _load_vectors(self) -> None:
        """Load the recorded faiss file (or start an index of the kind the size wants) and
        reconcile it with SQLite."""
        started = time.perf_counter()
        # readers opened at once (a server's sessions) wait for the first one's load, then share it
        with _SHARED_LOCK if self.read_only else contextlib.nullcontext(), self._read_snapshot():
            vectors, source = self._vectors_shared() if self.read_only else (None, "")
            if vectors is None:
                vectors, source = self._vectors_from_file()
            self._vectors = vectors or self._fresh_index(self.policy.kind_for(self._chunk_count(), EXACT))
            added, removed = self._reconcile()
            self._data_version = self._current_data_version()
            if self.read_only and source == "loaded" and not (added or removed):
                self._share()
        self._dirty = source not in ("loaded", "shared") or bool(added or removed)
        self.open_report = {"faiss": source, "added": added, "removed": removed,
                            "seconds": round(time.perf_counter() - started, 3)}
        if source != "loaded" or added or removed:
            log.info("faiss cache of %s: %s", self.folder, self.open_report)

    def _vectors_from_file(self) -> tuple[DenseIndex | None, str]:
        """The index in the file meta names, checked against its SHA-256; None (to be rebuilt
        from SQLite) when there is none or it cannot be used, with the reason."""
        name = self._meta.get("faiss_file", "")
        if not name:
            return None, "new"
        try:
            with open(self.folder / name, "rb") as handle:
                if _sha256_of(handle) != self._meta.get("faiss_sha256"):
                    log.warning("faiss file %s does not match its checksum; rebuilding it", name)
                    return None, "rebuilt: checksum mismatch"
                handle.seek(0)
                vectors = DenseIndex.read(handle, self._dimension)
        except FileNotFoundError:
            log.warning("faiss file %s is missing; rebuilding it from the database", name)
            return None, "rebuilt: file missing"
        if vectors is None:
            log.warning("faiss file %s is unreadable or holds an unexpected index; rebuilding it", name)
            return None, "rebuilt: unreadable"
        return vectors, "loaded"

    def _shared_key(self) -> tuple[str, str]:
        return str((self.folder / self._meta.get("faiss_file", "")).resolve()), self._meta.get("faiss_sha256", "")

    def _vectors_shared(self) -> tuple[DenseIndex | None, str]:
        """The index another read-only store of this collection loaded from the same file."""
        if not self._meta.get("faiss_file"):
            return None, ""
        vectors = _SHARED.get(self._shared_key())
        self._shared = vectors is not None
        return vectors, "shared"

    def _share(self) -> None:
        self._vectors = _SHARED.setdefault(self._shared_key(), self._vectors)
        self._shared = True

    def _fresh_index(self, kind: str) -> DenseIndex:
        """An empty index of `kind` for the chunks SQLite holds now, which _reconcile fills; an
        approximate one is trained on a sample of their vectors (the same sample for the same
        chunks). Call inside a read snapshot."""
        if kind == EXACT:
            return DenseIndex.exact(self._dimension)
        ids = self._chunk_ids()
        lists = self.policy.lists_for(len(ids))
        size = min(len(ids), lists * self.policy.train_per_list)
        picked = np.sort(np.random.default_rng(len(ids)).choice(ids, size, replace=False))
        sample = [self._embeddings_of(batch)[1] for batch in _batches(picked.tolist())]
        return DenseIndex.trained(np.concatenate(sample), lists)

    def _chunk_ids(self) -> np.ndarray:
        return np.fromiter((row[0] for row in self._db.execute("SELECT id FROM chunks")), dtype=np.int64)

    def _chunk_count(self) -> int:
        return self._db.execute("SELECT count(*) FROM chunks").fetchone()[0]

    def _reconcile(self) -> tuple[int, int]:
        """Make faiss hold exactly SQLite's chunk ids. Returns (added, removed) counts."""
        in_sqlite = self._chunk_ids()
        in_faiss = self._vectors.ids()
        extra = np.setdiff1d(in_faiss, in_sqlite, assume_unique=True)
        missing = np.setdiff1d(in_sqlite, in_faiss, assume_unique=True)
        if (extra.size or missing.size) and self._shared:  # others search it: change a copy
            self._vectors, self._shared = self._vectors.copy(), False
        if extra.size:
            self._vectors.remove(extra.tolist())
        for batch in _batches(missing.tolist()):
            ids, vectors = self._embeddings_of(batch)
            self._vectors.add(ids, vectors)
        return int(missing.size), int(extra.size)

    def _embeddings_of(self, chunk_ids: list[int]) -> tuple[list[int], np.ndarray]:
        marks = ",".join("?" * len(chunk_ids))
        sql = f"SELECT id, embedding FROM chunks WHERE id IN ({marks})"
        rows = self._db.execute(sql, chunk_ids).fetchall()
        matrix = np.frombuffer(b"".join(row[1] for row in rows), dtype=np.float32)
        return [row[0] for row in rows], matrix.reshape(len(rows), self._dimension)

    def _refresh_if_changed_elsewhere(self) -> None:
        """Another process committed (a reader beside an indexer): bring faiss up to date."""
        version = self._current_data_version()
        if version == self._data_version:
            return
        with self._read_snapshot():
            self._load_rebuilt_file()
            added, removed = self._reconcile()
            self._data_version = self._current_data_version()
        self._dirty = self._dirty or bool(added or removed)

    def _load_rebuilt_file(self) -> None:
        """A writer rebuilt the index (another kind, or retrained lists): take its file rather
        than keep catching up an index of the wrong shape for the size now."""
        meta = _read_meta(self._db, self.folder)
        rebuilt = int(meta.get("faiss_lists", 0)) != self._vectors.lists
        if not rebuilt or meta.get("faiss_file") == self._meta.get("faiss_file"):
            return
        self._meta = meta
        loaded, _ = self._vectors_from_file()
        if loaded is not None:
            self._vectors, self._shared = loaded, False

    def _current_data_version(self) -> int:
        return self._db.execute("PRAGMA data_version").fetchone()[0]

    @contextmanager
    def _read_snapshot(self) -> Iterator[None]:
        """One read transaction, so the ids and embeddings read belong to the same state."""
        self._db.execute("BEGIN")
        try:
            yield
        finally:
            self._db.execute("COMMIT")

    def _existing_chunk_ids(self, chunk_ids: list[int]) -> set[int]:
        found: set[int] = set()
        for batch in _batches(chunk_ids):
            marks = ",".join("?" * len(batch))
            rows = self._db.execute(f"SELECT id FROM chunks WHERE id IN ({marks})", batch)
            found.update(row[0] for row in rows)
        return found

    def _remove_stale_vector_files(self) -> None:
        """Delete faiss files that meta no longer names (older ones, or a crashed flush's)."""
        current = self._meta.get("faiss_file", "")
        for path in self.folder.glob(VECTORS_GLOB):
            if path.name == current:
                continue
            try:
                path.unlink()
            except OSError as exc:  # e.g. a reader on Windows still has it open: next time
                log.info("could not remove old faiss file %s yet: %s", path, exc)


# -- helpers -----------------------------------------------------------------------------------




def fts_query(text: str, prefixes: Iterable[str] = ()) -> str:
    """An FTS5 MATCH expression for free text: each distinct word as a quoted phrase, ORed,
    and each prefix as a quoted prefix query.

    Quoting makes operators (AND, NEAR, *, ^, column:, parentheses) plain words; words
    without a letter or digit are dropped, since they would be empty phrases."""
    terms: list[str] = []
    for word, star in [(w, "") for w in _printable(text).split()] + \
                      [(p, "*") for p in _printable(" ".join(prefixes)).split()]:
        if not any(ch.isalnum() for ch in word):
            continue
        term = '"' + word.replace('"', '""') + '"' + star
        if term not in terms:
            terms.append(term)
    return " OR ".join(terms[:_MAX_QUERY_TERMS])


def _printable(text: str) -> str:
    """Control characters become spaces: FTS5 reads a NUL as the end of the query."""
    return "".join(ch if ch.isprintable() else " " for ch in _clean(text))


def _take_writer_lock(folder: Path):
    """Hold an OS lock on writer.lock; the OS releases it when the process ends, even killed."""
    folder.mkdir(parents=True, exist_ok=True)
    handle = open(folder / LOCK_NAME, "a+b")
    handle.seek(0)  # msvcrt locks bytes from the current position
    if not _try_lock(handle):
        handle.close()
        raise EngineError(f"The collection '{folder.name}' is being indexed by another process; "
                          "wait for it to finish (or stop it) and try again.")
    return handle


def _check_on_open(folder: Path, db_path: Path, lock) -> list[str]:
    """Check (and repair) the database before it is used; see engine/store/health.py. A reader
    repairs too when no writer is at work (it holds the writer lock meanwhile), since an
    FTS5 integrity-check needs a writable connection. Files as a sound check left them are not
    read again (a writer asks for FTS5's check too)."""
    if health.is_fresh(db_path) or health.is_stamped(db_path, with_fts=lock is not None):
        return []
    guard = lock if lock is not None else _writer_lock_if_free(folder)
    try:
        return health.check(folder, db_path, lambda: _connect(db_path, guard is None),
                            can_repair=guard is not None)
    finally:
        if guard is not None and guard is not lock:
            guard.close()


def _writer_lock_if_free(folder: Path):
    """The writer lock when nobody holds it and the folder may be written; else None."""
    try:
        handle = open(folder / LOCK_NAME, "a+b")
    except OSError:
        return None
    handle.seek(0)
    if _try_lock(handle):
        return handle
    handle.close()
    return None


def _try_lock(handle) -> bool:
    try:
        if os.name == "nt":
            import msvcrt

            msvcrt.locking(handle.fileno(), msvcrt.LK_NBLCK, 1)
        else:
            import fcntl

            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def _connect(db_path: Path, read_only: bool) -> sqlite3.Connection:
    uri = db_path.resolve().as_uri() + ("?mode=ro" if read_only else "")
    # Autocommit mode: this module writes BEGIN/COMMIT itself. The store may be created on one
    # thread and used on a worker thread (one at a time), hence check_same_thread=False.
    db = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
    try:
        db.row_factory = sqlite3.Row
        db.execute("PRAGMA busy_timeout = 10000")
        db.execute("PRAGMA foreign_keys = ON")
        if not read_only:
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("PRAGMA synchronous = FULL")
    except BaseException:
        db.close()
        raise
    return db


def _remove_database(db_path: Path) -> None:
    """Delete a database this process began to create, with its WAL and shared memory."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        try:
            db_path.with_name(db_path.name + suffix).unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("could not remove the unfinished %s: %s", db_path.name + suffix, exc)


def _has_schema(db: sqlite3.Connection) -> bool:
    return db.execute("SELECT 1 FROM sqlite_master WHERE name = 'meta'").fetchone() is not None


def _create_schema(db: sqlite3.Connection, embedder_id: str, dimension: int) -> None:
    db.executescript("BEGIN IMMEDIATE;" + _SCHEMA)
    try:
        _set_meta(db, schema_version=SCHEMA_VERSION, embedder_id=embedder_id, dimension=int(dimension),
                  faiss_file="", faiss_sha256="", faiss_max_chunk_id=0, faiss_generation=0,
                  created_at=time.time())
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


def _upgrade(db: sqlite3.Connection, folder: Path) -> bool:
    """Format 1 -> 2 in one transaction: the FTS index is rebuilt from the chunks table with
    the heading paths (seconds; no text or embedding is touched, so nothing is lost)."""
    row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    if row is None or int(row[0]) != 1:
        return False
    started = time.perf_counter()
    db.executescript("BEGIN IMMEDIATE;" + _DROP_FTS_V1 + _FTS_SCHEMA)
    try:
        db.execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('rebuild')")
        _set_meta(db, schema_version=SCHEMA_VERSION)
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    log.info("collection %s upgraded to format %d (keyword index with headings) in %.1f s",
             folder, SCHEMA_VERSION, time.perf_counter() - started)
    return True


def adopt_vectors(db: sqlite3.Connection, name: str, sha256: str, lists: int) -> None:
    """Names `name`, a faiss file beside the database with that SHA-256, as the collection's
    dense index: an install that inserted a bundle's rows takes the index built with them
    instead of building its own (minutes at a million chunks)."""
    _set_meta(db, faiss_file=name, faiss_sha256=sha256, faiss_lists=int(lists), faiss_generation=1)


def _set_meta(db: sqlite3.Connection, **values) -> None:
    db.executemany("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                   [(key, str(value)) for key, value in values.items()])


def _read_meta(db: sqlite3.Connection, folder: Path) -> dict:
    try:
        meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
    except sqlite3.OperationalError as exc:  # no meta table: not one of our collections
        raise EngineError(f"'{folder}' does not hold a collection this app can read ({exc}).") from exc
    version = int(meta.get("schema_version", 0))
    if version not in READABLE_VERSIONS:
        raise EngineError(f"The collection in '{folder}' has format {version}, this app reads formats "
                          f"up to {SCHEMA_VERSION}; use a matching version of the app or index the documents "
                          "again.")
    return meta


def _embedder_mismatch(meta: dict, embedder_id: str | None, dimension: int | None, folder: Path) -> str:
    if embedder_id is None and dimension is None:
        return ""  # the caller takes whatever embedder the collection has
    if meta["embedder_id"] == embedder_id and int(meta["dimension"]) == dimension:
        return ""
    return (f"The collection '{folder.name}' was built with the embedding model '{meta['embedder_id']}' "
            f"({meta['dimension']} dimensions), not '{embedder_id}' ({dimension} dimensions); "
            "re-embed it (index its documents again into a new collection) or switch back to that model.")


def _as_matrix(vectors, rows: int, dimension: int) -> np.ndarray:
    matrix = np.asarray(vectors, dtype=np.float32)
    if matrix.size == 0 and rows == 0:
        matrix = matrix.reshape(0, dimension)
    if rows == 1 and matrix.ndim == 1:
        matrix = matrix.reshape(1, -1)
    if matrix.shape != (rows, dimension):
        raise ValueError(f"expected embeddings of shape ({rows}, {dimension}), got {matrix.shape}")
    if not np.isfinite(matrix).all():
        raise ValueError("embeddings contain NaN or infinite values")
    return matrix


def _normalised(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.ascontiguousarray(matrix / np.where(norms > 0, norms, 1.0), dtype=np.float32)


def _chunk_rows(document_id: int, chunks: list[Chunk], vectors: np.ndarray):
    for chunk, vector in zip(chunks, vectors):
        yield (document_id, int(chunk.page), int(chunk.start), int(chunk.end), _clean(chunk.text),
               json.dumps(list(chunk.heading_path), ensure_ascii=False), vector.tobytes())


def _ocr_row(document_id: int, page: int, ocr: PageOcr) -> tuple:
    data = ocr.to_json()
    return (document_id, int(page), float(ocr.confidence), _clean(ocr.engine), float(ocr.width),
            float(ocr.height), json.dumps(data["words"]))


def _page_ocr(row: sqlite3.Row) -> PageOcr:
    """A stored row back as a PageOcr; damaged words raise CollectionDamagedError (the caller's guard)."""
    words = json.loads(row["words"])
    if not isinstance(words, list):
        raise json.JSONDecodeError("ocr_pages.words is not a list", str(row["words"])[:40], 0)
    try:
        return PageOcr.from_json({"confidence": row["confidence"], "width": row["width"], "height": row["height"],
                                  "engine": row["engine"], "words": words})
    except (TypeError, ValueError) as exc:
        raise json.JSONDecodeError(f"ocr_pages.words: {exc}", str(row["words"])[:40], 0) from exc


def _chunk_dict(row: sqlite3.Row) -> dict:
    chunk = dict(row)
    chunk["heading_path"] = tuple(json.loads(chunk["heading_path"]))
    return chunk


def _clean(text: str) -> str:
    """Lone surrogates (from odd decoders) cannot be stored as UTF-8; replace them, length kept."""
    return text.encode("utf-8", "replace").decode("utf-8")


def _batches(items: list[int]) -> Iterator[list[int]]:
    for start in range(0, len(items), _ID_BATCH):
        yield items[start:start + _ID_BATCH]


def _write_index_durably(path: Path, index: DenseIndex) -> str:
    """Stream the index to a temporary name, fsync, rename, fsync the folder: never a torn file.
    Returns its SHA-256. On a failure the temporary is removed; a full disk raises DiskFullError
    naming the folder."""
    temporary = path.with_name(path.name + ".tmp")
    digest = hashlib.sha256()
    with disk_full_as_error(path.parent, index.nbytes):
        try:
            with open(temporary, "wb") as handle:
                index.write(lambda data: (digest.update(data), handle.write(data)))
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, path)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise
    fsync_folder(path.parent)
    return digest.hexdigest()


def _sha256_of(handle) -> str:
    digest = hashlib.sha256()
    while block := handle.read(1 << 20):
        digest.update(block)
    return digest.hexdigest()


def _file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0
