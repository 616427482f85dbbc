"""Scanning an inbox folder: which new or changed manuals are whole and can be indexed.

    state = InboxState("/srv/manuals/inbox")
    ready, count = state.poll()    # call it every few seconds, one poll at a time

A file counts once it is stable, the same size and mtime on two polls in a row, so a manual
still being copied in is never handed on half-written (one whose copy stalls for longer is
handed on again once it changes). Supported files are the engine's own list (SUPPORTED);
hidden files and folders and temporary names (~$..., *.part, *.tmp, *.crdownload) are ignored.
A file gone from the folder is only forgotten: coming back, it is handed on again.

A missing or unreadable folder is logged once (not on every poll); once it is there, it is
picked up. The desktop app polls from a thread of its own (desktop_app/controllers/inbox.py).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from engine.ingest.discover import SUPPORTED, normal_path

log = logging.getLogger(__name__)

TEMP_PREFIXES = (".", "~$")  # hidden files, Office's lock files
TEMP_SUFFIXES = (".part", ".tmp", ".crdownload")  # downloads and copies in progress
_HIDDEN_ATTRIBUTE = 0x2  # FILE_ATTRIBUTE_HIDDEN (Windows; st_file_attributes)

Signature = tuple[int, int]  # (size, mtime in ns)


def is_ignored(name: str) -> bool:
    """Hidden and temporary names: never a manual, even with a supported extension."""
    lower = name.lower()
    return lower.startswith(TEMP_PREFIXES) or lower.endswith(TEMP_SUFFIXES)


def scan_folder(folder: str) -> dict[str, Signature]:
    """Every supported file under `folder` (an absolute path) with its signature. Raises
    OSError when `folder` itself cannot be listed; an unreadable subfolder is skipped."""
    found: dict[str, Signature] = {}
    seen_folders: set[tuple[int, int]] = set()  # links to folders are followed, without looping
    pending = [folder]
    while pending:
        current = pending.pop()
        try:
            _scan_one(current, found, pending, seen_folders)
        except OSError:
            if current == folder:
                raise
            log.debug("inbox: cannot list %s", current, exc_info=True)
    return found


def _scan_one(current: str, found: dict, pending: list, seen_folders: set) -> None:
    info = os.stat(current)
    if (info.st_dev, info.st_ino) in seen_folders:
        return
    seen_folders.add((info.st_dev, info.st_ino))
    with os.scandir(current) as entries:
        for entry in entries:
            if is_ignored(entry.name):
                continue
            try:
                if entry.is_dir():
                    pending.append(entry.path)
                elif entry.is_file() and os.path.splitext(entry.name)[1].lower() in SUPPORTED:
                    stat = entry.stat()
                    if not getattr(stat, "st_file_attributes", 0) & _HIDDEN_ATTRIBUTE:
                        found[entry.path] = (stat.st_size, stat.st_mtime_ns)
            except OSError:  # gone between the listing and the stat: next poll
                continue


class InboxState:
    """What the polls have seen, and which files were handed on (one poll at a time)."""

    def __init__(self, folder: str | os.PathLike):
        self.folder = normal_path(Path(folder).expanduser())
        self.available: bool | None = None  # None until the first poll
        self._last: dict[str, Signature] = {}  # what the previous poll saw
        self._handed: dict[str, Signature] = {}  # what was handed on, as it was then

    def poll(self) -> tuple[list[str], int]:
        """(the files to index now, how many supported files are there; -1: no folder)."""
        try:
            seen = scan_folder(self.folder)
        except OSError as exc:
            self._unavailable(exc)
            return [], -1
        if self.available is False:
            log.info("inbox folder %s is there now; watching it", self.folder)
        self.available = True
        ready = [path for path, signature in seen.items()
                 if self._last.get(path) == signature and self._handed.get(path) != signature]
        for path in ready:
            self._handed[path] = seen[path]
        # a file gone from the inbox is forgotten (not removed from the collection): back, it goes again
        self._handed = {path: s for path, s in self._handed.items() if path in seen}
        self._last = seen
        return sorted(ready), len(seen)

    def forget(self, paths: list[str]) -> None:
        """These were not handed on after all (the watcher stopped): the next poll offers them again."""
        for path in paths:
            self._handed.pop(path, None)

    def _unavailable(self, exc: OSError) -> None:
        if self.available is not False:  # once, until it has been there again
            log.warning("inbox folder %s cannot be read (%s); new manuals are picked up once it can",
                        self.folder, exc.strerror or exc)
        self.available = False
        self._last = {}  # back again: a file must be stable over two fresh polls
