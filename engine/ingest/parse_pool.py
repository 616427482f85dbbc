"""ParsePool: documents are parsed in child processes, never in the caller's.

A hostile or broken file can make a parser hang, eat memory, recurse without end or crash
the interpreter (pypdf raises TypeError, AssertionError, RecursionError and more besides its
own errors). So each document is parsed in a worker process with:
  - a wall-time limit: past it the worker is killed and the document "timed out"; the worker
    also sets its own CPU-time limit (RLIMIT_CPU) as a backstop while the caller is not
    looking (an imap consumer busy embedding);
  - a memory cap (RLIMIT_AS, on Linux): a MemoryError or a killed worker means "too large";
  - pypdf's own limits, set inside the worker (pypdf keeps them per thread);
  - size limits checked before any worker sees the file.
Whatever happens to a worker, the caller gets a DocumentError for that document, and the next
document gets a fresh worker.

OCR (ParsePool(ocr=OcrOptions(...)), see ocr_pages): after a PDF's text pass the worker
recognises its pages without a usable text layer, one by one, and reports each page. Each
report moves the document's deadline to at least the per-page limit (plus a grace) from then,
and the worker re-arms its CPU limit before each page: a 300-page scan is not "timed out" by
the document's limit, while a page stuck in the recogniser still is. A page over its limit
between the recogniser's steps is given up alone (a warning); the rest of the document is kept.
A page that stops the worker (stuck in one native call past its limit, or a crash) is given up
too: the document starts again in a new worker, told to skip it ("skip": its position among the
pages to recognise), and the pages recognised before it come back from the cache.

PDFium reads a PDF's text (engine.ingest.pdf). It has no limits of its own: a hostile file can
make it abort (a 2 GB flate bomb fails an allocation) or be killed for memory. A worker that
dies while reading a PDF's text with PDFium costs no more than a second try: the document
starts again in a new worker that reads it with pypdf, whose limits end it with a reason.

Protocol: one JSON object per message over a Pipe (send_bytes / recv_bytes; never pickle).
  caller -> worker   {"op": "settings", "memory_limit_mb": int}   once, first
                     {"op": "parse", "path": str, "cpu_limit_s": float, "pdf_reader": "pdfium" | "pypdf",
                      "ocr": null | {"enabled": bool, "cache": str | null, "page_time_limit_s": float,
                                     "memory_limit_mb": int | null, "skip": [[position, why]]}}
                     {"op": "close"}
  worker -> caller   {"progress": {"done": int, "total": int}}   OCR: before the first page to
                      recognise and after each one (pages read from the cache count as done)
                     {"ok": true, "document": {"path", "title",
                      "pages": [[number, text, label, ocr]], (ocr: null, or PageOcr.to_json())
                      "warnings": [str], "outline": [[page, [title, ...]]]}}
                     {"ok": false, "kind": str, "message": str, "retire": bool}
A worker that replies with "retire": true exits after the reply (its state is suspect).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import stat
import time
import warnings
from collections import deque
from collections.abc import Iterable, Iterator
from multiprocessing.connection import Connection
from pathlib import Path

from engine.child_process import ChildDied, JsonChild, describe_exit, quiet_child
from engine.errors import DocumentError, EngineProcessError
from engine.hashing import sha256_file
from engine.ingest.discover import is_supported
from engine.ingest.ocr_pages import OcrOptions
from engine.types import CancelFlag, OutlineEntry, Page, PageOcr, PageProgress, ParsedDocument

log = logging.getLogger(__name__)

MB = 1024 * 1024
TEXT_SUFFIXES = {".txt", ".md", ".markdown", ".html", ".htm"}
_POLL_S = 0.1  # how often a waiting caller looks at its cancel flag
WORKER_NICE = 10  # on Linux's scheduler a nice-0 process then gets ~10x the CPU of a worker
_CPU_MARGIN_S = 5.0  # the worker's own CPU limit lies this far past the wall-time limit
# a page's hard limits lie this far past its own limit: the first page also loads the models,
# and the per-page limit is checked between the recogniser's steps, not inside them
_PAGE_GRACE_S = 30.0
# RLIMIT_AS of a worker recognising pages (OCR). Measured in the worker (VmPeak, what RLIMIT_AS
# caps): 1,437 MB after three R-intro pages at 200 dpi (RSS 650 MB), 1,201 MB for one A1-size
# page; under 2,048 MB that leaves some 600 MB for the text pass of a large file and for larger
# pages. Text-only documents keep memory_limit_mb.
OCR_MEMORY_LIMIT_MB = 3072
MAX_SKIPPED_PAGES = 3  # pages of one document that stopped its reader; one more and it fails


Result = ParsedDocument | DocumentError


class ParsePool:
    """Parses documents in `workers` child processes, each document within the limits.

    max_file_mb limits PDF and DOCX files; max_text_mb limits TXT, Markdown and HTML, whose
    size is their text: 64 MB is some 30,000 pages, far beyond any manual, and parses well
    within the default memory cap. Use from one thread at a time.
    """

    def __init__(self, workers: int = 1, time_limit_s: float = 120.0,
                 memory_limit_mb: int | None = 2048, max_file_mb: int = 512,
                 max_text_mb: int = 64, ocr: OcrOptions | None = None, pdf_reader: str = "pdfium"):
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self.pdf_reader = pdf_reader  # "pypdf": PDF text by pypdf alone (benchmarks, a fallback)
        self.ocr = ocr if ocr is not None and ocr.enabled else None
        self.workers = workers
        self.time_limit_s = time_limit_s
        self.memory_limit_mb = memory_limit_mb
        self.max_file_mb = max_file_mb
        self.max_text_mb = max_text_mb
        self._live: list[_Worker] = []
        self._idle: list[_Worker] = []

    def __enter__(self) -> "ParsePool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stops every worker (an imap still running then raises EngineProcessError)."""
        for worker in list(self._live):
            self._discard(worker, polite=worker in self._idle)

    @property
    def pids(self) -> list[int]:
        """The process ids of the running workers."""
        return [worker.pid for worker in self._live]

    # -- parsing --------------------------------------------------------------------------
    def parse(self, path: str | Path) -> ParsedDocument:
        """One document; raises DocumentError (with .kind and .outcome) if it cannot be read."""
        [(_, result)] = self.imap([path])
        if isinstance(result, DocumentError):
            raise result
        return result

    def imap(self, paths: Iterable[str | Path], cancel: CancelFlag | None = None,
             progress: bool = False) -> Iterator[tuple[Path, Result | PageProgress]]:
        """(path, ParsedDocument or DocumentError) for each path, in order; with `progress`,
        also (path, PageProgress(done, total)) while OCR recognises its pages, before its result.

        Keeps `workers` documents parsing ahead, so the next documents parse while the caller
        works on this one. Stops early, yielding nothing more, once `cancel` is set.
        """
        queue = iter(paths)
        in_flight: deque[_Job] = deque()
        try:
            self._fill(in_flight, queue, cancel)
            while in_flight:
                job = in_flight[0]  # stays in the queue, to be stopped, while its progress is out
                result = None
                for item in self._outcome(job, cancel):
                    if not isinstance(item, PageProgress):
                        result = item
                    elif progress:
                        yield job.path, item
                in_flight.popleft()
                if result is None:
                    return  # cancelled while waiting
                self._fill(in_flight, queue, cancel)
                yield job.path, result
        finally:
            for job in in_flight:  # the caller stopped early: their workers are mid-parse
                if job.worker is not None:
                    self._discard(job.worker)

    def _fill(self, in_flight: deque, queue: Iterator, cancel: CancelFlag | None) -> None:
        while len(in_flight) < self.workers and not _is_set(cancel):
            path = next(queue, None)
            if path is None:
                return
            in_flight.append(self._start(Path(path)))

    def _start(self, path: Path) -> "_Job":
        refusal = self._refusal(path)
        if refusal is not None:
            return _Job(path, result=refusal)
        job = _Job(path)
        job.pdf_reader = self.pdf_reader
        self._send_job(job)
        return job

    def _send_job(self, job: "_Job") -> None:
        job.worker = self._send({"op": "parse", "path": str(job.path), "pdf_reader": job.pdf_reader,
                                 "cpu_limit_s": self.time_limit_s + _CPU_MARGIN_S, "ocr": self._ocr_request(job)})
        job.deadline = time.monotonic() + self.time_limit_s
        job.progress = None

    def _ocr_request(self, job: "_Job") -> dict | None:
        if self.ocr is None:
            return None
        memory = max(self.memory_limit_mb, OCR_MEMORY_LIMIT_MB) if self.memory_limit_mb else None
        return {**self.ocr.to_json(), "memory_limit_mb": memory, "skip": job.skipped}

    def _send(self, request: dict) -> "_Worker":
        """An idle worker, or a new one, that has taken `request`."""
        if self._idle:
            worker = self._idle.pop()
            try:
                worker.send(request)
                return worker
            except ChildDied:  # it died while idle; that is no document's fault
                self._discard(worker)
        worker = self._spawn()
        try:
            worker.send(request)
        except ChildDied as exc:
            self._discard(worker)
            raise EngineProcessError("A document reader process stopped as it started.") from exc
        return worker

    def _outcome(self, job: "_Job", cancel: CancelFlag | None) -> Iterator[PageProgress | Result | None]:
        """The document's OCR progress as it comes, then its result (None: cancelled)."""
        if job.result is not None:
            yield job.result
            return
        worker = job.worker
        while True:
            try:
                reply = worker.receive(job.deadline, cancel)
            except _Cancelled:
                self._discard(worker)
                yield None
                return
            except _TimedOut:
                self._discard(worker)
                if self._skip_page(job, f"it went past the {self._ocr_limit_text()} and stopped the reader"):
                    worker = job.worker
                    continue
                yield DocumentError.of("timed_out", job.path, self._over_limit(job))
                return
            except ChildDied as died:
                self._discard(worker)
                if self._read_with_pypdf(job, died.exitcode) or self._skip_page(
                        job, f"it stopped the reader process ({describe_exit(died.exitcode)})"):
                    worker = job.worker
                    continue
                yield self._death_error(job, died.exitcode)
                return
            if "progress" not in reply:
                break
            job.progress = _progress_of(reply)
            job.deadline = max(job.deadline, time.monotonic() + self.ocr.page_time_limit_s + _PAGE_GRACE_S)
            yield job.progress
        if reply.get("retire"):
            self._discard(worker, polite=True)
        else:
            self._idle.append(worker)
        yield _result_from(reply, job.path)

    def _ocr_limit_text(self) -> str:
        return f"{self.ocr.page_time_limit_s:g} s limit per page" if self.ocr else ""

    def _read_with_pypdf(self, job: "_Job", exitcode: int | None) -> bool:
        """After a worker died reading a PDF's text with PDFium: whether the document starts
        again in a new worker that reads it with pypdf."""
        if job.pdf_reader != "pdfium" or job.progress is not None or job.path.suffix.lower() != ".pdf":
            return False
        log.info("%s: PDFium stopped its reader process (%s); reading it with pypdf",
                 job.path.name, describe_exit(exitcode))
        job.pdf_reader = "pypdf"
        try:
            self._send_job(job)
        except EngineProcessError:
            return False
        return True

    def _skip_page(self, job: "_Job", reason: str) -> bool:
        """After a worker stopped on a page it was recognising (stuck past the page's limit, or
        dead): whether the document starts again in a new worker, without that page. The pages
        recognised before it come from the cache. At most MAX_SKIPPED_PAGES per document."""
        progress = job.progress
        if progress is None or progress.done >= progress.total or len(job.skipped) >= MAX_SKIPPED_PAGES:
            return False
        job.skipped = job.skipped + [[progress.done, reason]]
        try:
            self._send_job(job)
        except EngineProcessError:
            return False
        return True

    def _over_limit(self, job: "_Job", what: str = "limit") -> str:
        """Which limit a document ran past: the document's, or a page's while OCR ran."""
        if job.progress is None or job.progress.done >= job.progress.total:
            return f"{what} {self.time_limit_s:g} s"
        return (f"recognising page {job.progress.done + 1} of the {job.progress.total} without text went "
                f"past the {self.ocr.page_time_limit_s:g} s {what} per page")

    def _refusal(self, path: Path) -> DocumentError | None:
        """Why `path` need not reach a worker at all, if it need not."""
        if not is_supported(path):
            return DocumentError.of("unsupported", path, f"'{path.suffix or 'no extension'}'")
        try:
            info = path.stat()
            if not stat.S_ISDIR(info.st_mode):
                _try_opening(path)
        except OSError as exc:
            return read_error(path, exc)
        if stat.S_ISDIR(info.st_mode):
            return DocumentError.of("unreadable", path, "it is a folder")
        if info.st_size == 0:
            return DocumentError.of("empty", path, "0 bytes")
        limit_mb = self.max_text_mb if path.suffix.lower() in TEXT_SUFFIXES else self.max_file_mb
        if info.st_size > limit_mb * MB:
            return DocumentError.of("too_large", path, f"{info.st_size / MB:,.0f} MB; the "
                                    f"limit for this format is {limit_mb:,} MB")
        return None

    def _death_error(self, job: "_Job", exitcode: int | None) -> DocumentError:
        path = job.path
        if exitcode == -signal.SIGKILL:  # not by us: the system ran out of memory
            return DocumentError.of("too_large", path, "it ran out of memory")
        sigxcpu = getattr(signal, "SIGXCPU", None)  # not on Windows
        if sigxcpu is not None and exitcode == -sigxcpu:
            if job.progress is not None and job.progress.done < job.progress.total:
                return DocumentError.of("timed_out", path, self._over_limit(job, "CPU limit"))
            return DocumentError.of("timed_out", path, f"over {self.time_limit_s:g} s of CPU")
        return DocumentError.of("crashed", path, f"the reader process {describe_exit(exitcode)}")

    # -- workers --------------------------------------------------------------------------
    def _spawn(self) -> "_Worker":
        worker = _Worker.start({"op": "settings", "memory_limit_mb": self.memory_limit_mb})
        self._live.append(worker)
        return worker

    def _discard(self, worker: "_Worker", polite: bool = False) -> None:
        if worker in self._idle:
            self._idle.remove(worker)
        if worker in self._live:
            self._live.remove(worker)
        worker.stop(polite)


