"""The audit log: one JSON line per question, append-only, rotated, in the data dir.

    log = AuditLog(paths.audit_folder)               # AppPaths.root / "audit"
    events = list(assistant.ask(question, history, cancel))
    log.record(AuditEntry.from_events(question, events, model=name, model_version=...,
                                      collection=name, collection_version=..., session=id))
    read_tail(folder, n) -> list[str]                # the last n lines, oldest first

AuditSink is the same fed one event at a time, as the assistant's worker iterates ask:

    sink = AuditSink(AuditLog(paths.audit_folder), on_recorded=..., on_failed=...)
    sink.begin(question, collection="default", session=id)
    for event in assistant.ask(question, history, cancel):
        sink.feed(event)                              # what the person was shown
    sink.end(model_folder=folder, collection_version=..., stopped=False)   # writes the line

An AuditEntry (frozen; to_dict() / to_json()) holds: time (ISO 8601 UTC, "Z"), question,
answerable (the gate's verdict; None if the ask failed first) and refused (its negation, in the
JSON), passages [{document, page}] in the order the model got them, citations [{number,
document, page}] the answer actually cites (each with page_label, the printed label, where
a PDF prints another than the physical page), model, model_version, collection,
collection_version, session (optional), error (the message shown, if the ask failed) and
finish_reason (stop / length / cancelled). Source(document, page, number) is one of those.

Versions, so an auditor can tell which model and which manuals gave an answer:
    model_version(folder)       16 hex chars of SHA-256 over the model folder's manifest.json
                                (without one: over the names and sizes of its files)
    collection_version(store.list_documents(), store.embedder_id)
                                16 hex chars of SHA-256 over the sorted (path, sha256) of the
                                ready documents and the embedder id: it changes whenever a
                                document is added, removed or replaced, or the index re-embedded

Each record is one line of UTF-8 JSON (sort_keys) written with a single O_APPEND write, so a
crash can leave at most the last line cut; the next record starts on a new line after it.
Each record is fsynced; record() raises EngineError when the folder cannot be written.
When a record would take `audit.jsonl` past max_bytes, the files shift first: audit.jsonl ->
audit.1.jsonl -> ... -> audit.{backups}.jsonl, the oldest dropped. Lines are never rewritten.
One AuditLog per process and folder: it serialises its own threads, not other processes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

from engine.errors import EngineError
from engine.paths import MANIFEST
from engine.safe_text import UNSAFE
from engine.types import StoredDocument

log = logging.getLogger(__name__)

FILE_NAME = "audit.jsonl"
_READY = ("ready", "ready_with_warnings")
_LINE_BREAKS = {ord(c): f"\\u{ord(c):04x}" for c in "\x85\u2028\u2029"}  # only ever inside strings


@dataclass(frozen=True)
class Source:
    """A passage given to the model, or (with its [n]) one the answer cites."""

    document: str  # the file name, as citations show it
    page: int
    number: int | None = None
    page_label: str = ""  # the printed label, where it differs from the physical page

    @classmethod
    def of(cls, passage, number: int | None = None) -> "Source":
        label = passage.page_label(passage.page)
        return cls(passage.document, passage.page, number, "" if label == str(passage.page) else label)

    def to_dict(self) -> dict:
        data = {"document": self.document, "page": self.page}
        if self.page_label:
            data["page_label"] = self.page_label
        return data if self.number is None else {"number": self.number, **data}


@dataclass(frozen=True)
class AuditEntry:
    time: str  # ISO 8601, UTC, ending in Z
    question: str
    answerable: bool | None  # the relevance gate's verdict; None when the ask failed before it
    passages: tuple[Source, ...] = ()  # in the order they were given to the model
    citations: tuple[Source, ...] = ()  # the [n] the answer actually cites
    model: str = ""
    model_version: str = ""
    collection: str = ""
    collection_version: str = ""
    session: str | None = None
    error: str | None = None  # why the answer failed, as the person was told
    finish_reason: str | None = None  # stop, length, or cancelled (by the person)

    @property
    def refused(self) -> bool:
        return self.answerable is False

    def to_dict(self) -> dict:
        data = asdict(self)
        data.update(passages=[s.to_dict() for s in self.passages],
                    citations=[s.to_dict() for s in self.citations], refused=self.refused)
        return data

    def to_json(self) -> str:
        """One line of JSON, no newline, even for readers that also break lines at U+2028; the
        controls, bidi and zero-width characters json leaves raw (DEL, C1, U+202E...) escaped
        too, so a question or file name cannot drive the terminal of someone reading the log."""
        text = json.dumps(self.to_dict(), ensure_ascii=False, sort_keys=True)
        return UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text.translate(_LINE_BREAKS))

    @classmethod
    def from_events(cls, question: str, events: Iterable, *, model: str = "",
                    model_version: str = "", collection: str = "", collection_version: str = "",
                    session: str | None = None, time: datetime | None = None) -> "AuditEntry":
        """The entry for what `Assistant.ask` yielded (all its events, in any number: text
        events are ignored, so the caller may pass everything it collected)."""
        answerable, passages, citations, error, finish = None, (), (), None, None
        for event in events:
            kind = getattr(event, "kind", "")
            if kind == "passages":
                answerable = event.answerable
                passages = tuple(Source.of(p) for p in event.passages)
            elif kind == "citations":
                citations = tuple(Source.of(c.passage, c.number) for c in event.citations if c.cited)
            elif kind == "done":
                finish = event.stats.finish_reason
            elif kind == "error":
                error = event.message
        return cls(utc_time(time), question, answerable, passages, citations, model,
                   model_version, collection, collection_version, session, error, finish)


def utc_time(moment: datetime | None = None) -> str:
    moment = (moment or datetime.now(timezone.utc)).astimezone(timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class AuditLog:
    def __init__(self, folder: Path, max_bytes: int = 5_000_000, backups: int = 10):
        self.folder = Path(folder)
        self.path = self.folder / FILE_NAME
        self.max_bytes = max_bytes
        self.backups = backups
        self._lock = threading.Lock()

    def record(self, entry: AuditEntry) -> None:
        """Append one line. EngineError when the folder cannot be written."""
        line = (entry.to_json() + "\n").encode("utf-8")
        try:
            with self._lock:
                self.folder.mkdir(parents=True, exist_ok=True)
                self._append(line)
        except OSError as exc:
            raise EngineError(f"The audit log '{self.path}' could not be written ({exc}); "
                              "check that the data folder is writable and not full.") from exc

    def _append(self, line: bytes) -> None:
        size = _size(self.path)
        if size and size + len(line) > self.max_bytes:
            self._rotate()
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_BINARY", 0)
        fd = os.open(self.path, flags, 0o600)
        try:
            end = os.fstat(fd).st_size
            if end and _last_byte(self.path, end) != b"\n":  # a line cut by a crash: leave it whole
                line = b"\n" + line
            while line:
                line = line[os.write(fd, line):]
            os.fsync(fd)
        finally:
            os.close(fd)

    def _rotate(self) -> None:
        names = [self.path] + [self.folder / f"audit.{i}.jsonl" for i in range(1, self.backups + 1)]
        names[-1].unlink(missing_ok=True)
        for older, newer in zip(reversed(names[1:]), reversed(names[:-1])):
            if newer.exists():
                os.replace(newer, older)


class AuditSink:
    """One AuditEntry per answer, from the events it is fed, written by end() on the caller's
    thread. One answer at a time, as the assistant's worker answers them. A write that fails
    is logged and passed to on_failed(message); on_recorded(entry) follows each line written.
    Both are called on the writing thread."""

    def __init__(self, log: AuditLog, on_recorded=None, on_failed=None):
        self.log = log
        self._on_recorded = on_recorded
        self._on_failed = on_failed
        self._answer: dict | None = None  # {"question", "collection", "session", "events"}
        self._model_versions: dict[Path, str] = {}
        self._idle = threading.Condition()
        self._closed = False

    def begin(self, question: str, *, collection: str = "", session: str | None = None) -> None:
        with self._idle:
            if not self._closed:
                self._answer = {"question": question, "collection": collection, "session": session,
                                "events": []}

    def feed(self, event) -> None:
        if self._answer is not None:
            self._answer["events"].append(event)

    def end(self, *, model_folder: Path | None = None, collection_version: str = "",
            stopped: bool = False) -> AuditEntry | None:
        """Writes the answer's line (finish_reason "cancelled" when the person stopped it)."""
        answer = self._answer
        if answer is None:
            return None
        try:
            entry = AuditEntry.from_events(
                answer["question"], answer["events"], model=model_folder.name if model_folder else "",
                model_version=self._model_version(model_folder), collection=answer["collection"],
                collection_version=collection_version, session=answer["session"])
            if stopped:
                entry = replace(entry, finish_reason="cancelled")
            return self._write(entry)
        finally:
            with self._idle:
                self._answer = None
                self._idle.notify_all()

    def wait(self, timeout: float | None = None) -> bool:
        """True once no answer is being recorded (its line, if any, is on disk)."""
        with self._idle:
            return self._idle.wait_for(lambda: self._answer is None, timeout)

    def close(self, timeout: float | None = 10.0) -> None:
        """Waits for the answer being recorded; nothing is recorded after this."""
        with self._idle:
            self._closed = True
        self.wait(timeout)

    def _write(self, entry: AuditEntry) -> AuditEntry | None:
        try:
            self.log.record(entry)
        except EngineError as exc:
            log.error("audit: %s", exc)
            if self._on_failed is not None:
                self._on_failed(str(exc))
            return None
        if self._on_recorded is not None:
            self._on_recorded(entry)
        return entry

    def _model_version(self, folder: Path | None) -> str:
        if folder is None:
            return ""
        if folder not in self._model_versions:
            try:
                self._model_versions[folder] = model_version(folder)
            except OSError as exc:
                log.warning("audit: the model folder %s could not be read (%s)", folder, exc)
                return ""
        return self._model_versions[folder]


