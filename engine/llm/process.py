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

The child takes several generations at a time, and they take turns a piece at a time: a token,
or a piece of a prompt (so a long prompt going in does not stall the others' text; two prompts
go in one after the other). The app
sends one at a time (a new request cancels an unfinished one); a server's pool leases each
process to `streams` requests at once, from as many threads. Each thread reads the replies of its
own request: whichever waits reads the pipe for all, and leaves each reply with its request.

Tokens are counted in the caller with the folder's tokenizer.json (engine.llm.tokens), which
gives the model's own counts, so building a prompt costs no trip through the pipe. The caller
fits the prompt to the context; the child refuses one that does not fit, and never cuts it.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import threading
import traceback
from collections import deque
from collections.abc import Callable, Collection, Iterator, Sequence
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

    With streams=1 (the app's), use it from one thread at a time: starting a request while an
    earlier stream is unfinished cancels that stream first. With more (a server's pool), up to
    that many threads stream at once, and the child answers them in turns.
    """

    def __init__(self, model_dir: str | Path, provider: str = "auto", threads: int | None = None,
                 prompt_cache_mib: int = 0, streams: int = 1):
        self.model_dir = Path(model_dir)
        self.requested_provider = provider
        self.threads = threads  # the child's onnxruntime threads; None: its physical cores
        self.prompt_cache_mib = prompt_cache_mib  # LocalLLM's: recent greedy answers' KV caches kept
        # requests at once, from as many threads (a server's); 1: a new one cancels an unfinished one
        self.streams = streams
        self.provider: str | None = None
        self.context_length = 0
        self.template_overhead = (0, 0)  # what the chat template adds: per chat, per message
        self.token_counter: TokenCounter | None = None  # None: the child counts
        self._child: _Child | None = None
        self._loaded = False
        self._ids = itertools.count(1)
        self._active: _Request | None = None  # streams == 1: the request whose replies are still coming
        self._lock = threading.Lock()  # the child's restart and the active request, among threads

    @property
    def pid(self) -> int | None:
        """The child's process id, while it runs."""
        return self._child.pid if self._child is not None else None

    def alive(self) -> bool:
        """Whether the child process runs (False once it died or was killed, or is closed)."""
        return self._child is not None and self._child.alive()

    # -- lifetime -------------------------------------------------------------------------
    def load(self) -> "LLMClient":
        with self._lock:  # a server's threads lease one client at once
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
                    raise GenerationError("This answer was stopped: a newer request started.")
                reply = child.receive(request.id, request.forward_cancel)
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
                self._abandon(request)
            self._end(request)

    def _call(self, request: "_Request", message: dict) -> dict:
        """A request with a single reply."""
        try:
            request.child.send(message)
            reply = request.child.receive(request.id)
            if reply["type"] == "error":
                raise _error_from(reply)
            return reply
        except EngineProcessError:
            self._forget(request.child)
            raise

    def _begin(self, cancel: CancelFlag | None) -> "_Request":
        """A new request; with one stream, an unfinished earlier one is cancelled and left to end."""
        with self._lock:
            earlier, self._active = self._active, None
        if earlier is not None:
            try:
                earlier.supersede()
            except EngineProcessError:
                self._forget(earlier.child)  # restarted below
        with self._lock:
            request = _Request(self._ready_child(), next(self._ids), cancel)
            if self.streams == 1:
                self._active = request
        request.child.expect(request.id)
        return request

    def _end(self, request: "_Request") -> None:
        request.child.forget(request.id)
        with self._lock:
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
            reply = child.receive(None)
            if reply["type"] == "error":
                raise _error_from(reply)
        except BaseException:
            child.stop()
            raise
        self.provider = reply["provider"]
        self.context_length = int(reply["context_length"])
        self.template_overhead = tuple(int(n) for n in reply["template_overhead"])
        self._child = child

    def _abandon(self, request: "_Request") -> None:
        """The consumer stopped early: the child stops that generation before its next token;
        its last replies are dropped as they come (_end forgets the request)."""
        try:
            request.send_cancel()
        except EngineProcessError:
            self._forget(request.child)  # the next request starts a fresh child

    def _forget(self, child: "_Child") -> None:
        with self._lock:
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
    """The model's process, with the caller's errors, and the replies of its requests kept apart
    for the threads that wait on them."""

    def __init__(self, process, conn: Connection):
        super().__init__(process, conn)
        self._replies: dict[int | None, deque] = {None: deque()}  # request id -> its replies not read yet
        self._turns = threading.Condition()  # guards _replies, _reading, _lost
        self._reading = False  # a thread is reading the pipe for all
        self._lost: EngineProcessError | None = None
        self._sending = threading.Lock()

    @classmethod
    def start(cls) -> "_Child":
        try:
            return super().start(child_main, "offline-assistant-llm")
        except OSError as exc:
            raise EngineProcessError(f"The model process could not be started ({exc}).") from exc

    def send(self, message: dict) -> None:
        self._require_open()
        try:
            with self._sending:
                super().send(message)
        except ChildDied as died:
            raise _lost(died) from died

    def expect(self, request_id: int) -> None:
        with self._turns:
            self._replies.setdefault(request_id, deque())

    def forget(self, request_id: int) -> None:
        """Its replies still to come are dropped."""
        with self._turns:
            self._replies.pop(request_id, None)

    def receive(self, request_id: int | None, on_wait: Callable[[], object] | None = None) -> dict:
        """The next reply to `request_id` (None: to a load); calls on_wait every _POLL_S while
        waiting (GIL released). The waiting threads take turns reading the pipe for all."""
        with self._turns:
            while True:
                if on_wait is not None:
                    on_wait()
                self._require_open()
                if self._replies.get(request_id):
                    return self._replies[request_id].popleft()
                if self._lost is not None:
                    raise self._lost
                if self._reading:
                    self._turns.wait(_POLL_S)
                else:
                    self._read_for_all()

    def _read_for_all(self) -> None:
        """One look at the pipe, the lock let go meanwhile; the reply goes to its request."""
        self._reading = True
        self._turns.release()
        reply = lost = None
        try:
            reply = self.poll(_POLL_S)
        except ChildDied as died:
            lost = _lost(died)
        finally:
            self._turns.acquire()
            self._reading = False
            self._turns.notify_all()
        self._lost = self._lost or lost
        if reply is not None and reply.get("id") in self._replies:
            self._replies[reply.get("id")].append(reply)


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
    """The child's loop: serve requests until told to close or the caller goes away. The
    generations under way take turns a piece at a time (a token, or a piece of a prompt), so a
    request that comes while others are answered starts at once, and a long prompt does not
    stall their text (the server's processes take several at a time)."""
    quiet_child()
    llm = None
    inbox = _Inbox(conn)
    streams: dict[int, _Stream] = {}
    try:
        while not inbox.closing:
            inbox.read(block=not streams)
            while inbox.waiting and not inbox.closing:
                request = inbox.waiting.popleft()
                op = request.get("op")
                if op == "load":
                    llm = _serve_load(conn, request, llm)
                elif op == "generate":  # first in turn: its prompt goes in before the others' next tokens
                    streams = {request["id"]: _Stream(llm, request, _Flag(inbox, request["id"])), **streams}
                elif op == "count_tokens":
                    _serve_count(conn, llm, request)
            for request_id in _this_round(streams, inbox.cancelled):
                if not inbox.closing and not streams[request_id].step(conn):
                    del streams[request_id]
            inbox.keep_cancels_of(streams)
    except OSError:
        return  # the caller's end is gone: nobody is left to answer
    finally:
        if llm is not None:
            llm.close()
        conn.close()


def _this_round(streams: dict[int, "_Stream"], cancelled: Collection[int] = ()) -> list[int]:
    """The generations that take a turn now: every one writing its text, and of those still
    taking their prompts in, the one that came first (ids grow with arrival), and any cancelled
    (its turn ends it at once). Two prompts going in by turns would both finish as late as the
    second would alone; writing text is never held."""
    prompting = [i for i, stream in streams.items() if stream.prompting and i not in cancelled]
    first = min(prompting, default=None)
    return [i for i in streams if i not in prompting or i == first]


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


class _Stream:
    """One generation, advanced a piece at a time."""

    def __init__(self, llm, request: dict, cancel: "_Flag"):
        self.id = request["id"]
        self.prompting = True  # until its first text: its prompt (or the first tokens) going in
        self._error: Exception | None = None
        if llm is None:
            self._error = GenerationError("The model is not loaded; call load() first.")
            return
        self._stream = llm.stream(request["messages"], cancel=cancel, **request["params"])
        self._pieces = self._stream.turns()

    def step(self, conn: Connection) -> bool:
        """Sends the next piece (nothing for a piece of its prompt); False once the generation
        ended (its done or error sent)."""
        if self._error is None:
            try:
                if text := next(self._pieces):
                    self.prompting = False
                    _send(conn, {"type": "piece", "id": self.id, "text": text})
                return True
            except StopIteration:
                _send(conn, {"type": "done", "id": self.id, "stats": self._stream.stats.to_dict()})
                return False
            except OSError:
                raise
            except Exception as exc:
                self._error = exc
        _send(conn, _error_reply(self.id, self._error))
        return False


def _serve_count(conn: Connection, llm, request: dict) -> None:
    try:
        if llm is None:
            raise GenerationError("The model is not loaded; call load() first.")
        tokens = llm.count_tokens(request["text"])
    except Exception as exc:
        _send(conn, _error_reply(request["id"], exc))
        return
    _send(conn, {"type": "count", "id": request["id"], "tokens": tokens})


class _Inbox:
    """The caller's messages, read whenever the child looks: between tokens and between a
    prompt's pieces. A cancel or a close takes effect at once; the rest wait for the loop."""

    def __init__(self, conn: Connection):
        self._conn = conn
        self.waiting: deque[dict] = deque()
        self.cancelled: set = set()
        self.closing = False

    def read(self, block: bool = False) -> None:
        if block and not self.waiting:
            self._take(self._next())
        while not self.closing and self._conn.poll():
            self._take(self._next())

    def keep_cancels_of(self, running: Collection[int]) -> None:
        """Forgets the cancels of generations that ended (one may come after its end) and of
        none at all, keeping those of the running and the waiting ones: over weeks the set
        would otherwise grow by each late cancel."""
        live = set(running) | {m.get("id") for m in self.waiting if m.get("op") == "generate"}
        self.cancelled &= live

    def _next(self) -> dict:
        try:
            return _receive(self._conn)
        except EOFError:
            return {"op": "close"}  # the caller is gone

    def _take(self, message: dict) -> None:
        op = message.get("op")
        if op == "cancel":
            self.cancelled.add(message.get("id"))
        elif op == "close":
            self.closing = True
        else:
            self.waiting.append(message)


class _Flag:
    """A generation's cancel flag: set by a cancel of its request, or by the child closing."""

    def __init__(self, inbox: _Inbox, request_id: int):
        self._inbox = inbox
        self._id = request_id

    def is_set(self) -> bool:
        self._inbox.read()
        return self._inbox.closing or self._id in self._inbox.cancelled


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