def read_error(path: Path, exc: OSError) -> DocumentError:
    """A file that cannot be read, as one failed document: "permission denied: FILE"."""
    why = "permission denied" if isinstance(exc, PermissionError) else exc.strerror or str(exc)
    return DocumentError.of("unreadable", path, f"{why}: {path}")


def readable_sha256(path: Path) -> str:
    """The file's SHA-256, or "" when it cannot be read: the pool then refuses it with the
    reason (read_error), as one failed document, and the run goes on."""
    try:
        return sha256_file(path)
    except OSError:
        return ""


def _try_opening(path: Path) -> None:
    """Raises the OSError a worker would meet opening `path` (permission denied, mostly)."""
    os.close(os.open(path, os.O_RDONLY))


class _Job:
    """One document on its way: either a worker parsing it, or a result known at once."""

    def __init__(self, path: Path, worker: "_Worker | None" = None, deadline: float = 0.0,
                 result: Result | None = None):
        self.path = path
        self.worker = worker
        self.deadline = deadline
        self.result = result
        self.progress: PageProgress | None = None  # the last OCR progress its worker reported
        self.skipped: list[list] = []  # [position among the pages to recognise, why] of pages given up
        self.pdf_reader = "pdfium"  # "pypdf" after PDFium stopped a worker on it


