"""Assembling an installed version's collection on a kiosk from the rows its bundle carries.

    assemble(temp, manifest, objects_dir, final, base, base_folder, where)

With a base (the current version, of the same embedder): its database is copied, the documents gone or
changed are removed and the changed ones' rows put in, through IndexStore, so the dense index
(the base's, linked) follows as the indexer's would. Without one: an empty collection takes
every document's rows in one transaction and adopts the bundle's index (training one here would
take minutes at a million chunks). Either way the result is checked against the manifest: the
documents it lists, each with the bytes it lists, and nothing else.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
from pathlib import Path

from engine.errors import BundleError, EngineError
from engine.fleet.manifest import FileEntry, Manifest
from engine.paths import DB_NAME
from engine.store import health, portable
from engine.store.index_store import LOCK_NAME, IndexStore, adopt_vectors


class DeltaError(BundleError):
    """The version held here is not what the new one's bundle was built on (its rows do not fit):
    install it from all of its rows instead (install_version(..., fresh=True))."""


def assemble(temp: Path, manifest: Manifest, objects_dir: Path, final: Path, base: Manifest | None,
             base_folder: Path | None, where: str) -> None:
    for entry in manifest.files:
        if entry.kind == "document":
            _place(objects_dir / entry.sha256, temp / entry.name)
    paths = kiosk_paths(manifest, final)
    try:
        if base is None:
            gone, changed = [], _from_rows(temp, manifest, objects_dir, paths, where)
        else:
            gone, changed = _from_base(temp, manifest, base, base_folder, paths, where)
        index = manifest.entry("index")
        if index is not None and (base is None or base.index_lists != manifest.index_lists):
            _adopt_index(temp, objects_dir / index.sha256, index.sha256, manifest.index_lists)
        with IndexStore.open(temp, embedder_id=manifest.embedder_id, dimension=manifest.dimension,
                             create=False) as store:
            for path in gone:
                store.remove_document(path)
            for entry in changed:
                store.put_rows(_rows(objects_dir, entry, where), paths[entry.source_path])
            _check_documents(store, manifest, paths, where)
    except sqlite3.IntegrityError as exc:  # an id taken: the base is not what the bundle was built on
        raise DeltaError(f"{where}: its rows do not fit version {base and base.version} here ({exc}).") from exc
    except EngineError as exc:
        if isinstance(exc, BundleError):
            raise
        raise BundleError(f"{where}: the collection cannot be assembled from its rows: {exc}") from exc
    _single_file(temp)


def kiosk_paths(manifest: Manifest, final: Path) -> dict[str, str]:
    """{a document's path in the admin's collection: where this kiosk stores it}: its file in
    the version's documents/, or the admin's path for a document that failed (no file)."""
    files = manifest.by_source("document")
    return {source: str(final / files[source].name) if source in files else source
            for source in manifest.by_source("rows")}


def _place(source: Path, dest: Path) -> None:
    """A hard link to the object where the disk allows it (no second copy of a manual or of an
    index), else a copy."""
    with contextlib.suppress(OSError):
        os.link(source, dest)
        return
    shutil.copyfile(source, dest)


def _from_rows(temp: Path, manifest: Manifest, objects_dir: Path, paths: dict[str, str],
               where: str) -> list[FileEntry]:
    """An empty collection with every document's rows, in one transaction; nothing left to put."""
    IndexStore.open(temp, embedder_id=manifest.embedder_id, dimension=manifest.dimension, create=True).close()
    with _connection(temp, stamp=True) as db:  # written here from verified rows: no need to check them again
        for entry in manifest.by_source("rows").values():
            portable.insert_rows(db, _rows(objects_dir, entry, where), paths[entry.source_path], manifest.dimension)
    return []


def _from_base(temp: Path, manifest: Manifest, base: Manifest, base_folder: Path, paths: dict[str, str],
               where: str) -> tuple[list[str], list[FileEntry]]:
    """The base's database copied with its index linked, the documents both versions hold moved
    to this version's paths; returns the stored paths to remove and the rows to put."""
    old_rows, new_rows = base.by_source("rows"), manifest.by_source("rows")
    kept = [source for source, entry in new_rows.items()
            if source in old_rows and old_rows[source].sha256 == entry.sha256]
    old_paths = kiosk_paths(base, base_folder)
    checked = health.is_stamped(base_folder / DB_NAME, with_fts=True)
    shutil.copyfile(base_folder / DB_NAME, temp / DB_NAME)
    with _connection(temp, stamp=checked) as db:  # a copy of a checked collection, changed through SQLite alone
        for source in kept:
            moved = db.execute("UPDATE documents SET path = ? WHERE path = ?",
                               (paths[source], old_paths[source])).rowcount
            if moved != 1:
                raise DeltaError(f"{where}: version {base.version} here lacks {source}, which it listed.")
        vectors = db.execute("SELECT value FROM meta WHERE key = 'faiss_file'").fetchone()
    if vectors and vectors[0]:
        _place(base_folder / vectors[0], temp / vectors[0])
    gone = [old_paths[source] for source in old_rows if source not in kept]
    return gone, [entry for source, entry in new_rows.items() if source not in kept]


def _adopt_index(temp: Path, source: Path, sha256: str, lists: int) -> None:
    name = f"vectors-bundle-{sha256[:16]}.faiss"
    _place(source, temp / name)
    with _connection(temp, stamp=health.is_stamped(temp / DB_NAME, with_fts=True)) as db:
        adopt_vectors(db, name, sha256, lists)


def _rows(objects_dir: Path, entry: FileEntry, where: str) -> portable.DocumentRows:
    try:
        return portable.read_rows((objects_dir / entry.sha256).read_bytes(), f"{where}: {entry.name}")
    except ValueError as exc:
        raise BundleError(str(exc)) from exc


def _check_documents(store: IndexStore, manifest: Manifest, paths: dict[str, str], where: str) -> None:
    """The collection holds exactly the manifest's documents, each file's bytes as listed."""
    files = manifest.by_source("document")
    expected = {paths[source]: files[source].sha256 if source in files else None
                for source in manifest.by_source("rows")}
    held = {document.path: document.sha256 for document in store.list_documents()}
    wrong = sorted(path for path in expected.keys() | held.keys()
                   if path not in held or path not in expected or expected[path] not in (None, held[path]))
    if wrong:
        raise DeltaError(f"{where}: the assembled collection does not match its manifest "
                         f"({len(wrong)} documents differ, first {wrong[0]}).")


@contextlib.contextmanager
def _connection(folder: Path, stamp: bool):
    """A write transaction on the collection's database, outside IndexStore (bulk rows, meta);
    with `stamp`, the database is stamped as checked once committed (health.stamp), so that the
    store opened next does not read it all again."""
    db = sqlite3.connect(folder / DB_NAME, isolation_level=None)
    try:
        db.execute("PRAGMA foreign_keys = ON")
        db.execute("BEGIN IMMEDIATE")
        yield db
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    finally:
        db.close()
    if stamp:
        health.stamp(folder / DB_NAME, with_fts=True)


def _single_file(folder: Path) -> None:
    """The database as one file (no WAL), as kiosks open it read-only, without the writer's lock."""
    with contextlib.closing(sqlite3.connect(folder / DB_NAME)) as db:
        db.execute("PRAGMA journal_mode = DELETE")
    for leftover in (LOCK_NAME, DB_NAME + "-wal", DB_NAME + "-shm"):
        (folder / leftover).unlink(missing_ok=True)
