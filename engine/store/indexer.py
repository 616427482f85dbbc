"""Indexing: files -> parsed pages (child processes) -> chunks -> embeddings -> the store.

Parsing of the next documents runs in child processes while this process chunks and embeds
the current one (onnxruntime releases the GIL), so both cores stay busy. Each document is
stored in one transaction; a cancel (Ctrl-C, the GUI's stop button) is checked between
documents and between embedding batches, and leaves the collection consistent: the next run
skips what is already stored and carries on.

Scanned pages are recognised (OCR) in the parse workers, with events of stage "recognising"
page by page; the pages recognised are kept in settings.ocr_cache, so a stopped run does not
recognise them again. A page recognised with a confidence under LOW_CONFIDENCE is not searched
(its text would pollute answers); the document's warnings say so.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from engine.encoders.embedder import Embedder
from engine.errors import DocumentError
from engine.ingest import text_version
from engine.ingest.chunking import chunk_document
from engine.ingest.discover import discover, normal_path
from engine.ingest.ocr_pages import PAGE_TIME_LIMIT_S, OcrOptions
from engine.ingest.parse_pool import ParsePool, readable_sha256
from engine.ingest.pdf import WITHOUT_OCR, page_numbers_text
from engine.paths import DEFAULT_COLLECTION, AppPaths
from engine.store.index_store import IndexStore
from engine.types import (
    CancelFlag,
    Chunk,
    DocumentOutcome,
    IndexProgress,
    Page,
    PageOcr,
    PageProgress,
    ParsedDocument,
    StoredDocument,
)

# A recognised page under this confidence (PageOcr.confidence, 0..1) is not searched. Measured
# on R-intro page 12 scanned with tests/helpers/scanned.py, as (confidence, character error
# rate): clean (0.98, 0.02); noise 12 + skew 2.5 deg (0.98, 0.02); noise 40 (0.99, 0.05); noise 80
# (0.94, 0.05); blur radius 3 (0.96, 0.06); 50 dpi (0.81, 0.17): searchable. Unreadable: blur
# radius 5 (0.70, 0.92); 36 dpi (0.52, 0.53); noise 120 (0.53, 0.57); noise 170 (0.52, 0.96);
# pure noise and a photo-like image find no words (0). The limit lies between the two groups.
LOW_CONFIDENCE = 0.75


@dataclass(frozen=True)
class IndexSettings:
    chunk_tokens: int = 256
    overlap_tokens: int = 32
    embed_batch: int = 8  # measured ~13% faster than 32 here, and less memory
    parse_workers: int = 1
    parse_time_limit_s: float = 120.0
    parse_memory_limit_mb: int = 2048
    outline_headings: bool = True  # a PDF's bookmarks as its headings (False: guessed from lines)
    embedded_headings: int = 2  # headings the embedder reads before a chunk's text (0: none)
    ocr: bool = True  # recognise the text of scanned pages (False: they are skipped, with a warning)
    ocr_cache: Path | None = None  # recognised pages kept here across runs (AppPaths.ocr_cache); None: not kept
    ocr_page_time_limit_s: float = PAGE_TIME_LIMIT_S  # a page taking longer is given up, with a warning
    pdf_reader: str = "pdfium"  # whose text a PDF's is: "pypdf" reads it as before PDFium did (benchmarks)


class _Cancelled(Exception):
    pass


def open_collection(paths: AppPaths, name: str = DEFAULT_COLLECTION, embedder: Embedder | None = None,
                    *, read_only: bool = False, dense: bool = True) -> IndexStore:
    """A collection of `paths`; with an embedder it must have been built with that one."""
    folder = paths.collection(name)
    return IndexStore.open(
        folder,
        embedder_id=embedder.model_id if embedder else None,
        dimension=embedder.dimension if embedder else None,
        create=embedder is not None and not read_only,
        read_only=read_only,
        dense=dense,
    )


def default_embedder(paths: AppPaths) -> Embedder:
    from engine.models.registry import resolve_embedder

    return Embedder.from_files(resolve_embedder(paths)).load()


PAUSE_POLL_S = 0.05  # how often a paused run looks at its pause and cancel flags
EMBED_STEP = 16  # chunks per embedding call (~0.3-0.5 s): cancel and pause are checked between calls


class Indexer:
    """`pause`, while set, holds the embedding between steps: the window sets it while a
    question is answered, which then runs at its idle speed (docs/benchmarks.md)."""

    def __init__(self, store: IndexStore, embedder: Embedder, settings: IndexSettings | None = None,
                 pause: CancelFlag | None = None):
        self.store = store
        self.embedder = embedder
        self.settings = settings or IndexSettings()
        self.pause = pause

    def run(self, inputs: Iterable[str | Path] = (), cancel: CancelFlag | None = None, *,
            files: Iterable[str | Path] | None = None) -> Iterator[IndexProgress]:
        """Index files and folders (found here with discover), or `files` someone found already
        (find_documents: existing files, each once, in the order to index them); yields an
        event when a document starts, after each embedding step (with its pages done), and
        when it ends."""
        self.store.upgrade()  # an older collection's keyword index gains the headings
        files = [Path(normal_path(p)) for p in (discover(inputs) if files is None else files)]
        clock = _Clock({path: path.stat().st_size for path in files})
        todo, first_with = [], {}  # first_with: {sha256: the run's first file with those bytes}
        for path in files:
            if _cancelled(cancel):
                break
            fingerprint = self._fingerprint_if_changed(path)
            if fingerprint is None:
                yield clock.finished(path, DocumentOutcome(str(path), "ready", "unchanged", not_read="unchanged"))
                continue
            same = self._same_bytes(path, fingerprint, first_with)
            if same is not None:
                yield clock.finished(path, same)
                continue
            first_with.setdefault(fingerprint["sha256"], path)
            todo.append((path, fingerprint))
        try:
            yield from self._parse_and_store(todo, clock, cancel)
        finally:
            self.store.flush()

    def _fingerprint_if_changed(self, path: Path) -> dict | None:
        """None when the stored copy is this file, read as it is read now: same size and mtime,
        or else same SHA-256. A copy read with an older reading of its format is read again
        ("outdated" in the fingerprint: if that fails, the stored copy stays). "stored": whether
        this path is in the collection at all."""
        stat = path.stat()
        known = self.store.find_document(str(path))
        stored = known is not None
        if known and self._without_ocr(known):
            known = None  # indexed with OCR off: its scanned pages are recognised now
        if known and self._outdated(known):
            return {"sha256": readable_sha256(path), "size": stat.st_size, "mtime": stat.st_mtime,
                    "outdated": True, "stored": stored}
        if known and known.size == stat.st_size and known.mtime == stat.st_mtime \
                and known.status != "failed":
            return None
        fingerprint = {"sha256": readable_sha256(path), "size": stat.st_size, "mtime": stat.st_mtime,
                       "stored": stored}
        if known and known.sha256 == fingerprint["sha256"] and known.status != "failed":
            return None
        return fingerprint

    def _same_bytes(self, path: Path, fingerprint: dict, first_with: dict) -> DocumentOutcome | None:
        """A new path whose bytes are indexed already: a copy of a stored document that is still
        there is not indexed twice (its passages would show twice); a stored document whose file
        is gone was moved here, and is stored under this path without being read again. None:
        read it."""
        if fingerprint["stored"]:
            return None  # a stored path whose file changed: read it again
        earlier = first_with.get(fingerprint["sha256"])
        if earlier is not None:
            return _copy_of(path, str(earlier))
        for twin in self.store.documents_with_content(fingerprint["sha256"]):
            if not self._current(twin) or Path(twin.path).suffix.lower() != path.suffix.lower():
                continue  # its copy is to be read again anyway, or it is read as another format
            if Path(twin.path).is_file():
                return _copy_of(path, twin.path)
            self.store.move_document(twin.path, path, fingerprint["size"], fingerprint["mtime"])
            return DocumentOutcome(str(path), twin.status, f"moved here from {twin.path}",  # no pages read
                                   not_read="moved", stored_as=twin.path)
        return None

    def _current(self, known: StoredDocument) -> bool:
        """Whether a stored copy is what reading its file now would give."""
        return known.status != "failed" and not self._without_ocr(known) and not self._outdated(known)

    def _without_ocr(self, known: StoredDocument) -> bool:
        """Indexed with OCR off while it is on: its scanned pages are to be recognised."""
        return self.settings.ocr and WITHOUT_OCR in known.error

    def _outdated(self, known: StoredDocument) -> bool:
        """Stored from an older reading of its format than indexing uses now."""
        return _older_reading(known, self._text_version(Path(known.path)))

    def _parse_and_store(self, todo, clock: "_Clock", cancel) -> Iterator[IndexProgress]:
        s = self.settings
        fingerprints = {path: fp for path, fp in todo}
        ocr = OcrOptions(enabled=s.ocr, cache=s.ocr_cache, page_time_limit_s=s.ocr_page_time_limit_s)
        with ParsePool(workers=s.parse_workers, time_limit_s=s.parse_time_limit_s,
                       memory_limit_mb=s.parse_memory_limit_mb, ocr=ocr, pdf_reader=s.pdf_reader) as pool:
            for path, parsed in pool.imap([p for p, _ in todo], cancel=cancel, progress=True):
                if _cancelled(cancel):
                    return
                if isinstance(parsed, PageProgress):
                    yield clock.recognising(path, parsed)
                    continue
                pages = 0 if isinstance(parsed, DocumentError) else len(parsed.pages)
                yield clock.started(path, pages)
                try:
                    outcome = yield from self._store(path, fingerprints[path], parsed, cancel, clock)
                except _Cancelled:
                    return
                yield clock.finished(path, outcome)

    def _store(self, path: Path, fingerprint: dict, parsed, cancel, clock: "_Clock"):
        """Yields progress events while embedding; returns the document's outcome."""
        fingerprint = dict(fingerprint)
        outdated = fingerprint.pop("outdated", False)
        fingerprint.pop("stored")
        if isinstance(parsed, DocumentError):
            if outdated:
                return _kept(self.store.find_document(str(path)), parsed)
            self.store.record_failure(str(path), status="failed", error=str(parsed), **fingerprint)
            return DocumentOutcome(str(path), "failed", str(parsed))
        if not self.settings.outline_headings:
            parsed = dataclasses.replace(parsed, outline=())
        parsed, recognised = searched_pages(parsed)
        chunks = chunk_document(parsed, self.embedder.count_tokens, target_tokens=self.settings.chunk_tokens,
                                overlap_tokens=self.settings.overlap_tokens,
                                count_tokens_batch=self.embedder.count_tokens_batch)
        embeddings = yield from self._embed(path, chunks, len(parsed.pages), cancel, clock)
        status, reason = _status(parsed, chunks)
        self.store.add_document(str(path), title=parsed.title, page_count=len(parsed.pages), chunks=chunks,
                                embeddings=embeddings, status=status, error=reason,
                                page_labels=printed_labels(parsed), ocr_pages=recognised,
                                text_version=self._text_version(path), **fingerprint)
        return DocumentOutcome(str(path), status, reason, len(parsed.pages), len(chunks))

    def _text_version(self, path: Path) -> int:
        pypdf = self.settings.pdf_reader != "pdfium" and path.suffix.lower() == ".pdf"
        return 1 if pypdf else text_version(path)

    def _embed(self, path: Path, chunks, pages: int, cancel, clock: "_Clock"):
        """Yields an event after each step (the pages embedded so far); returns the vectors."""
        import numpy as np

        step = EMBED_STEP
        parts = []
        for start in range(0, len(chunks), step):
            self._wait_while_paused(cancel)
            if _cancelled(cancel):
                raise _Cancelled
            texts = [embedded_text(c, self.settings.embedded_headings) for c in chunks[start:start + step]]
            parts.append(self.embedder.encode_documents(texts, batch_size=self.settings.embed_batch))
            yield clock.working(path, pages, chunks[min(start + step, len(chunks)) - 1].page)
        return np.concatenate(parts) if parts else np.zeros((0, self.embedder.dimension), np.float32)

    def _wait_while_paused(self, cancel: CancelFlag | None) -> None:
        while self.pause is not None and self.pause.is_set() and not _cancelled(cancel):
            time.sleep(PAUSE_POLL_S)


