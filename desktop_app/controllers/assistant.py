"""The assistant's worker on a long-lived QThread: questions -> streamed answers (the first-start
preparation of the built-in model is in controllers/prepare.py).

    controller = AssistantController(paths, settings=settings)   # starts its thread
    controller.answerEvent.connect(view.on_event)    # PassagesEvent, TextEvent, ..., DoneEvent | ErrorEvent
    request = controller.ask("How do I prime the pump?", history)
    controller.stop()                                              # from the GUI thread, at once

The AssistantWorker lives on its own thread (a WorkerThread) and keeps an AnswerSession open
there (engine.answer.session: the model, in a child process kept warm between questions, the
collection, the encoders). Requests go in as jobs queued on that thread; the events of the
session's ask come back one by one on one signal, as the engine typed them (as superqt's
GeneratorWorker.yielded does), and the views dispatch on their type; the model's state, as the
session's ModelSupervisor reports it (opened, failed, restarting, engine unreachable), and the
end of each request come as typed records on a second signal, `status`. Cancel is a
threading.Event set directly by stop(), never a queued job: a busy worker runs no other. Every
request has an id, and an event of a request that is no longer the live one is dropped under a
lock, so nothing of a stopped answer is emitted after stop() returns.

The rules of the model's life (restarting a dead process with backoff, falling back from a
remote engine to the local model and back) are the supervisor's (engine.llm.supervisor), the
same for the CLI; here a timer only asks it to look at the process between questions.
"""

from __future__ import annotations

import itertools
import logging
import threading
from dataclasses import dataclass, replace
from pathlib import Path

from PySide6.QtCore import QObject, QTimer, Signal, Slot

from desktop_app.controllers.worker_thread import WorkerThread
from engine.answer.assistant import AssistantSettings, DoneEvent, ErrorEvent
from engine.answer.session import AnswerSession, SessionConfig
from engine.config import Settings
from engine.errors import EngineError
from engine.llm.supervisor import EngineUnreachable, ModelFailed, ModelOpened, Restarting
from engine.paths import DEFAULT_COLLECTION, AppPaths

log = logging.getLogger(__name__)

WATCH_MS = 500  # how often the idle worker asks the supervisor to look at the model's process


@dataclass(frozen=True)
class RequestEnded:
    """The worker is done with a request, however it ended (live or not)."""

    request_id: int


class RequestGate:
    """Which request is live. The worker emits an event only while its request is live, and
    stop() makes it stale under the same lock: after stop() returns, nothing more is emitted."""

    def __init__(self):
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._live: int | None = None

    def begin(self) -> int:
        with self._lock:
            self._live = next(self._ids)
            return self._live

    def end(self, request_id: int) -> bool:
        """Marks `request_id` finished; False when it was not the live one."""
        with self._lock:
            if self._live != request_id:
                return False
            self._live = None
            return True

    def stop(self) -> int | None:
        with self._lock:
            stopped, self._live = self._live, None
            return stopped

    def is_live(self, request_id: int) -> bool:
        with self._lock:
            return self._live == request_id

    def emit(self, request_id: int, signal, *args) -> bool:
        with self._lock:
            if self._live != request_id:
                return False
            signal.emit(request_id, *args)
            return True


