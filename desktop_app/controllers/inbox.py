"""The inbox folder: new manuals copied into a folder the administrator chose are indexed.

    watcher = InboxWatcher(window.index, "/srv/manuals/inbox", interval_s=10.0, parent=window)
    watcher.start()        # a look every interval_s; stable new or changed files are indexed
    start_inbox(window)    # the same from window.settings (inbox_folder, inbox_poll_s), or None

Polling is the contract, not QFileSystemWatcher: that one misses changes on network shares and
when a folder is replaced, and needs one watch per subfolder. Each poll lists the folder and
its subfolders on the watcher's own QThread, not the GUI thread: 2,000 files take 12-22 ms to
list on a local disk, and a network share can take seconds, or hang. The GUI thread only asks
(a job queued on that thread) and hands the result on when it comes back: about 0.1 ms a poll, 1-2 ms for a batch of 2,000 files
(tests/gui/controllers/test_gui_inbox.py). A poll that is still running when the next is due skips that one.

Which files are ready (whole, supported, not hidden or temporary) is the engine's rule
(engine.ingest.inbox.InboxState). New and changed stable files go to the IndexController, the
same entry point as a drop, in one batch per poll; the indexer skips files it already has, so
after a start the whole inbox goes once, cheaply.

A file removed from the inbox stays in the collection: the administrator also adds documents
through the admin panel, so the inbox is not a mirror of the collection, and a manual vanishing
from a share (a move, a share that drops for a while) must not take it away from the operator.
Removing a document is an admin action in the documents panel.

A missing or unreadable inbox folder is logged once (not on every poll) and shows nothing to
the operator; once it is there, it is picked up.
"""

from __future__ import annotations

import logging
import os
import time

from PySide6.QtCore import QObject, QTimer, Signal

from desktop_app.controllers.worker_thread import WorkerThread
from engine.ingest.inbox import InboxState

log = logging.getLogger(__name__)


def _scan(state: InboxState) -> tuple[list, int, float]:
    """One poll, on the watcher's "inbox" thread: (ready, count, scan ms); -1: it failed."""
    started = time.perf_counter()
    try:
        ready, count = state.poll()
    except Exception:  # never lose the thread: the next poll tries again
        log.exception("inbox: the scan of %s failed", state.folder)
        ready, count = [], -1
    return ready, count, (time.perf_counter() - started) * 1000


class InboxWatcher(QObject):
    """Polls the inbox folder every `interval_s` and hands stable new or changed files to
    `index.add_paths` (the window's IndexController), one batch per poll.

    queued(list): the paths just handed on. polled(int): after each poll, how many supported
    files the inbox holds (-1: the folder is missing or unreadable). scan_ms and gui_ms: what
    the last poll cost the scan thread and the GUI thread."""

    queued = Signal(list)
    polled = Signal(int)

    def __init__(self, index, folder: str | os.PathLike, interval_s: float = 10.0,
                 parent: QObject | None = None):
        super().__init__(parent)
        self.index = index
        self.state = InboxState(folder)
        self.folder = self.state.folder
        self.scan_ms = 0.0
        self.gui_ms = 0.0
        self._polling = False  # a poll is in flight
        self._stopped = True
        self._scans: WorkerThread | None = None  # kept after stop(): its scan may still be running
        self._thread = None  # its QThread, while started
        self.timer = QTimer(self)
        self.timer.setInterval(max(1, round(interval_s * 1000)))
        self.timer.timeout.connect(self.poll)

    def start(self) -> None:
        """A first look at once, then one every interval."""
        if self._scans is None or self._scans.stopped:
            self._start_thread()
        self._stopped = False
        self.timer.start()
        self.poll()
        log.info("watching the inbox folder %s every %g s", self.folder, self.timer.interval() / 1000)

    def stop(self, wait_s: float = 0.0) -> None:
        """No more polls; the scan thread ends after the poll in flight (waited for up to `wait_s`)."""
        self._stopped = True
        self.timer.stop()
        self._thread = None
        if self._scans is not None:
            self._scans.stop(max(0, round(wait_s * 1000)))

    def is_polling(self) -> bool:
        return self._polling

    def poll(self) -> None:
        """One look now, unless the last one is still going (a slow share skips a beat)."""
        if self._stopped or self._polling:
            return
        started = time.perf_counter()
        self._polling = True
        self._scans.run(_scan, self.state)
        self.gui_ms = (time.perf_counter() - started) * 1000

    def _start_thread(self) -> None:
        # detached: the thread belongs to the GUI thread's own QThread object, not to Python: a
        # scan stuck on a hung share outlives the window and the app's exit, where a QThread
        # that Python owns would be destroyed while running (and Qt aborts the process). Once
        # the scan thread ends, it deletes itself.
        self._scans = WorkerThread("inbox", self, detached=True)
        self._thread = self._scans.qthread
        self._scans.finished.connect(self._on_scanned)

    def _on_scanned(self, scanned: tuple) -> None:
        started = time.perf_counter()
        ready, count, scan_ms = scanned
        self._polling = False
        self.scan_ms = scan_ms
        if ready and self._stopped:
            self.state.forget(ready)
        elif ready:
            self.index.add_paths(ready)
            log.info("inbox: %d new or changed file(s) to index", len(ready))
            self.queued.emit(ready)
        self.polled.emit(count)
        self.gui_ms += (time.perf_counter() - started) * 1000


def start_inbox(window) -> InboxWatcher | None:
    """The watcher of `window.settings.inbox_folder`, started (one per window), or None when
    no inbox folder is set."""
    folder = window.settings.inbox_folder
    if not folder:
        return None
    watcher = window.findChild(InboxWatcher)
    if watcher is None:
        watcher = InboxWatcher(window.index, folder, window.settings.inbox_poll_s, parent=window)
        watcher.start()
    return watcher
