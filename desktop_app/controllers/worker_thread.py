"""A controller's QThread and the jobs it runs there: the thread plumbing every controller shares
(the way superqt's GeneratorWorker and Anki's QueryOp run work off the GUI thread).

    jobs = WorkerThread("models", owner=self)          # its thread started; stopped with its owner
    jobs.event.connect(self._on_event)                  # each item a job yields (or reports), in order
    jobs.finished.connect(self._on_done)                # a job's return value
    jobs.failed.connect(self._on_failed)                # a job's exception
    cancel = jobs.run(import_files, files)              # queued: one job at a time, in order
    cancel.set()                                        # a generator job stops before its next item
    jobs.stop(timeout_ms)                               # cancels; the thread ends after the queued jobs

A job is any callable, called on the thread with the arguments given to run(). When it returns a
generator, each item it yields goes out as one `event`, and its cancel flag is read between two
items: once set, no more goes out, the generator is closed (its `finally` runs on the thread)
and `finished` carries None. A job that learns of its items through a callback (a child process's
progress) hands them to `report`, which any thread may call. The three signals are emitted on the
GUI thread (the one that made the WorkerThread), in the order the thread produced them.

`failed` carries every exception a job raises. One not of the `expected` types is a bug: it also
goes to sys.excepthook (the app logs and shows it), as an exception in a slot would.

A long-lived worker QObject (one with timers of its own, or signals that tests watch) is moved
onto the thread with `worker=`, and `close=` runs on the thread as it ends: what was opened there
is closed there.

Lifetimes: the WorkerThread holds the QThread and its runner, never its owner (no Python reference
cycle: a controller must be freed at once by reference counting, never by the cyclic GC, which
may run on another thread; see desktop_app/gui_gc.py). When the owner is destroyed, or the
application is about to quit, the thread is stopped and waited for: Qt aborts the process when
a QThread object is destroyed while its thread runs. A `detached` thread is for work that may
hang (a network share): its QThread belongs to the GUI thread's QThread object, not to Python;
stop() and the owner's end only ask it to quit, and it deletes itself once it has ended.
"""

from __future__ import annotations

import inspect
import logging
import sys
import threading
from functools import partial

import shiboken6
from PySide6.QtCore import QCoreApplication, QObject, QThread, Signal, Slot

log = logging.getLogger(__name__)

DEFAULT_WAIT_MS = 10_000


class _Flags:
    """The cancel flags of the jobs not ended yet (stop() sets them all), under a lock: the GUI
    thread adds them, the job's thread drops them."""

    def __init__(self):
        self._lock = threading.Lock()
        self._flags: list[threading.Event] = []  # one entry per job: two jobs may share a flag

    def add(self, flag: threading.Event) -> None:
        with self._lock:
            self._flags.append(flag)

    def drop(self, flag: threading.Event) -> None:
        with self._lock:
            self._flags.remove(flag)

    def set_all(self) -> None:
        with self._lock:
            for flag in self._flags:
                flag.set()


class _Thread(QThread):
    """A QThread that calls `close` on itself once its event loop has ended, before `finished`
    goes out. A Python slot connected to `finished` runs inside that signal's emission, where
    Qt holds a lock while the slot waits for the GIL; the GUI thread, holding the GIL, can wait
    for the same lock (it did in the suite: QTextBrowser's constructor against QThread::finished,
    a deadlock). So no Python slot is connected to `finished`."""

    def __init__(self, close=None, parent: QObject | None = None):
        super().__init__(parent)
        self._close = close

    def run(self) -> None:
        self.exec()
        if self._close is not None:
            try:
                self._close()
            except Exception:
                sys.excepthook(*sys.exc_info())  # as an exception in a slot would


class _Runner(QObject):
    """Lives on the thread: runs each job it is sent, in turn."""

    event = Signal(object)
    finished = Signal(object)
    failed = Signal(object)

    def __init__(self, flags: _Flags):
        super().__init__()
        self._flags = flags

    @Slot(object)
    def run(self, job: tuple) -> None:
        call, cancel = job
        try:
            result = call()
            if inspect.isgenerator(result):
                result = self._relay(result, cancel)
        except Exception as exc:
            self.failed.emit(exc)
        else:
            self.finished.emit(result)
        finally:
            self._flags.drop(cancel)

    def _relay(self, items, cancel: threading.Event):
        """Emits each item; the generator's return value, or None once cancelled (an item made
        while the flag was set is dropped)."""
        try:
            while not cancel.is_set():
                try:
                    item = next(items)
                except StopIteration as end:
                    return end.value
                if cancel.is_set():
                    break
                self.event.emit(item)
            return None
        finally:
            items.close()

    @Slot()
    def quit(self) -> None:
        QThread.currentThread().quit()


