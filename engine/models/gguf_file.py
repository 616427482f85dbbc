"""Reading a GGUF file's header: opening it with an error that says what to do, its fields,
and the longest context an import keeps. Shared by the import, the fits check and the
tokenizer, so that none of them imports another for these."""

from __future__ import annotations

from pathlib import Path

from gguf import GGUFReader

from engine.errors import ModelError

MAX_CONTEXT = 32768  # beyond this a small CPU model is of no use and the rotary tables grow


def open_gguf(path: Path) -> GGUFReader:
    try:
        return GGUFReader(path)
    except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:
        raise ModelError(f"'{path}' is not a readable GGUF file ({exc}); download it again.") from exc


def field(reader: GGUFReader, key: str, default=None):
    entry = reader.fields.get(key)
    return default if entry is None else entry.contents()
