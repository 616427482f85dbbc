"""Finding the documents to index in files and folders."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

SUPPORTED = {".pdf", ".txt", ".md", ".markdown", ".html", ".htm", ".docx"}


def discover(paths: Iterable[str | Path]) -> list[Path]:
    """Supported files under `paths`, sorted, each once.

    Folders are searched recursively by extension (any case), skipping hidden files and
    folders, and following links to folders without looping. A file named directly is kept
    whatever its extension, so it gets an outcome ("unsupported format") rather than silently
    vanishing; a path that does not exist is left out (callers check their inputs).
    """
    found: dict[str, Path] = {}
    for path in map(Path, paths):
        files = _walk(path) if path.is_dir() else [path] if path.is_file() else []
        for file in files:
            found.setdefault(_identity(file), file)
    return sorted(found.values())


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
