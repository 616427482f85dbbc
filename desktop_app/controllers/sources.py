"""Reading a cited document's pages for the source view, off the GUI thread.

    GUI thread                          "sources" WorkerThread (started at the first read)
    SourceReader
      read(path) -> ticket ── job ─────> _Reader.work(): pool.imap([path], cancel) — a
                                         ParsePool child parses it, within the pool's time
                                         and memory limits
      pagesRead(ticket, document) <───── the ParsedDocument
      readFailed(ticket, message) <───── why not (the pool's DocumentError, in words)

Only the latest read counts: a newer one sets the older one's cancel flag (the pool looks at
it every 0.1 s while it waits and kills a child still parsing; a job superseded before it
started does nothing), and nothing is sent for it. The pool is closed when no read is left: an
idle reader holds no child. The thread is the controllers' WorkerThread
(controllers/worker_thread.py), which stops it, waited for, when the reader is deleted with its
parent and when the application quits; shutdown() does the same at once. (A document read again
is served from the view's copy, so the child's start is paid once per document shown.)

The pool runs without OCR (ParsePool's default): showing a document never recognises its
scanned pages again (seconds a page). A PDF is shown by QtPdf, and the view marks a passage on
a scanned page from the word boxes the index keeps (SourceView, IndexController.read_page_ocr).

A PDF is opened the same way by a PdfOpener, on a "pdf" thread: QtPdf's load reads a damaged
file whole to rebuild its cross-reference table (1.1 s for a 29 MB manual here), which on the
GUI thread would freeze the window. The QPdfDocument it opened moves to the GUI thread.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import threading
import weakref
from pathlib import Path

from PySide6.QtCore import QObject, QThread, Signal, Slot
from PySide6.QtPdf import QPdfDocument

from desktop_app.controllers.worker_thread import WorkerThread
from engine.errors import EngineError
from engine.ingest.parse_pool import ParsePool

log = logging.getLogger(__name__)


class _Pending:
    """How many jobs are queued or running, under a lock: the GUI thread adds them, the
    jobs' thread drops them."""

    def __init__(self):
        self._lock = threading.Lock()
        self._count = 0

    def add(self) -> None:
        with self._lock:
            self._count += 1

    def drop(self) -> None:
        with self._lock:
            self._count -= 1

    def last(self) -> bool:
        """Only the job ending now is left: what it held may be closed."""
        with self._lock:
            return self._count <= 1

    def __bool__(self) -> bool:
        with self._lock:
            return self._count > 0


class _Work:
    """What the jobs do, on their thread. It holds no reference to its QObject (no cycle)."""

    def work(self, path: str, cancel: threading.Event):
        """The result for `path`, or None when it was superseded (nothing is sent)."""
        raise NotImplementedError

    def close(self) -> None:
        """Runs when no job is left, and as the thread ends: an idle reader holds nothing."""


def _job(work: _Work, pending: _Pending, ticket: int, path: str, cancel: threading.Event):
    """One job, on the thread: (ticket, result), None as the result when it was superseded."""
    try:
        return ticket, (None if cancel.is_set() else work.work(path, cancel))
    finally:
        if pending.last():
            work.close()
        pending.drop()


class _Reader(_Work):
    """Parses in a ParsePool child, owned while there is work: a ParsedDocument or a message."""

    def __init__(self, limits: dict):
        self._limits = limits
        self.pool: ParsePool | None = None

    def work(self, path: str, cancel: threading.Event):
        try:
            if self.pool is None:
                self.pool = ParsePool(workers=1, **self._limits)
            results = list(self.pool.imap([path], cancel=cancel))
        except EngineError as error:  # no reader process could be started
            return str(error)
        except Exception as error:  # a bug of ours: logged and shown, the reader lives on
            log.exception("Reading %s for the source view failed", path)
            return f"“{Path(path).name}” could not be shown ({error})."
        if not results:
            return None  # superseded
        [(_, result)] = results
        return str(result) if isinstance(result, EngineError) else result

    def close(self) -> None:  # no child is kept waiting: a kiosk may not open a text source for weeks
        if self.pool is not None:
            self.pool.close()
            self.pool = None


