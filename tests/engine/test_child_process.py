"""engine.child_process.JsonChild from several threads at once: the exit code of a killed
child is reported, whoever asks first (multiprocessing's own reaping is not thread-safe)."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from engine.child_process import ChildDied, JsonChild

ROUNDS = 12


def _wait_forever(conn) -> None:
    conn.recv_bytes()


def _hammer(child: JsonChild, stop: threading.Event) -> None:
    while not stop.is_set():
        child.alive()


@pytest.mark.parametrize("ask", ["poll", "send"])
def test_a_killed_child_is_reported_killed_while_another_thread_checks_it(ask):
    for _ in range(ROUNDS):
        child = JsonChild.start(_wait_forever, "test-child")
        stop = threading.Event()
        checking = threading.Thread(target=_hammer, args=(child, stop))
        checking.start()
        try:
            os.kill(child.pid, signal.SIGKILL)
            with pytest.raises(ChildDied) as died:
                while True:  # the kill lands at once; a reply never comes
                    child.poll(1.0) if ask == "poll" else child.send({"op": "x"})
            assert died.value.exitcode == -signal.SIGKILL
            child.stop()
            assert not child.alive()
        finally:
            stop.set()
            checking.join()
            child.stop()


def test_a_child_reaped_by_another_waitpid_still_stops_cleanly():
    """Seen once in the suite: a thread starting a process runs multiprocessing's cleanup, which
    reaped the source view's parse worker between the worker's kill and its join; the join came
    back without an exit code and Process.close() raised "still running"."""
    child = JsonChild.start(_wait_forever, "test-child")
    os.kill(child.pid, signal.SIGKILL)
    os.waitpid(child.pid, 0)  # reaped elsewhere: multiprocessing never learns the exit code
    child.stop(polite=False)
    assert not child.alive() and child.conn is None
