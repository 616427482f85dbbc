"""CLI commands for collections: `index PATH...`, `docs list`, `docs remove`."""

from __future__ import annotations

import json
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from engine.cli.common import (
    CANCELLED_EXIT,
    SOME_FAILED_EXIT,
    Throttle,
    collection_option,
    collection_told,
    common_options,
    ctrl_c_sets,
    nothing_indexed,
    paths_of,
    plural,
    print_repairs,
    usage,
)
from engine.errors import EngineError
from engine.safe_text import visible
from engine.types import IndexProgress

STOPPING = "\nStopping after the current batch (Ctrl-C again to stop at once)...\n"


def add_commands(commands) -> None:
    collection = collection_option()

    index = commands.add_parser("index", parents=[common_options(), collection],
                                help="index files and folders (PDF, TXT, Markdown, HTML, DOCX)",
                                epilog=f"Exit codes: 0 indexed (or unchanged); {SOME_FAILED_EXIT} some documents "
                                       f"failed, each named with why, the others were indexed; 1 an error.")
    index.add_argument("inputs", nargs="+", metavar="PATH",
                       help="a file, or a folder: every document in it and its subfolders")
    index.add_argument("--json", action="store_true", help="one JSON line per finished document")
    index.add_argument("--no-ocr", action="store_true",
                       help="do not recognise the text of scanned pages (OCR); they are skipped with a warning")
    index.set_defaults(run=lambda args: _index(args, paths_of(args)))

    docs = commands.add_parser("docs", help="list or remove indexed documents")
    actions = docs.add_subparsers(title="actions", metavar="ACTION")
    docs.set_defaults(run=lambda args: usage(docs))
    listing = actions.add_parser("list", parents=[common_options(), collection], help="the documents and their status")
    listing.add_argument("--json", action="store_true", help="one JSON object per document")
    listing.set_defaults(run=lambda args: _docs_list(args, paths_of(args)))
    remove = actions.add_parser("remove", parents=[common_options(), collection], help="remove documents")
    remove.add_argument("documents", nargs="+", metavar="PATH_OR_ID",
                        help="a document's path, or its ID from 'docs list'")
    remove.set_defaults(run=lambda args: _docs_remove(args, paths_of(args)))


# -- index --------------------------------------------------------------------------------
def _index(args, paths) -> int:
    from engine.config import load_settings
    from engine.ingest.discover import find_documents
    from engine.store.indexer import Indexer, IndexSettings, default_embedder, open_collection

    missing = [p for p in args.inputs if not Path(p).exists()]
    if missing:
        raise EngineError(f"Not found: {', '.join(missing)}. Check the path and try again.")
    cancel = threading.Event()
    embedder = default_embedder(paths.ensure())
    ocr = load_settings(paths.settings_file).ocr and not args.no_ocr
    settings = IndexSettings(ocr=ocr, ocr_cache=paths.ocr_cache)
    with collection_told(), open_collection(paths, args.collection, embedder) as store, \
            ctrl_c_sets(cancel, STOPPING):
        print_repairs(store.open_report.get("repaired"))
        bar = _ProgressBar(sys.stderr)
        timer = _DocumentTimer()
        tally = _Tally()
        found = find_documents(args.inputs)  # once: the indexer takes the files as they are
        for folder, why in found.unreadable:
            bar.note(visible(f"could not read {folder}: {why}"))
        files = [Path(f) for f in found.files]
        bar.begin(files)
        for event in Indexer(store, embedder, settings).run(files=files, cancel=cancel):
            _report(event, bar, args.json, timer.see(event))
            tally.count(event.outcome)
        bar.finish()
        if cancel.is_set():
            print(f"Stopped after {plural(bar.last.documents_done if bar.last else 0, 'document')}; "
                  "run the same command again to carry on.", file=sys.stderr)
            return CANCELLED_EXIT
        _summary(bar, store, tally)
    return SOME_FAILED_EXIT if tally.failed else 0


SLOW_DOCUMENT_S = 30.0  # a document that held the run this long is named, with its time


def _report(event: IndexProgress, bar: "_ProgressBar", as_json: bool,
            took: _Took | None) -> None:
    bar.show(event)
    outcome = event.outcome
    if outcome is None or took is None:
        return
    if as_json:
        print(json.dumps({"path": outcome.path, "status": outcome.status, "reason": outcome.reason,
                          "pages": outcome.pages, "chunks": outcome.chunks,
                          "seconds": round(took.seconds, 3), "read_s": round(took.read_s, 3)}),
              flush=True)
        return
    if outcome.not_read in ("copy", "moved"):
        bar.note(visible(f"{Path(outcome.path).name}: not read again, {outcome.reason}"))
    elif outcome.status != "ready":
        name = Path(outcome.path).name
        where = "" if name in outcome.reason else f" ({name})"  # a parse error names its file
        bar.note(visible(f"{outcome.status.replace('_', ' ')}{where}: {outcome.reason}"))
    if took.seconds >= SLOW_DOCUMENT_S:
        bar.note(f"{visible(Path(outcome.path).name)} took {_duration(took.seconds)} "
                 f"({_duration(took.read_s)} of it reading the file)")


