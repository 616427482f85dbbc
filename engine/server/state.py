"""ServerState: what every route shares, made once per server.

    state.pool            the LLM processes (or a remote engine's slots) and their queue
    state.embedder        the built-in embedder (one ONNX session; thread-safe)
    state.metrics         the Prometheus metrics of answers and requests
    state.answering(name, llm)    an AnswerSession of a collection for one request, answering with llm
    state.documents(name) the collection's documents

Loading (the embedder, then each LLM process) runs in a background thread, so that /health
answers at once and /ready says when the server can serve.

With config.engine_url the slots hold RemoteLLMs (engine.llm.remote) and no LLM process is
started: generation goes to that engine, while retrieval, the gate and the embedder stay here.
An engine that cannot be reached does not keep the server from being ready: each request tries
it again and, while it is away, gets a 502 naming it.
"""

from __future__ import annotations

import logging
import threading
from contextlib import contextmanager
from pathlib import Path

from engine.answer.metrics import Metrics
from engine.errors import EngineError, RemoteEngineError
from engine.server.config import ServerConfig
from engine.server.pool import LLMPool
from engine.server.replies import CollectionNotFound, NotReady

log = logging.getLogger(__name__)


class ServerState:
    def __init__(self, config: ServerConfig, llm_folder: Path | None, make_llm=None, embedder=None):
        self.config = config
        self.paths = config.paths
        self.llm_folder = None if config.engine_url else Path(llm_folder)  # a remote engine needs none
        retried = (RemoteEngineError,) if config.engine_url else ()
        # only our own model processes take several requests at once (an engine's slot sends one)
        streams = config.llm_streams if make_llm is None and not config.engine_url else 1
        self.pool = LLMPool(make_llm or self._llm_maker(), config.llm_workers, config.queue_size,
                            config.queue_timeout_s, retried_at_lease=retried, streams=streams)
        self.metrics = Metrics(self.pool)  # with the server's families: requests, queue
        self.embedder = None
        self._given_embedder = embedder  # a loaded one (tests); None: the built-in one, loaded here
        self.load_error: str | None = None  # why loading failed, for /ready
        self._stores: dict[str, object] = {}  # collection -> the IndexStore of listings
        self._idle: dict[str, list] = {}  # collection -> AnswerSessions no request uses now
        self._stores_lock = threading.Lock()
        self._loader: threading.Thread | None = None
        self._shared_reranker = None  # loaded at the first question; False when none is imported

    def _llm_maker(self):
        """What makes one slot's unloaded LLM: a RemoteLLM on the engine, else a model process."""
        config = self.config
        if config.engine_url:
            from engine.llm.remote import remote_llm

            return lambda: remote_llm(self.paths, config.engine_url, config.engine_key, config.engine_model)
        from engine.encoders.onnx_session import physical_cores
        from engine.llm.process import LLMClient

        threads = max(1, (config.threads or physical_cores()) // config.llm_workers)  # the workers share them
        cache = config.prompt_cache_mib // config.llm_workers  # and the prompt cache
        return lambda: LLMClient(self.llm_folder, config.provider, threads, cache, config.llm_streams)

    @property
    def model_name(self) -> str:
        """What /v1/models and the replies call the model: the engine's own name for it (known
        once a slot has reached the engine), else --model's name or the model's folder."""
        if self.config.engine_url:
            return getattr(self.pool.any_llm, "model", None) or self.config.engine_model or "remote"
        return self.config.model_name or self.llm_folder.name

    # -- lifetime -------------------------------------------------------------------------
    def start_loading(self) -> None:
        self._loader = threading.Thread(target=self._load, name="offline-assistant-load", daemon=True)
        self._loader.start()

    def wait_loaded(self, timeout: float | None = None) -> bool:
        if self._loader is not None:
            self._loader.join(timeout)
        return self.ready

    def _load(self) -> None:
        from engine.store.indexer import default_embedder

        try:
            self.embedder = self._given_embedder or default_embedder(self.paths)
            self.pool.load()
            if self.config.engine_url:
                log.info("Generating on the engine at %s (model %s)", self.config.engine_url, self.model_name)
        except Exception as exc:  # told by /ready and the log; the server keeps running
            self.load_error = str(exc) if isinstance(exc, EngineError) else f"{type(exc).__name__}: {exc}"
            log.error("The server could not load its models: %s", self.load_error)

    @property
    def ready(self) -> bool:
        return self.embedder is not None and self.pool.ready

    def require_ready(self) -> None:
        """NotReady (503) until the embedder and every LLM process are loaded."""
        if not self.ready:
            self._require_embedder()
            raise NotReady(self.load_error or "The server is still loading its model processes; "
                           "try again in a moment (see /ready).")

    def require_embedder(self):
        """The loaded embedder, or NotReady (503)."""
        return self._require_embedder()

    def close(self) -> None:
        self.pool.close()
        with self._stores_lock:
            stores, self._stores = list(self._stores.values()), {}
            sessions, self._idle = [s for idle in self._idle.values() for s in idle], {}
        for part in sessions + stores:
            part.close()
        for encoder in (self.embedder, self._shared_reranker):
            if encoder and encoder is not self._given_embedder:  # a given one is its owner's
                encoder.close()

    # -- collections ----------------------------------------------------------------------
    def check_collection(self, name: str | None) -> str:
        """The collection's name (the server's default for None); CollectionNotFound if none."""
        from engine.store.health import collection_exists

        name = name or self.config.collection
        self.paths.collection(name)  # EngineError for a name that is a path
        if not collection_exists(self.paths, name):
            raise CollectionNotFound(f"No collection named '{name}'; index documents into it first "
                                     "(offline-assistant-cli index --collection NAME FILES).")
        return name

    def store(self, name: str):
        """The collection's read-only store for listings, shared by them under the lock."""
        from engine.store.indexer import open_collection

        name = self.check_collection(name)
        with self._stores_lock:
            store = self._stores.get(name)
            if store is None:
                store = open_collection(self.paths, name, self._require_embedder(), read_only=True)
                store.refuse_if_emptied()
                self._stores[name] = store
            return store

    @contextmanager
    def answering(self, name: str, llm):
        """An AnswerSession of collection `name` for one request, answering with `llm` (a leased
        slot's model, or a LeasedLLM), with the settings file as it is now. A session serves one
        request at a time, so its SQLite handle is never shared; idle ones are kept for the next
        request (their dense index is the one the collection's readers share)."""
        from engine.answer.session import AnswerSession, SessionConfig
        from engine.config import load_settings
        from engine.llm.supervisor import GivenModel

        name = self.check_collection(name)
        with self._stores_lock:
            idle = self._idle.setdefault(name, [])
            session = idle.pop() if idle else None
        if session is None:
            session = AnswerSession(self.paths, name, metrics=self.metrics, model=GivenModel(None),
                                    embedder=self._require_embedder(), reranker=self._reranker)
        session.model.llm = llm
        try:
            yield session.open(SessionConfig(load_settings(self.paths.settings_file), central=False))
        finally:
            session.model.llm = None
            with self._stores_lock:
                self._idle.setdefault(name, []).append(session)

    def _reranker(self):
        """The imported reranker, loaded once for every session (None when none is, or when the
        server's config turns it off)."""
        from engine.answer.assistant import imported_reranker

        if self.config.use_reranker and self._shared_reranker is None:
            with self._stores_lock:
                if self._shared_reranker is None:
                    self._shared_reranker = imported_reranker(self.paths) or False  # False: none is imported
        return self._shared_reranker or None

    def documents(self, name: str) -> list:
        store = self.store(name)
        with self._stores_lock:  # the listing store is shared by every listing request
            return store.list_documents()

    def _require_embedder(self):
        if self.embedder is None:
            raise NotReady(self.load_error
                           or "The server is still loading its models; try again in a moment (see /ready).")
        return self.embedder