def outdated_files(documents: Iterable[StoredDocument]) -> list[str]:
    """The stored documents whose text comes from an older reading of their format (a PDF read
    before PDFium read PDFs, a table before its cells were rows) and whose file is still there:
    the next run reads them again."""
    return [d.path for d in documents if _older_reading(d, text_version(d.path)) and Path(d.path).is_file()]


def _older_reading(known: StoredDocument, version: int) -> bool:
    """Stored (not failed) from a reading of its format older than `version`."""
    return known.status != "failed" and (known.text_version or 1) < version


def _copy_of(path: Path, stored: str) -> DocumentOutcome:
    return DocumentOutcome(str(path), "ready", f"the same file as {stored}", not_read="copy", stored_as=stored)


def _kept(known, error: DocumentError) -> DocumentOutcome:
    """A document read again for a newer reading of its format that failed this time: its
    stored copy stays as it was, and the outcome says so."""
    reason = f"kept as indexed before: reading it again failed ({error})"
    return DocumentOutcome(known.path, known.status, reason, known.page_count, known.chunk_count)


def embedded_text(chunk: Chunk, headings: int = 2) -> str:
    """What the embedder reads for a chunk: its nearest `headings` (the section and the one
    above it: "Set-show > Logscale"), then its text. A chunk in
    the middle of a section often never names its topic; its headings do (measured in
    docs/retrieval.md, issue 13). Only the vector sees this; the stored text stays the page's."""
    path = chunk.heading_path[-headings:] if headings > 0 else ()
    return " > ".join(path) + "\n" + chunk.text if path else chunk.text


