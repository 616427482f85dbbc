"""LLMClient: LocalLLM in a separate process, with the same API.

onnxruntime-genai holds Python's GIL while it prefills and decodes, which would freeze every
other thread of the caller (the GUI included). So the model lives in a child process, loaded
once and kept for many requests; the caller's thread waits on a pipe, which releases the GIL.

Protocol: one JSON object per message, sent with Connection.send_bytes (never pickle).

  caller -> child
    {"op": "load", "model_dir": str, "provider": str, "threads": int | None, "prompt_cache_mib": int}
    {"op": "generate", "id": int, "messages": [...], "params": GenerationParams as dict}
    {"op": "count_tokens", "id": int, "text": str}   only for a folder without tokenizer.json
    {"op": "cancel", "id": int}        stops that generation before its next token
    {"op": "close"}                    the child exits (also stops a generation in progress)
  child -> caller
    {"type": "loaded", "provider": str, "context_length": int, "pid": int,
     "template_overhead": [per chat, per message]}    what the chat template adds, in tokens
    {"type": "piece", "id": int, "text": str}
    {"type": "done", "id": int, "stats": GenerationStats as dict}
    {"type": "count", "id": int, "tokens": int}
    {"type": "error", "id": int | None, "error": EngineError subclass name, "message": str}

One request runs at a time; the caller reads a request's replies to its "done" or "error".

Tokens are counted in the caller with the folder's tokenizer.json (engine.llm.tokens), which
gives the model's own counts, so building a prompt costs no trip through the pipe. The caller
fits the prompt to the context; the child refuses one that does not fit, and never cuts it.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import traceback
from collections.abc import Callable, Iterator, Sequence
from multiprocessing.connection import Connection
from pathlib import Path

from engine import errors
from engine.child_process import ChildDied, JsonChild, quiet_child
from engine.errors import EngineError, EngineProcessError, GenerationError
from engine.llm.local import Message
from engine.llm.tokens import TokenCounter
from engine.types import CancelFlag, GenerationParams, GenerationResult, GenerationStats, GenerationStream

_POLL_S = 0.02  # how often a waiting caller looks at its cancel flag


# -- caller side --------------------------------------------------------------------------
class LLMClient:
    """Same API as LocalLLM; the model runs in a child process that is restarted if it dies.

    Use it from one thread at a time (the app's LLM worker thread). Starting a request while
    an earlier stream is unfinished cancels that stream first.
    """

    def __init__(self, model_dir: str | Path, provider: str = "auto", threads: int | None = None,
                 prompt_cache_mib: int = 0):
        self.model_dir = Path(model_dir)
        self.requested_provider = provider
        self.threads = threads  # the child's onnxruntime threads; None: its physical cores
        self.prompt_cache_mib = prompt_cache_mib  # LocalLLM's: recent greedy answers' KV caches kept
        self.provider: str | None = None
        self.context_length = 0
        self.template_overhead = (0, 0)  # what the chat template adds: per chat, per message
        self.token_counter: TokenCounter | None = None  # None: the child counts
        self._child: _Child | None = None
        self._loaded = False
        self._ids = itertools.count(1)
        self._active: _Request | None = None  # the request whose replies are still coming

    @property
    def pid(self) -> int | None:
        """The child's process id, while it runs."""
        return self._child.pid if self._child is not None else None

    def alive(self) -> bool:
        """Whether the child process runs (False once it died or was killed, or is closed)."""
        return self._child is not None and self._child.alive()

    # -- lifetime -------------------------------------------------------------------------
    def load(self) -> "LLMClient":
        if self._loaded and self._child is not None and self._child.alive():
            return self
        self._restart()
        if self.token_counter is None:
            self.token_counter = TokenCounter.from_folder(self.model_dir)
        self._loaded = True
        return self

    def close(self) -> None:
        self._loaded = False
        self._active = None
        child, self._child = self._child, None
        if child is not None:
            child.stop()

    def __enter__(self) -> "LLMClient":
        return self.load()

    def __exit__(self, *exc) -> None:
        self.close()

    # -- requests -------------------------------------------------------------------------
    def count_tokens(self, text: str) -> int:
        """Counted here, with the model folder's tokenizer; by the child only for a folder
        that has none in tokenizers' format."""
        if not self._loaded:
            raise GenerationError("The model is not loaded; call load() first.")
        if self.token_counter is not None:
            return self.token_counter.count(text)
        return self._count_in_child(text)

    def template_tokens(self, messages: int) -> int:
        """What the chat template adds to a chat of that many messages (LocalLLM's)."""
        per_chat, per_message = self.template_overhead
        return per_chat + per_message * messages

    def _count_in_child(self, text: str) -> int:
        request = self._begin(None)
        try:
            reply = self._call(request, {"op": "count_tokens", "id": request.id, "text": text})
        finally:
            self._end(request)
        return int(reply["tokens"])

    def stream(
        self,
        messages: Sequence[Message],
        *,
        max_new_tokens: int = 256,
        temperature: float = 0.0,
        top_p: float = 1.0,
        top_k: int = 50,
        seed: int | None = None,
        cancel: CancelFlag | None = None,
    ) -> GenerationStream:
        params = GenerationParams(max_new_tokens, temperature, top_p, top_k, seed)
        return GenerationStream(self._run(list(messages), params, cancel))

    def generate(self, messages: Sequence[Message], **kwargs) -> GenerationResult:
        return self.stream(messages, **kwargs).collect()

    def _run(self, messages, params: GenerationParams, cancel) -> Iterator[str | GenerationStats]:
        request = self._begin(cancel)
        child = request.child
        finished = False
        try:
            child.send({"op": "generate", "id": request.id, "messages": messages,
                        "params": params.to_dict()})
            while True:
                if request.superseded:
                    finished = True
                    raise GenerationError("This answer was stopped: a newer request started.")
                reply = child.receive(request.forward_cancel)
                if reply.get("id") != request.id:
                    continue  # a late reply to an abandoned request
                if reply["type"] == "piece":
                    if not request.forward_cancel():
                        yield reply["text"]
                    continue
                finished = True
                if reply["type"] == "error":
                    raise _error_from(reply)
                yield request.final_stats(reply["stats"])
                return
        except EngineProcessError:
            finished = True
            self._forget(child)
            raise
        finally:
            if not finished:
                self._abandon(child, request)
            self._end(request)

    def _call(self, request: "_Request", message: dict) -> dict:
        """A request with a single reply."""
        try:
            request.child.send(message)
            while True:
                reply = request.child.receive()
                if reply.get("id") != request.id:
                    continue
                if reply["type"] == "error":
                    raise _error_from(reply)
                return reply
        except EngineProcessError:
            self._forget(request.child)
            raise

    def _begin(self, cancel: CancelFlag | None) -> "_Request":
        """A new request; an unfinished earlier stream is cancelled and left to end."""
        earlier, self._active = self._active, None
        if earlier is not None:
            try:
                earlier.supersede()
            except EngineProcessError:
                self._forget(earlier.child)  # restarted below
        request = _Request(self._ready_child(), next(self._ids), cancel)
        self._active = request
        return request

    def _end(self, request: "_Request") -> None:
        if self._active is request:
            self._active = None

    # -- the child ------------------------------------------------------------------------
    def _ready_child(self) -> "_Child":
        if not self._loaded:
            raise GenerationError("The model is not loaded; call load() first.")
        if self._child is None or not self._child.alive():
            self._restart()  # it died between requests: nothing was lost, start afresh
        return self._child

    def _restart(self) -> None:
        if self._child is not None:
            self._child.stop()
            self._child = None
        child = _Child.start()
        try:
            child.send({"op": "load", "model_dir": str(self.model_dir),
                        "provider": self.requested_provider, "threads": self.threads,
                        "prompt_cache_mib": self.prompt_cache_mib})
            reply = child.receive()
            if reply["type"] == "error":
                raise _error_from(reply)
        except BaseException:
            child.stop()
            raise
        self.provider = reply["provider"]
        self.context_length = int(reply["context_length"])
        self.template_overhead = tuple(int(n) for n in reply["template_overhead"])
        self._child = child

    def _abandon(self, child: "_Child", request: "_Request") -> None:
        """The consumer stopped early: stop the child's work and read up to its end, so the
        pipe is clean for the next request."""
        if request.superseded:
            return  # the newer request reads past its replies
        try:
            request.send_cancel()
            while True:
                reply = child.receive()
                if reply.get("id") == request.id and reply["type"] in ("done", "error"):
                    return
        except EngineProcessError:
            self._forget(child)  # the next request starts a fresh child

    def _forget(self, child: "_Child") -> None:
        if self._child is child:
            self._child = None
        if self._active is not None and self._active.child is child:
            self._active = None
        child.stop()


class _Request:
    """One generation request: forwards the caller's cancel flag to the child, once."""

    def __init__(self, child: "_Child", request_id: int, cancel: CancelFlag | None):
        self.id = request_id
        self.child = child
        self._cancel = cancel
        self.cancelled = False
        self.superseded = False

    def forward_cancel(self) -> bool:
        if not self.cancelled and self._cancel is not None and self._cancel.is_set():
            self.send_cancel()
        return self.cancelled

    def send_cancel(self) -> None:
        if not self.cancelled:
            self.cancelled = True
            self.child.send({"op": "cancel", "id": self.id})

    def supersede(self) -> None:
        self.superseded = True
        self.send_cancel()

    def final_stats(self, stats: dict) -> GenerationStats:
        result = GenerationStats(**stats)
        # the caller saw no text after its cancel, whatever the child had got to
        return dataclasses.replace(result, finish_reason="cancelled") if self.cancelled else result


class _Child(JsonChild):
    """The model's process, with the caller's errors."""

    @classmethod
    def start(cls) -> "_Child":
        try:
            return super().start(child_main, "offline-assistant-llm")
        except OSError as exc:
            raise EngineProcessError(f"The model process could not be started ({exc}).") from exc

    def send(self, message: dict) -> None:
        self._require_open()
        try:
            super().send(message)
        except ChildDied as died:
            raise _lost(died) from died

    def receive(self, on_wait: Callable[[], object] | None = None) -> dict:
        """The next message; calls on_wait every _POLL_S while waiting (GIL released)."""
        self._require_open()
        while True:
            if on_wait is not None:
                on_wait()
            try:
                reply = self.poll(_POLL_S)
            except ChildDied as died:
                raise _lost(died) from died
            if reply is not None:
                return reply


    def _require_open(self) -> None:
        if self.conn is None:
            raise EngineProcessError("The model was closed; load it again.")


def _lost(died: ChildDied) -> EngineProcessError:
    return EngineProcessError(
        f"The model process stopped unexpectedly ({died}); it may have run out of memory. "
        "The answer was lost; ask again and the model will be started afresh."
    )


def _error_from(reply: dict) -> EngineError:
    """The same EngineError subclass, with the same message, as was raised in the child."""
    cls = getattr(errors, str(reply.get("error")), None)
    message = reply.get("message", "The model process reported an error.")
    if not (isinstance(cls, type) and issubclass(cls, EngineError)):
        cls = EngineError
    try:
        return cls(message)
    except TypeError:  # a subclass that needs more than a message
        return EngineError(message)





# -- child side ---------------------------------------------------------------------------
def child_main(conn: Connection) -> None:
    """The child's loop: serve requests until told to close or the caller goes away."""
    quiet_child()
    llm = None
    try:
        while True:
            try:
                request = _receive(conn)
            except EOFError:
                return
            op = request.get("op")
            if op == "close":
                return
            if op == "load":
                llm = _serve_load(conn, request, llm)
            elif op == "generate":
                if _serve_generate(conn, llm, request):
                    return
            elif op == "count_tokens":
                _serve_count(conn, llm, request)
            # a "cancel" that arrives after its generation ended needs nothing
    except OSError:
        return  # the caller's end is gone: nobody is left to answer
    finally:
        if llm is not None:
            llm.close()
        conn.close()





def _serve_load(conn: Connection, request: dict, llm):
    from engine.llm.local import LocalLLM

    if llm is not None:
        llm.close()
    try:
        llm = LocalLLM(request["model_dir"], request.get("provider", "auto"), request.get("threads"),
                       request.get("prompt_cache_mib", 0)).load()
    except Exception as exc:
        _send(conn, _error_reply(None, exc))
        return None
    _send(conn, {"type": "loaded", "provider": llm.provider, "context_length": llm.context_length,
                 "pid": os.getpid(), "template_overhead": list(llm.template_overhead)})
    return llm


def _serve_generate(conn: Connection, llm, request: dict) -> bool:
    """Streams one answer. Returns True when the caller asked the child to close meanwhile."""
    request_id = request["id"]
    flag = _PipeCancel(conn, request_id)
    try:
        if llm is None:
            raise GenerationError("The model is not loaded; call load() first.")
        stream = llm.stream(request["messages"], cancel=flag, **request["params"])
        for piece in stream:
            _send(conn, {"type": "piece", "id": request_id, "text": piece})
        _send(conn, {"type": "done", "id": request_id, "stats": stream.stats.to_dict()})
    except OSError:
        raise
    except Exception as exc:
        _send(conn, _error_reply(request_id, exc))
    return flag.closing


def _serve_count(conn: Connection, llm, request: dict) -> None:
    try:
        if llm is None:
            raise GenerationError("The model is not loaded; call load() first.")
        tokens = llm.count_tokens(request["text"])
    except Exception as exc:
        _send(conn, _error_reply(request["id"], exc))
        return
    _send(conn, {"type": "count", "id": request["id"], "tokens": tokens})


class _PipeCancel:
    """Checked once per token: a message from the caller during a generation means stop."""

    def __init__(self, conn: Connection, request_id: int):
        self._conn = conn
        self._id = request_id
        self._set = False
        self.closing = False

    def is_set(self) -> bool:
        while not self._set and self._conn.poll():
            try:
                message = _receive(self._conn)
            except EOFError:
                message = {"op": "close"}  # the caller is gone
            if message.get("op") == "close":
                self.closing = True
            self._set = self.closing or message.get("id") == self._id
        return self._set


def _error_reply(request_id: int | None, exc: Exception) -> dict:
    if isinstance(exc, EngineError):
        return {"type": "error", "id": request_id, "error": type(exc).__name__,
                "message": str(exc)}
    traceback.print_exc()  # a bug, not a user error: keep the details on stderr
    return {"type": "error", "id": request_id, "error": "EngineError",
            "message": f"The model failed unexpectedly ({type(exc).__name__}: {exc})."}


def _send(conn: Connection, message: dict) -> None:
    conn.send_bytes(json.dumps(message).encode("utf-8"))


def _receive(conn: Connection) -> dict:
    return json.loads(conn.recv_bytes())