class _PdfWork(_Work):
    """Opens a PDF with QtPdf: a QPdfDocument handed over to the GUI thread, or why not.

    QtPdf's load holds Python's GIL (PySide6 does not release it there), so a file whose
    cross-reference table is damaged, which PDFium repairs by reading it whole, would still
    stall the GUI thread from here. pypdfium2 (ctypes: the GIL is released) checks the table
    first; a damaged file is saved once, repaired, to a temporary copy that QtPdf opens at once.
    """

    def __init__(self, gui_thread: QThread, copies: "_Copies"):
        self._gui_thread = gui_thread
        self._copies = copies

    def work(self, path: str, cancel: threading.Event):
        shown = self._loadable(path)
        if cancel.is_set():
            return None
        document = QPdfDocument()
        error = document.load(shown)
        if cancel.is_set():
            document.close()
            return None
        if error != QPdfDocument.Error.None_ or document.status() != QPdfDocument.Status.Ready:
            document.close()
            return f"QtPdf could not open it ({error.name})"
        document.moveToThread(self._gui_thread)  # from here on it is the GUI thread's
        return document

    def _loadable(self, path: str) -> str:
        """`path`, or a repaired copy of it when its cross-reference table is damaged."""
        import pypdfium2
        import pypdfium2.raw as pdfium_c

        try:
            pdf = pypdfium2.PdfDocument(path)
        except Exception:  # QtPdf says why it cannot open it either
            return path
        try:
            if pdfium_c.FPDF_DocumentHasValidCrossReferenceTable(pdf.raw):
                return path
            copy = self._copies.new_file()
            pdf.save(copy)
            log.info("%s has a damaged cross-reference table: shown from a repaired copy", path)
            return copy
        except Exception:
            log.warning("could not repair %s for showing; QtPdf opens it as it is", path, exc_info=True)
            return path
        finally:
            pdf.close()


class _Copies:
    """A temporary folder of repaired PDFs, made at the first one. It stays while the view
    lives (QtPdf reads a file as it renders) and goes when the opener does, or at exit."""

    def __init__(self):
        self.folder: str | None = None
        self._count = 0

    def new_file(self) -> str:
        if self.folder is None:
            self.folder = tempfile.mkdtemp(prefix="offline-assistant-pdf-")
            weakref.finalize(self, shutil.rmtree, self.folder, True)
        self._count += 1
        return os.path.join(self.folder, f"{self._count}.pdf")

    def remove(self, *_args) -> None:
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)  # a file still open (Windows) stays
            self.folder = None


class _LatestJobs(QObject):
    """The latest job asked for, done on a WorkerThread (started at the first): tickets,
    cancel, shutdown. done(ticket, result) carries only the latest job's result."""

    done = Signal(int, object)

    def __init__(self, name: str, work: _Work, parent: QObject | None = None):
        super().__init__(parent)
        self._ticket = 0
        self._closed = False
        self._work = work
        self._pending = _Pending()
        self._cancel = threading.Event()  # the cancel flag of the latest job
        # no limit on the waits (the owner's end, the app's quit): a job ends within 0.1 s of
        # its cancel flag, and the thread must not be destroyed while it runs
        self._jobs = WorkerThread(name, self, close=work.close, wait_ms=None, start=False)
        self._jobs.finished.connect(self._on_done)

    def read(self, path: str | Path) -> int:
        """Do the job for `path` off the GUI thread; returns the ticket its result will carry."""
        self._ticket += 1
        if not self._closed:
            self._cancel.set()  # only the latest counts
            self._cancel = threading.Event()
            self._pending.add()
            self._jobs.start()
            self._jobs.run(_job, self._work, self._pending, self._ticket, str(path), self._cancel,
                           cancel=self._cancel)
        return self._ticket

    def cancel(self) -> None:
        """Nothing more arrives for the jobs asked for so far."""
        self._ticket += 1
        self._cancel.set()

    def busy(self) -> bool:
        """Whether a job is waiting or going on (also one cancelled, until it has ended)."""
        return bool(self._pending)

    def shutdown(self) -> None:
        """Stop the job in progress and wait for the thread. Safe to call twice."""
        if not self._closed:
            self._closed = True
            self.cancel()
            self._jobs.stop(None)

    @Slot(object)
    def _on_done(self, done: tuple) -> None:
        ticket, result = done
        if result is not None and ticket == self._ticket and not self._closed:
            self.done.emit(ticket, result)


class SourceReader(_LatestJobs):
    """Parses documents for the source view in a ParsePool child, on a thread of its own.

    `limits` go to ParsePool (time_limit_s, memory_limit_mb, ...); its defaults are the
    indexer's. Results carry the ticket that read() returned; only the latest read's arrive.
    """

    pagesRead = Signal(int, object)  # ticket, ParsedDocument
    readFailed = Signal(int, str)  # ticket, a message for the user

    def __init__(self, parent: QObject | None = None, **limits):
        super().__init__("sources", _Reader(limits), parent)
        self.done.connect(self._relay)

    def _relay(self, ticket: int, result) -> None:
        if isinstance(result, str):
            self.readFailed.emit(ticket, result)
        else:
            self.pagesRead.emit(ticket, result)


class PdfOpener(_LatestJobs):
    """Opens PDFs with QtPdf on a thread of its own: a damaged file's repair (pdfium rebuilds
    a broken cross-reference table by reading the whole file) takes seconds on a large one.

    done(ticket, QPdfDocument | str): the document, now living on the GUI thread and without a
    parent (the caller adopts it), or why it could not be opened.
    """

    def __init__(self, parent: QObject | None = None):
        copies = _Copies()
        super().__init__("pdf", _PdfWork(QThread.currentThread(), copies), parent)
        self.destroyed.connect(copies.remove)  # after the thread has stopped (the base's first)

