"""Finding the documents to index in files and folders, once per request: the GUI's scanner
and the CLI call `find_documents` (or `discover`) and hand the files they found to the indexer.

    found = find_documents(["~/manuals", "extra.pdf"])
    found.files                   # normal paths, sorted, each file once
    found.empty, found.missing    # folders without documents, inputs that are not there
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

SUPPORTED = {".pdf", ".txt", ".md", ".markdown", ".html", ".htm", ".docx"}


def normal_path(path: str | os.PathLike) -> str:
    """The key of a document: its absolute path, spelled as the indexer and the store spell it."""
    return str(Path(os.path.abspath(path)))


@dataclass(frozen=True)
class Found:
    """What find_documents found, and which inputs gave nothing (in the order given)."""

    files: tuple[str, ...]  # normal paths, sorted as discover sorts them, each file once
    empty: tuple[str, ...] = ()  # folders without a supported document
    missing: tuple[str, ...] = ()  # inputs that do not exist (moved or deleted)
    unreadable: tuple[tuple[str, str], ...] = ()  # (input, why) where looking failed


def find_documents(inputs: Iterable[str | os.PathLike]) -> Found:
    """discover() over `inputs`, telling which of them gave no file; a failure to look in one
    input is kept in `unreadable`, and the others are still searched."""
    found: dict[str, Path] = {}
    empty, missing, unreadable = [], [], []
    for item in map(str, inputs):
        try:
            files, folders_failed = _files_of(Path(item))
        except OSError as exc:
            unreadable.append((item, str(exc)))
            continue
        unreadable.extend(folders_failed)
        for file in files:
            found.setdefault(_identity(file), file)
        if not files and normal_path(item) not in {normal_path(f) for f, _ in folders_failed}:
            (empty if os.path.isdir(item) else missing).append(item)
    files = tuple(normal_path(file) for file in sorted(found.values()))
    return Found(files, tuple(empty), tuple(missing), tuple(unreadable))


def discover(paths: Iterable[str | Path]) -> list[Path]:
    """Supported files under `paths`, sorted, each once.

    Folders are searched recursively by extension (any case), skipping hidden files and
    folders, and following links to folders without looping. A file named directly is kept
    whatever its extension, so it gets an outcome ("unsupported format") rather than silently
    vanishing; a path that does not exist is left out (callers check their inputs).
    A folder that cannot be read is logged as a warning ("could not read folder DIR:
    permission denied"), and the others are still searched.
    """
    found: dict[str, Path] = {}
    for path in map(Path, paths):
        files, folders_failed = _files_of(path)
        for file in files:
            found.setdefault(_identity(file), file)
        for folder, why in folders_failed:
            log.warning("could not read folder %s: %s", folder, why)
    return sorted(found.values())


def _files_of(path: Path) -> tuple[list[Path], list[tuple[str, str]]]:
    """The files of one input, and the folders under it that could not be read (with why)."""
    folders_failed: list[tuple[str, str]] = []
    if path.is_dir():
        return _walk(path, folders_failed), folders_failed
    return ([path] if path.is_file() else []), folders_failed


def is_supported(path: Path) -> bool:
    return path.suffix.lower() in SUPPORTED


def _walk(folder: Path, folders_failed: list[tuple[str, str]]) -> list[Path]:
    """Supported files under `folder`; each folder that cannot be listed is added to
    `folders_failed` as (folder, why), and the walk goes on."""
    files = []
    seen_folders = set()

    def failed(exc: OSError) -> None:
        folders_failed.append((str(exc.filename or folder), _why(exc)))

    for root, folders, names in os.walk(folder, followlinks=True, onerror=failed):
        key = _folder_key(root)
        if key is None or key in seen_folders:
            folders[:] = []  # a link back up the tree, or unreadable
            continue
        seen_folders.add(key)
        folders[:] = sorted(name for name in folders if not name.startswith("."))
        for name in names:
            file = Path(root, name)
            if not name.startswith(".") and is_supported(file) and file.is_file():
                files.append(file)
    return files


def _why(exc: OSError) -> str:
    if isinstance(exc, PermissionError):
        return "permission denied"
    return (exc.strerror or str(exc)).lower()


def _folder_key(folder: str) -> tuple[int, int] | None:
    try:
        info = os.stat(folder)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def _identity(path: Path) -> str:
    """One key for a file reached by several names (links, relative and absolute)."""
    try:
        return str(path.resolve())
    except (OSError, RuntimeError):  # a link loop resolves to nothing
        return str(path.absolute())
