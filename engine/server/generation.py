"""The generation routes: the simple API this project grew from (/generate, /stream_generate)
and OpenAI's (/v1/models, /v1/chat/completions), on the server's LLM pool.

Every generation takes a place in the pool's queue in the handler (429 at once when it is
full), then runs in a thread of its own (engine.server.bridge) with a cancel flag that the
model process checks before each token: a client that goes away stops its generation there.
A streamed request waits for its first piece before it answers, so that a refused prompt or a
queue timeout still gets its own HTTP status; an error after that ends the stream with an
error event (SSE) or an error line (plain text).
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, Field

from engine.errors import EngineError, GenerationError
from engine.llm import DEFAULT_SYSTEM
from engine.server.bridge import iterate_in_thread
from engine.server.replies import NotReady, PromptTooLong, body_for, reply_for

log = logging.getLogger(__name__)
router = APIRouter()

_DISCONNECT_POLL_S = 0.1  # how often a request still waiting for its model looks at its client
_MAX_STOPS = 4  # as OpenAI


# -- request and reply shapes ---------------------------------------------------------------
class GenerateRequest(BaseModel):
    prompt: str = Field(description="The text to answer; it goes to the model as one user message "
                                    "after a short default system message, as `offline-assistant-cli generate`.")
    max_new_tokens: int = Field(256, ge=1, description="At most this many new tokens; more than the "
                                                       "server's limit (--max-new-tokens) is cut to it.")
    temperature: float = Field(0.0, ge=0.0, le=2.0, description="0 answers greedily: the same text every time.")


class GenerateResponse(BaseModel):
    generated_text: str
    tokens_generated: int
    finish_reason: str = Field(description='"stop" (the model ended), "length" (max_new_tokens reached).')


class TextPart(BaseModel):
    type: Literal["text"] = "text"
    text: str


class ChatMessage(BaseModel):
    role: Literal["system", "developer", "user", "assistant"] = Field(
        description='"developer" is read as "system", as OpenAI does for its newer models.')
    content: str | list[TextPart]

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content)


class StreamOptions(BaseModel):
    include_usage: bool = False


class ChatRequest(BaseModel):
    """OpenAI's chat completion request. Fields this server does not know are ignored, as
    OpenAI's clients send some (user, logprobs, ...)."""

    model: str | None = Field(None, description="Any name is accepted: this server serves one model "
                                                "(/v1/models), and clients often send a fixed name.")
    messages: list[ChatMessage] = Field(min_length=1)
    max_tokens: int | None = Field(None, ge=1, description="Cut to the server's limit; default: that limit.")
    max_completion_tokens: int | None = Field(None, ge=1, description="The newer name of max_tokens; wins over it.")
    temperature: float | None = Field(None, ge=0.0, le=2.0, description="Default 1, as OpenAI; 0 is greedy.")
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    seed: int | None = Field(None, description="With a temperature, the same seed gives the same text.")
    stop: str | list[str] | None = Field(None, description="Up to 4 strings; the text is cut before the "
                                                           "first one found, with finish_reason \"stop\".")
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    n: int | None = Field(1, description="Only 1.")


# -- one generation, run in a thread --------------------------------------------------------
@dataclass(frozen=True)
class Job:
    messages: list[dict]
    max_new_tokens: int
    temperature: float
    top_p: float = 1.0
    seed: int | None = None
    stop: tuple[str, ...] = ()


@dataclass(frozen=True)
class Finished:
    """The last item of a generation: its stats (engine.types.GenerationStats) and why it ended."""
    stats: object
    finish_reason: str

    @property
    def usage(self) -> dict:
        prompt, completion = self.stats.prompt_tokens, self.stats.new_tokens
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
                "prompt_tokens_details": {"cached_tokens": self.stats.cached_tokens}}


