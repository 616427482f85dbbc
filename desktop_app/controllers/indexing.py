"""Indexing for the desktop app: one long-lived worker thread owns the writer store.

    GUI thread                         "indexing" QThread                "scanning" QThread
    IndexController                    _IndexWorker                      (each a WorkerThread)
      add_paths(paths) ─────── job ───────────────────────────────────>  _scan(): find_documents
      _on_scanned(files) <──────────────────────────────────────────────  finished
        inbox.put(add) ── wake (job) > drain(): opens the store and the
                                       embedder (lazily, here), runs
      _on_progress(event) <── event ──── Indexer.run(files=files, cancel)
      _on_snapshot(docs)  <── event ──── store.list_documents()
      cancel(): inbox.cancel_all() sets a threading.Event, read by the engine between
                documents and batches; a busy worker never runs a queued slot, so a slot
                could not cancel anything.

The worker opens the writer store (with its own dense index, ~0.4 GB at a million chunks, beside
the answering store's) and the embedder only to index or remove: the documents' list and a
scanned page's words are read from the collection opened read-only without its dense index, so a
kiosk, which never indexes, holds one dense index and no writer's lock (docs/benchmarks.md, issue
32). Once nothing has been asked of it for RELEASE_AFTER_S, the controller has it close what it
holds and give the memory back; the next request opens it again (about 3 s at a million chunks).

Requests travel in a small locked inbox, not as slot arguments: a request made while a run is
busy is then visible to the worker between two documents (removals, refreshes), and cancel can
drop the adds still waiting. The controller keeps the per-document state the GUI shows:
stored documents (the last snapshot of the store) overlaid by live states (queued, indexing,
just finished), merged into one list for `documentsChanged`.

The worker reports on one signal, `event`, with typed records (IndexProgress from the engine,
the small records below for the rest); the controller dispatches on their type.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from PySide6.QtCore import QCoreApplication, QObject, QTimer, Signal, Slot

from desktop_app.controllers.worker_thread import WorkerThread
from engine.errors import EngineError
from engine.ingest.discover import Found, find_documents, normal_path
from engine.paths import DEFAULT_COLLECTION, AppPaths
from engine.store.health import collection_exists
from engine.store.index_store import READY_STATUSES, IndexStore
from engine.store.indexer import (
    Indexer,
    IndexSettings,
    default_embedder,
    open_collection,
    outdated_files,
)
from engine.store.memory import give_back_freed_memory
from engine.types import IndexProgress, StoredDocument

log = logging.getLogger(__name__)

ACTIVE_STATUSES = ("queued", "indexing")
FINAL_STATUSES = ("ready", "ready_with_warnings", "failed")
SUPPORTED_TEXT = "PDF, TXT, Markdown, HTML and DOCX"
_SNAPSHOT_EVERY_S = 0.5  # during a run, the store's list is sent at most this often
_EMIT_DELAY_MS = 30  # changes within this time go out as one documentsChanged
_PROBLEMS_SHOWN = 5  # of the dropped paths that cannot be indexed, in one message
RELEASE_AFTER_S = 30.0  # idle this long, the worker closes the store and the embedder


# -- requests from the GUI thread to the worker ------------------------------------------------

@dataclass(frozen=True)
class _Request:
    kind: str  # "add", "remove", "refresh" or "ocr" (a page's recognised words, for the source view)
    path: str = ""
    force: bool = False  # add: remove the stored copy first (re-index)
    ticket: int = 0  # add: which live "queued" state this request answers; ocr: which answer
    page: int = 0  # ocr: the page (1-based)


class _Inbox:
    """Requests and the cancel flag, under one lock: cancel drops the waiting adds and sets the
    flag in one step, and the worker takes adds and clears the flag in one step, so a cancel
    is never lost between the two."""

    def __init__(self):
        self._lock = threading.Lock()
        self._requests: list[_Request] = []
        self.cancel = threading.Event()

    def put(self, request: _Request) -> None:
        with self._lock:
            self._requests.append(request)

    def drop_adds(self, path: str) -> None:
        with self._lock:
            self._requests = [r for r in self._requests if not (r.kind == "add" and r.path == path)]

    def cancel_all(self) -> None:
        with self._lock:
            self._requests = [r for r in self._requests if r.kind != "add"]
            self.cancel.set()

    def take_all(self) -> list[_Request]:
        with self._lock:
            taken, self._requests = self._requests, []
            if any(r.kind == "add" for r in taken):
                self.cancel.clear()  # a cancel applies to what was asked before it
            return taken

    def empty(self) -> bool:
        with self._lock:
            return not self._requests

    def take_others(self) -> list[_Request]:
        """Removals and refreshes; adds stay for the next run."""
        with self._lock:
            taken = [r for r in self._requests if r.kind != "add"]
            self._requests = [r for r in self._requests if r.kind == "add"]
            return taken


# -- what the worker reports, besides the engine's IndexProgress --------------------------------

@dataclass(frozen=True)
class _RunStarted:
    ticket: int  # the last ticket taken
    files: list  # in the order they go
    sizes: dict  # path -> bytes


@dataclass(frozen=True)
class _RunFinished:
    ticket: int


@dataclass(frozen=True)
class _Snapshot:
    documents: list  # store.list_documents(): StoredDocument
    ready: int
    chunks: int
    outdated: tuple = ()  # the first snapshot's: files read with an older reading of their format


@dataclass(frozen=True)
class _Stored:
    """A document just stored, between two snapshots."""

    path: str
    document: StoredDocument | None


@dataclass(frozen=True)
class _Removed:
    path: str  # no longer in the store (or never was)


@dataclass(frozen=True)
class _Failed:
    message: str


@dataclass(frozen=True)
class _PageOcrRead:
    ticket: int
    ocr: object  # the page's PageOcr, or None


@dataclass
class _Live:
    """What the controller knows of a document before the store's list has it: queued,
    indexing, or just finished and not stored. None leaves the stored value."""

    ticket: int  # the request it answers
    status: str
    error: str = ""
    pages_done: int | None = None
    page_count: int | None = None
    chunk_count: int | None = None

    def over(self, document: StoredDocument) -> StoredDocument:
        counts = {name: value for name, value in (("page_count", self.page_count),
                                                  ("chunk_count", self.chunk_count)) if value is not None}
        return replace(document, status=self.status, error=self.error, pages_done=self.pages_done, **counts)


# -- the work on the two threads ----------------------------------------------------------------

def _scan(generation: int, inputs: list) -> tuple[int, list, list]:
    """Finds the documents in dropped files and folders, on the "scanning" thread (a big folder
    must not stall the GUI, nor wait behind a busy indexing run): (generation, files (normal
    paths), problems (messages)). This is the one discovery of a drop: the worker hands these
    files to the indexer as they are."""
    try:
        found = find_documents(inputs)
    except Exception as exc:  # not an unreadable folder (that is in found): say so
        log.exception("could not look for documents in %s", inputs)
        return generation, [], [f"Could not look for documents in '{item}' ({exc})." for item in inputs]
    for item, why in found.unreadable:
        log.warning("could not look for documents in %s: %s", item, why)
    return generation, list(found.files), _problems(inputs, found)


def _problems(inputs: list, found: Found) -> list[str]:
    """One message per input that gave no document, in the order they were dropped, then one
    per folder inside them that could not be read."""
    why = dict(found.unreadable)
    problems, told = [], set(map(str, inputs))
    for item in inputs:
        inside = [folder for folder in why if folder != item and Path(folder).is_relative_to(item)]
        if item in why:
            problems.append(f"Could not look for documents in '{item}' ({why[item]}).")
        elif item in found.empty and inside:  # not empty: what it holds could not be read
            problems.append(f"No documents could be read in '{item}': "
                            + "; ".join(f"the folder '{f}' could not be opened ({why[f]})" for f in inside)
                            + ". Check that you may read it.")
            told.update(inside)
        elif item in found.empty:
            problems.append(f"No documents to index were found in '{item}'. Supported: {SUPPORTED_TEXT}.")
        elif item in found.missing:
            problems.append(f"'{item}' was not found; it may have been moved or deleted.")
    problems += [f"Could not look in the folder '{folder}' ({reason}); its documents were left out."
                 for folder, reason in found.unreadable if folder not in told]
    return problems


class _IndexWorker(QObject):
    """Owns the writer IndexStore and the Embedder; both are opened here, on this thread, at
    the first request, and closed here by release() when idle, or by close() as the thread ends."""

    event = Signal(object)  # IndexProgress, or one of the records above

    def __init__(self, paths: AppPaths, collection: str, settings: IndexSettings | None, inbox: _Inbox):
        super().__init__()
        self._paths = paths
        self._collection = collection
        # read at each run's start; the GUI thread swaps it whole (a frozen record), never edits it
        self.settings = settings
        self._inbox = inbox
        self._store: IndexStore | None = None
        self._listing: IndexStore | None = None  # read-only, no dense index: while no writer is needed
        self._embedder = None
        self._remaining: set[str] = set()  # files of the current run not finished yet
        self._doomed: set[str] = set()  # removed while in the current run: removed when done
        self._last_snapshot = 0.0
        self.opened_on_thread: int | None = None  # threading ident, for tests
        self.pause = None  # a threading.Event: while set, a run's embedding waits (pause_while)

    def drain(self) -> None:
        """Handle every waiting request: removals and refreshes first, then one run for the adds."""
        while requests := self._inbox.take_all():
            adds = [r for r in requests if r.kind == "add"]
            if self._apply([r for r in requests if r.kind != "add"]) and not adds:
                with self._reporting():
                    self._publish()
            if adds:
                self._run(adds)

    @Slot()
    def close(self) -> None:
        with self._reporting():
            self._close()

    def release(self) -> None:
        """Close the store and the embedder and give their memory back, unless requests wait
        (their drain comes next and would open them again); the next request reopens them."""
        if (self._store is None and self._embedder is None and self._listing is None) or not self._inbox.empty():
            return
        with self._reporting():
            self._close()
        give_back_freed_memory()

    @property
    def holds_store(self) -> bool:
        return self._store is not None

    # -- requests --------------------------------------------------------------------------

    def _apply(self, requests: list[_Request]) -> bool:
        """Removals and refreshes; True when the store's list should be sent again."""
        changed = False
        for request in requests:
            if request.kind == "ocr":
                self._read_page_ocr(request)
                continue
            with self._reporting():
                changed = True
                if request.kind == "refresh":
                    pass  # the list is sent after these requests
                elif request.path in self._remaining:
                    self._doomed.add(request.path)  # the run will store it: remove it then
                else:
                    self._remove_now(request.path)
        return changed

    def _run(self, adds: list[_Request]) -> None:
        ticket = max(r.ticket for r in adds)
        wanted: dict[str, bool] = {}
        for request in adds:
            wanted[request.path] = wanted.get(request.path, False) or request.force
        try:
            with self._reporting():
                store = self._open()
                for path, force in wanted.items():
                    if force:
                        store.remove_document(path)
                # the scanner found these files already: only those gone since are left out
                files = sorted((path for path in wanted if os.path.isfile(path)), key=Path)
                gone = [path for path in wanted if not os.path.isfile(path)]
                if gone:
                    self.event.emit(_Failed("\n".join(f"'{path}' was not found, so it was not indexed; it may have "
                                               "been moved or deleted." for path in gone[:_PROBLEMS_SHOWN])))
                self._remaining = set(files)
                self.event.emit(_RunStarted(ticket, files, _sizes(files)))
                indexer = Indexer(store, self._embedder, self.settings, pause=self.pause)
                for event in indexer.run(files=files, cancel=self._inbox.cancel):
                    if event.outcome is not None:  # its row first: the list shows it with its id
                        self.event.emit(_Stored(event.outcome.path, store.find_document(event.outcome.path)))
                        self._say_not_read(event.outcome)
                    self.event.emit(event)
                    if event.outcome is not None:
                        self._finished(event.outcome.path)
                    if self._apply(self._inbox.take_others()) or self._snapshot_due():
                        self._publish()
        finally:
            self._remaining = set()
            for path in sorted(self._doomed):  # cancelled before their turn
                with self._reporting():
                    self._remove_now(path)
            self._doomed.clear()
            with self._reporting():
                self._publish()
            self.event.emit(_RunFinished(ticket))

    def _say_not_read(self, outcome) -> None:
        """A copy of a document indexed already is said in the status bar (its row then goes);
        a document moved here leaves its old path's row."""
        if outcome.not_read == "copy":  # said short: the status bar shows one line
            self.event.emit(_Failed(f"'{Path(outcome.path).name}' is indexed already (the same file in "
                                    f"'{Path(outcome.stored_as).parent.name}'): it is searched once."))
        elif outcome.not_read == "moved":
            self.event.emit(_Removed(outcome.stored_as))

    def _finished(self, path: str) -> None:
        self._remaining.discard(path)
        if path in self._doomed:
            self._doomed.discard(path)
            with self._reporting():
                self._remove_now(path)

    def _read_page_ocr(self, request: _Request) -> None:
        """The stored word boxes of a scanned page (None when it was not read by OCR, or the
        store cannot say): a lookup for the source view, never an error shown to the user."""
        found = None
        try:
            store = self._reader()
            found = store.page_ocr_by_path(request.path, request.page) if store is not None else None
        except Exception:
            log.warning("could not read the recognised words of %s, page %d", request.path, request.page,
                        exc_info=True)
        self.event.emit(_PageOcrRead(request.ticket, found))

    def _remove_now(self, path: str) -> None:
        try:
            self._open().remove_document(path)
        finally:
            self.event.emit(_Removed(path))

    # -- the store -------------------------------------------------------------------------

    def _close_listing(self) -> None:
        listing, self._listing = self._listing, None
        if listing is not None:
            listing.close()

    def _open(self) -> IndexStore:
        if self._store is None:
            self._close_listing()
            if self._embedder is None:
                self._embedder = default_embedder(self._paths)
            self._store = open_collection(self._paths, self._collection, self._embedder)
            self.opened_on_thread = threading.get_ident()
        return self._store

    def _reader(self) -> IndexStore | None:
        """The writer store when it is open; else the collection read-only, without its dense
        index and with no embedder loaded (a kiosk lists its manuals and reads a page without
        holding a second index), kept until release; None when there is no collection yet."""
        if self._store is not None:
            return self._store
        if self._listing is not None and self._listing.folder != self._paths.collection(self._collection):
            self._close_listing()  # a bundle switch: list the version now current
        if self._listing is None and collection_exists(self._paths, self._collection):
            self._listing = open_collection(self._paths, self._collection, read_only=True, dense=False)
        return self._listing

    def _publish(self) -> None:
        store = self._reader()
        if store is None:
            self.event.emit(_Snapshot([], 0, 0, ()))
            return
        stats = store.stats()
        documents = store.list_documents()
        ready = sum(stats["documents_by_status"].get(status, 0) for status in READY_STATUSES)
        outdated = () if self._last_snapshot else tuple(outdated_files(documents))
        self.event.emit(_Snapshot(documents, ready, stats["chunks"], outdated))
        self._last_snapshot = time.monotonic()

    def _snapshot_due(self) -> bool:
        return time.monotonic() - self._last_snapshot >= _SNAPSHOT_EVERY_S

    def _close(self) -> None:
        self._close_listing()
        store, self._store = self._store, None
        embedder, self._embedder = self._embedder, None
        try:
            if store is not None:
                store.close()
        finally:
            if embedder is not None:
                embedder.close()

    @contextmanager
    def _reporting(self):
        """Errors become _Failed events (the GUI shows them); nothing is lost silently."""
        try:
            yield
        except EngineError as exc:
            log.warning("indexing: %s", exc)
            self.event.emit(_Failed(str(exc)))
        except Exception as exc:
            log.exception("indexing failed unexpectedly")
            self.event.emit(_Failed(f"Indexing stopped because of an unexpected error ({type(exc).__name__}: "
                                    f"{exc}). The details are in the log file."))


