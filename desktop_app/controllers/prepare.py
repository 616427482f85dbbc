"""The first-start preparation of the built-in model, off the GUI thread.

    job = PrepareJob(paths, parent=window)
    job.progress.connect(dialog.update)    # (fraction, message)
    job.finished.connect(on_prepared)      # the prepared folder
    job.failed.connect(show_error)         # a sentence for the person
    job.start()

The conversion itself runs in a child process (engine.models.prepare): numpy and onnx hold the GIL
for long stretches, which would stall the window. The job's thread only relays the child's
progress, and ends when the preparation does.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QObject, Signal

from desktop_app.controllers.worker_thread import WorkerThread
from engine.errors import EngineError
from engine.models.prepare import prepare_builtin_llm_in_child
from engine.paths import AppPaths


@dataclass(frozen=True)
class Progress:
    fraction: float
    message: str


class PrepareJob(QObject):
    """The preparation on a thread of its own that ends when the preparation does."""

    progress = Signal(float, str)
    finished = Signal(str)
    failed = Signal(str)

    def __init__(self, paths: AppPaths, parent=None):
        super().__init__(parent)
        self.paths = paths
        self._jobs = WorkerThread("prepare", self, expected=(EngineError,), wait_ms=60000, start=False)
        self._jobs.event.connect(self._on_progress)
        self._jobs.finished.connect(self._on_prepared)
        self._jobs.failed.connect(self._on_failed)

    def start(self) -> None:
        report = self._jobs.report
        self._jobs.start()
        self._jobs.run(prepare_builtin_llm_in_child, self.paths,
                       lambda fraction, message: report(Progress(fraction, message)))

    def is_running(self) -> bool:
        return self._jobs.is_running()

    def wait(self, timeout_ms: int = 60000) -> None:
        self._jobs.stop(timeout_ms)

    def _on_progress(self, event: Progress) -> None:
        self.progress.emit(event.fraction, event.message)

    def _on_prepared(self, folder) -> None:
        self.wait()  # the job is done
        self.finished.emit(str(folder))

    def _on_failed(self, exc: Exception) -> None:
        self.wait()
        if isinstance(exc, EngineError):  # another is a bug: the WorkerThread has shown it
            self.failed.emit(str(exc))
