"""The health of a collection's database, checked when it is opened, and its repair.

A damaged collection is never replaced silently. What can be rebuilt from what is intact is
rebuilt: the FTS5 keyword index from the chunks table, and a document whose stored rows are
unreadable is emptied and marked failed, so that the next index run reads it again from its
file (faiss follows the chunks table on its own). A database that cannot be read at all (not
SQLite, empty, its pages broken) has its files moved aside into `<name>.damaged-<time>` next
to the collection, never deleted, and CollectionDamagedError says where and what to do.

The checks: SQLite's quick_check, FTS5's own integrity-check (which needs a writable
connection, so only a process that may write runs it), and a scan that decodes every stored
text and checks every embedding. They read the whole database: 0.1 s at 6,000 chunks, 50 s at
a million. So a sound check leaves a stamp beside the database (its files' size, time and
inode), and so do a writer that closes cleanly and a verified bundle install; an open of a
database of STAMPED_FROM bytes or more that finds its files as stamped skips the checks.
Anything that changes the files otherwise (a crash mid-write, a copy, a restore) changes the
stamp's figures, and a read that meets damage removes the stamp, so the next open checks
everything again. Smaller databases are checked on every open, which also finds a disk's
silent damage (bytes changed, file times not).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from engine.atomic_file import write_json_atomic
from engine.errors import CollectionDamagedError, EngineError
from engine.paths import DB_NAME

log = logging.getLogger(__name__)

SQLITE_HEADER = b"SQLite format 3\x00"
ASIDE_MARK = ".damaged-"
REREAD_REASON = ("Its stored text was damaged and has been removed; it is read again from its file "
                 "on the next index run.")
STATUSES = ("ready", "ready_with_warnings", "failed")
STAMP_NAME = "collection.checked.json"
STAMPED_FROM = 256 * 1024 * 1024  # bytes: checked in ~1 s here; 4.2 GB (a million chunks) in 55 s
_FTS_SHADOWS = ("data", "idx", "docsize", "config")
_SIDE_FILES = ("-wal", "-shm", "-journal")
# A log record with this attribute says what the caller is also told (the error raised, the
# store's open_report): a command line that prints those may leave the record out.
TOLD = "told_to_caller"
_DAMAGE_WORDS = ("malformed", "corrupt", "not a database", "decode", "vtable constructor", "no such table",
                 "no such column", "file is not", "encrypted")


@dataclass
class Findings:
    """What a check found that can be repaired."""

    fts: str = ""  # why the keyword index must be rebuilt; "" when it is sound
    reread: dict[int, str] = field(default_factory=dict)  # document id -> path, to read again
    unnamed: set[int] = field(default_factory=set)  # documents whose path itself is unreadable

    def __bool__(self) -> bool:
        return bool(self.fts or self.reread or self.unnamed)


def is_fresh(db_path: Path) -> bool:
    """True when there is no database yet to lose: no file, or an empty one that never got a
    table (a creation that stopped at once) with no vectors or WAL beside it."""
    if not db_path.exists():
        return True
    if db_path.stat().st_size > 0:
        return False
    folder = db_path.parent
    wal = db_path.with_name(db_path.name + "-wal")
    return not any(folder.glob("vectors-*.faiss")) and not (wal.exists() and wal.stat().st_size > 0)


def is_damage(exc: BaseException) -> bool:
    """True for an error that says the stored data is damaged (not busy, full or read-only)."""
    if isinstance(exc, (UnicodeDecodeError, json.JSONDecodeError)):
        return True
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    text = str(exc).lower()
    return type(exc) is sqlite3.DatabaseError or any(word in text for word in _DAMAGE_WORDS)


def check(folder: Path, db_path: Path, connect: Callable[[], sqlite3.Connection], *,
          can_repair: bool) -> list[str]:
    """Check the database on open and repair what can be. Returns what was repaired, in words
    (empty when it was sound). Raises CollectionDamagedError, with the files moved aside when
    can_repair (this process holds the writer lock), for damage nothing can be rebuilt from."""
    forget_check(db_path)
    reason, findings = _inspect(db_path, connect, can_repair)
    if not reason and findings and can_repair:
        try:
            repaired = _repair(connect, findings)
        except sqlite3.DatabaseError as exc:
            if not is_damage(exc):
                raise
            reason = f"it could not be repaired: {exc}"
        else:
            stamp(db_path, with_fts=True)
            return repaired
    if not reason and not findings:
        stamp(db_path, with_fts=can_repair)
    if reason:
        raise refused(folder, reason, can_repair)
    if findings:
        log.warning("collection %s is damaged (%s) and will be repaired by the next process that writes it",
                    folder, _describe(findings))
    return []


def refused(folder: Path, reason: str, move: bool) -> CollectionDamagedError:
    """The error for a collection nothing can be rebuilt from; its files are moved aside first
    when `move` (the caller holds the writer lock and has closed its connections)."""
    name = folder.name
    if not move:
        return CollectionDamagedError(
            f"The collection '{name}' in '{folder}' is damaged ({reason}). Stop the program that is "
            "indexing it, then open it again: its files will be set aside and you can index the "
            "manuals again, or restore the folder from a backup.", folder)
    aside = set_aside(folder)
    log.error("collection %s is damaged (%s); its files were moved to %s", folder, reason, aside,
              extra={TOLD: True})
    return CollectionDamagedError(
        f"The collection '{name}' could not be opened: its database '{folder / 'collection.sqlite3'}' "
        f"is damaged ({reason}). Its files were moved to '{aside}' (nothing was deleted). Index the "
        "manuals again to rebuild the collection, or restore the folder from a backup.", folder, aside)


def set_aside(folder: Path) -> Path:
    """Move the database, its WAL and the faiss files into `<folder>.damaged-<time>`, next to
    the collection; the writer lock stays. Returns the new folder."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    aside = folder.with_name(f"{folder.name}{ASIDE_MARK}{stamp}")
    number = 1
    while aside.exists():
        number += 1
        aside = folder.with_name(f"{folder.name}{ASIDE_MARK}{stamp}-{number}")
    aside.mkdir(parents=True)
    for path in sorted(folder.iterdir()):
        if path.name.startswith("collection.sqlite3") or path.name.startswith("vectors-"):
            os.replace(path, aside / path.name)
    return aside