def read_tail(folder: Path, count: int) -> list[str]:
    """The last `count` lines of the log (from the rotated files too when needed), oldest first."""
    folder = Path(folder)
    backups = sorted((p for p in folder.glob("audit.*.jsonl") if p.name.split(".")[1].isdigit()),
                     key=lambda p: int(p.name.split(".")[1]))
    lines: list[str] = []
    for name in [folder / FILE_NAME, *backups]:
        if len(lines) >= count:
            break
        try:
            text = name.read_text(encoding="utf-8", errors="replace")
            lines = [line for line in text.split("\n") if line] + lines  # not splitlines: U+2028
        except FileNotFoundError:
            continue
    return lines[-count:] if count > 0 else []


def model_version(folder: Path) -> str:
    """A short hash of the model folder's manifest.json, or of its files' names and sizes."""
    folder = Path(folder)
    try:
        return _short_hash((folder / MANIFEST).read_bytes())
    except FileNotFoundError:
        pass
    files = sorted((str(p.relative_to(folder)).replace("\\", "/"), p.stat().st_size)
                   for p in folder.rglob("*") if p.is_file())
    return _short_hash(json.dumps(files).encode("utf-8"))


def collection_version(documents: Sequence[StoredDocument], embedder_id: str = "") -> str:
    """A short hash of the ready documents (path, sha256) and the embedder id."""
    ready = sorted((d.path, d.sha256) for d in documents if d.status in _READY)
    return _short_hash(json.dumps({"embedder": embedder_id, "documents": ready}).encode("utf-8"))


def _short_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _last_byte(path: Path, size: int) -> bytes:
    with open(path, "rb") as handle:
        handle.seek(size - 1)
        return handle.read(1)
