"""Finding the documents to index in files and folders, once per request: the GUI's scanner
and the CLI call `find_documents` (or `discover`) and hand the files they found to the indexer.

    found = find_documents(["~/manuals", "extra.pdf"])
    found.files                   # normal paths, sorted, each file once
    found.empty, found.missing    # folders without documents, inputs that are not there
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

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
            files = _files_of(Path(item))
        except OSError as exc:
            unreadable.append((item, str(exc)))
            continue
        for file in files:
            found.setdefault(_identity(file), file)
        if not files:
            (empty if os.path.isdir(item) else missing).append(item)
    files = tuple(normal_path(file) for file in sorted(found.values()))
    return Found(files, tuple(empty), tuple(missing), tuple(unreadable))


def discover(paths: Iterable[str | Path]) -> list[Path]:
    """Supported files under `paths`, sorted, each once.

    Folders are searched recursively by extension (any case), skipping hidden files and
    folders, and following links to folders without looping. A file named directly is kept
    whatever its extension, so it gets an outcome ("unsupported format") rather than silently
    vanishing; a path that does not exist is left out (callers check their inputs).
    """
    found: dict[str, Path] = {}
    for path in map(Path, paths):
        for file in _files_of(path):
            found.setdefault(_identity(file), file)
    return sorted(found.values())


def _files_of(path: Path) -> list[Path]:
    return _walk(path) if path.is_dir() else [path] if path.is_file() else []


def is_supported(path: Path) -> bool:
    return path.suffix.lower() in SUPPORTED


def _walk(folder: Path) -> list[Path]:
    files = []
    seen_folders = set()
    for root, folders, names in os.walk(folder, followlinks=True):
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
