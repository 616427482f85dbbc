"""A document's rows as a portable object: what bundles carry instead of the whole database, so
a kiosk that holds the previous version downloads only the documents that changed.

    data = export_rows(db, document_id)       # gzip'd JSON lines: the same bytes for the same rows
    rows = read_rows(data, where)             # DocumentRows; ValueError naming `where` and what is wrong
    chunk_ids, vectors = insert_rows(db, rows, path, dimension)   # inside the caller's transaction

Rows keep the ids they have in the collection they came from, so the dense index built there
(keyed by chunk id) stays valid beside them. Embeddings travel as the stored float32 bytes
(base64): a kiosk searches with exactly the admin's vectors.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import json
import sqlite3
import zlib
from dataclasses import dataclass

import numpy as np

FORMAT = 1
# Every table that holds a document's rows, parent first (the order they are inserted in).
TABLES = ("documents", "chunks", "page_labels", "ocr_pages", "text_versions")
_KEY = {"documents": "id"}  # the column naming the document; document_id in the others
_BINARY = "embedding"  # the one BLOB column


@dataclass(frozen=True)
class DocumentRows:
    document_id: int
    tables: dict[str, tuple[list[str], list[list]]]  # table -> (columns, rows)


def export_rows(db: sqlite3.Connection, document_id: int) -> bytes:
    """The document's rows in every table that has any, ordered by key: deterministic bytes."""
    lines = [json.dumps({"format": FORMAT, "document_id": int(document_id)})]
    for table in TABLES:
        if not has_table(db, table):
            continue
        columns = _columns(db, table)
        key = _KEY.get(table, "document_id")
        cursor = db.execute(f'SELECT {", ".join(_quoted(columns))} FROM {table} WHERE {key} = ? '
                            f'ORDER BY {", ".join(_quoted(_primary_key(db, table)))}', (int(document_id),))
        rows = [[_encoded(value) for value in row] for row in cursor]
        if rows:
            lines.append(json.dumps({"table": table, "columns": columns, "rows": rows},
                                    ensure_ascii=False, separators=(",", ":")))
    return gzip.compress("\n".join(lines).encode("utf-8") + b"\n", compresslevel=6, mtime=0)


def read_rows(data: bytes, where: str) -> DocumentRows:
    """Parses and checks an object written by export_rows: one document row, every other row
    naming that document, known tables only."""
    try:
        lines = gzip.decompress(data).decode("utf-8").splitlines()
        head, parts = json.loads(lines[0]), [json.loads(line) for line in lines[1:]]
    except (OSError, EOFError, zlib.error, UnicodeDecodeError, ValueError, IndexError) as exc:
        raise ValueError(f"{where}: not a document's rows ({exc})") from exc
    if not isinstance(head, dict) or head.get("format") != FORMAT or not _is_int(head.get("document_id")):
        raise ValueError(f"{where}: rows of format {head.get('format') if isinstance(head, dict) else head!r}, "
                         f"this app reads format {FORMAT}")
    document_id = head["document_id"]
    tables: dict[str, tuple[list[str], list[list]]] = {}
    for part in parts:
        table, columns, rows = _part(part, where)
        if table in tables:
            raise ValueError(f"{where}: table {table} given twice")
        key = columns.index(_KEY.get(table, "document_id"))
        if any(row[key] != document_id for row in rows):
            raise ValueError(f"{where}: a row of {table} belongs to another document than {document_id}")
        try:
            tables[table] = (columns, [[_decoded(value) for value in row] for row in rows])
        except ValueError as exc:
            raise ValueError(f"{where}: {table}: {exc}") from exc
    if len(tables.get("documents", ((), ()))[1]) != 1:
        raise ValueError(f"{where}: needs exactly one row of documents")
    return DocumentRows(document_id, tables)


def insert_rows(db: sqlite3.Connection, rows: DocumentRows, path: str, dimension: int,
                ) -> tuple[list[int], np.ndarray]:
    """Inserts `rows` with their ids, the document stored at `path`; returns the chunk ids and
    their vectors. sqlite3.IntegrityError when an id is taken (rows that do not belong here)."""
    for table in TABLES:
        if table not in rows.tables:
            continue
        columns, values = rows.tables[table]
        unknown = set(columns) - set(_columns(db, table))
        if unknown:
            raise ValueError(f"rows of document {rows.document_id}: {table} has no column {sorted(unknown)}")
        if table == "documents":
            at = columns.index("path")
            values = [[path if n == at else value for n, value in enumerate(row)] for row in values]
        marks = ", ".join("?" * len(columns))
        db.executemany(f'INSERT INTO {table} ({", ".join(_quoted(columns))}) VALUES ({marks})', values)
    return _chunk_vectors(rows, dimension)


def _chunk_vectors(rows: DocumentRows, dimension: int) -> tuple[list[int], np.ndarray]:
    columns, values = rows.tables.get("chunks", (["id", _BINARY], []))
    ids, blobs = columns.index("id"), columns.index(_BINARY)
    if any(not isinstance(row[blobs], bytes) or len(row[blobs]) != 4 * dimension for row in values):
        raise ValueError(f"rows of document {rows.document_id}: an embedding is not {dimension} float32 values")
    matrix = np.frombuffer(b"".join(row[blobs] for row in values), dtype=np.float32)
    return [row[ids] for row in values], matrix.reshape(len(values), dimension)


def _part(part, where: str) -> tuple[str, list[str], list[list]]:
    if not isinstance(part, dict) or part.get("table") not in TABLES:
        raise ValueError(f"{where}: unknown table {part.get('table') if isinstance(part, dict) else part!r}")
    table, columns, rows = part["table"], part.get("columns"), part.get("rows")
    if not isinstance(columns, list) or not all(isinstance(c, str) and c.isidentifier() for c in columns) \
            or _KEY.get(table, "document_id") not in columns or len(set(columns)) != len(columns):
        raise ValueError(f"{where}: the columns of {table} are not valid")
    if not isinstance(rows, list) or not all(isinstance(row, list) and len(row) == len(columns) for row in rows):
        raise ValueError(f"{where}: a row of {table} does not match its columns")
    return table, columns, rows


def _encoded(value):
    return {"base64": base64.b64encode(value).decode("ascii")} if isinstance(value, bytes) else value


def _decoded(value):
    if isinstance(value, dict):
        try:
            return base64.b64decode(value["base64"], validate=True)
        except (KeyError, TypeError, binascii.Error) as exc:
            raise ValueError(f"a binary value is not base64 ({exc})") from exc
    if isinstance(value, list):
        raise ValueError("a value is a list, not a column's value")
    return value


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def has_table(db: sqlite3.Connection, table: str) -> bool:
    return db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone() is not None


def _columns(db: sqlite3.Connection, table: str) -> list[str]:
    return [row[1] for row in db.execute(f"PRAGMA table_info({table})")]


def _primary_key(db: sqlite3.Connection, table: str) -> list[str]:
    keyed = sorted((row[5], row[1]) for row in db.execute(f"PRAGMA table_info({table})") if row[5])
    return [name for _, name in keyed] or ["rowid"]


def _quoted(columns: list[str]) -> list[str]:
    return [f'"{name}"' for name in columns]