class WorkerThread(QObject):
    """One QThread named `name`, and the jobs run() queues on it; see the module's docstring.

    owner: the QObject whose end stops the thread (the WorkerThread itself has no parent: its
        owner keeps it in an attribute). worker: a QObject moved onto the thread. close: called on
        the thread as it ends. cancel: called first by stop(), for what the jobs read themselves
        (a flag of their own). expected: the exception types a job may end with (failed only).
    """

    event = Signal(object)
    finished = Signal(object)
    failed = Signal(object)

    _submit = Signal(object)
    _quit = Signal()

    def __init__(self, name: str, owner: QObject | None = None, *, worker: QObject | None = None,
                 close=None, cancel=None, expected: tuple[type[BaseException], ...] = (),
                 wait_ms: int | None = DEFAULT_WAIT_MS, detached: bool = False, start: bool = True):
        super().__init__()
        self.setObjectName(name)
        self.expected = expected
        self.wait_ms = 0 if detached else wait_ms  # how long the safety nets wait (None: no limit)
        self._flags = _Flags()
        self._cancel = cancel
        self._stopped = False
        self.qthread = _Thread(close, self.thread() if detached else None)
        self.qthread.setObjectName(name)
        self._runner = _Runner(self._flags)
        self._runner.moveToThread(self.qthread)
        if worker is not None:
            worker.moveToThread(self.qthread)
        self._submit.connect(self._runner.run)
        self._quit.connect(self._runner.quit)
        self._runner.event.connect(self.event)  # queued: emitted again here, on the GUI thread
        self._runner.finished.connect(self.finished)
        self._runner.failed.connect(self._on_failed)
        if detached:  # it may outlive this object and its owner: it deletes itself once ended
            self.qthread.finished.connect(self._runner.deleteLater)
            self.qthread.finished.connect(self.qthread.deleteLater)
            if owner is not None:
                owner.destroyed.connect(self.qthread.quit)
        elif owner is not None:  # a plain function: it runs while the owner is being deleted
            owner.destroyed.connect(partial(_end, self.qthread, self._flags, cancel, self.wait_ms))
        app = QCoreApplication.instance()
        if app is not None:
            app.aboutToQuit.connect(self._on_app_quit)
        if start:
            self.start()

    def start(self) -> None:
        if not self._stopped:
            self.qthread.start()

    @property
    def stopped(self) -> bool:
        """stop() was called: nothing more runs here."""
        return self._stopped

    def is_running(self) -> bool:
        return shiboken6.isValid(self.qthread) and self.qthread.isRunning()

    def run(self, job, *args, cancel: threading.Event | None = None) -> threading.Event:
        """Queues job(*args) behind the jobs queued before; returns its cancel flag (`cancel`, or
        a new one), which stop() sets too. After stop() nothing more runs (the flag comes back set)."""
        cancel = threading.Event() if cancel is None else cancel
        if self._stopped:
            cancel.set()
            return cancel
        self._flags.add(cancel)
        self._submit.emit((partial(job, *args) if args else job, cancel))
        return cancel

    def report(self, item) -> None:
        """Sends `item` as one `event`, in order with those the running job yields (any thread)."""
        self._runner.event.emit(item)

    def cancel_all(self) -> None:
        """Sets the cancel flag of every job queued or running."""
        if self._cancel is not None:
            self._cancel()
        self._flags.set_all()

    def stop(self, timeout_ms: int | None = DEFAULT_WAIT_MS) -> bool:
        """Cancels every job, ends the thread once the jobs queued before have returned, and
        waits up to `timeout_ms` for it (None: as long as it takes; 0: not at all). True when
        the thread has ended (or never started). Safe to call twice."""
        self.cancel_all()
        if not self._stopped:
            self._stopped = True
            self._quit.emit()  # queued behind the jobs: each one queued runs (or sees its flag)
        return _wait(self.qthread, timeout_ms, log_late=not self.wait_ms == 0)

    def _on_failed(self, exc: BaseException) -> None:
        self.failed.emit(exc)
        if not isinstance(exc, self.expected):
            sys.excepthook(type(exc), exc, exc.__traceback__)

    def _on_app_quit(self) -> None:
        self.stop(self.wait_ms)


def _wait(thread: QThread, timeout_ms: int | None, log_late: bool = True) -> bool:
    if not shiboken6.isValid(thread) or not thread.isRunning():  # ended (a detached one: deleted)
        return True
    if timeout_ms == 0:
        return False
    if thread.wait() if timeout_ms is None else thread.wait(timeout_ms):
        return True
    if log_late:
        log.error("the %s thread did not end within %d ms", thread.objectName(), timeout_ms)
    return False


def _end(thread: QThread, flags: _Flags, cancel, timeout_ms: int | None, *_destroyed) -> None:
    """The owner is being deleted without stop(): ends the thread, waited for."""
    if cancel is not None:
        cancel()
    flags.set_all()
    if shiboken6.isValid(thread) and thread.isRunning():  # at the interpreter's exit it may be gone
        thread.quit()
        _wait(thread, timeout_ms)
