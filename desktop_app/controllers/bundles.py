"""A kiosk's index-bundle updates, off the GUI thread: engine.fleet's BundleWatcher polled on a
thread this controller owns.

    bundles = BundleController(watcher)     # polls from now on, within one interval
    bundles.polled.connect(show)            # each PollResult but 'current'
    ...
    bundles.stop()                          # a download in progress stops between two chunks

The assistant notices an installed version by itself, before its next question (engine.fleet).
"""

from __future__ import annotations

import threading

from PySide6.QtCore import QObject, Signal

from desktop_app.controllers.worker_thread import WorkerThread
from engine.fleet.watcher import BundleWatcher


def _polls(watcher: BundleWatcher, cancel: threading.Event):
    """Each poll's PollResult, one every interval (the first within one), until cancelled."""
    wait = watcher.next_wait(first=True)
    while not cancel.wait(wait) and not watcher.cancelled:
        yield watcher.poll_once()
        wait = watcher.next_wait()


class BundleController(QObject):
    """Owns the watcher's thread; polled(PollResult) for each poll that did something."""

    polled = Signal(object)

    def __init__(self, watcher: BundleWatcher, parent: QObject | None = None):
        super().__init__(parent)
        self.watcher = watcher
        self._jobs = WorkerThread("bundles", self, cancel=watcher.cancel)
        self._thread = self._jobs.qthread
        self._jobs.event.connect(self._on_event)
        cancel = threading.Event()
        self._jobs.run(_polls, watcher, cancel, cancel=cancel)

    @property
    def source(self):
        return self.watcher.source

    @property
    def poll_s(self) -> float:
        return self.watcher.poll_s

    def stop(self, timeout_ms: int = 10_000) -> None:
        """Cancels, waits for the thread to end, closes the source. Safe to call twice."""
        self._jobs.stop(timeout_ms)
        self.watcher.close()

    def _on_event(self, result) -> None:
        if result.outcome != "current":
            self.polled.emit(result)