# -- the controller (GUI thread) -----------------------------------------------------------

def _sizes(files: list[str]) -> dict[str, int]:
    """Each file's size in bytes, as the engine's progress counts them (0 if it went since)."""
    sizes = {}
    for path in files:
        try:
            sizes[path] = os.path.getsize(path)
        except OSError:
            sizes[path] = 0
    return sizes


def ocr_settings(settings: IndexSettings, paths: AppPaths | None, ocr: bool | None) -> IndexSettings:
    """`settings` with OCR on or off (None: as they say) and, with `paths`, the data dir's OCR
    page cache where they name none: recognised pages survive a kill and a re-index."""
    changes = {} if ocr is None else {"ocr": ocr}
    if paths is not None and settings.ocr_cache is None:
        changes["ocr_cache"] = paths.ocr_cache
    return replace(settings, **changes) if changes else settings


def done_fraction(event: IndexProgress, current_bytes: int) -> float | None:
    """How much of the run is done, 0..1, by bytes: the finished documents' bytes, plus the
    share of the current document's pages embedded so far (`current_bytes` is its size), so
    the bar moves within a long document too. None before the engine gives a total."""
    if event.bytes_total <= 0:
        return None
    done = float(event.bytes_done)
    if event.outcome is None and event.document_pages > 0:
        done += current_bytes * min(1.0, event.document_pages_done / event.document_pages)
    return min(1.0, done / event.bytes_total)