@dataclass(frozen=True)
class _Took:
    seconds: float  # how long the document held the run: reading, chunking, embedding, storing
    read_s: float  # of those, waiting for its parse (a parse ahead of its turn is not counted)


class _DocumentTimer:
    """Each finished document's duration, from the run's events: the indexer turns to a
    document when the one before it is finished, gets its parse (the "started" event), then
    embeds and stores it (the "finished" event). elapsed_s is the run's clock."""

    def __init__(self):
        self._last_finish = 0.0
        self._started: dict[str, float] = {}

    def see(self, event: IndexProgress) -> _Took | None:
        if event.outcome is None:
            self._started.setdefault(event.current_file, event.elapsed_s)
            return None
        began, self._last_finish = self._last_finish, event.elapsed_s
        parsed = self._started.pop(event.current_file, began)
        return _Took(event.elapsed_s - began, parsed - began)


@dataclass
class _Tally:
    """What became of the run's documents: indexed (of those, with warnings), unchanged, failed."""

    indexed: int = 0
    warned: int = 0
    pages: int = 0  # of the documents indexed
    unchanged: int = 0
    copies: int = 0  # of documents stored already, under another path
    moved: int = 0  # stored documents whose file was moved: stored under its new path
    failed: int = 0

    def count(self, outcome) -> None:
        if outcome is None:
            return
        kind = outcome.not_read
        if outcome.status == "failed":
            self.failed += 1
        elif kind == "unchanged":
            self.unchanged += 1
        elif kind == "copy":
            self.copies += 1
        elif kind == "moved":
            self.moved += 1
        else:
            self.indexed += 1
            self.warned += outcome.status != "ready"
            self.pages += outcome.pages


def _summary(bar: "_ProgressBar", store, tally: _Tally) -> None:
    last = bar.last
    if last is None:
        print("Nothing to index: no PDF, TXT, Markdown, HTML or DOCX files there.", file=sys.stderr)
        return
    stats = store.stats()
    print(f"{_outcome_text(tally, last.elapsed_s)} The collection holds "
          f"{_count(stats.get('documents'), 'document')}, {_count(stats.get('chunks'), 'chunk')}.",
          file=sys.stderr)


def _outcome_text(tally: _Tally, elapsed_s: float) -> str:
    """"Indexed 2 documents, 30 pages in 4.1 s (7.3 pages/s); 1 unchanged (skipped), 1 failed."."""
    others = [text for count, text in (
        (tally.unchanged, f"{tally.unchanged} unchanged (skipped)"),
        (tally.copies, f"{plural(tally.copies, 'copy', 'copies')} of documents indexed already (skipped)"),
        (tally.moved, f"{tally.moved} moved (not read again)"),
        (tally.failed, f"{tally.failed} failed")) if count]
    if not tally.indexed:
        return f"Nothing new indexed: {', '.join(others)}."
    rate = tally.pages / elapsed_s if elapsed_s > 0 else 0.0
    warned = f" ({tally.warned} with warnings)" if tally.warned else ""
    text = (f"Indexed {plural(tally.indexed, 'document')}{warned}, {plural(tally.pages, 'page')} "
            f"in {elapsed_s:.1f} s ({rate:.1f} pages/s)")
    return text + (f"; {', '.join(others)}." if others else ".")


def _count(number, noun: str) -> str:
    return plural(number, noun) if isinstance(number, int) else f"? {noun}s"