class StopCut:
    """Cuts a stream of pieces before the first stop string, holding back a tail that could
    be the start of one (a stop string may come split over pieces)."""

    def __init__(self, stops: tuple[str, ...]):
        self._stops = stops
        self._held = ""
        self.stopped = False

    def feed(self, piece: str) -> str:
        if not self._stops or self.stopped:
            return "" if self.stopped else piece
        text = self._held + piece
        found = [i for i in (text.find(stop) for stop in self._stops) if i >= 0]
        if found:
            self.stopped, self._held = True, ""
            return text[:min(found)]
        keep = self._partial_stop_at_end(text)
        self._held = text[len(text) - keep:] if keep else ""
        return text[:len(text) - keep]

    def flush(self) -> str:
        held, self._held = self._held, ""
        return held

    def _partial_stop_at_end(self, text: str) -> int:
        """How many characters at the end of `text` begin some stop string."""
        for size in range(min(len(text), max(len(s) for s in self._stops) - 1), 0, -1):
            if any(stop.startswith(text[-size:]) for stop in self._stops):
                return size
        return 0


class _Either:
    """A cancel flag set when either flag is: the client left, or a stop string was found."""

    def __init__(self, *flags: threading.Event):
        self._flags = flags

    def is_set(self) -> bool:
        return any(flag.is_set() for flag in self._flags)


def run_job(ticket, job: Job, cancel: threading.Event, metrics=None) -> Iterator[str | Finished]:
    """In the request's thread: the text as it comes (cut at a stop string), then Finished."""
    stopped = threading.Event()
    cut = StopCut(job.stop)
    with ticket.lease(cancel) as slot:
        stream = slot.llm.stream(job.messages, max_new_tokens=job.max_new_tokens, temperature=job.temperature,
                                 top_p=job.top_p, seed=job.seed, cancel=_Either(cancel, stopped))
        for piece in stream:
            if text := cut.feed(piece):
                yield text
            if cut.stopped:
                stopped.set()  # the model stops before its next token; its stats still come
    if text := cut.flush():
        yield text
    if metrics is not None and stream.stats is not None:
        metrics.record_generation(stream.stats)
    yield Finished(stream.stats, "stop" if cut.stopped else stream.stats.finish_reason)


class Generation:
    """One request's generation seen from the event loop: admitted to the queue when made
    (QueueFull at once), then `await first()` and `async for` over the rest."""

    def __init__(self, request: Request, job: Job):
        state = request.app.state.server
        if not state.pool.ready:
            raise NotReady(state.load_error
                           or "The server is still loading its model; try again in a moment (see /ready).")
        self.request = request
        self.job = job
        self.cancel = threading.Event()
        self.ticket = state.pool.admit()
        self._items = iterate_in_thread(lambda: run_job(self.ticket, job, self.cancel, state.metrics), self.cancel)
        self.finished: Finished | None = None

    async def first(self) -> str | Finished:
        """The first item, waited for while the client is watched: one that goes away while
        its request waits leaves the queue."""
        return await self._watching(anext(self._items))

    async def collect(self) -> tuple[str, Finished]:
        """The whole text and how it ended (a non-streaming reply)."""
        async def gather() -> list:
            return [item async for item in self._items]
        items = await self._watching(gather())
        self.finished = items[-1]
        return "".join(items[:-1]), items[-1]

    async def rest(self) -> AsyncIterator[str]:
        """The text pieces after first(); `finished` is set at the end."""
        async for item in self._items:
            if isinstance(item, Finished):
                self.finished = item
            else:
                yield item

    async def close(self) -> None:
        """Stops what still runs and gives the queue place back if it was never used."""
        self.cancel.set()
        self.ticket.release_unused()
        await self._items.aclose()

    async def _watching(self, awaitable):
        task = asyncio.ensure_future(awaitable)
        try:
            while not task.done():
                done, _ = await asyncio.wait({task}, timeout=_DISCONNECT_POLL_S)
                if not done and await self.request.is_disconnected():
                    self.cancel.set()
            return task.result()
        finally:
            if not task.done():
                task.cancel()


