"""AnswerSession: answering questions over one collection with one model, for as long as a window,
a chat on the command line or a server's slot lives.

    session = AnswerSession(paths, "default", report)        # report(record): the model's state
    session.open(SessionConfig(settings))                      # EngineError when no model opens
    for event in session.ask("How do I prime the pump?", history, cancel):
        ...                                                    # Assistant.ask's typed events
    session.open(SessionConfig(new_settings))                  # reopens only what changed
    session.close()

It opens the parts an Assistant needs (the embedder, the collection read-only, the reranker when
the settings want it) and keeps them between questions; the model's life (remote or local,
fallback, restarts) is its ModelSupervisor's. The rules all front ends meet:
- with a central server (settings.server_url: a thin kiosk) whole answers come from it; when it
  cannot be reached, or fails mid-answer also when asked again (CentralServer asks again when a
  load balancer's replica dies mid-answer), the session says so (EngineUnreachable) and this
  machine's own collection and model answer, if it has a collection, for SERVER_RETRY_S; the
  first question after that goes to the server again;
- a question the remote engine fails mid-answer is asked again on the local model (if any);
- an installed bundle that switched the collection to another folder (engine.fleet) is read from
  the next question on: the answer in flight ends on the old store first;
- no collection: NO_MANUALS, or what happened when a damaged one was moved aside.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from engine.answer.assistant import Assistant, AssistantSettings, ErrorEvent, Event, imported_reranker
from engine.answer.central import CentralServer, chosen_server
from engine.answer.retrieval import Retriever
from engine.config import Settings
from engine.errors import CentralServerError, CollectionDamagedError, EngineError
from engine.llm.supervisor import REMOTE_RETRY_S, EngineUnreachable, ModelChoice, ModelOpened, ModelSupervisor
from engine.paths import DEFAULT_COLLECTION, AppPaths
from engine.types import CancelFlag

log = logging.getLogger(__name__)

NO_MANUALS = "No manuals are indexed yet: drop PDF manuals on the window, or use Add documents…"
SERVER_RETRY_S = REMOTE_RETRY_S  # answering here after the central server failed, until the next try


@dataclass(frozen=True)
class SessionConfig:
    """Everything a session opens with; a new one reopens what changed."""

    settings: Settings
    provider: str = "auto"
    llm_folder: Path | None = None  # a fixed model folder (tests, kiosks); else settings.model
    assistant_settings: AssistantSettings | None = None  # else settings.assistant_settings()
    model: ModelChoice | None = None  # the CLI's, from its options; else from the settings
    central: bool = True  # settings.server_url is followed (a server's own sessions never forward)

    def answer_settings(self) -> AssistantSettings:
        return self.assistant_settings or self.settings.assistant_settings()

    def model_choice(self) -> ModelChoice:
        from engine.llm.remote import chosen_engine

        if self.model is not None:
            return self.model
        url, key = chosen_engine(settings=self.settings)
        return ModelChoice(self.provider, self.llm_folder, self.settings.model, url, key,
                           self.settings.engine_model if url else None)


def _ignore(record) -> None:
    pass


class AnswerSession:
    """`model`, `embedder` and `reranker` (a function giving the loaded reranker or None) are a
    server's, shared by its sessions and closed by it; by default the session opens its own."""

    def __init__(self, paths: AppPaths, collection: str = DEFAULT_COLLECTION,
                 report: Callable[[object], None] = _ignore, metrics=None, model=None, embedder=None,
                 reranker: Callable[[], object] | None = None, clock: Callable[[], float] = time.monotonic):
        self.paths = paths
        self.collection = collection
        self.model = model or ModelSupervisor(paths, report)
        self._report = report
        self.server: CentralServer | None = None  # a thin kiosk's central server
        self._server_at: tuple = (None, None)  # its (url, key) as the settings give them
        self._local_until: float | None = None  # clock(): answering here until then (server failed)
        self._clock = clock
        self.metrics = metrics
        self._config: SessionConfig | None = None
        self._given = (embedder, reranker)
        self._embedder = embedder
        self.store = None  # the collection, read-only, once a question opened it
        self._store_folder: Path | None = None  # the folder it reads: a bundle switch changes it
        self._reranker = None
        self._reranker_wanted: bool | None = None
        self._assistant: Assistant | None = None

    def open(self, config: SessionConfig) -> AnswerSession:
        """(Re)opens what `config` changes: the embedder, now rather than at the first question
        (loading it holds the GIL), and the model (its process only when the model or the
        provider changed). EngineError when the model cannot be opened. With a central server
        that answers, nothing of this machine's is opened until the server fails."""
        self._config = config
        self._assistant = None
        self.model.configure(config.model_choice())
        if self._use_server(config):
            try:
                self.server.check()
            except CentralServerError as exc:
                if not self._server_failed(str(exc)):
                    return self  # nothing here to answer from either
            else:
                self._report(ModelOpened(self.server.status()))
                return self
        self._open_embedder()
        self.model.open()
        return self

    def _use_server(self, config: SessionConfig) -> bool:
        """Whether a central server answers; a changed address or key opens a new client."""
        wanted = chosen_server(config.settings) if config.central else (None, None)
        if self.server is not None and wanted != self._server_at:
            self.server.close()
            self.server = None
        if wanted[0] and self.server is None:
            self.server, self._server_at = CentralServer(*wanted), wanted
            self._local_until = None
        return self.server is not None

    def _server_failed(self, message: str) -> bool:
        """Says the server failed and what answers meanwhile; False when nothing can here."""
        self._local_until = self._clock() + SERVER_RETRY_S
        if not self._has_manuals():
            self._report(EngineUnreachable(f"{message} This kiosk has no manuals of its own to answer from; "
                                           "ask again once the server is back."))
            return False
        self._report(EngineUnreachable(f"{message} Answering from this kiosk's own manuals meanwhile."))
        return True

    def ask(self, question: str, history: Sequence[dict] = (), cancel: CancelFlag | None = None,
            ) -> Iterator[Event]:
        """Assistant.ask's events, from the central server when there is one. A failure of the
        server or of the remote engine is not one of them: the question is asked again here, or
        ends with that error when nothing here can answer it."""
        if self.server is not None and not self._answering_locally():
            failure = yield from self._from_server(question, history, cancel)
            if failure is None:
                return
            if not self._server_failed(failure):
                yield ErrorEvent(f"{failure} This kiosk has no manuals of its own to answer from; ask again "
                                 "once the server is back.", CentralServerError.__name__)
                return
        yield from self._here(question, history, cancel)

    def _answering_locally(self) -> bool:
        """Within SERVER_RETRY_S of the server's failure, when this machine has manuals (with
        none, every question tries the server again)."""
        return self._local_until is not None and self._clock() < self._local_until and self._has_manuals()

    def _has_manuals(self) -> bool:
        """Whether this machine's own collection holds anything to answer from."""
        from engine.store.health import collection_exists

        if not collection_exists(self.paths, self.collection):
            return False
        try:
            if self.store is None:
                self._open_embedder()
                self.store = self._open_store()
            return self.store.stats()["chunks"] > 0
        except EngineError as exc:
            log.info("no manuals here to answer from: %s", exc)
            return False

    def _from_server(self, question: str, history: Sequence[dict], cancel) -> Iterator[Event]:
        """The server's events; returns its failure's message, or None when it answered."""
        came_back = self._local_until is not None
        try:
            yield from self.server.ask(question, history, cancel)
        except CentralServerError as exc:
            log.warning("the central server failed: %s", exc)
            return str(exc)
        if came_back:
            self._local_until = None
            self._report(ModelOpened(self.server.status()))
        return None

    def _here(self, question: str, history: Sequence[dict], cancel) -> Iterator[Event]:
        """The answer of this machine's own collection and model."""
        try:
            events = self.assistant().ask(question, history, cancel)
        except EngineError as exc:
            yield ErrorEvent(str(exc), type(exc).__name__)
            return
        failure = yield from self._until_remote_failure(events)
        if failure is None:
            return
        if not self.model.fall_back(failure.message):
            yield failure
            return
        try:
            events = self.assistant().ask(question, history, cancel)
        except EngineError as exc:
            yield ErrorEvent(str(exc), type(exc).__name__)
            return
        yield from self._until_remote_failure(events)

    def _until_remote_failure(self, events) -> Iterator[Event]:
        """Yields `events` until the remote engine's error, which is returned instead."""
        try:
            for event in events:
                if self.model.is_remote_failure(event):
                    return event
                yield event
        finally:
            events.close()  # an unfinished stream cancels the model's work and drains it
        return None

    def assistant(self) -> Assistant:
        """The Assistant for the next question, on the model that answers now (its model's
        state is the supervisor's: EngineError while it restarts or when nothing answers)."""
        if self._config is None:
            raise EngineError("The assistant is not configured yet.")
        llm = self.model.ready()
        self._follow_switch()
        if self._assistant is not None and self._assistant.llm is llm:
            return self._assistant
        self._open_embedder()
        if self.store is None:
            self.store = self._open_store()
        self.store.refuse_if_emptied()  # damage left nothing: say so, not "no manuals yet"
        retriever = Retriever(self.store, self._embedder, self._ready_reranker())
        self._assistant = Assistant(retriever, llm, self._config.answer_settings(), self.metrics)
        return self._assistant

    def _open_store(self):
        from engine.store.health import collection_exists
        from engine.store.indexer import open_collection

        if not collection_exists(self.paths, self.collection):
            raise self._no_collection()
        self._store_folder = self.paths.collection(self.collection)
        return open_collection(self.paths, self.collection, self._embedder, read_only=True)

    def _ready_reranker(self):
        wanted = self._config.settings.use_reranker
        shared = self._given[1]
        if shared is not None:
            return shared() if wanted else None
        if wanted != self._reranker_wanted:
            if self._reranker is not None:
                self._reranker.close()
            self._reranker = imported_reranker(self.paths) if wanted else None
            self._reranker_wanted = wanted
        return self._reranker

    def _follow_switch(self) -> None:
        """Between questions: a collection switched to another folder is reopened."""
        if self.store is None or self.paths.collection(self.collection) == self._store_folder:
            return
        log.info("the collection '%s' switched to %s; reopening it", self.collection,
                 self.paths.collection(self.collection))
        store, self.store, self._assistant = self.store, None, None
        store.close()

    def _open_embedder(self):
        from engine.store.indexer import default_embedder

        if self._embedder is None:
            self._embedder = default_embedder(self.paths)
        return self._embedder

    def _no_collection(self) -> EngineError:
        from engine.store.health import missing_error

        error = missing_error(self.paths.collection(self.collection))
        return error if isinstance(error, CollectionDamagedError) else EngineError(NO_MANUALS)

    def collection_version(self) -> str:
        """The open collection's version for the audit log ("" while none is open)."""
        from engine.kiosk.audit import collection_version

        if self.store is None:
            return ""
        try:
            return collection_version(self.store.list_documents(), self.store.embedder_id)
        except EngineError as exc:
            log.info("audit: no collection version (%s)", exc)
            return ""

    def close(self) -> None:
        """Closes the model, the collection, the reranker, the embedder and the server's client."""
        self._assistant = None
        self.model.close()
        if self.server is not None:
            self.server.close()
            self.server = None
        for name in ("store", "_reranker", "_embedder"):
            part = getattr(self, name)
            setattr(self, name, None)
            if part is not None and part not in self._given:
                try:
                    part.close()
                except Exception:  # closing must go on with the other parts
                    log.exception("closing %s failed", name)
        self._reranker_wanted = None

    def __enter__(self) -> AnswerSession:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@contextmanager
def open_assistant(paths: AppPaths, collection: str = DEFAULT_COLLECTION, llm_folder: Path | None = None,
                   provider: str = "auto", settings: AssistantSettings | None = None, metrics=None,
                   use_reranker: bool = True) -> Iterator[Assistant]:
    """A session's Assistant on the local model, opened at once and closed on exit: for the
    evaluation, tests and benchmarks, which read its retriever and settings."""
    config = SessionConfig(Settings(use_reranker=use_reranker), provider, llm_folder, settings,
                           ModelChoice(provider, llm_folder))
    with AnswerSession(paths, collection, metrics=metrics) as session:
        yield session.open(config).assistant()
