"""A kiosk's index-bundle updates, off the GUI thread: engine.fleet's BundleWatcher polled on a
thread this controller owns.

    bundles = BundleController(watcher)     # polls from now on, within one interval
    bundles.polled.connect(show)            # each PollResult but 'current'
    ...
    bundles.stop()                          # a download in progress stops between two chunks

The assistant notices an installed version by itself, before its next question (engine.fleet).
"""

from __future__ import annotations

from PySide6.QtCore import QObject, QThread, QTimer, Signal, Slot

from engine.fleet.watcher import BundleWatcher


class _PollWorker(QObject):
    """Polls on its thread, then waits (a timer on that thread) for the next poll."""

    event = Signal(object)  # a PollResult

    def __init__(self, watcher: BundleWatcher):
        super().__init__()
        self.watcher = watcher
        self._timer: QTimer | None = None

    @Slot()
    def begin(self) -> None:
        self._timer = QTimer(self, singleShot=True)
        self._timer.timeout.connect(self._poll)
        self._wait(first=True)

    @Slot()
    def end(self) -> None:
        if self._timer is not None:
            self._timer.stop()  # on its own thread: Qt stops timers on theirs only
        QThread.currentThread().quit()

    def _poll(self) -> None:
        result = self.watcher.poll_once()
        self.event.emit(result)
        self._wait(first=False)

    def _wait(self, first: bool) -> None:
        if not self.watcher.cancelled:
            self._timer.start(round(self.watcher.next_wait(first=first) * 1000))


class BundleController(QObject):
    """Owns the watcher's thread; polled(PollResult) for each poll that did something."""

    polled = Signal(object)
    _endRequested = Signal()

    def __init__(self, watcher: BundleWatcher, parent: QObject | None = None):
        super().__init__(parent)
        self.watcher = watcher
        self._thread = QThread()
        self._thread.setObjectName("bundles")
        self._worker = _PollWorker(watcher)
        self._worker.moveToThread(self._thread)
        self._thread.started.connect(self._worker.begin)
        self._endRequested.connect(self._worker.end)
        self._worker.event.connect(self._on_event)
        self._thread.start()

    @property
    def source(self):
        return self.watcher.source

    @property
    def poll_s(self) -> float:
        return self.watcher.poll_s

    def stop(self, timeout_ms: int = 10_000) -> None:
        """Cancels, waits for the thread to end, closes the source. Safe to call twice."""
        if self._thread.isRunning():
            self.watcher.cancel()
            self._endRequested.emit()
            self._thread.wait(timeout_ms)
        self.watcher.close()

    def _on_event(self, result) -> None:
        if result.outcome != "current":
            self.polled.emit(result)