class _GenerationResponse(StreamingResponse):
    """A streamed reply that closes its generation however the response ends (a client that
    left before the first byte included)."""

    def __init__(self, content, generation: Generation, media_type: str):
        super().__init__(content, media_type=media_type,
                         headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        self._generation = generation

    async def __call__(self, scope, receive, send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self._generation.close()


async def started(generation: Generation) -> str | Finished:
    """The first item; the generation is closed if it failed (the caller replies with the error)."""
    try:
        return await generation.first()
    except BaseException:
        await generation.close()
        raise


def _error_dict(exc: BaseException) -> dict:
    if isinstance(exc, EngineError):
        return body_for(exc)
    log.exception("A generation failed unexpectedly", exc_info=exc)
    return {"error": {"message": f"The server failed unexpectedly ({type(exc).__name__}).",
                      "type": "server_error", "code": None}}


# -- limits ---------------------------------------------------------------------------------
def _check_prompt_size(request: Request, chars: int) -> None:
    limit = request.app.state.server.config.max_prompt_chars
    if chars > limit:
        raise PromptTooLong(f"The prompt is {chars} characters; this server takes at most {limit} "
                            "(max_prompt_chars). Shorten it.")


def _capped(request: Request, wanted: int | None) -> int:
    limit = request.app.state.server.config.max_new_tokens
    return limit if wanted is None else min(wanted, limit)


async def _collected(generation: Generation) -> tuple[str, Finished] | JSONResponse:
    """The whole text and how it ended, or the error's reply; the generation is closed."""
    try:
        return await generation.collect()
    except EngineError as exc:
        return reply_for(exc)
    finally:
        await generation.close()


# -- the simple API -------------------------------------------------------------------------
def _simple_job(request: Request, body: GenerateRequest) -> Job:
    _check_prompt_size(request, len(body.prompt))
    messages = [{"role": "system", "content": DEFAULT_SYSTEM}, {"role": "user", "content": body.prompt}]
    return Job(messages, _capped(request, body.max_new_tokens), body.temperature)


@router.post("/generate", response_model=GenerateResponse, summary="The model's answer to one prompt")
async def generate(body: GenerateRequest, request: Request):
    """The model's answer to `prompt`, with no manuals. `max_new_tokens` over the server's
    limit (--max-new-tokens) is cut to it; a prompt over max_prompt_chars gets 413, one too
    long for the model's context 400, a full queue 429 with Retry-After."""
    try:
        generation = Generation(request, _simple_job(request, body))
    except EngineError as exc:
        return reply_for(exc)
    collected = await _collected(generation)
    if isinstance(collected, JSONResponse):
        return collected
    text, finished = collected
    return GenerateResponse(generated_text=text, tokens_generated=finished.stats.new_tokens,
                            finish_reason=finished.finish_reason)


@router.post("/stream_generate", summary="The model's answer to one prompt, streamed as plain text",
             response_class=StreamingResponse,
             responses={200: {"content": {"text/plain": {}}, "description": "The text, as it is generated."}})
async def stream_generate(body: GenerateRequest, request: Request):
    """The same request as /generate; the reply is `text/plain; charset=utf-8`, written piece
    by piece as the model generates it (chunked transfer), with nothing else in it. Errors
    before the first piece get their HTTP status and JSON error as /generate. An error after
    it (the model process died) ends the stream with a line of its own:
    `[error] <message>`. Closing the connection stops the generation before its next token."""
    try:
        generation = Generation(request, _simple_job(request, body))
    except EngineError as exc:
        return reply_for(exc)
    try:
        first = await started(generation)
    except EngineError as exc:
        return reply_for(exc)
    except StopAsyncIteration:  # cannot happen: a generation always ends with Finished
        first = ""

    async def text() -> AsyncIterator[str]:
        if isinstance(first, str):
            yield first
            try:
                async for piece in generation.rest():
                    yield piece
            except Exception as exc:  # the stream has begun: its last line says what went wrong
                yield f"\n[error] {_error_dict(exc)['error']['message']}\n"

    return _GenerationResponse(text(), generation, "text/plain; charset=utf-8")


# -- OpenAI's API ---------------------------------------------------------------------------
@router.get("/v1/models", summary="The model this server serves (OpenAI's list)")
async def list_models(request: Request):
    state = request.app.state.server
    model = {"id": state.model_name, "object": "model", "created": 0, "owned_by": "offline-assistant"}
    llm = state.pool.any_llm
    if llm is not None and llm.context_length:  # 0: a remote engine not reached yet
        model["max_model_len"] = llm.context_length  # vLLM's field: RemoteLLM fits its prompts to it
    return {"object": "list", "data": [model]}


def _chat_job(request: Request, body: ChatRequest) -> Job:
    if (body.n or 1) != 1:
        raise GenerationError(f"n={body.n}: this server gives one choice per request (n=1); "
                              "send the request several times instead.")
    messages = [{"role": "system" if m.role == "developer" else m.role, "content": m.text()}
                for m in body.messages]
    _check_prompt_size(request, sum(len(m["content"]) for m in messages))
    stops = [body.stop] if isinstance(body.stop, str) else list(body.stop or [])
    if len(stops) > _MAX_STOPS:
        raise GenerationError(f"stop: at most {_MAX_STOPS} strings, not {len(stops)}.")
    wanted = body.max_completion_tokens or body.max_tokens
    temperature = 1.0 if body.temperature is None else body.temperature
    return Job(messages, _capped(request, wanted), temperature, 1.0 if body.top_p is None else body.top_p,
               body.seed, tuple(stop for stop in stops if stop))


def _finish(reason: str) -> str:
    return "length" if reason == "length" else "stop"


@router.post("/v1/chat/completions", summary="OpenAI's chat completions, plain or streamed (SSE)")
async def chat_completions(body: ChatRequest, request: Request):
    """OpenAI's chat completion. `max_tokens` / `max_completion_tokens` over the server's
    limit is cut to it (the default is that limit); messages over max_prompt_chars together
    get 413, a chat too long for the model's context 400, n other than 1 400, a full queue
    429 with Retry-After.

    With `"stream": true` the reply is server-sent events: `chat.completion.chunk` objects
    with one id, the role in the first delta, then the content deltas, `finish_reason` in the
    last; a usage chunk (`choices: []`) when `stream_options.include_usage` is true; then
    `data: [DONE]`. An error after the stream began comes as `data: {"error": {...}}` before
    `[DONE]`. Closing the connection stops the generation before its next token."""
    try:
        generation = Generation(request, _chat_job(request, body))
    except EngineError as exc:
        return reply_for(exc)
    reply = _ChatReply(request.app.state.server.model_name)
    if not body.stream:
        collected = await _collected(generation)
        return collected if isinstance(collected, JSONResponse) else reply.completion(*collected)
    try:
        first = await started(generation)
    except EngineError as exc:
        return reply_for(exc)
    usage = bool(body.stream_options and body.stream_options.include_usage)
    return _GenerationResponse(_chat_events(reply, generation, first, usage), generation, "text/event-stream")


class _ChatReply:
    """The ids and names every object of one completion shares."""

    def __init__(self, model: str):
        self.id = f"chatcmpl-{uuid.uuid4().hex}"
        self.created = int(time.time())
        self.model = model

    def _head(self, kind: str) -> dict:
        return {"id": self.id, "object": kind, "created": self.created, "model": self.model,
                "system_fingerprint": None}

    def completion(self, text: str, finished: Finished) -> dict:
        choice = {"index": 0, "message": {"role": "assistant", "content": text},
                  "finish_reason": _finish(finished.finish_reason), "logprobs": None}
        return {**self._head("chat.completion"), "choices": [choice], "usage": finished.usage}

    def chunk(self, delta: dict, finish_reason: str | None = None) -> dict:
        choice = {"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}
        return {**self._head("chat.completion.chunk"), "choices": [choice]}

    def usage_chunk(self, finished: Finished) -> dict:
        return {**self._head("chat.completion.chunk"), "choices": [], "usage": finished.usage}


def _event(data: dict | str) -> str:
    return f"data: {data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)}\n\n"


async def _chat_events(reply: _ChatReply, generation: Generation, first, usage: bool) -> AsyncIterator[str]:
    yield _event(reply.chunk({"role": "assistant", "content": ""}))
    try:
        if isinstance(first, str):
            yield _event(reply.chunk({"content": first}))
            async for piece in generation.rest():
                yield _event(reply.chunk({"content": piece}))
            finished = generation.finished
        else:
            finished = first
        yield _event(reply.chunk({}, _finish(finished.finish_reason)))
        if usage:
            yield _event(reply.usage_chunk(finished))
    except Exception as exc:  # the stream has begun: an error event, then the end as usual
        yield _event(_error_dict(exc))
    yield _event("[DONE]")