class _TimedOut(Exception):
    pass


class _Cancelled(Exception):
    pass


class _Worker(JsonChild):
    """A parse worker process."""

    @classmethod
    def start(cls, settings: dict) -> "_Worker":
        try:
            worker = super().start(worker_main, "offline-assistant-parse")
        except OSError as exc:
            raise EngineProcessError(f"A document reader process could not be started ({exc}).") from exc
        try:
            worker.send(settings)
        except ChildDied as exc:
            worker.stop()
            raise EngineProcessError("A document reader process stopped as it started.") from exc
        return worker

    def receive(self, deadline: float, cancel: CancelFlag | None) -> dict:
        """The worker's reply; raises _TimedOut past `deadline`, _Cancelled, or ChildDied."""
        if self.conn is None:
            raise EngineProcessError("The document reader was closed while it was reading.")
        while True:
            if _is_set(cancel):
                raise _Cancelled()
            remaining = deadline - time.monotonic()
            reply = self.poll(min(remaining, _POLL_S) if cancel is not None else remaining)
            if reply is not None:
                return reply
            if deadline - time.monotonic() <= 0:
                raise _TimedOut()


def _progress_of(reply: dict) -> PageProgress:
    progress = reply["progress"]
    return PageProgress(int(progress["done"]), int(progress["total"]))