class _ProgressBar:
    """One line on a terminal, redrawn in place. Not on a terminal (a service's log): a line
    as the run starts, one per finished document, and within a long document one at most every
    PLAIN_EVERY_S seconds with its pages done: a 1,300-page manual said nothing for minutes."""

    WIDTH = 24

    def __init__(self, stream):
        self.stream = stream
        self.live = stream.isatty()
        self.last: IndexProgress | None = None
        self.throttle = Throttle()
        self.throttle.wrote(0.0)  # the run's clock (IndexProgress.elapsed_s) starts at 0

    def begin(self, files: list[Path]) -> None:
        """The run's first line in a log, before its first document is read."""
        if self.live or not files:
            return
        size = sum(f.stat().st_size for f in files)
        self.stream.write(f"Indexing {plural(len(files), 'file')} ({size / 1e6:.1f} MB)\n")
        self.stream.flush()

    def show(self, event: IndexProgress) -> None:
        self.last = event
        if self.live:
            self.stream.write("\r\x1b[K" + self._line(event))
        elif event.outcome is not None:
            self.stream.write(self._line(event) + "\n")
            self.throttle.wrote(event.elapsed_s)
        elif self.throttle.due(event.elapsed_s):
            self.stream.write(_step_line(event) + "\n")
        else:
            return
        self.stream.flush()

    def note(self, text: str) -> None:
        self.stream.write(("\r\x1b[K" if self.live else "") + text + "\n")
        if self.live and self.last is not None:
            self.stream.write(self._line(self.last))
        self.stream.flush()

    def finish(self) -> None:
        if self.live:
            self.stream.write("\n")
            self.stream.flush()

    def _line(self, e: IndexProgress) -> str:
        fraction = e.bytes_done / e.bytes_total if e.bytes_total else 0.0
        filled = int(fraction * self.WIDTH)
        eta = "" if e.eta_s is None else f" ETA {_duration(e.eta_s)}"
        unchanged = " (unchanged)" if e.outcome and e.outcome.not_read == "unchanged" else ""
        return (f"[{'#' * filled}{'.' * (self.WIDTH - filled)}] {e.documents_done}/{e.documents_total} docs, "
                f"{plural(e.pages_done, 'page')}, {e.pages_per_s:.1f} pages/s{eta}  "
                f"{visible(Path(e.current_file).name)}{unchanged}{stage_text(e)}")


def _step_line(e: IndexProgress) -> str:
    """"R-exts.pdf: page 120 of 236 embedded (1m40s)", or its OCR stage, for a log."""
    name = visible(Path(e.current_file).name)
    if e.stage == "recognising":
        return f"{name}{stage_text(e)} ({_duration(e.elapsed_s)})"
    if not e.document_pages:
        return f"{name}: reading ({_duration(e.elapsed_s)})"
    if not e.document_pages_done:
        return f"{name}: {plural(e.document_pages, 'page')} read; embedding ({_duration(e.elapsed_s)})"
    return f"{name}: page {e.document_pages_done} of {e.document_pages} embedded ({_duration(e.elapsed_s)})"


def stage_text(event: IndexProgress) -> str:
    """", recognising text, page 12 of 80" while OCR reads the document's scanned pages."""
    if event.stage != "recognising" or not event.document_pages:
        return ""
    page = min(event.document_pages_done + 1, event.document_pages)
    return f", recognising text, page {page} of {event.document_pages}"


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


# -- docs ---------------------------------------------------------------------------------
def _docs_list(args, paths) -> int:
    from engine.store.health import collection_exists
    from engine.store.indexer import open_collection

    if not collection_exists(paths, args.collection):  # nothing indexed yet: not an error
        print(nothing_indexed(args, paths), file=sys.stderr)
        return 0
    with open_collection(paths, args.collection, read_only=True) as store:
        documents = store.list_documents()
    if args.json:
        for doc in documents:
            print(json.dumps(doc.to_dict(), default=str))
    elif documents:
        print(_documents_table(documents))
    if not documents:
        print(nothing_indexed(args, paths), file=sys.stderr)
    return 0


DOCS_HEADER = ("ID", "STATUS", "PAGES", "CHUNKS", "DOCUMENT")


def _documents_table(documents) -> str:
    """A header row, then one row per document: the numbers right-aligned, the path last (not
    padded: paths are long), then why it failed or what it warned of."""
    rows = [DOCS_HEADER] + [(str(d.id), d.status.replace("_", " "), str(d.page_count or 0),
                             str(d.chunk_count or 0), visible(str(d.path)) + _ocr_note(d)
                             + (f"  ({visible(d.error)})" if d.error else "")) for d in documents]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    return "\n".join(f"{row[0]:>{widths[0]}}  {row[1]:<{widths[1]}}  {row[2]:>{widths[2]}}  "
                     f"{row[3]:>{widths[3]}}  {row[4]}" for row in rows)


def _ocr_note(document) -> str:
    """"  [OCR: 3 pages, 97%]" for a document with pages read by OCR."""
    if not document.ocr_pages:
        return ""
    confidence = f", {document.ocr_confidence:.0%}" if document.ocr_confidence is not None else ""
    return f"  [OCR: {plural(document.ocr_pages, 'page')}{confidence}]"


def _docs_remove(args, paths) -> int:
    from engine.store.indexer import open_collection

    with open_collection(paths, args.collection) as store:
        missing = [d for d in args.documents if not store.remove_document(_path_or_id(d))]
        store.flush()
    removed = len(args.documents) - len(missing)
    if removed:
        print(f"Removed {plural(removed, 'document')} from the collection '{visible(args.collection)}'.")
    if missing:
        raise EngineError(f"Not in the collection: {', '.join(missing)}; see 'docs list'.")
    return 0


def _path_or_id(text: str):
    if text.isdigit():
        return int(text)
    return str(Path(text).resolve()) if Path(text).exists() else text
