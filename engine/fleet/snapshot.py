"""Building a bundle: a consistent snapshot of a collection that may be being written, signed.

    manifest = build_bundle(paths, "R", private_key, Path("R-7.tar"), version=None)

The database is copied with VACUUM INTO (one read transaction: a consistent copy, while an
indexer goes on committing). The faiss file is taken only if it is exactly the one the
snapshot's meta names (same SHA-256); otherwise, and for any vectors it lacks, IndexStore
rebuilds it from the snapshot's own embeddings, so rows and index always agree. The bundle
carries each document's rows (engine.store.portable), not the database: a kiosk holding the
previous version downloads the rows of the documents that changed. Each ready document's file
is copied (hashed while copied) and must still be the bytes that were indexed, so a bundle
never pairs an index with other text than it was made from.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import tarfile
import tempfile
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from engine.atomic_file import write_json_atomic
from engine.errors import BundleError, EngineError
from engine.fleet.manifest import (
    FORMAT,
    MANIFEST_NAME,
    SIGNATURE_NAME,
    FileEntry,
    Manifest,
    public_key_text,
    sign,
    utc_now,
)
from engine.paths import DB_NAME
from engine.store import health, portable

BUILDS_FILE = "builds.json"  # DATA/fleet/builds.json: {collection: last version built here}
_READY = ("ready", "ready_with_warnings")


def build_bundle(paths, collection: str, private_key: Ed25519PrivateKey, out: str | Path,
                 version: int | None = None) -> Manifest:
    """Writes the bundle to `out` (via out.part, renamed when complete) and returns its
    manifest. `version` defaults to the last version built here + 1, else the UTC time as
    an int (YYYYMMDDHHMMSS), so versions keep increasing without bookkeeping."""
    out = Path(out)
    source = paths.collection(collection)
    if not (source / DB_NAME).is_file():
        raise BundleError(f"There is no collection '{collection}' to bundle (no {source / DB_NAME}); index it first.")
    version = _next_version(paths, collection) if version is None else int(version)
    if version < 0:
        raise BundleError(f"--version must be 0 or more, not {version}.")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".bundle-", dir=out.parent) as temp:
        folder = Path(temp) / "snapshot"
        folder.mkdir()
        meta = _snapshot(source, folder)
        files, objects = _entries(folder, meta)
        manifest = Manifest(version=version, collection=collection, embedder_id=meta["embedder_id"],
                            schema_version=int(meta["schema_version"]), files=tuple(files),
                            created=utc_now(), signer=public_key_text(private_key), format=FORMAT,
                            reranker_id=reranker_id(paths), dimension=int(meta["dimension"]),
                            index_lists=int(meta.get("faiss_lists", 0)) if meta.get("faiss_file") else 0)
        raw = manifest.to_bytes()
        signature = sign(raw, private_key)
        _write_tar(out, raw, signature, objects)
    _remember_version(paths, collection, version)
    return Manifest.from_bytes(raw, signature, origin=str(out))


def reranker_id(paths) -> str:
    """The id of the reranker this app ranks with (the imported one), '' for none."""
    from engine.encoders.reranker import CrossEncoder
    from engine.models.registry import resolve_reranker

    try:
        folder = resolve_reranker(paths)
        return CrossEncoder.from_folder(folder).model_id if folder is not None else ""
    except (EngineError, OSError):
        return ""  # a damaged reranker is reported where it is used; the bundle does not need it


def _snapshot(source: Path, folder: Path) -> dict:
    """The collection in `source` copied consistently into `folder`; returns its meta."""
    db_path = folder / DB_NAME
    checked = health.is_stamped(source / DB_NAME, with_fts=True)
    try:
        with sqlite3.connect(f"file:{(source / DB_NAME).resolve()}?mode=ro", uri=True) as db:
            db.execute("PRAGMA busy_timeout = 10000")
            db.execute("VACUUM INTO ?", (str(db_path),))
        db.close()
    except sqlite3.Error as exc:
        raise BundleError(f"Cannot copy {source / DB_NAME}: {exc}.") from exc
    if checked and health.is_stamped(source / DB_NAME, with_fts=True):  # checked, and unchanged while copied
        health.stamp(db_path, with_fts=True)
    meta = _meta(db_path)
    name = meta.get("faiss_file", "")
    if name:
        _copy_index(source / name, folder / name, meta.get("faiss_sha256", ""))
    _settle_index(folder)
    return _meta(db_path)


def _copy_index(source: Path, dest: Path, sha256: str) -> None:
    """The faiss file copied block by block (0.4 GB at a million chunks), kept only if it is the
    one meta names; a flush may have replaced it since (then it is rebuilt from the snapshot)."""
    try:
        copied = _copy_hashed(source, dest)
    except OSError:  # gone since, or unreadable: rebuilt; a full disk fails there, with its message
        copied = ""
    if copied != sha256:
        dest.unlink(missing_ok=True)


def _settle_index(folder: Path) -> None:
    """Opens the snapshot as its writer: faiss is reconciled with (or rebuilt from) the
    snapshot's chunks and flushed, the meta then naming it."""
    from engine.store.index_store import IndexStore

    try:
        IndexStore.open(folder, embedder_id=None, dimension=None, create=False).close()
    except EngineError as exc:
        raise BundleError(f"The snapshot of the collection cannot be opened: {exc}") from exc