class AssistantWorker(QObject):
    """Lives on the assistant thread: its AnswerSession opens the model there and answers one
    request at a time; this only relays what the session yields and reports."""

    # Two streams: the answers' events, gated by request (nothing of a stopped answer goes out
    # after stop() returns: tests hold this signal to that), and the records above.
    answerEvent = Signal(int, object)  # request id, an event of Assistant.ask (ErrorEvent: ours too)
    status = Signal(object)  # ModelOpened, ModelFailed, Restarting, EngineUnreachable, RequestEnded

    def __init__(self, paths: AppPaths, collection: str, gate: RequestGate):
        super().__init__()
        self.paths = paths
        self.collection = collection
        self._gate = gate
        self.session = AnswerSession(paths, collection, self.status.emit)
        # Made and connected on the GUI thread; the timer moves with the worker. Connected on the
        # worker's thread, connect() held the GIL while it waited for Qt's signal lock, which the
        # GUI thread held while it waited for the GIL to delete a widget: a hang, seen once.
        self._watch = QTimer(self)
        self._watch.setInterval(WATCH_MS)
        self._watch.timeout.connect(self.session.model.check)
        self.audit = None  # an engine.kiosk.audit.AuditSink when the audit log is on
        self.answering = threading.Event()  # set while a question is answered (indexing pauses)

    @property
    def llm(self):
        """The model that answers now (None until opened, or while it restarts)."""
        return self.session.model.llm

    # -- requests (jobs run on the worker thread) ------------------------------------------
    def configure(self, config: SessionConfig) -> None:
        """(Re)opens what `config` changes; the LLM child process is restarted only when the
        model or provider changed."""
        self._watch.start()
        try:
            self.session.open(config)
        except EngineError as exc:
            log.warning("the model could not be opened: %s", exc)
            self.status.emit(ModelFailed(str(exc)))

    def run(self, request_id: int, question: str, history: list, cancel: threading.Event,
            session: str | None = None) -> None:
        audit = self.audit  # read once: the whole answer is recorded, or none of it
        if audit is not None:
            audit.begin(question, collection=self.collection, session=session)
        complete = False
        self.answering.set()
        try:
            complete = self._answer(request_id, question, history, cancel, audit)
        except Exception as exc:
            complete = self._send(request_id, ErrorEvent(f"The answer failed unexpectedly ({exc}).",
                                                         type(exc).__name__), audit)
            raise  # a bug: sys.excepthook logs it and shows it
        finally:
            try:
                if audit is not None:  # here, on this thread: closing the window waits for it
                    audit.end(model_folder=self.session.model.model_folder,
                              collection_version=self.session.collection_version(), stopped=not complete)
            finally:
                self.answering.clear()
                self.status.emit(RequestEnded(request_id))
                self.session.model.check()  # it may have died during the answer: restart it now

    def _answer(self, request_id: int, question: str, history: list, cancel, audit) -> bool:
        """Relays the answer's events; False when it was stopped before its last one went out."""
        if not self._gate.is_live(request_id):
            return False  # stopped before it started
        events = self.session.ask(question, history, cancel)
        try:
            for event in events:
                if not self._send(request_id, event, audit):
                    return False  # stopped: the rest is not wanted
        finally:
            events.close()  # an unfinished stream cancels the model's work and drains it
        return True

    def _send(self, request_id: int, event, audit) -> bool:
        """Relays `event`; the audit log records what went out while the request was live."""
        live = self._relay(request_id, event)
        if live and audit is not None:
            audit.feed(event)
        return live

    @Slot()
    def close(self) -> None:
        """Closes the model's child process, the collection, the embedder and the reranker."""
        self._watch.stop()
        self.session.close()

    def _relay(self, request_id: int, event) -> bool:
        """Emits `event` while its request is live; False once it is not (stopped)."""
        return self._gate.emit(request_id, self.answerEvent, event)


