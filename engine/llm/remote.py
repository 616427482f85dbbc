"""RemoteLLM: generation on a remote OpenAI-compatible engine (our own server, llama.cpp's
server, vLLM), with the API of LocalLLM / LLMClient, so that the Assistant keeps retrieval,
the gate and the lead sentences local and only sends the prompt out.

    llm = RemoteLLM("http://gpu-box:8080", key="...").load()   # "/v1" at the end or not
    for piece in llm.stream(messages, max_new_tokens=192): ...

It streams POST {url}/v1/chat/completions as server-sent events (asking for the usage chunk,
`stream_options.include_usage`, for the engine's own token counts). Tokens are counted here
for building prompts: with a given TokenCounter (the built-in model's tokenizer.json, an
estimate for another engine's model), else by characters (CHARS_PER_TOKEN, a cautious
estimate). Every failure to reach the engine or to read its answer is a RemoteEngineError
naming the URL and what to do; a request the engine refuses as bad (400, 413, 422) is a
GenerationError with the engine's own words.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator, Sequence
from urllib.parse import urlsplit

import httpx

from engine.errors import GenerationError, RemoteEngineError
from engine.llm.local import Message
from engine.types import CancelFlag, GenerationParams, GenerationResult, GenerationStats, GenerationStream

DEFAULT_CONTEXT = 2048  # when neither the settings nor the engine's /v1/models say
CONNECT_TIMEOUT_S = 3.0  # an engine on the network answers a connection at once, or never
READ_TIMEOUT_S = 60.0  # the longest wait for one token (a busy engine queues requests)
CHARS_PER_TOKEN = 3  # without a tokenizer: few enough that a prompt is never cut too late
TEMPLATE_TOKENS = (8, 6)  # the engine's chat template, unknown here: per chat, per message
ENV_URL = "OFFLINE_ASSISTANT_ENGINE_URL"
ENV_KEY = "OFFLINE_ASSISTANT_ENGINE_KEY"
_FINISH = {"stop": "stop", "length": "length"}  # the rest (tool calls, content filter) ends it


class RemoteLLM:
    """Same API as LLMClient; one request at a time, from one thread."""

    pid = None  # no process of ours

    def __init__(self, url: str, key: str | None = None, model: str | None = None, *,
                 context_length: int | None = None, token_counter=None,
                 connect_timeout_s: float = CONNECT_TIMEOUT_S, read_timeout_s: float = READ_TIMEOUT_S):
        self.url = engine_base(url)
        self.key = key or None
        self.model = model or None  # None: the first model the engine lists
        self.token_counter = token_counter  # a TokenCounter, or None: counted by characters
        self.provider = f"remote:{urlsplit(self.url).netloc}"
        self.requested_provider = self.provider
        self.context_length = int(context_length or 0)
        self._given_context = bool(context_length)
        self.template_overhead = TEMPLATE_TOKENS
        self._timeout = httpx.Timeout(read_timeout_s, connect=connect_timeout_s)
        self._client: httpx.Client | None = None

    # -- lifetime -------------------------------------------------------------------------
    def load(self) -> "RemoteLLM":
        """Opens the connection and asks the engine which models it serves: an engine that
        cannot be reached, or refuses the key, says so here rather than at the first question."""
        if self._client is not None:
            return self
        headers = {"Authorization": f"Bearer {self.key}"} if self.key else {}
        client = httpx.Client(timeout=self._timeout, headers=headers)
        try:
            self._read_models(client)
        except BaseException:
            client.close()
            raise
        self._client = client
        return self

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            client.close()

    def __enter__(self) -> "RemoteLLM":
        return self.load()

    def __exit__(self, *exc) -> None:
        self.close()

    def alive(self) -> bool:
        """Whether it is loaded (the engine's health is learnt from each request)."""
        return self._client is not None

    def _read_models(self, client: httpx.Client) -> None:
        reply = self._send(lambda: client.get(self._endpoint("models")))
        listed = _json(reply, self.url).get("data") or []
        if not isinstance(listed, list):
            raise self._error("its /v1/models reply is not a list of models")
        entry = next((m for m in listed if isinstance(m, dict) and m.get("id") == self.model), None)
        if entry is None and self.model is None and listed and isinstance(listed[0], dict):
            entry = listed[0]
            self.model = str(entry.get("id") or "") or None
        if not self._given_context:
            self.context_length = _context_of(entry or {}) or DEFAULT_CONTEXT

    # -- text -----------------------------------------------------------------------------
    def count_tokens(self, text: str) -> int:
        """An estimate: the given tokenizer's count (the engine's model may split differently),
        else one token per CHARS_PER_TOKEN characters."""
        if self.token_counter is not None:
            return self.token_counter.count(text)
        return -(-len(text) // CHARS_PER_TOKEN)

    def template_tokens(self, messages: int) -> int:
        per_chat, per_message = self.template_overhead
        return per_chat + per_message * messages

    # -- generation -----------------------------------------------------------------------
    def stream(self, messages: Sequence[Message], *, max_new_tokens: int = 256, temperature: float = 0.0,
               top_p: float = 1.0, top_k: int = 50, seed: int | None = None,
               cancel: CancelFlag | None = None) -> GenerationStream:
        params = GenerationParams(max_new_tokens, temperature, top_p, top_k, seed)
        return GenerationStream(self._run(list(messages), params, cancel))

    def generate(self, messages: Sequence[Message], **kwargs) -> GenerationResult:
        return self.stream(messages, **kwargs).collect()

    def _run(self, messages: list[Message], params: GenerationParams, cancel) -> Iterator[str | GenerationStats]:
        if self._client is None:
            raise GenerationError("The engine is not connected; call load() first.")
        if not messages:
            raise GenerationError("Nothing to answer: the conversation is empty.")
        if params.max_new_tokens < 1:
            raise GenerationError("max_new_tokens must be at least 1.")
        tally = _Tally(time.perf_counter())
        request = self._client.build_request("POST", self._endpoint("chat/completions"),
                                             json=self._body(messages, params))
        response = self._send(lambda: self._client.send(request, stream=True))
        try:  # closing the response (a cancel, the consumer leaving) stops the engine's work
            for chunk in self._chunks(response):
                if cancel is not None and cancel.is_set():
                    tally.finish = "cancelled"
                    break
                piece = tally.read(chunk)
                if piece:
                    yield piece
        finally:
            response.close()
        if tally.finish is None:  # [DONE] with no finish reason: the engine cut the answer short
            raise self._error("it ended the answer without saying why (another request may have "
                              "interrupted it)", "give the engine one request at a time; llama.cpp's "
                              "server: --interrupt_requests False")
        yield self._stats(tally, messages, params.max_new_tokens)

    def _body(self, messages: list[Message], params: GenerationParams) -> dict:
        body = {"messages": messages, "stream": True, "stream_options": {"include_usage": True},
                "max_tokens": params.max_new_tokens, "temperature": params.temperature}
        if self.model:
            body["model"] = self.model
        if params.temperature > 0:  # greedy needs none of these; top_k is not OpenAI's own
            body.update(top_p=params.top_p, top_k=params.top_k)
            if params.seed is not None:
                body["seed"] = params.seed
        return body

    def _chunks(self, response: httpx.Response) -> Iterator[dict]:
        """The JSON objects of the event stream, up to [DONE]."""
        lines = self._guarded(response.iter_lines())
        for line in lines:
            if not line.startswith("data:"):
                continue  # blank separators, comments (": ping"), event names
            data = line[5:].strip()
            if data == "[DONE]":
                return
            try:
                chunk = json.loads(data)
            except json.JSONDecodeError:
                raise self._error(f"it sent a line that is not JSON ({data[:80]!r})",
                                  "check that engine_url points at an OpenAI-compatible server") from None
            if not isinstance(chunk, dict):
                raise self._error("it sent an event that is not a JSON object")
            if "error" in chunk:
                raise self._error(f"it reported an error mid-answer: {_error_text(chunk)}")
            yield chunk
        raise self._error("the answer stopped before its end (the connection closed)",
                          "ask again; if it keeps happening, look at the engine's log")

    def _guarded(self, lines: Iterator[str]) -> Iterator[str]:
        """The response's lines, with a lost connection as a RemoteEngineError."""
        try:
            yield from lines
        except httpx.TimeoutException:
            raise self._error(f"it sent nothing for {self._timeout.read:g} s mid-answer",
                              "it may be overloaded; ask again, or raise its capacity") from None
        except (httpx.TransportError, httpx.StreamError) as exc:
            raise self._error(f"the connection was lost mid-answer ({_reason(exc)})",
                              "ask again; if it keeps happening, look at the engine's log") from None

    def _stats(self, tally: "_Tally", messages: list[Message], limit: int) -> GenerationStats:
        """The engine's own counts when it sent them (the usage chunk); else the prompt counted
        here, and the new tokens: the limit when the engine stopped at it, else the chunks
        (one token each, as llama.cpp and vLLM stream; a few servers add empty ones)."""
        end = time.perf_counter()
        first = tally.first_at or end
        prompt = tally.prompt_tokens
        if prompt is None:
            prompt = sum(self.count_tokens(str(m.get("content") or "")) for m in messages)
            prompt += self.template_tokens(len(messages))
        new = tally.new_tokens
        if new is None:
            new = limit if tally.finish == "length" else min(tally.pieces, limit)
        decode_s = end - first
        return GenerationStats(
            prompt_tokens=int(prompt), new_tokens=int(new),
            time_to_first_token_s=round(first - tally.start, 4),
            tokens_per_s=round((new - 1) / decode_s, 2) if new > 1 and decode_s > 0 else 0.0,
            total_s=round(end - tally.start, 4), finish_reason=tally.finish, provider=self.provider,
            cached_tokens=tally.cached_tokens)

    # -- HTTP -----------------------------------------------------------------------------
    def _endpoint(self, route: str) -> str:
        return f"{self.url}/v1/{route}"

    def _send(self, call) -> httpx.Response:
        """`call()`'s response, refused ones and failures to connect as our errors."""
        try:
            response = call()
        except httpx.ConnectTimeout:
            raise self._error(f"it did not accept a connection within {self._timeout.connect:g} s") from None
        except httpx.TimeoutException:
            raise self._error(f"it did not answer within {self._timeout.read:g} s",
                              "it may be overloaded or stuck; look at it, or ask again later") from None
        except httpx.ConnectError as exc:
            raise self._error(f"it cannot be reached ({_reason(exc)})") from None
        except httpx.TransportError as exc:
            raise self._error(f"the connection failed ({_reason(exc)})") from None
        if response.status_code >= 400:
            try:
                response.read()
            except httpx.HTTPError:
                pass
            finally:
                response.close()
            raise self._refused(response)
        return response

    def _refused(self, response: httpx.Response):
        status, said = response.status_code, _error_text(_json_or_empty(response)) or response.reason_phrase
        if status in (401, 403):
            return self._error(f"it refused the key ({status}: {said})",
                               "set the engine's API key (engine_key, or --engine-key)")
        if status == 404:
            return self._error(f"it has no such route or model ({status}: {said})",
                               "check engine_url (the server's address, with or without /v1) "
                               "and engine_model")
        if status == 429:
            return self._error(f"it is busy ({status}: {said})", "ask again in a moment")
        if status in (400, 413, 422):
            return GenerationError(f"The engine at {self.url} refused the request ({status}: {said}).")
        return self._error(f"it failed ({status}: {said})", "look at the engine's log, or ask again later")

    def _error(self, what: str, todo: str = "") -> RemoteEngineError:
        todo = todo or ("start it, check engine_url in the settings (or --engine-url), "
                        "or remove engine_url to answer with the local model")
        return RemoteEngineError(f"The engine at {self.url}: {what}; {todo}.", self.url)


class _Tally:
    """What one answer's chunks said: its pieces, the engine's own counts, how it ended."""

    def __init__(self, start: float):
        self.start = start
        self.first_at: float | None = None
        self.pieces = 0
        self.prompt_tokens: int | None = None
        self.new_tokens: int | None = None
        self.cached_tokens = 0  # of the prompt, taken from the engine's cache (llama.cpp, vLLM say so)
        self.finish: str | None = None  # the engine's finish_reason, or "cancelled" by us

    def read(self, chunk: dict) -> str:
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.prompt_tokens = _whole(usage.get("prompt_tokens"), self.prompt_tokens)
            self.new_tokens = _whole(usage.get("completion_tokens"), self.new_tokens)
            details = usage.get("prompt_tokens_details")
            if isinstance(details, dict):
                self.cached_tokens = _whole(details.get("cached_tokens"), self.cached_tokens)
        choices = chunk.get("choices") or []
        choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
        if choice.get("finish_reason"):
            self.finish = _FINISH.get(choice["finish_reason"], "stop")
        delta = choice.get("delta") if isinstance(choice.get("delta"), dict) else {}
        piece = delta.get("content")
        if not isinstance(piece, str):
            return ""  # the first chunk names the role only
        if self.first_at is None:
            self.first_at = time.perf_counter()
        self.pieces += 1  # one token per chunk, as these servers stream (an empty one: part of a character)
        return piece


def engine_base(url: str) -> str:
    """The engine's address without a trailing "/v1" or "/": both spellings are accepted.
    Refuses what is not an http(s) URL, naming it."""
    text = str(url or "").strip().rstrip("/")
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise RemoteEngineError(f"The engine URL '{url}' is not an http:// or https:// address; "
                                "set engine_url like http://gpu-box:8080.", str(url))
    return text.removesuffix("/v1")


def chosen_engine(url: str | None = None, key: str | None = None, settings=None,
                  environ=os.environ) -> tuple[str | None, str | None]:
    """(url, key) of the remote engine to use, or (None, None) for the local model: given
    ones first (--engine-url), then OFFLINE_ASSISTANT_ENGINE_URL/_KEY, then the settings."""
    url = url or environ.get(ENV_URL) or (settings.engine_url if settings is not None else None)
    if not url:
        return None, None
    key = key or environ.get(ENV_KEY) or (settings.engine_key if settings is not None else None)
    return url, key


def remote_llm(paths, url: str, key: str | None = None, model: str | None = None) -> RemoteLLM:
    """A RemoteLLM on `url`, counting tokens with the built-in model's tokenizer when it is
    prepared in `paths` (an estimate for the engine's model), else by characters."""
    from engine.llm.tokens import TokenCounter
    from engine.models.registry import builtin_llm_folder

    counter = TokenCounter.from_folder(builtin_llm_folder(paths)) if paths is not None else None
    return RemoteLLM(url, key, model, token_counter=counter)


def _context_of(entry: dict) -> int:
    """The context length an engine's /v1/models entry states: vLLM's max_model_len, others'
    context_length, llama.cpp's meta.n_ctx / n_ctx_train; 0 when none."""
    meta = entry.get("meta") if isinstance(entry.get("meta"), dict) else {}
    for value in (entry.get("max_model_len"), entry.get("context_length"), meta.get("n_ctx"),
                  meta.get("n_ctx_train")):
        number = _whole(value, 0)
        if number > 0:
            return number
    return 0


def _whole(value, default):
    return int(value) if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else default


def _json(response: httpx.Response, url: str) -> dict:
    try:
        data = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        data = None
    if not isinstance(data, dict):
        raise RemoteEngineError(f"The engine at {url}: its reply is not JSON; check that engine_url "
                                "points at an OpenAI-compatible server.", url)
    return data


def _json_or_empty(response: httpx.Response) -> dict:
    try:
        data = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError, httpx.ResponseNotRead):
        return {}
    return data if isinstance(data, dict) else {}


def _error_text(data: dict) -> str:
    """The message of an OpenAI-shaped error ({"error": {"message": ...}}, or a string)."""
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict):
        return str(error.get("message") or "")[:300]
    if isinstance(error, str):
        return error[:300]
    return str(data.get("detail") or "")[:300] if isinstance(data, dict) else ""


def _reason(exc: Exception) -> str:
    return str(exc) or type(exc).__name__
