"""The assistant's worker on a long-lived QThread: questions -> streamed answers (the first-start
preparation of the built-in model is in controllers/prepare.py).

    controller = AssistantController(paths, settings=settings)   # starts its thread
    controller.answerEvent.connect(view.on_event)    # PassagesEvent, TextEvent, ..., DoneEvent | ErrorEvent
    request = controller.ask("How do I prime the pump?", history)
    controller.stop()                                              # from the GUI thread, at once

The AssistantWorker lives on its own thread and keeps the model open there (the LLM itself runs
in a child process, kept warm between questions). Requests go in as queued signals; the events
of Assistant.ask come back one by one on one signal, as the engine typed them (as superqt's
GeneratorWorker.yielded does), and the views dispatch on their type. Cancel is a threading.Event set directly by stop(), never a queued slot: a busy
worker runs no slots. Every request has an id, and an event of a request that is no longer the
live one is dropped under a lock, so nothing of a stopped answer is emitted after stop() returns.

If the model's process dies (killed, out of memory), the worker notices within a second, even
when idle, emits engineRestarting and starts a new one at once; when that fails it tries again
after 1 s, 2 s, 4 s ... (at most 30 s). Questions asked while it waits get RESTARTING as their
error; modelReady comes again when the model is back.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

from PySide6.QtCore import QObject, Qt, QThread, QTimer, Signal, Slot

from engine.answer.assistant import (
    Assistant,
    AssistantSettings,
    DoneEvent,
    ErrorEvent,
    imported_reranker,
)
from engine.config import Settings
from engine.errors import CollectionDamagedError, EngineError
from engine.paths import DEFAULT_COLLECTION, AppPaths

log = logging.getLogger(__name__)

NO_MANUALS = "No manuals are indexed yet: drop PDF manuals on the window, or use Add documents…"
RESTARTING = "The model is restarting; ask again in a moment."
WATCH_MS = 500  # how often the idle worker looks at the model's process
RESTART_MAX_S = 30.0
STABLE_S = 60.0  # a model process up this long resets the restart backoff


@dataclass(frozen=True)
class AssistantConfig:
    """Everything the worker opens the assistant with; a new one reopens what changed."""

    settings: Settings
    provider: str = "auto"
    llm_folder: Path | None = None  # a fixed model folder (tests, kiosks); else settings.model
    assistant_settings: AssistantSettings | None = None  # else settings.assistant_settings()

    def answer_settings(self) -> AssistantSettings:
        return self.assistant_settings or self.settings.assistant_settings()


@dataclass(frozen=True)
class ModelStatus:
    """What the status bar shows once the model is loaded."""

    name: str
    provider: str
    pid: int | None
    folder: Path | None = None  # the model's folder (its manifest names the version)


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
    """Lives on the assistant thread: opens the model there and answers one request at a time."""

    opened = Signal(object)  # ModelStatus
    openFailed = Signal(str)
    answerEvent = Signal(int, object)  # request id, an event of Assistant.ask (ErrorEvent: ours too)
    finished = Signal(int)  # the request ended, however it ended (live or not)
    restarting = Signal(str)  # the model's process died; what the window shows meanwhile

    def __init__(self, paths: AppPaths, collection: str, gate: RequestGate):
        super().__init__()
        self.paths = paths
        self.collection = collection
        self._gate = gate
        self._config: AssistantConfig | None = None
        self._llm = None  # engine.llm.process.LLMClient, loaded
        self._llm_key: tuple | None = None
        self._model_folder: Path | None = None  # the last model opened, also while it restarts
        self._embedder = None
        self._store = None
        self._reranker = None
        self._reranker_wanted: bool | None = None
        self._assistant: Assistant | None = None
        self._watch: QTimer | None = None  # created on the worker's thread
        self._restart_at: float | None = None  # monotonic time of the next attempt, while restarting
        self._restarts = 0  # attempts since the model was last up for STABLE_S
        self._up_since = 0.0
        self.audit = None  # an engine.kiosk.audit.AuditSink when the audit log is on

    # -- slots (run on the worker thread) -------------------------------------------------
    @Slot(object)
    def configure(self, config: AssistantConfig) -> None:
        """(Re)opens what `config` changes; the LLM child process is restarted only when the
        model or provider changed."""
        self._config = config
        self._assistant = None
        self._restart_at = None  # configuring opens the model afresh anyway
        self._start_watch()
        try:
            self._open_llm()
            self._open_embedder()  # now, not at the first question: loading it holds the GIL
        except EngineError as exc:
            log.warning("the model could not be opened: %s", exc)
            self.openFailed.emit(str(exc))
            return
        self.opened.emit(self._status())

    @Slot(int, str, object, object, object)
    def run(self, request_id: int, question: str, history: list, cancel: threading.Event,
            session: str | None = None) -> None:
        audit = self.audit  # read once: the whole answer is recorded, or none of it
        if audit is not None:
            audit.begin(question, collection=self.collection, session=session)
        complete = False
        try:
            complete = self._answer(request_id, question, history, cancel, audit)
        except Exception as exc:
            complete = self._send(request_id, ErrorEvent(f"The answer failed unexpectedly ({exc}).",
                                                         type(exc).__name__), audit)
            raise  # a bug: sys.excepthook logs it and shows it
        finally:
            try:
                if audit is not None:  # here, on this thread: closing the window waits for it
                    audit.end(model_folder=self._model_folder,
                              collection_version=self._collection_version(), stopped=not complete)
            finally:
                self.finished.emit(request_id)
                self._check_llm()  # it may have died during the answer: restart it now, not later

    def _answer(self, request_id: int, question: str, history: list, cancel, audit) -> bool:
        """Relays the answer's events; False when it was stopped before its last one went out."""
        if not self._gate.is_live(request_id):
            return False  # stopped before it started
        if self._restart_at is not None:
            return self._send(request_id, ErrorEvent(RESTARTING, "EngineError"), audit)
        try:
            assistant = self._ready_assistant()
        except EngineError as exc:
            return self._send(request_id, ErrorEvent(str(exc), type(exc).__name__), audit)
        events = assistant.ask(question, history, cancel)
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
        self._assistant = None
        self._restart_at = None
        if self._watch is not None:
            self._watch.stop()
        for name in ("_llm", "_store", "_reranker", "_embedder"):
            part = getattr(self, name)
            setattr(self, name, None)
            if part is not None:
                try:
                    part.close()
                except Exception:  # closing must go on with the other parts
                    log.exception("closing %s failed", name)
        self._llm_key = None
        self._reranker_wanted = None

    # -- opening --------------------------------------------------------------------------
    def _open_llm(self):
        from engine.llm.process import LLMClient
        from engine.models.registry import resolve_llm

        config = self._config
        folder = Path(config.llm_folder) if config.llm_folder else resolve_llm(self.paths, config.settings.model)
        key = (folder, config.provider)
        if self._llm is not None and self._llm_key == key:
            return self._llm
        if self._llm is not None:
            self._llm.close()
            self._llm, self._llm_key = None, None
        llm = LLMClient(folder, config.provider).load()
        self._llm, self._llm_key = llm, key
        self._model_folder = folder
        self._up_since = time.monotonic()
        log.info("model %s loaded on %s (process %s)", folder.name, llm.provider, llm.pid)
        return llm

    # -- restarting a dead model process ------------------------------------------------------
    def _start_watch(self) -> None:
        if self._watch is None:
            self._watch = QTimer(self)
            self._watch.setInterval(WATCH_MS)
            self._watch.timeout.connect(self._check_llm)
        self._watch.start()

    @Slot()
    def _check_llm(self) -> None:
        """Runs between requests: notices a dead model process, and drives its restart."""
        if self._restart_at is not None:
            if time.monotonic() >= self._restart_at:
                self._try_restart()
            return
        if self._llm is None:
            return  # not open (or failed to open: the next question tries again)
        if self._llm.alive():
            if time.monotonic() - self._up_since >= STABLE_S:
                self._restarts = 0
            return
        log.error("the model process %s died; restarting it", self._llm.pid or "")
        # at once the first time; a process that keeps dying soon after starting backs off
        self._restart_at = time.monotonic() + (restart_delay(self._restarts) if self._restarts else 0.0)
        self.restarting.emit("The model stopped unexpectedly; restarting…")
        self._check_llm()

    def _try_restart(self) -> None:
        self._restarts += 1
        self._assistant = None  # it holds the dead client
        if self._llm is not None:
            self._llm.close()
            self._llm, self._llm_key = None, None
        try:
            self._open_llm()
        except Exception as exc:  # whatever it is, a kiosk keeps trying (a bug's traceback is logged)
            delay = restart_delay(self._restarts)
            log.warning("restarting the model failed (%s); next try in %.0f s", exc, delay,
                        exc_info=not isinstance(exc, EngineError))
            self._restart_at = time.monotonic() + delay
            self.restarting.emit(f"The model could not be restarted ({exc}); trying again in {delay:.0f} s…")
            return
        self._restart_at = None
        self.opened.emit(self._status())

    def _status(self) -> ModelStatus:
        folder, provider = self._llm_key
        return ModelStatus(folder.name, self._llm.provider or provider, self._llm.pid, folder)

    def _ready_assistant(self) -> Assistant:
        if self._config is None:
            raise EngineError("The assistant is not configured yet.")
        if self._llm is None:  # it failed to open before: try again (a model prepared meanwhile)
            self._open_llm()
            self.opened.emit(self._status())
        llm = self._llm
        if self._assistant is not None:
            return self._assistant
        from engine.answer.retrieval import Retriever
        from engine.store.indexer import open_collection

        self._open_embedder()
        if self._store is None:
            if not self._collection_exists():
                raise self._no_collection()
            self._store = open_collection(self.paths, self.collection, self._embedder, read_only=True)
        self._store.refuse_if_emptied()  # damage left nothing: say so, not "no manuals yet"
        wanted = self._config.settings.use_reranker
        if wanted != self._reranker_wanted:
            if self._reranker is not None:
                self._reranker.close()
            self._reranker = imported_reranker(self.paths) if wanted else None
            self._reranker_wanted = wanted
        retriever = Retriever(self._store, self._embedder, self._reranker)
        self._assistant = Assistant(retriever, llm, self._config.answer_settings())
        return self._assistant

    def _open_embedder(self):
        from engine.store.indexer import default_embedder

        if self._embedder is None:
            self._embedder = default_embedder(self.paths)
        return self._embedder

    def _collection_version(self) -> str:
        """The open collection's version for the audit log ("" while none is open)."""
        from engine.kiosk.audit import collection_version

        if self._store is None:
            return ""
        try:
            return collection_version(self._store.list_documents(), self._store.embedder_id)
        except EngineError as exc:
            log.info("audit: no collection version (%s)", exc)
            return ""

    def _collection_exists(self) -> bool:
        return self.paths.collection_db(self.collection).is_file()

    def _no_collection(self) -> EngineError:
        """NO_MANUALS, or what happened when a damaged collection was moved aside."""
        from engine.store.health import missing_error

        error = missing_error(self.paths.collection(self.collection))
        return error if isinstance(error, CollectionDamagedError) else EngineError(NO_MANUALS)

    def _relay(self, request_id: int, event) -> bool:
        """Emits `event` while its request is live; False once it is not (stopped)."""
        return self._gate.emit(request_id, self.answerEvent, event)


