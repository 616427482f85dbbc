"""The language models installed, imported and removed off the GUI thread (the Models page).

    models = ModelsController(paths, parent=window)
    models.listed.connect(page.show_entries)          # [engine.models.catalog.LLMEntry]
    models.importProgress.connect(page.show_progress)   # (fraction, message)
    models.importEnded.connect(page.import_ended)       # (name or "", a sentence for the person)
    models.import_files(["qwen2.5-0.5b-instruct-q4_k_m.gguf"])
    models.cancel_import()                              # from the GUI thread, at once
    models.measure("qwen2.5-0.5b-instruct-q4_k_m")      # measured.emit(name, "" or why not)
    models.shutdown()                                   # from closeEvent

One thread (a WorkerThread) does everything in turn, each request a job; the import itself runs
in a child process (engine.models.prepare) whose progress the worker relays. Cancel is a
threading.Event set directly, never a queued slot: the thread is busy while it imports; shutdown
sets it, and the flag a measure reads.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from desktop_app.controllers.worker_thread import WorkerThread
from engine.errors import EngineError
from engine.llm.speed import measure_speed
from engine.models.catalog import LLMEntry, llm_entries, record_speed
from engine.models.prepare import import_model_in_child
from engine.models.registry import remove_model
from engine.paths import AppPaths

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Listed:
    entries: tuple[LLMEntry, ...]


@dataclass(frozen=True)
class ImportProgress:
    file: str
    fraction: float
    message: str


@dataclass(frozen=True)
class ImportEnded:
    name: str  # the model's name; "" when it was cancelled or failed
    message: str  # what happened, for the person
    failed: bool = False


@dataclass(frozen=True)
class Removed:
    name: str
    message: str  # "" when removed, else why not


@dataclass(frozen=True)
class Measured:
    name: str
    message: str  # "" when measured, else why not


class ModelsWorker:
    """Runs on the models thread: lists, imports (one file at a time) and removes; what it does
    goes out through `report` (the thread's event signal)."""

    def __init__(self, paths: AppPaths, provider: str, closing: threading.Event, report):
        self.paths = paths
        self.provider = provider
        self._closing = closing  # set when the app closes: a measure stops at its next token
        self._report = report

    def refresh(self) -> None:
        try:
            entries = tuple(llm_entries(self.paths))
        except EngineError as exc:
            log.warning("listing the models: %s", exc)
            entries = ()
        self._report(Listed(entries))

    def import_files(self, files: list, cancel: threading.Event) -> None:
        for file in files:
            if cancel.is_set():
                break
            self._report(self._import(Path(file), cancel))
        self.refresh()

    def _import(self, file: Path, cancel: threading.Event) -> ImportEnded:
        def progress(fraction: float, message: str) -> None:
            self._report(ImportProgress(file.name, fraction, message))

        try:
            folder = import_model_in_child(file, self.paths, progress, cancel)
        except EngineError as exc:
            return ImportEnded("", str(exc), failed=True)
        if folder is None:
            return ImportEnded("", f"The import of '{file.name}' was cancelled; nothing was kept.")
        return ImportEnded(folder.name, f"'{folder.name}' is imported; choose it in Settings › Models.")

    def remove(self, name: str) -> None:
        try:
            remove_model(self.paths, name)
        except EngineError as exc:
            self._report(Removed(name, str(exc)))
        else:
            self._report(Removed(name, ""))
        self.refresh()

    def measure(self, name: str | None) -> None:
        shown = name or "The built-in model"
        try:
            speed = measure_speed(self.paths, name, self.provider, self._closing)
        except EngineError as exc:
            self._report(Measured(shown, str(exc)))
            return
        if speed is None:
            self._report(Measured(shown, f"{shown} stopped too soon to measure its speed."))
        else:
            self._report(Measured(shown, ""))
        self.refresh()

    def record_speed(self, folder: Path, tokens_per_s: float, new_tokens: int, provider: str) -> None:
        if record_speed(self.paths, folder, tokens_per_s, new_tokens, provider):
            self.refresh()


class ModelsController(QObject):
    """The GUI thread's handle on the models: owns the worker's thread."""

    listed = Signal(list)  # [LLMEntry], the built-in model first
    importProgress = Signal(str, float, str)  # file name, fraction, message
    importEnded = Signal(str, str, bool)  # model name ("" if none), a sentence, failed
    removed = Signal(str, str)  # model name, "" or why it was not removed
    measured = Signal(str, str)  # model name, "" or why it was not measured
    busyChanged = Signal(bool)  # True while an import runs

    def __init__(self, paths: AppPaths, provider: str = "auto", parent=None):
        super().__init__(parent)
        self.entries: list[LLMEntry] = []  # the latest listing
        self._cancel: threading.Event | None = None
        self._closing = threading.Event()  # a measure's flag: set as the app closes
        self._pending = 0  # files of the running import not yet ended
        # stopped by the window's shutdown(), else as this object goes or the app quits
        self._jobs = WorkerThread("models", self, wait_ms=15000)
        self._worker = ModelsWorker(paths, provider, self._closing, self._jobs.report)
        self._jobs.event.connect(self._on_event)

    def is_importing(self) -> bool:
        return self._cancel is not None

    def refresh(self) -> None:
        self._jobs.run(self._worker.refresh)

    def import_files(self, files: list[str]) -> bool:
        """Imports `files` one after the other; False (and nothing done) while one is running."""
        if self._cancel is not None or not files:
            return False
        self._cancel = threading.Event()
        self._pending = len(files)
        self.busyChanged.emit(True)
        self._jobs.run(self._worker.import_files, [str(f) for f in files], self._cancel, cancel=self._cancel)
        return True

    def cancel_import(self) -> None:
        """Stops the running import (and those queued after it); what was imported stays."""
        if self._cancel is not None:
            self._cancel.set()

    def remove(self, name: str) -> None:
        self._jobs.run(self._worker.remove, name)

    def measure(self, name: str | None) -> None:
        """Measures how fast the model `name` (None: the built-in one) writes on this machine."""
        self._jobs.run(self._worker.measure, name, cancel=self._closing)

    def record_speed(self, folder: Path, tokens_per_s: float, new_tokens: int, provider: str) -> None:
        """Keeps the speed an answer of the model in `folder` was written at (see catalog)."""
        self._jobs.run(self._worker.record_speed, Path(folder), float(tokens_per_s), int(new_tokens), provider)

    def shutdown(self, timeout_ms: int = 15000) -> None:
        """Stops an import or a measure at its next step and ends the thread."""
        self._jobs.stop(timeout_ms)

    def _on_event(self, event) -> None:
        if isinstance(event, Listed):
            self.entries = list(event.entries)
            self.listed.emit(self.entries)
        elif isinstance(event, ImportProgress):
            self.importProgress.emit(event.file, event.fraction, event.message)
        elif isinstance(event, ImportEnded):
            self._import_ended(event)
        elif isinstance(event, Measured):
            self.measured.emit(event.name, event.message)
        else:
            self.removed.emit(event.name, event.message)

    def _import_ended(self, event: ImportEnded) -> None:
        self._pending -= 1
        cancelled = self._cancel is not None and self._cancel.is_set()
        if self._pending <= 0 or cancelled:
            self._cancel = None
            self.busyChanged.emit(False)
        self.importEnded.emit(event.name, event.message, event.failed)
