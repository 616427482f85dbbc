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

A PDF is opened by a PdfOpener: on a "pdf" thread a damaged file is repaired to a copy first
(QtPdf's load would read it whole to rebuild its cross-reference table, 1.1 s for a 29 MB
manual here, holding the GUI thread); QtPdf then loads the file or the copy on the GUI thread.

On a thin kiosk a DocumentFetcher, on a "fetch" thread, brings a cited document that is not on
this machine from the central server first (engine.answer.central).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import threading
import weakref
from functools import partial
from pathlib import Path

import shiboken6
from PySide6.QtCore import QCoreApplication, QObject, QThread, Signal, Slot
from PySide6.QtPdf import QPdfDocument

from engine.errors import EngineError
from engine.ingest.parse_pool import ParsePool

log = logging.getLogger(__name__)


class _Latest:
    """The latest read asked for, handed from the GUI thread to the read thread."""

    def __init__(self):
        self._lock = threading.Lock()
        self._job: tuple[int, object, threading.Event] | None = None
        self.flag = threading.Event()  # the cancel flag of the latest read

    def put(self, ticket: int, path) -> None:
        with self._lock:
            self.flag.set()
            self.flag = threading.Event()
            self._job = (ticket, path, self.flag)

    def take(self) -> tuple[int, object, threading.Event] | None:
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


class _LatestThread(QThread):
    """Does the latest job asked for, until none is left; done(ticket, result) for each one
    that was not superseded before its result was ready."""

    done = Signal(int, object)

    def __init__(self, latest: _Latest, name: str):
        super().__init__()
        self.setObjectName(name)
        self._latest = latest

    def run(self) -> None:
        try:
            while (job := self._latest.take()) is not None:
                ticket, path, cancel = job
                result = self.work(path, cancel)
                if result is not None:  # one superseded meanwhile is dropped by its ticket, on
                    self.done.emit(ticket, result)  # the GUI thread (a QPdfDocument lives there)
        finally:
            self.close()

    def work(self, path: str, cancel: threading.Event):
        """The result for `path`, or None when it was superseded (nothing is sent)."""
        raise NotImplementedError

    def close(self) -> None:
        """Runs as the thread ends: an idle reader holds nothing."""


class _ReadThread(_LatestThread):
    """Parses in a ParsePool child, owned while there is work: a ParsedDocument or a message."""

    def __init__(self, latest: _Latest, limits: dict):
        super().__init__(latest, "sources")
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


class _PdfThread(_LatestThread):
    """Makes a PDF loadable at once: the path of the file, or of a repaired copy of it.

    QtPdf's load holds Python's GIL (PySide6 does not release it there), so a file whose
    cross-reference table is damaged, which PDFium repairs by reading it whole, would stall the
    GUI thread. pypdfium2 (ctypes: the GIL is released) checks the table here; a damaged file is
    saved once, repaired, to a temporary copy. The QPdfDocument itself is made on the GUI
    thread (PdfOpener): one made here had to be moved there, and moveToThread, called holding
    the GIL, deadlocked with a widget deleted on the GUI thread at the same moment (Qt's lock
    held there, the GIL wanted).
    """

    def __init__(self, latest: _Latest, copies: "_Copies"):
        super().__init__(latest, "pdf")
        self._copies = copies

    def work(self, path: str, cancel: threading.Event):
        shown = self._loadable(path)
        return None if cancel.is_set() else Path(shown)

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
    """The GUI thread's side of a _LatestThread: tickets, cancel, start on demand, shutdown.
    done(ticket, result) carries only the latest job's result."""

    done = Signal(int, object)

    def __init__(self, thread: _LatestThread, latest: _Latest, parent: QObject | None = None):
        super().__init__(parent)
        self._ticket = 0
        self._closed = False
        self._latest = latest
        self._thread = thread
        self._thread.done.connect(self._on_done)
        self._thread.finished.connect(self._on_thread_finished)
        # a plain function, not a method: it runs while this object is being deleted
        self.destroyed.connect(partial(_stop, self._thread, self._latest))
        app = QCoreApplication.instance()
        if app is not None:
            app.aboutToQuit.connect(self.shutdown)

    def read(self, job) -> int:
        """Do the job (a path; the fetcher's: a passage) off the GUI thread; returns the ticket
        its result will carry."""
        self._ticket += 1
        if not self._closed:
            self._latest.put(self._ticket, str(job) if isinstance(job, Path) else job)
            self._start()
        return self._ticket

    def cancel(self) -> None:
        """Nothing more arrives for the jobs asked for so far."""
        self._ticket += 1
        self._latest.cancel()

    def busy(self) -> bool:
        """Whether a job is waiting or going on (also one cancelled, until it has ended)."""
        return self._thread.isRunning() or self._latest.waiting()

    def shutdown(self) -> None:
        """Stop the job in progress and wait for the thread. Safe to call twice."""
        if not self._closed:
            self._closed = True
            self.cancel()
            _stop(self._thread, self._latest)

    def _start(self) -> None:
        if not self._thread.isRunning():
            self._thread.start()

    @Slot()
    def _on_thread_finished(self) -> None:
        # a job asked for while the thread was ending: it was not taken, so start again
        if self._latest.waiting() and not self._closed:
            self._start()

    @Slot(int, object)
    def _on_done(self, ticket: int, result) -> None:
        if ticket == self._ticket and not self._closed:
            self.done.emit(ticket, self._finished(result))

    def _finished(self, result):
        """The thread's result as done() carries it, made on the GUI thread."""
        return result


