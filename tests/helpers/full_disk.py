"""A simulated full disk for tests: writes that fail with ENOSPC, as a full disk's do.

    monkeypatch.setattr(index_store, "open", opener_full_for(".faiss.tmp"), raising=False)

The file is still created (as on a real full disk, where creating it needs no data block) and
the write raises OSError(ENOSPC), so a test sees what a person would find left behind.
"""

from __future__ import annotations

import builtins
import errno


def no_space(*_args, **_kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


class FullFile:
    """An open file whose writes and flushes fail as on a full disk."""

    def __init__(self, file):
        self._file = file

    def write(self, _data):
        no_space()

    def flush(self):
        no_space()

    def __getattr__(self, name):
        return getattr(self._file, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._file.close()

    def close(self):
        self._file.close()


def opener_full_for(suffix: str):
    """An `open` for which files named ...`suffix` opened to write are on a full disk."""

    def opener(file, mode="r", *args, **kwargs):
        handle = builtins.open(file, mode, *args, **kwargs)
        writing = any(flag in mode for flag in "wax+")
        return FullFile(handle) if writing and str(file).endswith(suffix) else handle

    return opener