def set_aside_folders(folder: Path) -> list[Path]:
    """The folders a damaged `folder` was moved aside into, the oldest first."""
    if not folder.parent.is_dir():
        return []
    return sorted(p for p in folder.parent.glob(folder.name + ASIDE_MARK + "*") if p.is_dir())


def collection_exists(paths, name: str) -> bool:
    """Whether the collection `name` was ever created, or set aside when found damaged (then
    opening it says what happened)."""
    folder = paths.collection(name)
    return (folder / DB_NAME).exists() or bool(set_aside_folders(folder))


def missing_error(folder: Path) -> Exception:
    """The error for a collection that is not there: when a damaged one was set aside, it
    says so and where (so a second `ask` does not just say "index some documents")."""
    aside = set_aside_folders(folder)
    if not aside:
        return EngineError(f"There is no collection in '{folder}'; index some documents into it first.")
    return CollectionDamagedError(_set_aside_note(folder, aside[-1]), folder, aside[-1])


def emptied_error(folder: Path, documents, chunks: int) -> CollectionDamagedError | None:
    """Why a collection has nothing to answer from, when damage is the reason: the stored
    text of its documents was damaged and removed (the next index run reads them again), or
    its files were moved aside and it was created anew. None when it has chunks, or is
    simply new."""
    if chunks:
        return None
    emptied = sorted(Path(d.path).name for d in documents if d.error == REREAD_REASON)
    if emptied:
        return CollectionDamagedError(
            f"The collection '{folder.name}' has nothing to answer from: the stored text of "
            f"{len(emptied)} document(s) was damaged and removed ({', '.join(emptied)}). Index the "
            "manuals again to read them from their files.", folder)
    aside = set_aside_folders(folder)
    if aside and not documents:
        return CollectionDamagedError(_set_aside_note(folder, aside[-1]), folder, aside[-1])
    return None


