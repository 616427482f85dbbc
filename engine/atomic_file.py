"""Writing a small file whole or not at all: a crash, a kill or a full disk leaves the old one.

    write_atomic(path, text_or_bytes)      # settings, PIN record, conversations, start history
    write_json_atomic(path, data)
    move_aside(path, aside)                # a damaged file renamed, never deleted
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
from pathlib import Path

from engine.errors import disk_full_as_error

log = logging.getLogger(__name__)


def write_atomic(path: str | Path, data: str | bytes) -> None:
    """Writes under a temporary name in the same folder, fsyncs, renames it over `path`, then
    fsyncs the folder so that the rename survives a power cut. A full disk raises
    DiskFullError (an OSError) and leaves no temporary behind. The file is the user's alone
    (mode 0o600, as mkstemp creates it; the rename keeps it)."""
    path = Path(path)
    data = data.encode("utf-8") if isinstance(data, str) else data
    with disk_full_as_error(path.parent, len(data)):  # DiskFullError, the temporary gone
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temp_name, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp_name)
            raise
    fsync_folder(path.parent)


def write_json_atomic(path: str | Path, data) -> None:
    write_atomic(path, json.dumps(data, ensure_ascii=False, sort_keys=True))


def fsync_folder(folder: Path) -> None:
    if os.name == "nt":
        return  # Windows cannot open a folder for fsync; NTFS journals the rename itself
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def move_aside(path: Path, aside: Path) -> Path | None:
    """Renames a damaged file to `aside` (an older one of that name is replaced), so that
    nothing is lost and the next write does not overwrite it; None when that fails (logged)."""
    try:
        os.replace(path, aside)
    except OSError as exc:
        log.warning("could not set %s aside: %s", path, exc)
        return None
    return aside