def printed_labels(parsed: ParsedDocument) -> dict[int, str]:
    """{physical page: printed label} of a PDF. Other formats' page labels name sections or
    line ranges ("lines 1-120"), which citations do not show as page numbers."""
    if not parsed.path.lower().endswith(".pdf"):
        return {}
    return {page.number: page.label for page in parsed.pages if page.label}


def searched_pages(parsed: ParsedDocument) -> tuple[ParsedDocument, dict[int, PageOcr]]:
    """The document with its poorly recognised pages emptied (not chunked, so not searched),
    a warning for them, and {page: PageOcr} of the recognised pages that are searched."""
    searched: dict[int, PageOcr] = {}
    low: list[Page] = []
    blank: list[int] = []
    pages = []
    for page in parsed.pages:
        if page.ocr is None:
            pages.append(page)
        elif not page.ocr.words or not page.text.strip():
            blank.append(page.number)
            pages.append(Page(page.number, "", page.label))
        elif page.ocr.confidence < LOW_CONFIDENCE:
            low.append(page)
            pages.append(Page(page.number, "", page.label))
        else:
            searched[page.number] = page.ocr
            pages.append(page)
    warnings = _low_confidence_warnings(low)
    if blank:
        verb = "has" if len(blank) == 1 else "have"
        warnings.append(f"{page_numbers_text(blank)} {verb} only images and OCR found no text")
    if not warnings:
        return parsed, searched
    return dataclasses.replace(parsed, pages=tuple(pages), warnings=parsed.warnings + tuple(warnings)), searched