def _meta(db_path: Path) -> dict:
    with sqlite3.connect(f"file:{db_path}?mode=ro", uri=True) as db:
        meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
    db.close()
    return meta


def _entries(folder: Path, meta: dict) -> tuple[list[FileEntry], dict[str, Path]]:
    """The manifest's files and {sha256: file holding those bytes}: the index, then per document
    (failed ones too, so a kiosk lists them) its rows and, when indexed, its file."""
    objects: dict[str, Path] = {}

    def add(name: str, path: Path, kind: str, source_path: str = "") -> FileEntry:
        sha, size = _hash(path)
        objects.setdefault(sha, path)
        return FileEntry(name, sha, size, kind, source_path)

    files = []
    if meta.get("faiss_file"):
        files.append(add(meta["faiss_file"], folder / meta["faiss_file"], "index"))
    documents, rows = folder.parent / "documents", folder.parent / "rows"
    documents.mkdir()
    rows.mkdir()
    taken: set[str] = set()
    with contextlib.closing(sqlite3.connect(f"file:{folder / DB_NAME}?mode=ro", uri=True)) as db:
        for document_id, stored_path, stored_sha, status in db.execute(
                "SELECT id, path, sha256, status FROM documents ORDER BY path").fetchall():
            name = _unique_name(Path(stored_path).name, stored_sha, taken)
            (rows / name).write_bytes(portable.export_rows(db, document_id))
            files.append(add(f"rows/{name}", rows / name, "rows", stored_path))
            if status in _READY:
                files.append(_document(stored_path, stored_sha, documents / name, add))
    return files, objects


def _document(stored_path: str, stored_sha: str, copy: Path, add) -> FileEntry:
    if _copy_document(Path(stored_path), copy) != stored_sha:
        raise BundleError(f"{stored_path} changed since it was indexed (its bytes are not the ones in "
                          "the index); index it again, then build the bundle.")
    return add(f"documents/{copy.name}", copy, "document", stored_path)


def _unique_name(name: str, sha: str, taken: set[str]) -> str:
    """The file's own name; two documents with the same name in different folders get the
    second one's first 8 hex digits before the suffix."""
    if name in taken:
        stem, dot, suffix = name.rpartition(".")
        name = f"{stem}-{sha[:8]}.{suffix}" if dot else f"{name}-{sha[:8]}"
    taken.add(name)
    return name


def _copy_document(source: Path, dest: Path) -> str:
    try:
        return _copy_hashed(source, dest)
    except OSError as exc:
        raise BundleError(f"The indexed document {source} cannot be read ({exc.strerror or exc}); "
                          "put it back, or remove it from the collection, then build again.") from exc


def _copy_hashed(source: Path, dest: Path) -> str:
    """Copies block by block; returns the SHA-256 of what was copied."""
    digest = hashlib.sha256()
    with open(source, "rb") as src, open(dest, "wb") as out:
        while block := src.read(1 << 20):
            digest.update(block)
            out.write(block)
    return digest.hexdigest()


def _hash(path: Path) -> tuple[str, int]:
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
            size += len(block)
    return digest.hexdigest(), size


def _write_tar(out: Path, manifest: bytes, signature: bytes, objects: dict[str, Path]) -> None:
    """manifest.json and manifest.sig first (a reader can check the signature before the
    objects), then each object once; written as out.part and renamed when complete."""
    part = out.with_name(out.name + ".part")
    try:
        with tarfile.open(part, "w", format=tarfile.PAX_FORMAT) as tar:
            _add_bytes(tar, MANIFEST_NAME, manifest)
            _add_bytes(tar, SIGNATURE_NAME, signature)
            for sha, path in objects.items():
                info = tar.gettarinfo(str(path), arcname=f"objects/{sha}")
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                info.mode = 0o644
                with open(path, "rb") as handle:
                    tar.addfile(info, handle)
        with open(part, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(part, out)
    except BaseException:
        part.unlink(missing_ok=True)
        raise


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    import io

    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def _next_version(paths, collection: str) -> int:
    built = _builds(paths).get(collection)
    if isinstance(built, int):
        return built + 1
    return int(utc_now().replace("-", "").replace(":", "").replace("T", "").rstrip("Z"))


def _remember_version(paths, collection: str, version: int) -> None:
    builds = _builds(paths)
    builds[collection] = max(version, builds.get(collection, -1)) if isinstance(builds.get(collection), int) else version
    write_json_atomic(paths.fleet / BUILDS_FILE, builds)


def _builds(paths) -> dict:
    try:
        builds = json.loads((paths.fleet / BUILDS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return builds if isinstance(builds, dict) else {}