class AssistantController(QObject):
    """The GUI thread's handle on the assistant: owns the worker's thread; its signals carry
    the events of the live request only, on the GUI thread."""

    answerEvent = Signal(object)  # the live request's events; the last is a DoneEvent or an ErrorEvent
    busyChanged = Signal(bool)  # True while a live request is being answered
    modelReady = Signal(object)  # ModelStatus
    modelFailed = Signal(str)
    engineRestarting = Signal(str)  # the model's process died and is being restarted: a message
    engineUnreachable = Signal(str)  # the remote engine failed; what answers instead (also engineRestarting)
    requestEnded = Signal(int)  # the worker is done with a request, stopped ones included

    def __init__(self, paths: AppPaths, collection: str = DEFAULT_COLLECTION, provider: str = "auto",
                 settings: Settings | None = None, llm_folder: Path | None = None,
                 assistant_settings: AssistantSettings | None = None, start: bool = True, parent=None):
        super().__init__(parent)
        self._gate = RequestGate()
        self._cancel: threading.Event | None = None
        self._config = SessionConfig(settings or Settings(), provider, llm_folder, assistant_settings)
        self._worker = AssistantWorker(paths, collection, self._gate)
        # requests are jobs on its thread; the model is closed there as it ends, where it was opened
        self._jobs = WorkerThread("assistant", self, worker=self._worker, close=self._worker.close)
        self._thread = self._jobs.qthread
        self._worker.answerEvent.connect(self._on_event)
        self._worker.status.connect(self._on_status)
        self._started = False
        self.session: str | None = None  # the conversation questions belong to (the audit log names it)
        if start:
            self.start()

    @property
    def worker(self) -> AssistantWorker:
        return self._worker

    @property
    def answering(self) -> threading.Event:
        """Set while a question is being answered: indexing waits meanwhile (pause_while)."""
        return self._worker.answering

    @property
    def settings(self) -> Settings:
        return self._config.settings

    def start(self) -> None:
        """Opens the model on the worker thread (at once, or after the first-start preparation)."""
        self._started = True
        self._jobs.run(self._worker.configure, self._config)

    def apply_settings(self, settings: Settings) -> None:
        """Reopens the assistant with new settings (the model process only if the model changed)."""
        self._config = replace(self._config, settings=settings)
        if self._started:
            self._jobs.run(self._worker.configure, self._config)

    def is_busy(self) -> bool:
        return self._cancel is not None

    def ask(self, question: str, history: list[dict] | None = None) -> int:
        """Starts answering `question`; an answer still streaming is stopped first."""
        self.stop()
        if not self._started:
            self.start()
        request_id = self._gate.begin()
        self._cancel = threading.Event()
        self.busyChanged.emit(True)
        self._jobs.run(self._worker.run, request_id, question, list(history or []), self._cancel, self.session,
                       cancel=self._cancel)
        return request_id

    def set_audit(self, sink) -> None:
        """Records every question from now on with `sink` (an engine.kiosk.audit.AuditSink),
        written on the worker's thread as each answer ends; None switches it off."""
        self._worker.audit = sink

    def stop(self) -> bool:
        """Cancels the answer in progress; no event of it is emitted after this returns."""
        if self._cancel is None:
            return False
        self._cancel.set()
        self._gate.stop()
        self._cancel = None
        self.busyChanged.emit(False)
        return True

    def shutdown(self, timeout_ms: int = 10000) -> None:
        """Stops the answer, ends the thread and closes the model (call from closeEvent)."""
        self.stop()
        self._jobs.stop(timeout_ms)

    # -- relaying the live request's events (GUI thread) ------------------------------------
    def _on_event(self, request_id: int, event) -> None:
        if isinstance(event, (DoneEvent, ErrorEvent)):  # the answer's last event
            live = self._finish(request_id)
        else:
            live = self._gate.is_live(request_id)
        if live:
            self.answerEvent.emit(event)

    def _on_status(self, record) -> None:
        if isinstance(record, ModelOpened):
            self.modelReady.emit(record.status)
        elif isinstance(record, ModelFailed):
            self.modelFailed.emit(record.message)
        elif isinstance(record, Restarting):
            self.engineRestarting.emit(record.message)
        elif isinstance(record, EngineUnreachable):
            self.engineUnreachable.emit(record.message)
            self.engineRestarting.emit(record.message)  # the window's status bar says it today
        else:
            self.requestEnded.emit(record.request_id)

    def _finish(self, request_id: int) -> bool:
        if not self._gate.end(request_id):
            return False
        self._cancel = None
        self.busyChanged.emit(False)
        return True