def _is_set(cancel: CancelFlag | None) -> bool:
    return cancel is not None and cancel.is_set()


def _result_from(reply: dict, path: Path) -> Result:
    if not reply.get("ok"):
        return DocumentError(reply.get("message", f"'{path.name}' could not be read."),
                             reply.get("kind", "crashed"), str(path))
    document = reply["document"]
    pages = tuple(Page(number, text, label, PageOcr.from_json(ocr) if ocr else None)
                  for number, text, label, ocr in document["pages"])
    outline = tuple(OutlineEntry(page, tuple(titles)) for page, titles in document.get("outline", ()))
    return ParsedDocument(str(path), document["title"], pages, tuple(document["warnings"]), outline)


# -- the worker side ----------------------------------------------------------------------
def worker_main(conn: Connection) -> None:
    """The worker's loop: settings first, then one document per request, until told to close."""
    quiet_child()
    try:
        settings = json.loads(conn.recv_bytes())
        _apply_settings(settings)
        while True:
            request = json.loads(conn.recv_bytes())
            if request.get("op") != "parse":
                return
            reply, retire = _serve(request, settings, conn)
            conn.send_bytes(reply)
            if retire:
                return
    except (EOFError, OSError):
        return  # the caller's end is gone: nobody is left to answer


def _apply_settings(settings: dict) -> None:
    from engine.ingest.pdf import apply_pypdf_limits

    _limit_resources(settings.get("memory_limit_mb"))
    _lower_priority()
    apply_pypdf_limits()
    # pypdf reports recoverable damage through logging and warnings; the outcome says enough
    logging.getLogger("pypdf").addHandler(logging.NullHandler())
    logging.getLogger("pypdf").propagate = False
    warnings.simplefilter("ignore")