def _set_aside_note(folder: Path, aside: Path) -> str:
    return (f"The collection '{folder.name}' was damaged: its files were moved to '{aside}' (nothing "
            "was deleted). Index the manuals again to rebuild the collection, or restore the folder "
            "from a backup.")


def read_error(folder: Path, exc: BaseException) -> CollectionDamagedError:
    """The error for a read or write that met damaged data in an open collection; the next
    open checks the whole database again."""
    forget_check(folder / DB_NAME)
    return CollectionDamagedError(
        f"The collection '{folder.name}' could not be read: part of its database is damaged ({_short(exc)}). "
        "Index the manuals again (the next index run repairs what it can); if that fails, move the "
        f"folder '{folder}' aside and index them into a new collection, or restore a backup.", folder)


# -- the stamp of a sound check -------------------------------------------------------------------


def stamp(db_path: Path, *, with_fts: bool) -> None:
    """Record the database's files as checked and sound (`with_fts`: FTS5's integrity-check
    included). Only where an open reads it (STAMPED_FROM bytes on). Best effort: a folder that
    cannot be written (a read-only install) is checked on every open, as before."""
    try:
        if db_path.stat().st_size < STAMPED_FROM:
            return
        write_json_atomic(db_path.with_name(STAMP_NAME), {"files": _file_states(db_path), "fts": with_fts})
    except OSError as exc:
        log.debug("no check stamp for %s: %s", db_path, exc)


def is_stamped(db_path: Path, *, with_fts: bool) -> bool:
    """True for a large database whose files are exactly as a sound check (with FTS5's, when
    asked) left them."""
    try:
        if db_path.stat().st_size < STAMPED_FROM:
            return False
        found = json.loads(db_path.with_name(STAMP_NAME).read_text(encoding="utf-8"))
        return found["files"] == _file_states(db_path) and (found["fts"] or not with_fts)
    except (OSError, ValueError, TypeError, KeyError):
        return False


def forget_check(db_path: Path) -> None:
    with contextlib.suppress(OSError):
        db_path.with_name(STAMP_NAME).unlink()


def _file_states(db_path: Path) -> list:
    """The database's and its WAL's size, time and inode; an empty WAL holds nothing (a reader
    leaves one behind)."""
    states = []
    for path in (db_path, db_path.with_name(db_path.name + "-wal")):
        try:
            info = path.stat()
        except FileNotFoundError:
            info = None
        states.append([info.st_size, info.st_mtime_ns, info.st_ino] if info and info.st_size else None)
    return states


# -- checking --------------------------------------------------------------------------------------


def _inspect(db_path: Path, connect, can_repair: bool) -> tuple[str, Findings]:
    """(why nothing can be rebuilt, or ""; what can be repaired)."""
    with db_path.open("rb") as handle:
        header = handle.read(len(SQLITE_HEADER))
    if header != SQLITE_HEADER:
        what = "the file is empty" if not header else "the file is not an SQLite database"
        return what, Findings()
    try:
        db = connect()
        try:
            if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'meta'").fetchone() is None:
                return "it holds none of a collection's tables", Findings()
            problem = _quick_check(db)
            if problem:
                return f"SQLite's check found: {problem}", Findings()
            findings = _damaged_rows(db, _dimension(db))
            findings.fts = _fts_problem(db) if can_repair else ""
            return "", findings
        finally:
            db.close()
    except sqlite3.DatabaseError as exc:
        if not is_damage(exc):
            raise
        return _short(exc), Findings()


