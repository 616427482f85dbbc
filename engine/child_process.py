"""Shared helpers for the engine's child processes (the LLM process and the parse workers)."""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import signal
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection, wait

_MAIN_SWAP = threading.Lock()
_STOP_TIMEOUT_S = 5.0
_REAPED_ELSEWHERE_S = 1.0  # how long an exit code taken by another thread's waitpid may take to show


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


class ChildDied(Exception):
    """The child process exited; `exitcode` says how (negative: killed by that signal)."""

    def __init__(self, exitcode: int | None):
        super().__init__(describe_exit(exitcode))
        self.exitcode = exitcode


class JsonChild:
    """A spawned child process and the caller's end of a pipe carrying JSON messages
    (send_bytes/recv_bytes: never pickle). Waiting releases the GIL. Safe from several threads:
    only joins reap the child, one at a time (multiprocessing's waitpid, run by two threads at
    once, loses the exit code to the one that did not ask)."""

    def __init__(self, process, conn: Connection):
        self.process = process
        self.conn: Connection | None = conn
        self.pid = process.pid
        self._reaping = threading.Lock()
        self._exitcode: int | None = None

    @classmethod
    def start(cls, target: Callable[[Connection], None], name: str) -> "JsonChild":
        """Starts `target(conn)` in a new process; raises OSError if it cannot."""
        context = multiprocessing.get_context("spawn")
        parent_end, child_end = context.Pipe(duplex=True)
        process = context.Process(target=target, args=(child_end,), name=name, daemon=True)
        try:
            with caller_script_hidden():
                process.start()
        except OSError:
            parent_end.close()
            raise
        finally:
            child_end.close()  # else the caller would never see the child's end close
        return cls(process, parent_end)

    def alive(self) -> bool:
        """Whether it runs; looks at its sentinel, so this never reaps it."""
        try:
            return self.conn is not None and not wait([self.process.sentinel], 0)
        except (OSError, ValueError):  # stopped meanwhile by another thread
            return False

    def send(self, message: dict) -> None:
        if self.conn is None:
            raise ChildDied(self._exitcode)
        try:
            self.conn.send_bytes(json.dumps(message).encode("utf-8"))
        except (OSError, ValueError) as exc:
            raise self._died() from exc

    def poll(self, timeout: float) -> dict | None:
        """The next message, or None after `timeout` seconds; ChildDied if the child exited."""
        conn = self.conn
        if conn is None:
            raise ChildDied(self._exitcode)
        try:
            sentinel = self.process.sentinel
            ready = wait([conn, sentinel], timeout=max(0.0, timeout))
        except (OSError, ValueError) as exc:  # another thread stopped it meanwhile
            raise self._died() from exc
        if conn in ready:  # checked first: a reply sent just before exiting counts
            try:
                return json.loads(conn.recv_bytes())
            except (EOFError, OSError) as exc:
                raise self._died() from exc
        if sentinel in ready:
            raise self._died()
        return None

    def stop(self, polite: bool = True) -> None:
        """Ends the child: asks it to close first when `polite`, kills it if it lingers."""
        with self._reaping:
            if self.conn is None:
                return
            if polite:
                with contextlib.suppress(OSError, ValueError):  # it may be gone already
                    self.conn.send_bytes(json.dumps({"op": "close"}).encode("utf-8"))
                self.process.join(_STOP_TIMEOUT_S)
            if self.process.is_alive():
                self.process.kill()
            self.process.join()
            self._exitcode = self._exit_code()
            self.conn.close()
            self.conn = None
            if self._exitcode is not None:  # else close() would take the reaped child for a running one
                self.process.close()

    def _exit_code(self) -> int | None:
        """The exit code of the joined child. A thread that starts any process runs
        multiprocessing's cleanup, whose waitpid may reap our child before ours does: our join
        then returns without the code, which that thread sets a moment later (a test's bare
        os.waitpid never does)."""
        deadline = time.monotonic() + _REAPED_ELSEWHERE_S
        while self.process.exitcode is None and time.monotonic() < deadline:
            time.sleep(0.005)
        return self.process.exitcode

    def _died(self) -> ChildDied:
        with self._reaping:
            if self.conn is not None:  # else another thread stopped it and kept the code
                self.process.join(_STOP_TIMEOUT_S)
                self._exitcode = self._exit_code()
            return ChildDied(self._exitcode)