class IndexController(QObject):
    """Indexing for the GUI: every method is called on the GUI thread and returns at once.

    documentsChanged(list): one engine.types.StoredDocument per document, sorted by file name;
        one not stored yet has id None and status "queued" or "indexing", with pages_done
        (while indexing: pages embedded so far, None until the document is parsed).
    progressed(IndexProgress), busyChanged(bool), statsChanged(documents ready, chunks),
    failed(str): a message for the user.
    pageOcrRead(ticket, PageOcr | None): the answer to read_page_ocr(), from the worker's store
        (between two documents or batches of a run; at once when idle).

    Call shutdown() before the application quits (the window's closeEvent).
    """

    documentsChanged = Signal(list)
    progressed = Signal(object)
    busyChanged = Signal(bool)
    statsChanged = Signal(int, int)
    failed = Signal(str)
    pageOcrRead = Signal(int, object)
    # once, at start: how many stored documents are read again (read with an older reading of
    # their format: a PDF indexed before PDFium read its text, a table before its cells were rows), now queued
    rereading = Signal(int)

    def __init__(self, paths: AppPaths, collection: str = DEFAULT_COLLECTION, parent: QObject | None = None,
                 *, index_settings: IndexSettings | None = None, ocr: bool | None = None, clock=time.monotonic,
                 release_after_s: float = RELEASE_AFTER_S):
        super().__init__(parent)
        # OCR (Settings.ocr; None keeps index_settings' choice), its page cache in the data dir
        index_settings = ocr_settings(index_settings or IndexSettings(), paths, ocr)
        self._clock = clock  # seconds; tests drive their own
        self._indexing_since = 0.0  # when self._indexing became the file being read or embedded
        self._inbox = _Inbox()
        self._stored: dict[str, StoredDocument] = {}  # path -> as store.list_documents() has it
        self._live: dict[str, _Live] = {}  # path -> its state before the store's list has it
        self._hidden: set[str] = set()  # removed, until the worker says it is gone
        self._tickets = itertools.count(1)
        self._ocr_tickets = itertools.count(1)
        self._generation = 0  # scans answered for an older generation were cancelled
        self._scans = 0
        self._running = False
        self._run_ticket = 0
        self._run_order: list[str] = []
        self._run_sizes: dict[str, int] = {}  # bytes of each file of the run
        self._run_next = 0
        self._indexing: str | None = None  # the file of the run being read or embedded
        self._busy = False
        self._closed = False
        self._stats = (0, 0)
        self._emit_timer = QTimer(self, singleShot=True, interval=_EMIT_DELAY_MS)
        self._emit_timer.timeout.connect(self._emit_documents)
        # restarted by each request and when a run ends: the store is released once idle
        self._release_timer = QTimer(self, singleShot=True, interval=int(release_after_s * 1000))
        self._release_timer.timeout.connect(self._release_when_idle)

        self._worker = _IndexWorker(paths, collection, index_settings, self._inbox)
        # the store is closed on its thread as it ends; stopping cancels the run and drops the adds
        self._index_jobs = WorkerThread("indexing", self, worker=self._worker, close=self._worker.close,
                                        cancel=self._inbox.cancel_all, wait_ms=None)
        self._scan_jobs = WorkerThread("scanning", self, wait_ms=None)
        self._thread, self._scan_thread = self._index_jobs.qthread, self._scan_jobs.qthread
        self._scan_jobs.finished.connect(self._on_scanned)
        self._worker.event.connect(self._on_worker_event)
        app = QCoreApplication.instance()
        if app is not None:
            app.aboutToQuit.connect(self.shutdown)  # a safety net; the window calls it first
        self.refresh()

    # -- requests (GUI thread) -------------------------------------------------------------

    def _wake(self) -> None:
        """The worker handles what waits in the inbox (at once when idle, else after its run)."""
        self._index_jobs.run(self._worker.drain)
        self._release_timer.start()

    def _release_when_idle(self) -> None:
        if self._closed:
            return
        if self._busy:
            self._release_timer.start()  # and again when the run ends
            return
        self._index_jobs.run(self._worker.release)

    @property
    def holds_store(self) -> bool:
        """The worker has the collection open (with its dense index) and the embedder loaded:
        from a request until RELEASE_AFTER_S after the last one (a snapshot, for tools and tests)."""
        return self._worker.holds_store

    @property
    def busy(self) -> bool:
        return self._busy

    @property
    def stats(self) -> tuple[int, int]:
        """(documents ready, chunks) as last reported."""
        return self._stats

    def add_paths(self, paths: list[str]) -> None:
        """Index these files and folders (what is in the folders is found off the GUI thread);
        while a run is busy they wait, shown as queued."""
        inputs = [str(p) for p in paths]
        if self._closed or not inputs:
            return
        self._scans += 1
        self._scan_jobs.run(_scan, self._generation, inputs)
        self._update_busy()

    def cancel(self) -> None:
        """Stop the current run (between documents or batches) and drop the queued documents."""
        if self._closed:
            return
        self._inbox.cancel_all()
        self._generation += 1
        for path in [p for p, entry in self._live.items() if entry.status == "queued"]:
            del self._live[path]
        self._schedule_emit()
        self._update_busy()

    def remove(self, document_id: int) -> None:
        """Remove a stored document (by its id) from the index; the file itself stays."""
        path = next((p for p, document in self._stored.items() if document.id == document_id), None)
        if path is not None:
            self.remove_path(path)

    def remove_path(self, path: str) -> None:
        """Remove a document by path: a queued one is dropped, one being indexed is removed when
        it is done, a stored one at once (between two documents of a run)."""
        if self._closed:
            return
        path = normal_path(path)
        self._inbox.drop_adds(path)
        if self._live_status(path) == "queued":
            del self._live[path]
        self._hidden.add(path)
        self._inbox.put(_Request("remove", path))
        self._wake()
        self._schedule_emit()
        self._update_busy()

    def reindex(self, document_id: int) -> None:
        """Index a stored document again from its file (its stored copy is removed first)."""
        path = next((p for p, document in self._stored.items() if document.id == document_id), None)
        if path is None or self._closed:
            return
        self._queue(path, force=True)
        self._wake()
        self._schedule_emit()
        self._update_busy()

    def refresh(self) -> None:
        """Send the store's documents and stats again (also done once at start)."""
        if self._closed:
            return
        self._inbox.put(_Request("refresh"))
        self._wake()

    def shutdown(self) -> None:
        """Cancel, let the worker close the store and the embedder on its thread, stop both
        threads and wait for them. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        self._emit_timer.stop()
        self._release_timer.stop()
        self._scan_jobs.stop(0)
        self._index_jobs.stop(None)
        self._scan_jobs.stop(None)
        if self._busy:
            self._busy = False
            self.busyChanged.emit(False)

    def read_page_ocr(self, path: str, page: int) -> int:
        """Ask for the recognised words of a stored document's page (1-based), off the GUI
        thread; returns the ticket that pageOcrRead will carry with them."""
        ticket = next(self._ocr_tickets)
        if not self._closed:
            self._inbox.put(_Request("ocr", normal_path(path), ticket=ticket, page=page))
            self._wake()
        return ticket

    def pause_while(self, flag) -> None:
        """Indexing waits between embedding steps while `flag` (a threading.Event) is set: the
        window passes the assistant's `answering`, so that a question asked during indexing
        is answered at its idle speed."""
        self._worker.pause = flag

    def set_ocr(self, enabled: bool) -> None:
        """Recognise scanned pages (Settings.ocr) from the next run on; a run going on keeps
        what it started with."""
        self._worker.settings = ocr_settings(self._worker.settings, None, enabled)

    @property
    def index_settings(self) -> IndexSettings:
        """What the next run indexes with (OCR on or off, its page cache, limits)."""
        return self._worker.settings

    def fraction_done(self, event: IndexProgress) -> float | None:
        """The run's share done at `event` (0..1, by bytes, moving within a document as its
        pages are embedded), or None before there is a total."""
        return done_fraction(event, self._run_sizes.get(normal_path(event.current_file), 0))

    def indexing_now(self) -> tuple[str, float] | None:
        """(path, seconds so far) of the document being read or embedded, if one is."""
        path = self._indexing
        if path is None or self._live_status(path) != "indexing":
            return None
        return path, self._clock() - self._indexing_since

    def documents(self) -> list[StoredDocument]:
        """What documentsChanged sends: stored documents with their live states merged in."""
        merged = {path: document for path, document in self._stored.items() if path not in self._hidden}
        for path, entry in self._live.items():
            if path not in self._hidden:
                base = merged.get(path) or StoredDocument(path, "queued")
                merged[path] = entry.over(base)
        return sorted(merged.values(), key=lambda d: (d.name.casefold(), d.path))

    # -- what the workers report (GUI thread) ----------------------------------------------

    def _on_scanned(self, scanned: tuple) -> None:
        generation, files, problems = scanned
        self._scans -= 1
        if self._closed or generation != self._generation:
            self._update_busy()
            return
        if problems:
            shown = problems[:_PROBLEMS_SHOWN]
            if len(problems) > len(shown):
                shown.append(f"… and {len(problems) - len(shown)} more.")
            self.failed.emit("\n".join(shown))
        for path in files:
            self._queue(path, force=False)
        if files:
            self._wake()
            self._schedule_emit()
        self._update_busy()

    # by name, not bound methods kept on self: a reference cycle would leave the controller to
    # Python's cyclic GC, which may run on a worker thread and deadlock destroying a QObject there
    _HANDLERS = {IndexProgress: "_on_progress", _RunStarted: "_on_run_started", _RunFinished: "_on_run_finished",
                 _Snapshot: "_on_snapshot", _Stored: "_on_stored", _Removed: "_on_removed",
                 _Failed: "_on_failed", _PageOcrRead: "_on_page_ocr"}

    def _on_worker_event(self, event) -> None:
        getattr(self, self._HANDLERS[type(event)])(event)

    def _on_run_started(self, run: _RunStarted) -> None:
        self._running = True
        self._run_ticket = run.ticket
        self._run_order, self._run_next, self._indexing = run.files, 0, None
        self._run_sizes = {normal_path(path): size for path, size in run.sizes.items()}
        self._mark_next_indexing()
        self._schedule_emit()
        self._update_busy()

    def _on_progress(self, event: IndexProgress) -> None:
        if self._closed:
            return
        path = normal_path(event.current_file)
        entry = self._live.get(path)
        if entry is not None and entry.ticket > self._run_ticket:
            pass  # asked again since this run began: it stays queued for the next run
        elif event.outcome is None:
            self._live[path] = _Live(self._run_ticket, "indexing", page_count=event.document_pages,
                                     pages_done=event.document_pages_done if event.document_pages else None)
            self._set_indexing(path)
        else:
            outcome = event.outcome
            if path in self._stored:
                self._live.pop(path, None)  # the stored row is right (it came just before)
            else:  # not stored (it cannot be read back): show what the engine said
                self._live[path] = _Live(self._run_ticket, outcome.status, outcome.reason,
                                         page_count=outcome.pages, chunk_count=outcome.chunks)
            self._mark_next_indexing()
        self._schedule_emit()
        self.progressed.emit(event)

    def _on_run_finished(self, run: _RunFinished) -> None:
        self._running = False
        self._run_order, self._run_next, self._indexing = [], 0, None
        for path in [p for p, e in self._live.items() if e.status in ACTIVE_STATUSES and e.ticket <= run.ticket]:
            del self._live[path]  # cancelled, or gone before its turn
        self._schedule_emit()
        self._update_busy()

    def _on_snapshot(self, snapshot: _Snapshot) -> None:
        if self._closed:
            return
        self._stored = {document.path: document for document in snapshot.documents}
        for path in [p for p, e in self._live.items() if e.status in FINAL_STATUSES]:
            del self._live[path]  # the snapshot has it now
        self._stats = (snapshot.ready, snapshot.chunks)
        self._schedule_emit()
        self.statsChanged.emit(snapshot.ready, snapshot.chunks)
        if snapshot.outdated:
            log.info("reading %d documents again with the current reader", len(snapshot.outdated))
            self.add_paths(list(snapshot.outdated))
            self.rereading.emit(len(snapshot.outdated))

    def _on_stored(self, stored: _Stored) -> None:
        if stored.document is not None and not self._closed:
            self._stored[stored.path] = stored.document

    def _on_removed(self, removed: _Removed) -> None:
        path = removed.path
        self._hidden.discard(path)
        self._stored.pop(path, None)
        if self._live_status(path) in FINAL_STATUSES:
            del self._live[path]
        self._schedule_emit()

    def _on_page_ocr(self, read: _PageOcrRead) -> None:
        if not self._closed:
            self.pageOcrRead.emit(read.ticket, read.ocr)

    def _on_failed(self, failed: _Failed) -> None:
        if not self._closed:
            self.failed.emit(failed.message)

    # -- helpers ---------------------------------------------------------------------------

    def _queue(self, path: str, force: bool) -> None:
        ticket = next(self._tickets)
        self._hidden.discard(path)
        self._live[path] = _Live(ticket, "queued")
        self._inbox.put(_Request("add", path, force, ticket))

    def _mark_next_indexing(self) -> None:
        """Once nothing of the run shows as indexing, the next queued file of the run does: it is
        being read already (parsing runs ahead of the engine's events)."""
        if self._live_status(self._indexing) == "indexing":
            return
        while self._run_next < len(self._run_order):
            path = self._run_order[self._run_next]
            entry = self._live.get(path)
            if entry is not None and entry.status == "queued" and entry.ticket <= self._run_ticket:
                entry.status = "indexing"
                self._set_indexing(path)
                return
            self._run_next += 1

    def _live_status(self, path: str | None) -> str | None:
        entry = self._live.get(path)
        return entry.status if entry is not None else None

    def _set_indexing(self, path: str) -> None:
        if path != self._indexing:
            self._indexing, self._indexing_since = path, self._clock()

    def _schedule_emit(self) -> None:
        if not self._closed and not self._emit_timer.isActive():
            self._emit_timer.start()

    def _emit_documents(self) -> None:
        if not self._closed:
            self.documentsChanged.emit(self.documents())

    def _update_busy(self) -> None:
        busy = not self._closed and (self._scans > 0 or self._running or any(
            entry.status in ACTIVE_STATUSES for entry in self._live.values()))
        if busy != self._busy:
            self._busy = busy
            self.busyChanged.emit(busy)
            if not busy and not self._closed:
                self._release_timer.start()