def restart_delay(attempts: int) -> float:
    """Seconds before the next restart after `attempts` failed or short-lived ones: 1, 2, 4 … 30."""
    return min(RESTART_MAX_S, 2.0 ** max(0, attempts - 1))


class AssistantController(QObject):
    """The GUI thread's handle on the assistant: owns the worker's thread; its signals carry
    the events of the live request only, on the GUI thread."""

    answerEvent = Signal(object)  # the live request's events; the last is a DoneEvent or an ErrorEvent
    busyChanged = Signal(bool)  # True while a live request is being answered
    modelReady = Signal(object)  # ModelStatus
    modelFailed = Signal(str)
    engineRestarting = Signal(str)  # the model's process died and is being restarted: a message
    requestEnded = Signal(int)  # the worker is done with a request, stopped ones included

    _configure = Signal(object)
    _run = Signal(int, str, object, object, object)

    def __init__(self, paths: AppPaths, collection: str = DEFAULT_COLLECTION, provider: str = "auto",
                 settings: Settings | None = None, llm_folder: Path | None = None,
                 assistant_settings: AssistantSettings | None = None, start: bool = True, parent=None):
        super().__init__(parent)
        self._gate = RequestGate()
        self._cancel: threading.Event | None = None
        self._config = AssistantConfig(settings or Settings(), provider, llm_folder, assistant_settings)
        self._thread = QThread()
        self._thread.setObjectName("assistant")
        self._worker = AssistantWorker(paths, collection, self._gate)
        self._worker.moveToThread(self._thread)
        # cleanup runs on the worker's thread as it ends: the model is closed where it was opened
        self._thread.finished.connect(self._worker.close, Qt.ConnectionType.DirectConnection)
        self._configure.connect(self._worker.configure)
        self._run.connect(self._worker.run)
        w = self._worker
        w.answerEvent.connect(self._on_event)
        w.opened.connect(self.modelReady)
        w.openFailed.connect(self.modelFailed)
        w.restarting.connect(self.engineRestarting)
        w.finished.connect(self.requestEnded)
        self._thread.start()
        self._started = False
        self.session: str | None = None  # the conversation questions belong to (the audit log names it)
        if start:
            self.start()

    @property
    def worker(self) -> AssistantWorker:
        return self._worker

    @property
    def settings(self) -> Settings:
        return self._config.settings

    def start(self) -> None:
        """Opens the model on the worker thread (at once, or after the first-start preparation)."""
        self._started = True
        self._configure.emit(self._config)

    def apply_settings(self, settings: Settings) -> None:
        """Reopens the assistant with new settings (the model process only if the model changed)."""
        self._config = replace(self._config, settings=settings)
        if self._started:
            self._configure.emit(self._config)

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
        self._run.emit(request_id, question, list(history or []), self._cancel, self.session)
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
        if self._thread.isRunning():
            self._thread.quit()
            if not self._thread.wait(timeout_ms):
                log.error("the assistant thread did not end within %d ms", timeout_ms)

    # -- relaying the live request's events (GUI thread) ------------------------------------
    def _on_event(self, request_id: int, event) -> None:
        if isinstance(event, (DoneEvent, ErrorEvent)):  # the answer's last event
            live = self._finish(request_id)
        else:
            live = self._gate.is_live(request_id)
        if live:
            self.answerEvent.emit(event)

    def _finish(self, request_id: int) -> bool:
        if not self._gate.end(request_id):
            return False
        self._cancel = None
        self.busyChanged.emit(False)
        return True

