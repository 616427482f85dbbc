"""The controllers' one piece of thread plumbing (desktop_app/controllers/worker_thread.py): jobs run
on a QThread in turn, what they yield comes back in order on the GUI thread, cancel stops a
generator between two items, an exception is reported, and the thread always ends."""

from __future__ import annotations

import sys
import threading

import pytest
import shiboken6
from PySide6.QtCore import QObject, QThread

from desktop_app.controllers.worker_thread import WorkerThread
from engine.errors import EngineError
from tests.gui.controllers.test_controller_lifetime import freed_without_the_cyclic_gc

WAIT_MS = 5000


@pytest.fixture
def jobs(qtbot):
    made = []

    def make(name="test-jobs", owner=None, **kwargs) -> WorkerThread:
        worker_thread = WorkerThread(name, owner, **kwargs)
        made.append(worker_thread)
        return worker_thread

    yield make
    for worker_thread in made:
        assert worker_thread.stop(WAIT_MS)


def recorded(signal) -> list:
    """What `signal` carries, with the thread each one arrived on."""
    seen = []
    signal.connect(lambda item: seen.append((item, threading.get_ident())))
    return seen


def test_yielded_items_arrive_in_order_on_the_gui_thread(qtbot, jobs):
    worker_thread = jobs()
    produced_on = []

    def count(n):
        produced_on.append(threading.get_ident())
        for i in range(n):
            yield i
        return "done"

    items, ends = recorded(worker_thread.event), recorded(worker_thread.finished)
    with qtbot.waitSignal(worker_thread.finished, timeout=WAIT_MS):
        worker_thread.run(count, 50)
    gui = threading.get_ident()
    assert [item for item, _ in items] == list(range(50))
    assert {thread for _, thread in items} == {gui} and ends == [("done", gui)]
    assert produced_on and produced_on[0] != gui


def test_jobs_run_one_at_a_time_in_order_and_reported_items_keep_their_place(qtbot, jobs):
    worker_thread = jobs()
    report = worker_thread.report

    def job(name):
        report(f"{name}: reported")
        yield f"{name}: yielded"
        report(f"{name}: reported again")

    def plain(name):
        report(f"{name}: reported")
        return name

    items, ends = recorded(worker_thread.event), recorded(worker_thread.finished)
    for name in "ab":
        worker_thread.run(job, name)
    worker_thread.run(plain, "c")
    qtbot.waitUntil(lambda: len(ends) == 3, timeout=WAIT_MS)
    assert [item for item, _ in items] == [
        "a: reported", "a: yielded", "a: reported again",
        "b: reported", "b: yielded", "b: reported again", "c: reported"]
    assert [result for result, _ in ends] == [None, None, "c"]


def test_cancel_stops_a_generator_between_two_items(qtbot, jobs):
    worker_thread = jobs()
    step, closed_on = threading.Event(), []

    def slow():
        try:
            for i in range(100):
                yield i
                step.wait(WAIT_MS / 1000)  # the next item waits for the test
                step.clear()
        finally:
            closed_on.append(threading.get_ident())

    items = recorded(worker_thread.event)
    with qtbot.waitSignal(worker_thread.finished, timeout=WAIT_MS) as ended:
        cancel = worker_thread.run(slow)
        qtbot.waitUntil(lambda: len(items) == 1, timeout=WAIT_MS)
        cancel.set()
        step.set()
    assert [item for item, _ in items] == [0]
    assert ended.args == [None]  # cancelled: no return value
    assert closed_on and closed_on[0] != threading.get_ident()  # its finally ran on the thread