def _serve(request: dict, settings: dict, conn: Connection) -> tuple[bytes, bool]:
    """The reply to one parse request, and whether this worker should retire after it."""
    from engine.ingest.pdf import describe

    path = Path(request["path"])
    memory_limit_mb = settings.get("memory_limit_mb")
    try:
        _limit_cpu(float(request["cpu_limit_s"]))
        ocr = OcrOptions.from_json(request.get("ocr"))
        if ocr.enabled and path.suffix.lower() == ".pdf":
            memory_limit_mb = (request.get("ocr") or {}).get("memory_limit_mb") or memory_limit_mb
            document = _parse_with_ocr(path, ocr, conn, memory_limit_mb, request.get("pdf_reader", "pdfium"))
        else:
            from engine.ingest import parse_file

            document = parse_file(path, request.get("pdf_reader", "pdfium"))
        return _encode({"ok": True, "document": _document_json(document)}), False
    except DocumentError as exc:
        return _encode(_error_json(exc, retire=False)), False
    except MemoryError:  # built here, once the big objects are gone with the exception
        failure = DocumentError.of("too_large", path, "it needs more than the "
                                   f"{memory_limit_mb} MB memory limit")
    except Exception as exc:
        failure = DocumentError.of("crashed", path, describe(exc))
    return _encode(_error_json(failure, retire=True)), True


