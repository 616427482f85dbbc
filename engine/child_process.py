"""Shared helpers for the engine's child processes (the LLM process and the parse workers)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import types
from collections.abc import Iterator

_MAIN_SWAP = threading.Lock()


@contextlib.contextmanager
def caller_script_hidden() -> Iterator[None]:
    """A spawned child re-runs the caller's __main__ script, which may import Qt; show it a
    bare __main__ so the child imports only the engine. The lock keeps two threads that
    start children at once (the GUI's LLM and indexing workers) from losing the real one."""
    with _MAIN_SWAP:
        original = sys.modules["__main__"]
        sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            yield
        finally:
            sys.modules["__main__"] = original


def describe_exit(code: int | None) -> str:
    if code is None:
        return "it stopped answering"
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def quiet_child() -> None:
    """Run first in a child: leave Ctrl-C to the caller and keep library output off stdout."""
    # Ctrl-C reaches the whole process group; the caller decides how to cancel.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The caller's stdout may be the answer itself (the CLI).
    if sys.stderr is not None and sys.stdout is not None:
        with contextlib.suppress(OSError, ValueError):  # no console (a GUI app)
            os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
        sys.stdout = sys.stderr
