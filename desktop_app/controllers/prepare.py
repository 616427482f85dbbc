"""The first-start preparation of the built-in model, off the GUI thread.

    job = PrepareJob(paths, parent=window)
    job.progress.connect(dialog.update)    # (fraction, message)
    job.finished.connect(on_prepared)      # the prepared folder
    job.failed.connect(show_error)         # a sentence for the person
    job.start()

The conversion itself runs in a child process (engine.models.prepare); the job's thread only
relays the child's progress, and ends when the preparation does.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QObject, QThread, Signal, Slot

from engine.errors import EngineError
from engine.models.prepare import prepare_builtin_llm_in_child
from engine.paths import AppPaths


@dataclass(frozen=True)
class Progress:
    fraction: float
    message: str


@dataclass(frozen=True)
class Prepared:
    folder: str


@dataclass(frozen=True)
class Failed:
    message: str  # a sentence for the person


class PrepareWorker(QObject):
    """Prepares the built-in model (converts its GGUF once) in a child process, relaying its
    progress: numpy and onnx hold the GIL for long stretches, which would stall the window."""

    event = Signal(object)  # Progress..., then Prepared or Failed

    def __init__(self, paths: AppPaths):
        super().__init__()
        self.paths = paths

    @Slot()
    def run(self) -> None:
        try:
            folder = prepare_builtin_llm_in_child(
                self.paths, lambda fraction, message: self.event.emit(Progress(fraction, message)))
        except EngineError as exc:
            self.event.emit(Failed(str(exc)))
            return
        self.event.emit(Prepared(str(folder)))


class PrepareJob(QObject):
    """A PrepareWorker on a thread of its own that ends when the preparation does."""

    progress = Signal(float, str)
    finished = Signal(str)
    failed = Signal(str)

    def __init__(self, paths: AppPaths, parent=None):
        super().__init__(parent)
        self._thread = QThread()
        self._thread.setObjectName("prepare")
        self._worker = PrepareWorker(paths)
        self._worker.moveToThread(self._thread)
        self._thread.started.connect(self._worker.run)
        self._worker.event.connect(self._on_event)

    def start(self) -> None:
        self._thread.start()

    def is_running(self) -> bool:
        return self._thread.isRunning()

    def wait(self, timeout_ms: int = 60000) -> None:
        self._thread.quit()
        self._thread.wait(timeout_ms)

    def _on_event(self, event) -> None:
        if isinstance(event, Progress):
            self.progress.emit(event.fraction, event.message)
            return
        self.wait()  # the worker is done
        if isinstance(event, Prepared):
            self.finished.emit(event.folder)
        else:
            self.failed.emit(event.message)