def _quick_check(db: sqlite3.Connection) -> str:
    rows = [row[0] for row in db.execute("PRAGMA quick_check")]
    return "" if rows == ["ok"] else "; ".join(rows[:3])


def _dimension(db: sqlite3.Connection) -> int:
    row = db.execute("SELECT value FROM meta WHERE key = 'dimension'").fetchone()
    try:
        return int(row[0])
    except (TypeError, ValueError) as exc:
        raise sqlite3.DatabaseError("the collection's dimension is unreadable") from exc


def _fts_problem(db: sqlite3.Connection) -> str:
    """FTS5's integrity-check (the index against the chunks it was built from); "" when sound."""
    try:
        db.execute("INSERT INTO chunks_fts(chunks_fts, rank) VALUES ('integrity-check', 1)")
    except sqlite3.DatabaseError as exc:
        return _short(exc) if is_damage(exc) else ""
    return ""


def _damaged_rows(db: sqlite3.Connection, dimension: int) -> Findings:
    """Documents with a row that cannot be read back: text that is not UTF-8, a heading path
    that is not JSON, an embedding of the wrong size or not finite, an unknown status."""
    findings = Findings()
    names: dict[int, str] = {}
    for row in db.execute("SELECT id, CAST(path AS BLOB), CAST(sha256 AS BLOB), CAST(status AS BLOB),"
                          " CAST(error AS BLOB), CAST(title AS BLOB) FROM documents"):
        texts = _decoded(row[1:])
        if texts is None or not texts[0]:
            findings.unnamed.add(row[0])
            continue
        names[row[0]] = texts[0]
        if texts[2] not in STATUSES:
            findings.reread[row[0]] = texts[0]
    sql = "SELECT document_id, CAST(text AS BLOB), CAST(heading_path AS BLOB), embedding FROM chunks"
    for document_id, text, heading_path, embedding in db.execute(sql):
        if document_id in findings.unnamed or document_id in findings.reread:
            continue
        if not _chunk_readable(text, heading_path, embedding, dimension):
            if document_id in names:
                findings.reread[document_id] = names[document_id]
            else:
                findings.unnamed.add(document_id)
    for (document_id,) in _label_rows_unreadable(db) + _ocr_rows_unreadable(db):
        if document_id in names and document_id not in findings.reread:
            findings.reread[document_id] = names[document_id]
    return findings


def _label_rows_unreadable(db: sqlite3.Connection) -> list[tuple[int]]:
    if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'page_labels'").fetchone() is None:
        return []
    rows = db.execute("SELECT document_id, CAST(label AS BLOB) FROM page_labels")
    return [(row[0],) for row in rows if _decoded(row[1:]) is None]


def _ocr_rows_unreadable(db: sqlite3.Connection) -> list[tuple[int]]:
    """Documents whose recognised pages' word boxes no longer decode (the source view reads them)."""
    if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'ocr_pages'").fetchone() is None:
        return []
    rows = db.execute("SELECT document_id, CAST(words AS BLOB) FROM ocr_pages")
    return [(row[0],) for row in rows if not _is_json_list(row[1])]


def _is_json_list(value) -> bool:
    decoded = _decoded((value,))
    try:
        return decoded is not None and isinstance(json.loads(decoded[0]), list)
    except json.JSONDecodeError:
        return False


def _decoded(values) -> list[str] | None:
    try:
        return [bytes(value or b"").decode("utf-8") for value in values]
    except UnicodeDecodeError:
        return None


def _chunk_readable(text, heading_path, embedding, dimension: int) -> bool:
    decoded = _decoded((text, heading_path))
    if decoded is None or not isinstance(embedding, bytes) or len(embedding) != 4 * dimension:
        return False
    try:
        if not isinstance(json.loads(decoded[1]), list):
            return False
    except json.JSONDecodeError:
        return False
    return bool(np.isfinite(np.frombuffer(embedding, dtype=np.float32)).all())