def _parse_with_ocr(path: Path, ocr: OcrOptions, conn: Connection, memory_limit_mb: int | None,
                    pdf_reader: str) -> ParsedDocument:
    """The text pass, then OCR of the pages that need it, each page reported as it is done.
    The worker's memory cap grows to the OCR one first, and stays so: the models stay loaded
    for its next documents, which then have as much room as a worker without them."""
    from engine.ingest import cleaned
    from engine.ingest.ocr_pages import recognise_pages
    from engine.ingest.pdf import finish_pdf, read_pdf

    text = read_pdf(path, pdf_reader)
    if text.needs_ocr and memory_limit_mb:
        _limit_memory(memory_limit_mb)
    page_cpu_s = (ocr.page_time_limit_s + _PAGE_GRACE_S) * (os.cpu_count() or 1)  # all cores recognise

    def report(done: int, total: int) -> None:
        conn.send_bytes(_encode({"progress": {"done": done, "total": total}}))

    skip = {int(position): str(why) for position, why in ocr.skip}
    found, warnings = recognise_pages(path, text.needs_ocr, ocr, report, lambda: _limit_cpu(page_cpu_s), skip)
    return cleaned(finish_pdf(text, found, warnings))


def _document_json(document: ParsedDocument) -> dict:
    return {"path": document.path, "title": document.title,
            "pages": [[page.number, page.text, page.label, page.ocr.to_json() if page.ocr else None]
                      for page in document.pages],
            "warnings": list(document.warnings),
            "outline": [[entry.page, list(entry.path)] for entry in document.outline]}


def _error_json(error: DocumentError, retire: bool) -> dict:
    return {"ok": False, "kind": error.kind, "message": str(error), "retire": retire}


def _encode(message: dict) -> bytes:
    # ASCII escapes keep lone surrogates (from odd file names) intact across the pipe
    return json.dumps(message).encode("ascii")


def _limit_resources(limit_mb: int | None) -> None:
    try:
        import resource
    except ImportError:  # Windows: no rlimits; the time limit still applies
        return
    _set_soft_limit(resource, resource.RLIMIT_CORE, 0)  # a crash must not dump a document
    if limit_mb:
        _set_soft_limit(resource, resource.RLIMIT_AS, int(limit_mb) * MB)


def _limit_memory(limit_mb: int) -> None:
    try:
        import resource
    except ImportError:
        return
    _set_soft_limit(resource, resource.RLIMIT_AS, int(limit_mb) * MB)


def _lower_priority() -> None:
    """Reading and recognising documents is background work: the window and the model's
    answers come first (Unix; Windows keeps the normal priority)."""
    if hasattr(os, "nice"):
        try:
            os.nice(WORKER_NICE)
        except OSError:
            pass


def _limit_cpu(seconds: float) -> None:
    """The worker kills itself (SIGXCPU) after `seconds` more CPU time."""
    try:
        import resource
    except ImportError:
        return
    usage = resource.getrusage(resource.RUSAGE_SELF)
    _set_soft_limit(resource, resource.RLIMIT_CPU,
                      int(usage.ru_utime + usage.ru_stime + seconds) + 1)


def _set_soft_limit(resource, which: int, value: int) -> None:
    _, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(which, (value, hard))
