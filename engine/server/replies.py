"""Error replies, one shape and one status table for every route.

Every error reply has OpenAI's shape, {"error": {"message", "type", "code"}}, so that the
`openai` client and hand-written callers read the same message. The status follows the error's
class (an Assistant's ErrorEvent carries only the class's name, so both are looked up here):
a full queue is 429 with Retry-After, a collection that does not exist 404, a prompt over the
server's limit 413, a server still loading or a model process that died 503 with Retry-After
(the next request starts a fresh process), a remote engine that failed 502.
"""

from __future__ import annotations

import re

from fastapi.responses import JSONResponse

from engine.errors import (
    CollectionDamagedError,
    EngineError,
    EngineProcessError,
    GenerationError,
    ModelError,
    RemoteEngineError,
)
from engine.server.pool import Abandoned, PoolClosed, QueueFull, QueueTimeout

RETRY_AFTER_S = 2  # what a 429 or 503 tells the client to wait


class PromptTooLong(EngineError):
    """A prompt (or a question with its history) longer than the server's max_prompt_chars."""


class CollectionNotFound(EngineError):
    """No collection of that name in the data folder."""


class NotReady(EngineError):
    """The models are still loading (or failed to load: /ready says why)."""


# Most specific first: the first class an error is an instance of gives its status.
_STATUS: tuple[tuple[type[EngineError], int], ...] = (
    (QueueFull, 429), (CollectionNotFound, 404), (PromptTooLong, 413),
    (NotReady, 503), (QueueTimeout, 503), (PoolClosed, 503), (Abandoned, 503), (EngineProcessError, 503),
    (RemoteEngineError, 502),
    (GenerationError, 400),  # the model refused the request as asked: a prompt over its context
    (ModelError, 500), (CollectionDamagedError, 500),
    (EngineError, 400),  # the engine's own words for a request it cannot take (an empty question)
)
_STATUS_BY_NAME = {cls.__name__: status for cls, status in _STATUS}
_KIND = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
         413: "invalid_request_error", 422: "invalid_request_error", 429: "rate_limit_error"}


def status_of(exc: EngineError) -> int:
    return next(status for cls, status in _STATUS if isinstance(exc, cls))


def status_of_name(name: str) -> int:
    """The status of an error known by its class's name (an ErrorEvent's); 500 if unknown."""
    return _STATUS_BY_NAME.get(name, 500)


def kind_of(status: int) -> str:
    return _KIND.get(status, "server_error")


def error_body(message: str, kind: str, code: str | None = None) -> dict:
    return {"error": {"message": message, "type": kind, "code": code}}


def error_reply(status: int, message: str, kind: str | None = None, code: str | None = None,
                headers=None) -> JSONResponse:
    if headers is None and status in (429, 503):
        headers = {"Retry-After": str(RETRY_AFTER_S)}
    return JSONResponse(error_body(message, kind or kind_of(status), code), status_code=status, headers=headers)


def code_of(error: str) -> str:
    """An error class's name as the reply's code, in OpenAI's style: QueueFull -> queue_full."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", error).lower()


def body_for(exc: EngineError) -> dict:
    return named_body(str(exc), type(exc).__name__, status_of(exc))


def reply_for(exc: EngineError) -> JSONResponse:
    return error_reply(status_of(exc), str(exc), code=code_of(type(exc).__name__))


def named_reply(message: str, error: str) -> JSONResponse:
    """The reply for an error known by its class's name."""
    return error_reply(status_of_name(error), message, code=code_of(error))


def named_body(message: str, error: str, status: int | None = None) -> dict:
    return error_body(message, kind_of(status or status_of_name(error)), code_of(error))