# -- repairing -------------------------------------------------------------------------------------


def _repair(connect, findings: Findings) -> list[str]:
    """Repair in this order: the damaged documents' rows (the keyword index left alone, it may
    be unreadable), an emptied keyword index when it was damaged, then the keyword index rebuilt
    from the chunks table."""
    done = []
    if findings.reread or findings.unnamed:
        _clear_documents(connect, findings)
    if findings.fts:
        _reset_fts(connect)
    _run(connect, "INSERT INTO chunks_fts(chunks_fts) VALUES ('rebuild')")
    if findings.fts:
        done.append(f"the keyword index was damaged ({findings.fts}) and was rebuilt from the stored chunks")
    if findings.reread:
        names = ", ".join(sorted(Path(p).name for p in findings.reread.values()))
        done.append(f"{len(findings.reread)} document(s) had damaged stored text and are read again from "
                    f"their files on the next index run: {names}")
    if findings.unnamed:
        done.append(f"{len(findings.unnamed)} document(s) whose file name was damaged were removed; "
                    "add them again")
    log.warning("collection repaired: %s", "; ".join(done), extra={TOLD: True})
    return done


def _reset_fts(connect) -> None:
    """Empty the keyword index's own tables and give them what a new, empty index of this
    SQLite holds: a damaged index cannot even be opened to be rebuilt."""
    with _transaction(connect) as db:
        definition = db.execute("SELECT sql FROM sqlite_master WHERE name = 'chunks_fts'").fetchone()[0]
        fresh = sqlite3.connect(":memory:")
        try:
            fresh.execute(definition)
            empty = {name: fresh.execute(f"SELECT * FROM chunks_fts_{name}").fetchall() for name in _FTS_SHADOWS}
        finally:
            fresh.close()
        for name, rows in empty.items():
            db.execute(f"DELETE FROM chunks_fts_{name}")
            if rows:
                marks = ",".join("?" * len(rows[0]))
                db.executemany(f"INSERT INTO chunks_fts_{name} VALUES ({marks})", rows)


def _clear_documents(connect, findings: Findings) -> None:
    with _transaction(connect) as db:
        triggers = db.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'chunks'").fetchall()
        for name, _sql in triggers:
            db.execute(f'DROP TRIGGER "{name}"')  # the rebuild that follows covers their work
        for document_id in findings.reread:
            db.execute("DELETE FROM chunks WHERE document_id = ?", (document_id,))
            for table in ("page_labels", "ocr_pages"):  # tables newer collections have
                if db.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)).fetchone():
                    db.execute(f"DELETE FROM {table} WHERE document_id = ?", (document_id,))
            db.execute("UPDATE documents SET status = 'failed', sha256 = '', title = '', error = ?,"
                       " page_count = 0 WHERE id = ?", (REREAD_REASON, document_id))
        for document_id in findings.unnamed:
            db.execute("DELETE FROM chunks WHERE document_id = ?", (document_id,))
            db.execute("DELETE FROM documents WHERE id = ?", (document_id,))
        for _name, sql in triggers:
            db.execute(sql)


@contextmanager
def _transaction(connect):
    """A new connection in one immediate transaction: committed, or rolled back on any error;
    closed either way."""
    db = connect()
    try:
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
    finally:
        db.close()


def _run(connect, sql: str) -> None:
    db = connect()
    try:
        db.execute(sql)
    finally:
        db.close()


def _describe(findings: Findings) -> str:
    parts = [f"keyword index: {findings.fts}"] if findings.fts else []
    if findings.reread or findings.unnamed:
        parts.append(f"{len(findings.reread) + len(findings.unnamed)} document(s) with unreadable rows")
    return "; ".join(parts)


def _short(exc: BaseException) -> str:
    text = str(exc)
    return text if len(text) <= 160 else text[:157] + "..."
