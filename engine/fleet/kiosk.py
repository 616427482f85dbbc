"""The kiosk side of bundles: installing a verified version, switching, rolling back, status.

    DATA/fleet/objects/<sha256>                the objects this kiosk holds
    DATA/fleet/<collection>/versions/<N>/      an installed version (a collection folder, with
                                               its manifest.json and manifest.sig beside it)
    DATA/fleet/<collection>/state.json         {"current": N, "previous": M | null,
                                                "rolled_back": R | null}, written atomically

A version is unpacked into versions/.N-<random> and renamed to versions/N only when whole and
opened once. A bundle carries each document's rows, not a database: a kiosk that holds the
current version copies it and applies the documents that changed (downloading only those:
`needed_objects`); one without assembles the collection from every document's rows and the
bundle's index (engine/fleet/assembly.py). state.json is replaced last (the switch). Every
check comes before the switch, so a refusal or a crash at any point leaves the running version
as it was. `rolled_back` is the highest version rolled back from: a watcher does not install it
again, only a newer one.
Installs of one collection are serialised by an OS lock (install.lock), across processes.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from engine.atomic_file import fsync_folder, write_atomic, write_json_atomic
from engine.errors import BundleError, EngineError
from engine.fleet import assembly, records
from engine.fleet.assembly import DeltaError
from engine.fleet.manifest import (
    MANIFEST_NAME,
    SIGNATURE_NAME,
    Manifest,
    check_signature,
)
from engine.paths import DB_NAME
from engine.store import health

log = logging.getLogger(__name__)

LOCK_NAME = "install.lock"
OBJECT_GRACE_S = 3600  # unreferenced objects younger than this stay: a download in progress


def builtin_embedder_id(paths) -> str:
    """The id of the embedder this kiosk searches with (its questions are embedded with it)."""
    from engine.encoders.embedder import Embedder
    from engine.models.registry import resolve_embedder

    try:
        return Embedder.from_files(resolve_embedder(paths)).model_id
    except EngineError as exc:
        raise BundleError(f"Cannot tell which embedder this kiosk uses, so no bundle can be checked: {exc}") from exc


def read_state(paths, collection: str) -> dict:
    import json

    path = paths.fleet_state_file(collection)
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        state = {}
    except (OSError, ValueError) as exc:
        raise BundleError(f"{path} cannot be read ({exc}); fix or remove it (then the local collection is used).") from exc
    return {key: state.get(key) if isinstance(state.get(key), int) else None
            for key in ("current", "previous", "rolled_back")}


def install_version(paths, manifest: Manifest, objects_dir: str | Path, trusted_keys: Iterable[str],
                    expected_embedder: str | None = None, fresh: bool = False) -> Path:
    """Installs `manifest` (its raw bytes and signature as downloaded) from the objects in
    `objects_dir` and switches to it; returns the version folder. Checks, in order: the
    signature, the embedder (`expected_embedder`, default: this kiosk's built-in one), that
    the version is newer than the installed (and any rolled-back) one, and every object's
    size and SHA-256. A BundleError leaves the running version untouched, with an audit line.
    `fresh` assembles the version from all its rows, not from the current version."""
    objects_dir = Path(objects_dir)
    where = manifest.origin or f"version {manifest.version} of '{manifest.collection}'"
    audit = {"collection": manifest.collection, "version": manifest.version, "file": where}
    try:
        with _install_lock(paths, manifest.collection):
            check_signature(manifest, list(trusted_keys))
            expected = expected_embedder if expected_embedder is not None else builtin_embedder_id(paths)
            if manifest.embedder_id != expected:
                raise BundleError(f"{where}: the bundle was indexed with the embedder '{manifest.embedder_id}', "
                                  f"this kiosk searches with '{expected}', so it could not search it; build "
                                  "the bundle with the kiosks' embedder.")
            _check_newer(paths, manifest, where)
            base = None if fresh else delta_base(paths, manifest)
            for entry in needed_objects(manifest, base).values():
                _check_object(objects_dir / entry.sha256, entry.sha256, entry.size, where)
            started = time.perf_counter()
            folder = _unpack(paths, manifest, objects_dir, where, base)
            previous = switch(paths, manifest.collection, manifest.version, _audit=False)
    except DeltaError as exc:  # not refused: the caller installs it from all of its rows
        records.record(paths, "not_applied", reason=str(exc), **audit)
        raise
    except BundleError as exc:
        records.record(paths, "refused", reason=str(exc), **audit)
        raise
    records.record(paths, "installed", previous=previous, folder=str(folder), applied_to=base and base.version,
                   seconds=round(time.perf_counter() - started, 3), **audit)
    return folder


def delta_base(paths, manifest: Manifest) -> Manifest | None:
    """The manifest of the current version when `manifest` can be applied to it (the same
    embedder), else None (then every object is needed)."""
    try:
        current = read_state(paths, manifest.collection)["current"]
        if current is None:
            return None
        folder = paths.fleet_version(manifest.collection, current)
        base = Manifest.from_bytes((folder / MANIFEST_NAME).read_bytes(), origin=str(folder))
    except (OSError, BundleError):
        return None
    same = (base.embedder_id, base.dimension) == (manifest.embedder_id, manifest.dimension)
    return base if same and (folder / DB_NAME).is_file() else None


def needed_objects(manifest: Manifest, base: Manifest | None) -> dict:
    """{sha256: entry} a kiosk must hold to install `manifest` onto `base` (its current version,
    or None): the documents, the rows of the documents that changed, and the index only when its
    lists changed (else the kiosk's own follows the rows). Without a base, all of them."""
    if base is None:
        return manifest.objects()
    held = {entry.sha256 for entry in base.files if entry.kind == "rows"}
    return {sha: entry for sha, entry in manifest.objects().items()
            if entry.kind == "document" or (entry.kind == "rows" and sha not in held)
            or (entry.kind == "index" and base.index_lists != manifest.index_lists)}


def _check_newer(paths, manifest: Manifest, where: str) -> None:
    state = read_state(paths, manifest.collection)
    current, rolled_back = state["current"], state["rolled_back"]
    if current is not None and manifest.version <= current:
        raise BundleError(f"{where}: version {manifest.version} is not newer than the installed version "
                          f"{current} of '{manifest.collection}'; nothing was changed.")
    if rolled_back is not None and manifest.version <= rolled_back:
        raise BundleError(f"{where}: version {manifest.version} is not newer than version {rolled_back}, "
                          "which was rolled back here; publish a newer version.")


def _check_object(path: Path, sha: str, size: int, where: str) -> None:
    try:
        actual = path.stat().st_size
    except FileNotFoundError as exc:
        raise BundleError(f"{where}: object {sha} is missing from {path.parent}; download it first.") from exc
    digest = hashlib.sha256()
    if actual == size:
        with open(path, "rb") as handle:
            while block := handle.read(1 << 20):
                digest.update(block)
    if actual != size or digest.hexdigest() != sha:
        what = f"size {actual}, expected {size}" if actual != size else "its SHA-256 does not match"
        raise BundleError(f"{where}: object {sha} ({path}) was tampered with or damaged ({what}).")


def _unpack(paths, manifest: Manifest, objects_dir: Path, where: str, base: Manifest | None) -> Path:
    """versions/N, built in a hidden sibling and renamed when whole: the documents linked and
    the collection assembled from their rows (engine/fleet/assembly.py)."""
    final = paths.fleet_version(manifest.collection, manifest.version).absolute()
    final.parent.mkdir(parents=True, exist_ok=True)
    temp = Path(tempfile.mkdtemp(prefix=f".{manifest.version}-", dir=final.parent))
    try:
        (temp / "documents").mkdir()
        base_folder = base and paths.fleet_version(manifest.collection, base.version).absolute()
        assembly.assemble(temp, manifest, objects_dir, final, base, base_folder, where)
        health.stamp(temp / DB_NAME, with_fts=True)  # built from a checked collection, every byte verified
        write_atomic(temp / MANIFEST_NAME, manifest.raw)
        write_atomic(temp / SIGNATURE_NAME, manifest.signature)
        _check_opens(temp, manifest, where)
        _fsync_tree(temp)
        if final.exists():  # a crash after an earlier rename, before its switch: never current
            shutil.rmtree(final)
        os.replace(temp, final)
        fsync_folder(final.parent)
    except BaseException as exc:
        shutil.rmtree(temp, ignore_errors=True)
        if isinstance(exc, (OSError, sqlite3.Error)) and not isinstance(exc, BundleError):
            raise BundleError(f"{where}: cannot unpack into {final.parent}: {exc}") from exc
        raise
    return final


def _check_opens(folder: Path, manifest: Manifest, where: str) -> None:
    from engine.store.index_store import IndexStore

    try:
        with IndexStore.open(folder, embedder_id=None, dimension=None, read_only=True) as store:
            store.list_documents()
            if store.embedder_id != manifest.embedder_id:
                raise BundleError(f"{where}: its database was built with '{store.embedder_id}', its manifest "
                                  f"says '{manifest.embedder_id}'.")
    except BundleError:
        raise
    except EngineError as exc:
        raise BundleError(f"{where}: the unpacked collection cannot be opened: {exc}") from exc


def _fsync_tree(folder: Path) -> None:
    for path in folder.rglob("*"):
        if path.is_file():
            with open(path, "rb") as handle:
                os.fsync(handle.fileno())
    fsync_folder(folder / "documents")
    fsync_folder(folder)


# -- switching ------------------------------------------------------------------------------------
def switch(paths, collection: str, version: int, *, _audit: bool = True) -> int | None:
    """Makes installed `version` current (state.json replaced atomically); the one it replaces
    becomes previous. Older versions are removed. Returns the version that was current."""
    folder = paths.fleet_version(collection, version)
    if not (folder / DB_NAME).is_file():
        raise BundleError(f"Version {version} of '{collection}' is not installed (no {folder / DB_NAME}).")
    state = read_state(paths, collection)
    current = state["current"]
    previous = current if current != version else state["previous"]
    _write_state(paths, collection, version, previous, state["rolled_back"])
    if _audit:
        records.record(paths, "switched", collection=collection, version=version, previous=current)
    return current


def rollback(paths, collection: str | None = None) -> int:
    """Back to the previous version; the one left is marked rolled back (not installed again,
    only a newer one) and removed. Returns the version now current."""
    collection = collection or _only_collection(paths)
    with _install_lock(paths, collection):
        state = read_state(paths, collection)
        current, previous = state["current"], state["previous"]
        if previous is None or not paths.fleet_version(collection, previous).is_dir():
            raise BundleError(f"'{collection}' has no previous version to roll back to "
                              f"(current: {current if current is not None else 'none'}).")
        rolled_back = max(v for v in (current, state["rolled_back"]) if v is not None)
        _write_state(paths, collection, previous, None, rolled_back)
    records.record(paths, "rolled_back", collection=collection, version=previous, rolled_back=current)
    return previous


def _write_state(paths, collection: str, current: int, previous: int | None, rolled_back: int | None) -> None:
    write_json_atomic(paths.fleet_state_file(collection),
                      {"current": current, "previous": previous, "rolled_back": rolled_back})
    _prune(paths, collection, {current, previous})


def _prune(paths, collection: str, keep: set) -> None:
    """Removes version folders other than `keep` (and unpacking leftovers), then objects no
    kept version needs that are older than OBJECT_GRACE_S. An open store on a removed version
    keeps its open files (POSIX); where removal fails (Windows), the next switch retries."""
    versions = paths.fleet_collection(collection) / "versions"
    for folder in versions.glob("*"):
        if folder.name.lstrip(".").split("-")[0].isdigit() and not (folder.name.isdigit() and int(folder.name) in keep):
            if folder.name.startswith(".") and time.time() - folder.stat().st_mtime < OBJECT_GRACE_S:
                continue  # another process may be unpacking it now
            shutil.rmtree(folder, ignore_errors=True)
    _prune_objects(paths)


def _prune_objects(paths) -> None:
    needed: set[str] = set()
    for manifest_path in paths.fleet.glob(f"*/versions/*/{MANIFEST_NAME}"):
        with contextlib.suppress(OSError, BundleError):
            needed.update(Manifest.from_bytes(manifest_path.read_bytes()).objects())
    now = time.time()
    for path in paths.fleet_objects.glob("*"):
        name = path.name.removesuffix(".part")
        with contextlib.suppress(OSError):
            if name not in needed and now - path.stat().st_mtime > OBJECT_GRACE_S:
                path.unlink()


def _only_collection(paths) -> str:
    names = collections(paths)
    if len(names) != 1:
        raise BundleError(f"{'No' if not names else 'Several'} bundle collections are installed "
                          f"({', '.join(names) or 'none'}); name one with --collection.")
    return names[0]


def collections(paths) -> list[str]:
    return sorted(p.parent.name for p in paths.fleet.glob("*/state.json"))


def status(paths) -> dict:
    """{"collections": {name: {current, previous, rolled_back, versions, folder, created,
    embedder_id, reranker_id, documents, bytes}}, "objects": {count, bytes}}"""
    found = {}
    for name in collections(paths):
        state = read_state(paths, name)
        versions = sorted(int(p.name) for p in (paths.fleet_collection(name) / "versions").glob("*")
                          if p.name.isdigit())
        entry = {**state, "versions": versions, "folder": str(paths.collection(name))}
        if state["current"] is not None:
            entry.update(_installed_summary(paths.fleet_version(name, state["current"])))
        found[name] = entry
    objects = [p for p in paths.fleet_objects.glob("*") if not p.name.endswith(".part")]
    return {"collections": found,
            "objects": {"count": len(objects), "bytes": sum(p.stat().st_size for p in objects)}}


def _installed_summary(folder: Path) -> dict:
    try:
        manifest = Manifest.from_bytes((folder / MANIFEST_NAME).read_bytes(), origin=str(folder))
    except (OSError, BundleError) as exc:
        return {"error": str(exc)}
    return {"created": manifest.created, "embedder_id": manifest.embedder_id,
            "reranker_id": manifest.reranker_id, "documents": sum(e.kind == "document" for e in manifest.files), "bytes": manifest.total_bytes}


@contextlib.contextmanager
def _install_lock(paths, collection: str) -> Iterator[None]:
    path = paths.fleet_collection(collection) / LOCK_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as handle:
        if os.name == "nt":
            import msvcrt

            handle.seek(0)
            msvcrt.locking(handle.fileno(), msvcrt.LK_LOCK, 1)
        else:
            import fcntl

            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        yield  # released when the file closes
