"""Reading a cited document's pages for the source view, off the GUI thread.

    GUI thread                          "sources" QThread (runs while there is a read to do)
    SourceReader
      read(path) -> ticket ── latest ──> _ReadThread.run(): pool.imap([path], cancel) — a
                                         ParsePool child parses it, within the pool's time
                                         and memory limits
      pagesRead(ticket, document) <───── the ParsedDocument
      readFailed(ticket, message) <───── why not (the pool's DocumentError, in words)

Only the latest read counts: a newer one sets the older one's cancel flag (the pool looks at
it every 0.1 s while it waits and kills a child still parsing), and nothing is sent for it.
The thread ends, closing its pool, when no read is left: an idle reader holds no thread and no
child. shutdown() cancels the read and waits for the thread; it also runs when the reader is
deleted with its parent, and when the application quits. (A document read again is served
from the view's copy, so the child's start is paid once per document shown.)

The pool runs without OCR (ParsePool's default): showing a document never recognises its
scanned pages again (seconds a page). A PDF is shown by QtPdf, and the view marks a passage on
a scanned page from the word boxes the index keeps (SourceView, IndexController.read_page_ocr).
"""

from __future__ import annotations

import logging
import threading
from functools import partial
from pathlib import Path

import shiboken6
from PySide6.QtCore import QCoreApplication, QObject, QThread, Signal, Slot

from engine.errors import EngineError
from engine.ingest.parse_pool import ParsePool

log = logging.getLogger(__name__)


class _Latest:
    """The latest read asked for, handed from the GUI thread to the read thread."""

    def __init__(self):
        self._lock = threading.Lock()
        self._job: tuple[int, str, threading.Event] | None = None
        self.flag = threading.Event()  # the cancel flag of the latest read

    def put(self, ticket: int, path: str) -> None:
        with self._lock:
            self.flag.set()
            self.flag = threading.Event()
            self._job = (ticket, path, self.flag)

    def take(self) -> tuple[int, str, threading.Event] | None:
        with self._lock:
            job, self._job = self._job, None
            return job

    def waiting(self) -> bool:
        with self._lock:
            return self._job is not None

    def cancel(self) -> None:
        with self._lock:
            self.flag.set()
            self._job = None


class _ReadThread(QThread):
    """Reads the latest document asked for, until none is left; owns the ParsePool meanwhile."""

    pagesRead = Signal(int, object)  # ticket, ParsedDocument
    readFailed = Signal(int, str)  # ticket, message

    def __init__(self, latest: _Latest, limits: dict):
        super().__init__()
        self.setObjectName("sources")
        self._latest = latest
        self._limits = limits
        self.pool: ParsePool | None = None

    def run(self) -> None:
        try:
            while (job := self._latest.take()) is not None:
                self._read(*job)
        finally:  # no child is kept waiting: a kiosk may not open a text source for weeks
            if self.pool is not None:
                self.pool.close()
                self.pool = None

    def _read(self, ticket: int, path: str, cancel: threading.Event) -> None:
        try:
            if self.pool is None:
                self.pool = ParsePool(workers=1, **self._limits)
            results = list(self.pool.imap([path], cancel=cancel))
        except EngineError as error:  # no reader process could be started
            self.readFailed.emit(ticket, str(error))
            return
        except Exception as error:  # a bug of ours: logged and shown, the reader lives on
            log.exception("Reading %s for the source view failed", path)
            self.readFailed.emit(ticket, f"“{Path(path).name}” could not be shown ({error}).")
            return
        if not results or cancel.is_set():
            return  # superseded
        [(_, result)] = results
        if isinstance(result, EngineError):
            self.readFailed.emit(ticket, str(result))
        else:
            self.pagesRead.emit(ticket, result)


class SourceReader(QObject):
    """Parses documents for the source view in a ParsePool child, on a thread of its own.

    `limits` go to ParsePool (time_limit_s, memory_limit_mb, ...); its defaults are the
    indexer's. Results carry the ticket that read() returned; only the latest read's arrive.
    """

    pagesRead = Signal(int, object)  # ticket, ParsedDocument
    readFailed = Signal(int, str)  # ticket, a message for the user

    def __init__(self, parent: QObject | None = None, **limits):
        super().__init__(parent)
        self._ticket = 0
        self._closed = False
        self._latest = _Latest()
        self._thread = _ReadThread(self._latest, limits)
        self._thread.pagesRead.connect(self._on_read)
        self._thread.readFailed.connect(self._on_failed)
        self._thread.finished.connect(self._on_thread_finished)
        # a plain function, not a method: it runs while this object is being deleted
        self.destroyed.connect(partial(_stop, self._thread, self._latest))
        app = QCoreApplication.instance()
        if app is not None:
            app.aboutToQuit.connect(self.shutdown)

    def read(self, path: str | Path) -> int:
        """Parse `path` off the GUI thread; returns the ticket its result will carry."""
        self._ticket += 1
        if not self._closed:
            self._latest.put(self._ticket, str(path))
            self._start()
        return self._ticket

    def cancel(self) -> None:
        """Nothing more arrives for the reads asked for so far."""
        self._ticket += 1
        self._latest.cancel()

    def busy(self) -> bool:
        """Whether a read is waiting or going on (also one cancelled, until its child is gone)."""
        return self._thread.isRunning() or self._latest.waiting()

    def shutdown(self) -> None:
        """Stop the read in progress and wait for the thread and its child. Safe to call twice."""
        if not self._closed:
            self._closed = True
            self.cancel()
            _stop(self._thread, self._latest)

    def _start(self) -> None:
        if not self._thread.isRunning():
            self._thread.start()

    @Slot()
    def _on_thread_finished(self) -> None:
        # a read asked for while the thread was ending: it was not taken, so start again
        if self._latest.waiting() and not self._closed:
            self._start()

    @Slot(int, object)
    def _on_read(self, ticket: int, document) -> None:
        if ticket == self._ticket and not self._closed:
            self.pagesRead.emit(ticket, document)

    @Slot(int, str)
    def _on_failed(self, ticket: int, message: str) -> None:
        if ticket == self._ticket and not self._closed:
            self.readFailed.emit(ticket, message)


def _stop(thread: _ReadThread, latest: _Latest) -> None:
    """Cancel the read and wait for the thread (which closes its pool as it ends)."""
    latest.cancel()
    if shiboken6.isValid(thread):  # at the interpreter's exit it may be gone first
        thread.wait()