def test_an_exception_is_reported_as_failed_and_a_bug_goes_to_excepthook(qtbot, jobs, monkeypatch):
    worker_thread = jobs(expected=(EngineError,))
    hooked = []
    monkeypatch.setattr(sys, "excepthook", lambda kind, exc, tb: hooked.append(exc))

    def fails(exc):
        yield "before"
        raise exc

    items, failures = recorded(worker_thread.event), recorded(worker_thread.failed)
    with qtbot.assertNotEmitted(worker_thread.finished, wait=50):
        with qtbot.waitSignal(worker_thread.failed, timeout=WAIT_MS):
            worker_thread.run(fails, EngineError("the disk is full"))
    assert [item for item, _ in items] == ["before"] and hooked == []
    assert str(failures[0][0]) == "the disk is full"

    with qtbot.waitSignal(worker_thread.failed, timeout=WAIT_MS):
        worker_thread.run(fails, KeyError("a bug"))
    assert isinstance(failures[1][0], KeyError) and hooked == [failures[1][0]]
    with qtbot.waitSignal(worker_thread.finished, timeout=WAIT_MS):  # the thread goes on
        worker_thread.run(lambda: 1)


def test_stop_cancels_ends_the_thread_and_refuses_more_jobs(qtbot, jobs):
    worker_thread = jobs()
    started, seen = threading.Event(), []

    def forever(cancel):
        started.set()
        cancel.wait()  # a job reading its own flag
        seen.append("cancelled")

    cancel = threading.Event()
    worker_thread.run(forever, cancel, cancel=cancel)
    assert started.wait(WAIT_MS / 1000)
    thread = worker_thread.qthread
    assert thread.isRunning() and thread is not QThread.currentThread()
    assert worker_thread.stop(WAIT_MS)
    assert not thread.isRunning() and seen == ["cancelled"] and worker_thread.stopped
    assert worker_thread.run(lambda: 1).is_set()  # refused
    assert worker_thread.stop(WAIT_MS)  # twice is fine


def test_the_jobs_queued_before_stop_still_run_and_close_runs_on_the_thread(qtbot, jobs):
    ran, closed_on = [], []
    worker_thread = jobs(close=lambda: closed_on.append(threading.get_ident()))
    for i in range(3):
        worker_thread.run(ran.append, i)
    assert worker_thread.stop(WAIT_MS)
    assert ran == [0, 1, 2]
    assert closed_on and closed_on[0] != threading.get_ident()


def test_a_worker_object_lives_on_the_thread(qtbot, jobs):
    worker = QObject()
    worker_thread = jobs(worker=worker)
    assert worker.thread() is worker_thread.qthread
    with qtbot.waitSignal(worker_thread.finished, timeout=WAIT_MS) as ended:
        worker_thread.run(lambda: QThread.currentThread() is worker.thread())
    assert ended.args == [True]


def test_the_thread_ends_when_its_owner_is_destroyed(qtbot):
    owner = QObject()
    worker_thread = WorkerThread("owned", owner)
    cancel = threading.Event()
    worker_thread.run(cancel.wait, WAIT_MS / 1000, cancel=cancel)  # the owner's end sets its flag
    thread = worker_thread.qthread
    qtbot.waitUntil(thread.isRunning, timeout=WAIT_MS)
    shiboken6.delete(owner)
    assert cancel.is_set() and not thread.isRunning()


def test_a_detached_thread_is_not_waited_for_and_deletes_itself_once_it_ends(qtbot):
    release = threading.Event()
    worker_thread = WorkerThread("detached", detached=True)
    worker_thread.run(release.wait)  # a hung share
    thread = worker_thread.qthread
    qtbot.waitUntil(thread.isRunning, timeout=WAIT_MS)
    assert worker_thread.stop(0) is False and thread.isRunning()
    release.set()
    qtbot.waitUntil(lambda: not shiboken6.isValid(thread), timeout=WAIT_MS)  # deleted (later)


def test_an_owner_holding_one_is_freed_at_once_without_the_cyclic_gc(qtbot):
    class Owner(QObject):
        def __init__(self):
            super().__init__()
            self.jobs = WorkerThread("owner", self)
            self.jobs.event.connect(self.on_event)
            self.jobs.finished.connect(self.on_event)

        def on_event(self, item):
            pass

        def stop(self):
            self.jobs.stop(WAIT_MS)

    def make() -> Owner:
        owner = Owner()
        with qtbot.waitSignal(owner.jobs.finished, timeout=WAIT_MS):
            owner.jobs.run(lambda: (yield 1))
        return owner

    assert freed_without_the_cyclic_gc(make, "stop")
