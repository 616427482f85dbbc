"""CLI commands for collections: `index PATH...`, `docs list`, `docs remove`."""

from __future__ import annotations

import json
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from engine.cli.common import collection_option, collection_told, ctrl_c_sets, paths_of, print_repairs, usage
from engine.errors import EngineError
from engine.safe_text import visible
from engine.types import IndexProgress

STOPPING = "\nStopping after the current batch (Ctrl-C again to stop at once)...\n"

CANCELLED_EXIT = 130


def add_commands(commands, common) -> None:
    collection = collection_option()

    index = commands.add_parser("index", parents=[common, collection],
                                help="index files and folders (PDF, TXT, Markdown, HTML, DOCX)")
    index.add_argument("inputs", nargs="+", metavar="PATH")
    index.add_argument("--json", action="store_true", help="one JSON line per finished document")
    index.set_defaults(run=lambda args: _index(args, paths_of(args)))

    docs = commands.add_parser("docs", help="list or remove indexed documents")
    actions = docs.add_subparsers(title="actions", metavar="ACTION")
    docs.set_defaults(run=lambda args: usage(docs))
    listing = actions.add_parser("list", parents=[common, collection], help="the documents and their status")
    listing.add_argument("--json", action="store_true", help="one JSON object per document")
    listing.set_defaults(run=lambda args: _docs_list(args, paths_of(args)))
    remove = actions.add_parser("remove", parents=[common, collection], help="remove documents")
    remove.add_argument("documents", nargs="+", metavar="PATH_OR_ID")
    remove.set_defaults(run=lambda args: _docs_remove(args, paths_of(args)))


# -- index --------------------------------------------------------------------------------
def _index(args, paths) -> int:
    from engine.ingest.discover import find_documents
    from engine.store.indexer import Indexer, default_embedder, open_collection

    missing = [p for p in args.inputs if not Path(p).exists()]
    if missing:
        raise EngineError(f"Not found: {', '.join(missing)}. Check the path and try again.")
    cancel = threading.Event()
    embedder = default_embedder(paths.ensure())
    with collection_told(), open_collection(paths, args.collection, embedder) as store, \
            ctrl_c_sets(cancel, STOPPING):
        print_repairs(store.open_report.get("repaired"))
        bar = _ProgressBar(sys.stderr)
        timer = _DocumentTimer()
        found = find_documents(args.inputs)  # once: the indexer takes the files as they are
        for folder, why in found.unreadable:
            bar.note(visible(f"could not read {folder}: {why}"))
        files = [Path(f) for f in found.files]
        for event in Indexer(store, embedder).run(files=files, cancel=cancel):
            _report(event, bar, args.json, timer.see(event))
        bar.finish()
        if cancel.is_set():
            print(f"Stopped after {bar.last.documents_done if bar.last else 0} documents; "
                  "run the same command again to carry on.", file=sys.stderr)
            return CANCELLED_EXIT
        _summary(bar, store)
    return 0


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
    if outcome.status != "ready":
        bar.note(visible(f"{outcome.status.replace('_', ' ')}: {outcome.reason}"))
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


def _summary(bar: "_ProgressBar", store) -> None:
    last = bar.last
    if last is None:
        print("Nothing to index: no PDF, TXT, Markdown, HTML or DOCX files there.", file=sys.stderr)
        return
    stats = store.stats()
    print(f"Indexed {last.documents_done} documents, {last.pages_done} pages in {last.elapsed_s:.1f} s "
          f"({last.pages_per_s:.1f} pages/s). The collection holds {stats.get('documents', '?')} documents, "
          f"{stats.get('chunks', '?')} chunks.", file=sys.stderr)


class _ProgressBar:
    """One line on a terminal, redrawn in place; plain lines when not a terminal."""

    WIDTH = 24

    def __init__(self, stream):
        self.stream = stream
        self.live = stream.isatty()
        self.last: IndexProgress | None = None

    def show(self, event: IndexProgress) -> None:
        self.last = event
        if not self.live and event.outcome is None:
            return
        line = self._line(event)
        if self.live:
            self.stream.write("\r\x1b[K" + line)
        else:
            self.stream.write(line + "\n")
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
        return (f"[{'#' * filled}{'.' * (self.WIDTH - filled)}] {e.documents_done}/{e.documents_total} docs, "
                f"{e.pages_done} pages, {e.pages_per_s:.1f} pages/s{eta}  {visible(Path(e.current_file).name)}")


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


# -- docs ---------------------------------------------------------------------------------
def _docs_list(args, paths) -> int:
    from engine.store.indexer import open_collection

    with open_collection(paths, args.collection, read_only=True) as store:
        documents = store.list_documents()
    if args.json:
        for doc in documents:
            print(json.dumps(doc.to_dict(), default=str))
        return 0
    for doc in documents:
        reason = f"  ({visible(doc.error)})" if doc.error else ""
        print(f"{doc.id:>5}  {doc.status:<20} {doc.page_count or 0:>5} pages "
              f"{doc.chunk_count or 0:>6} chunks  {visible(str(doc.path))}{reason}")
    if not documents:
        print("The collection is empty.", file=sys.stderr)
    return 0


def _docs_remove(args, paths) -> int:
    from engine.store.indexer import open_collection

    with open_collection(paths, args.collection) as store:
        missing = [d for d in args.documents if not store.remove_document(_path_or_id(d))]
        store.flush()
    if missing:
        raise EngineError(f"Not in the collection: {', '.join(missing)}; see 'docs list'.")
    return 0


def _path_or_id(text: str):
    if text.isdigit():
        return int(text)
    return str(Path(text).resolve()) if Path(text).exists() else text
