"""ModelSupervisor: the one owner of the answering model's life, for the window and the CLI.

    model = ModelSupervisor(paths, report)      # report(record): ModelOpened, Restarting, ...
    model.configure(ModelChoice(provider="cpu", engine_url=url))
    llm = model.open()                          # EngineError when nothing can answer
    llm = model.ready()                         # before each question: reopens, or says it restarts
    model.check()                               # between questions (a timer): restarts a dead process

The rules it keeps, in one place:
- A remote engine (ModelChoice.engine_url) answers when one is set. When it cannot be reached, at
  opening or mid-question, fall_back() says so (EngineUnreachable) and the local model (if one is
  installed) answers for REMOTE_RETRY_S; the first question after that tries the engine again.
- The local model runs in a child process (LLMClient), kept open while the engine answers, so
  that falling back again is at once. It is reopened only when the model or provider changed.
- A dead model process is noticed by check() and restarted at once; a process that keeps dying
  soon after starting is restarted after 1 s, 2 s, 4 s ... (at most RESTART_MAX_S); one that stayed
  up STABLE_S resets that backoff. Meanwhile ready() raises RESTARTING.

A server's model processes are owned by its pool (engine.server.pool: N processes, each restarted
at its next lease, a remote engine tried again at each lease): one supervisor owns one model, so a
server's sessions answer with their slot's model through a GivenModel.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from engine.errors import EngineError, ModelError, RemoteEngineError
from engine.paths import AppPaths

log = logging.getLogger(__name__)

RESTARTING = "The model is restarting; ask again in a moment."
RESTART_MAX_S = 30.0
STABLE_S = 60.0  # a model process up this long resets the restart backoff
# The last answers' KV caches, kept in the model process (engine.llm.prompt_cache): every prompt
# begins with the same rules, and a question asked again on the same passages (a kiosk's common
# question) computes only its answer's header, its text the same word for word. Room for two
# answers of the built-in model at the default length (840 + 192 tokens at 45 KiB a token), one
# at any length; a larger imported model's does not fit, and it keeps none.
APP_PROMPT_CACHE_MIB = 96
REMOTE_RETRY_S = 60.0  # after falling back to the local model, the remote engine is tried again


@dataclass(frozen=True)
class ModelChoice:
    """Which model answers: the remote engine when engine_url is set, else the local model."""

    provider: str = "auto"
    folder: Path | None = None  # a fixed local model folder (tests, kiosks); else `model`'s
    model: str | None = None  # an imported model's name; None: the built-in one
    engine_url: str | None = None
    engine_key: str | None = None
    engine_model: str | None = None  # the engine's model name; None: the first it lists


@dataclass(frozen=True)
class ModelStatus:
    """What the status bar shows once the model is loaded."""

    name: str
    provider: str
    pid: int | None
    folder: Path | None = None  # the model's folder (its manifest names the version)


# -- what the supervisor reports ------------------------------------------------------------

@dataclass(frozen=True)
class ModelOpened:
    status: ModelStatus


@dataclass(frozen=True)
class ModelFailed:
    message: str


@dataclass(frozen=True)
class Restarting:
    message: str  # the model's process died; what to show meanwhile


@dataclass(frozen=True)
class EngineUnreachable:
    message: str  # the remote engine failed: what happened and what answers now


def restart_delay(attempts: int) -> float:
    """Seconds before the next restart after `attempts` failed or short-lived ones: 1, 2, 4 … 30."""
    return min(RESTART_MAX_S, 2.0 ** max(0, attempts - 1))


def _ignore(record) -> None:
    pass


class ModelSupervisor:
    def __init__(self, paths: AppPaths, report: Callable[[object], None] = _ignore):
        self.paths = paths
        self._report = report
        self._choice = ModelChoice()
        self.llm = None  # what answers now: the local LLMClient or a RemoteLLM, loaded
        self._llm_key: tuple | None = None
        self._local = None  # the local LLMClient, once opened (kept while the engine answers)
        self._local_key: tuple | None = None
        self.model_folder: Path | None = None  # the last local model opened, also while it restarts
        self._restart_at: float | None = None  # monotonic time of the next attempt, while restarting
        self._restarts = 0  # attempts since the model was last up for STABLE_S
        self._up_since = 0.0
        self._fallback_until: float | None = None  # monotonic: answering locally until then

    def configure(self, choice: ModelChoice) -> None:
        """Answers with `choice` from the next open(); the remote engine (if any) is tried at once."""
        self._choice = choice
        self._restart_at = None
        self._fallback_until = None

    @property
    def is_remote(self) -> bool:
        from engine.llm.remote import RemoteLLM

        return isinstance(self.llm, RemoteLLM)

    # -- opening --------------------------------------------------------------------------
    def open(self):
        """The model that answers now, opened if it was not, and reported (ModelOpened): the
        remote engine when one is set (unless the local model stands in for it), else the local one."""
        llm = self._open()
        self._report(ModelOpened(self.status()))
        return llm

    def _open(self):
        url = self._choice.engine_url
        if url and not self._answering_locally():
            return self._open_remote(url)
        return self._use(*self._open_local())

    def ready(self):
        """Before a question: the model to answer with. EngineError(RESTARTING) while a dead
        process waits for its restart; a model that failed to open is tried again."""
        if self._restart_at is not None:
            raise EngineError(RESTARTING)
        self._back_to_remote()
        if self.llm is None:  # it failed to open before: a model prepared meanwhile
            self.open()
        return self.llm

    def _open_remote(self, url: str):
        from engine.llm.remote import remote_llm

        choice = self._choice
        wanted = ("remote", url, choice.engine_key, choice.engine_model)
        if self.llm is not None and self._llm_key == wanted:
            return self.llm
        try:
            llm = remote_llm(self.paths, url, choice.engine_key, choice.engine_model).load()
        except RemoteEngineError as exc:
            log.warning("the engine could not be opened: %s", exc)
            if self.fall_back(str(exc)):
                return self.llm
            raise
        log.info("answering with the engine at %s (model %s)", llm.url, llm.model)
        return self._use(llm, wanted)

    def _open_local(self) -> tuple:
        """(the local LLMClient, its key): kept open, so that falling back again is at once."""
        from engine.llm.process import LLMClient
        from engine.models.registry import resolve_llm

        choice = self._choice
        folder = Path(choice.folder) if choice.folder else resolve_llm(self.paths, choice.model)
        key = (folder, choice.provider)
        if self._local is not None and self._local_key == key:
            return self._local, key
        if self._local is not None:
            self._forget_local()
        llm = LLMClient(folder, choice.provider, prompt_cache_mib=APP_PROMPT_CACHE_MIB).load()
        self._local, self._local_key = llm, key
        self.model_folder = folder
        self._up_since = time.monotonic()
        log.info("model %s loaded on %s (process %s)", folder.name, llm.provider, llm.pid)
        return llm, key

    def _use(self, llm, key: tuple):
        """Answers with `llm` from now on; a remote engine given up is closed (the local model
        is kept for the next fallback)."""
        previous = self.llm
        if previous is not None and previous is not llm and previous is not self._local:
            previous.close()
        self.llm, self._llm_key = llm, key
        if not self.is_remote:
            self.model_folder = key[0]
        return llm

    def _forget_local(self) -> None:
        local, self._local, self._local_key = self._local, None, None
        if self.llm is local:
            self.llm, self._llm_key = None, None
        if local is not None:
            local.close()

    # -- the remote engine and its fallback ----------------------------------------------------
    def is_remote_failure(self, event) -> bool:
        """True for the error event of a remote engine that failed mid-question."""
        return getattr(event, "error", None) == RemoteEngineError.__name__ and self.is_remote

    def _answering_locally(self) -> bool:
        return self._fallback_until is not None and time.monotonic() < self._fallback_until

    def fall_back(self, message: str) -> bool:
        """The remote engine failed: says so, and the local model answers for REMOTE_RETRY_S.
        False when no local model can be opened (the remote engine is kept, to try again)."""
        try:
            local, key = self._open_local()
        except EngineError as exc:
            log.warning("no local model to fall back on: %s", exc)
            self._report(EngineUnreachable(f"{message} No local model is installed to answer instead"
                                           f"{'' if isinstance(exc, ModelError) else f' ({exc})'}; "
                                           "ask again once the engine is back."))
            return False
        self._fallback_until = time.monotonic() + REMOTE_RETRY_S
        self._use(local, key)
        self._report(EngineUnreachable(f"{message} Answering with the local model ({key[0].name}) meanwhile."))
        self._report(ModelOpened(self.status()))
        return True

    def _back_to_remote(self) -> None:
        """Once REMOTE_RETRY_S have passed, the next question tries the remote engine again."""
        if self._fallback_until is None or self._answering_locally():
            return
        self._fallback_until = None
        try:
            self._open()
        except EngineError as exc:  # neither answers: the question says why
            log.warning("the engine is still unreachable: %s", exc)
            return
        if self.is_remote:
            self._report(ModelOpened(self.status()))

    # -- restarting a dead model process ------------------------------------------------------
    def check(self) -> None:
        """Between questions: notices a dead model process, and drives its restart."""
        if self._restart_at is not None:
            if time.monotonic() >= self._restart_at:
                self._try_restart()
            return
        if self.llm is None:
            return  # not open (or failed to open: the next question tries again)
        if self.llm.alive():
            if time.monotonic() - self._up_since >= STABLE_S:
                self._restarts = 0
            return
        log.error("the model process %s died; restarting it", getattr(self.llm, "pid", None) or "")
        # at once the first time; a process that keeps dying soon after starting backs off
        self._restart_at = time.monotonic() + (restart_delay(self._restarts) if self._restarts else 0.0)
        self._report(Restarting("The model stopped unexpectedly; restarting…"))
        self.check()

    def _try_restart(self) -> None:
        self._restarts += 1
        if self.llm is not None:
            if self.llm is self._local:
                self._forget_local()
            else:
                self.llm.close()
            self.llm, self._llm_key = None, None
        try:
            self.open()
        except Exception as exc:  # whatever it is, a kiosk keeps trying (a bug's traceback is logged)
            delay = restart_delay(self._restarts)
            log.warning("restarting the model failed (%s); next try in %.0f s", exc, delay,
                        exc_info=not isinstance(exc, EngineError))
            self._restart_at = time.monotonic() + delay
            self._report(Restarting(f"The model could not be restarted ({exc}); trying again in {delay:.0f} s…"))
            return
        self._restart_at = None

    def status(self) -> ModelStatus:
        if self.is_remote:
            return ModelStatus(self.llm.model or self.llm.url, self.llm.provider, None)
        folder, provider = self._llm_key
        return ModelStatus(folder.name, self.llm.provider or provider, self.llm.pid, folder)

    def close(self) -> None:
        """Closes the model's child process and the remote engine's connection."""
        self._restart_at = None
        self._fallback_until = None
        for llm in {id(x): x for x in (self.llm, self._local) if x is not None}.values():
            try:
                llm.close()
            except Exception:  # closing must go on with the other one
                log.exception("closing the model failed")
        self.llm = self._local = None
        self._llm_key = self._local_key = None


class GivenModel:
    """A model its owner opens, restarts and closes (a server pool's slot): a session answers
    with it as it is, with no fallback of its own; the supervisor's API, doing nothing more."""

    model_folder = None

    def __init__(self, llm):
        self.llm = llm

    def configure(self, choice: ModelChoice) -> None:
        pass

    def open(self):
        return self.llm

    def ready(self):
        return self.llm

    def is_remote_failure(self, event) -> bool:
        return False

    def fall_back(self, message: str) -> bool:
        return False

    def check(self) -> None:
        pass

    def close(self) -> None:
        pass  # its owner's