_LISTED_LOW_PAGES = 5  # pages named with their confidence; the rest are counted


def _low_confidence_warnings(pages: list[Page]) -> list[str]:
    """"page 7 was recognised with low confidence (38%) and is not searched"."""
    warnings = [f"page {page.number} was recognised with low confidence ({page.ocr.confidence:.0%}) "
                "and is not searched" for page in pages[:_LISTED_LOW_PAGES]]
    rest = [page.number for page in pages[_LISTED_LOW_PAGES:]]
    if rest:
        warnings.append(f"{page_numbers_text(rest)} also were recognised with low confidence (under "
                        f"{LOW_CONFIDENCE:.0%}) and are not searched")
    return warnings


def _status(parsed: ParsedDocument, chunks) -> tuple[str, str]:
    if not chunks:
        ocr = [w for w in parsed.warnings if "recognised" in w or "OCR" in w]
        return "ready_with_warnings", "; ".join(["no text was found to index"] + ocr)
    if parsed.warnings:
        return "ready_with_warnings", "; ".join(parsed.warnings)
    return "ready", ""


def _cancelled(cancel: CancelFlag | None) -> bool:
    return cancel is not None and cancel.is_set()


class _Clock:
    """Counts documents and pages for progress events."""

    def __init__(self, sizes: dict[Path, int]):
        self.sizes = sizes  # taken once at the start: the ETA goes by bytes
        self.total, self.total_bytes = len(sizes), sum(sizes.values())
        self.done = self.pages = self.bytes = 0
        self.start = time.perf_counter()

    def started(self, path: Path, pages: int) -> IndexProgress:
        return self._event(path, None, pages)

    def working(self, path: Path, pages: int, pages_done: int) -> IndexProgress:
        return self._event(path, None, pages, pages_done)

    def recognising(self, path: Path, progress: PageProgress) -> IndexProgress:
        """OCR under way: `done` of the document's `total` pages without text recognised."""
        return dataclasses.replace(self._event(path, None, progress.total, progress.done), stage="recognising")

    def finished(self, path: Path, outcome: DocumentOutcome) -> IndexProgress:
        self.done += 1
        self.pages += outcome.pages
        self.bytes += self.sizes[path]
        return self._event(path, outcome)

    def _event(self, path: Path, outcome: DocumentOutcome | None, pages: int = 0,
               pages_done: int = 0) -> IndexProgress:
        return IndexProgress(self.done, self.total, self.pages, str(path), self._elapsed(), outcome,
                             self.bytes, self.total_bytes, pages, pages_done)

    def _elapsed(self) -> float:
        return time.perf_counter() - self.start
