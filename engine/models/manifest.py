"""Model folders are written whole or not at all, and carry a manifest of SHA-256s.

A folder is built under a temporary name beside its final place, its manifest written last,
then renamed into place. A folder without a valid manifest is never used.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

from engine.errors import disk_full_as_error
from engine.hashing import sha256_file  # lower down: ingest and kiosk hash files too
from engine.paths import MANIFEST


def write_manifest(folder: Path, source: dict) -> dict:
    """Record every file's size and SHA-256, and where the folder came from."""
    files = {
        str(p.relative_to(folder)): {"size": p.stat().st_size, "sha256": sha256_file(p)}
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != MANIFEST
    }
    manifest = {"format": 1, "source": source, "files": files}
    _write_json_synced(folder / MANIFEST, manifest)
    return manifest


def read_manifest(folder: Path) -> dict | None:
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) and "files" in manifest else None


def verify_manifest(folder: Path, *, hashes: bool = False) -> bool:
    """True when every listed file is there with its size (and, if asked, its SHA-256)."""
    return first_mismatch(folder, hashes=hashes) is None


def first_mismatch(folder: Path, *, hashes: bool = False) -> str | None:
    """What is wrong with `folder` against its manifest (a file missing, resized or changed),
    or None when nothing is."""
    manifest = read_manifest(folder)
    if manifest is None:
        return f"{folder / MANIFEST} is missing or unreadable"
    for name, entry in manifest["files"].items():
        path = folder / name
        if not path.is_file():
            return f"{path} is missing"
        if path.stat().st_size != entry["size"]:
            return f"{path} has the wrong size"
        if hashes and sha256_file(path) != entry["sha256"]:
            return f"{path} has been changed"
    return None


@contextlib.contextmanager
def atomic_folder(final: Path, needed_bytes: int | None = None) -> Iterator[Path]:
    """Yields a temporary folder; on success it replaces `final` in one rename. On a failure
    the temporary folder is removed; a full disk raises DiskFullError naming the folder, with
    `needed_bytes` as the room to make (when not given: at least what was written so far)."""
    tmp = final.parent / f".{final.name}.tmp-{uuid.uuid4().hex[:8]}"
    room = needed_bytes if needed_bytes is not None else lambda: _tree_size(tmp)
    try:
        with disk_full_as_error(final.parent, room, at_least=needed_bytes is None):
            final.parent.mkdir(parents=True, exist_ok=True)
            tmp.mkdir()
            yield tmp
            _fsync_tree(tmp)
            _swap_in(tmp, final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _swap_in(tmp: Path, final: Path) -> None:
    old = set_aside(final) if final.exists() else None
    os.replace(tmp, final)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def set_aside(folder: Path) -> Path:
    """Renames `folder` in one step to a hidden name that remove_stale_temporaries deletes, and
    returns that name: a crash before it is deleted leaves a leftover, never half a model.
    OSError (a folder in use on Windows) is the caller's."""
    aside = folder.parent / f".{folder.name}.old-{uuid.uuid4().hex[:8]}"
    os.replace(folder, aside)
    return aside


def _tree_size(folder: Path) -> int:
    """Bytes in the files under `folder` (0 when it cannot be read)."""
    try:
        return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    except OSError:
        return 0


def remove_stale_temporaries(parent: Path) -> None:
    """Leftovers of an interrupted write (a crash or kill mid-way) are deleted."""
    if not parent.is_dir():
        return
    for path in parent.iterdir():
        if path.name.startswith(".") and (".tmp-" in path.name or ".old-" in path.name):
            shutil.rmtree(path, ignore_errors=True)


def _write_json_synced(path: Path, data: dict) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=2, sort_keys=True)
        handle.flush()
        os.fsync(handle.fileno())


def _fsync_tree(folder: Path) -> None:
    for path in folder.rglob("*"):
        if path.is_file():
            with open(path, "rb") as handle:
                os.fsync(handle.fileno())