class SourceReader(_LatestJobs):
    """Parses documents for the source view in a ParsePool child, on a thread of its own.

    `limits` go to ParsePool (time_limit_s, memory_limit_mb, ...); its defaults are the
    indexer's. Results carry the ticket that read() returned; only the latest read's arrive.
    """

    pagesRead = Signal(int, object)  # ticket, ParsedDocument
    readFailed = Signal(int, str)  # ticket, a message for the user

    def __init__(self, parent: QObject | None = None, **limits):
        latest = _Latest()
        super().__init__(_ReadThread(latest, limits), latest, parent)
        self.done.connect(self._relay)

    def _relay(self, ticket: int, result) -> None:
        if isinstance(result, str):
            self.readFailed.emit(ticket, result)
        else:
            self.pagesRead.emit(ticket, result)


class PdfOpener(_LatestJobs):
    """Opens PDFs with QtPdf: a damaged file is repaired on a thread of its own first (pdfium
    rebuilds a broken cross-reference table by reading the whole file: seconds on a large one),
    then QtPdf loads the file or the repaired copy on the GUI thread (14-118 ms for the
    development manuals, 2,415 pages the longest).

    done(ticket, QPdfDocument | str): the document, on the GUI thread and without a parent (the
    caller adopts it), or why it could not be opened.
    """

    def __init__(self, parent: QObject | None = None):
        latest, copies = _Latest(), _Copies()
        super().__init__(_PdfThread(latest, copies), latest, parent)
        self.destroyed.connect(copies.remove)  # after the thread has stopped (the base's first)

    def _finished(self, loadable: Path):
        document = QPdfDocument()
        error = document.load(str(loadable))
        if error != QPdfDocument.Error.None_ or document.status() != QPdfDocument.Status.Ready:
            document.close()
            return f"QtPdf could not open it ({error.name})"
        return document


class _FetchThread(_LatestThread):
    """Fetches a cited document from a thin kiosk's central server (engine.answer.central)."""

    def __init__(self, latest: _Latest, server, folder: Path):
        super().__init__(latest, "fetch")
        self._server = server
        self._folder = folder

    def work(self, passage, cancel: threading.Event):
        try:
            copy = self._server.document(passage, self._folder)
        except EngineError as error:
            return str(error)
        except OSError as error:
            return f"“{passage.document}” could not be kept on this kiosk ({error.strerror or error})."
        return None if cancel.is_set() else copy


class DocumentFetcher(_LatestJobs):
    """A thin kiosk's cited documents, fetched from its central server on a thread of its own
    (the network never holds the GUI thread). done(ticket, Path | str): the local copy, or why
    there is none."""

    def __init__(self, server, folder: Path, parent: QObject | None = None):
        latest = _Latest()
        super().__init__(_FetchThread(latest, server, Path(folder)), latest, parent)
        self.server = server  # its owner closes it once this is shut down


def _stop(thread: _LatestThread, latest: _Latest) -> None:
    """Cancel the job and wait for the thread (which closes what it holds as it ends)."""
    latest.cancel()
    if shiboken6.isValid(thread):  # at the interpreter's exit it may be gone first
        thread.wait()
