"""What keeps the server safe by default, installed by security.install(app, config):

- with an API key, every endpoint but /health (the docs too) needs `Authorization: Bearer KEY`,
  compared in constant time; 401 with WWW-Authenticate otherwise;
- a body larger than config.max_body_bytes gets 413 before it is read whole: Content-Length is
  checked first, then the bytes are counted as they arrive (Starlette's body limit);
- CORS stays off unless config.cors_origins names the origins allowed;
- the request metrics (engine.server.ops.install_metrics), outermost, so that they count the
  401s and 413s too.

No endpoint takes a file path: collection names go through AppPaths.collection, which refuses
any name that is a path.
"""

from __future__ import annotations

import hmac

from fastapi import Request
from starlette.middleware.body_limit import (
    MAX_BODY_SIZE_SCOPE_KEY,
    RequestBodyLimitMiddleware,
)
from starlette.middleware.cors import CORSMiddleware

from engine.server.replies import error_reply

OPEN_PATHS = frozenset({"/health"})  # a load balancer's probe carries no key


def install(app, config) -> None:
    from engine.server import ops

    if config.api_key:
        app.add_middleware(BearerAuth, api_key=config.api_key)
    # Starlette's limit (FastAPI's max_body_size is the same one) counts a body's bytes as they
    # arrive; a route reading past it gets an HTTPException(413), answered in our shape. Its own
    # reply to a declared Content-Length too large is plain text: those are refused before it.
    app.add_middleware(RequestBodyLimitMiddleware, max_body_size=config.max_body_bytes)
    app.add_exception_handler(413, _too_large)
    app.add_middleware(DeclaredSizeLimit, limit=config.max_body_bytes)
    if config.cors_origins:  # outside the key check: a browser's preflight carries no key
        app.add_middleware(CORSMiddleware, allow_origins=list(config.cors_origins),
                           allow_methods=["GET", "POST"], allow_headers=["Authorization", "Content-Type"])
    ops.install_metrics(app)


async def _too_large(request: Request, exc):
    return _too_large_reply(request.scope[MAX_BODY_SIZE_SCOPE_KEY])


def _too_large_reply(limit: int):
    return error_reply(413, f"The request body is larger than this server takes ({limit} bytes).",
                       "invalid_request_error", "body_too_large")


class DeclaredSizeLimit:
    """413 at once for a Content-Length over the limit: nothing of the body is read."""

    def __init__(self, app, limit: int):
        self.app = app
        self.limit = limit

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and _declared_length(scope) > self.limit:
            return await _too_large_reply(self.limit)(scope, receive, send)
        return await self.app(scope, receive, send)


def _declared_length(scope) -> int:
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return 0  # the server (h11) refuses a malformed one before we see it
    return 0


class BearerAuth:
    """Pure ASGI: a request without the key is answered 401 before any route reads its body."""

    def __init__(self, app, api_key: str):
        self.app = app
        self._key = api_key.encode("utf-8")

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS or self._allowed(scope):
            return await self.app(scope, receive, send)
        reply = error_reply(401, "This server needs an API key: send the header 'Authorization: Bearer KEY'.",
                            "authentication_error", "invalid_api_key",
                            headers={"WWW-Authenticate": 'Bearer realm="offline-assistant"'})
        await reply(scope, receive, send)

    def _allowed(self, scope) -> bool:
        given = b""
        for name, value in scope["headers"]:
            if name == b"authorization":
                given = value
        scheme, _, token = given.partition(b" ")
        # compare_digest even when the scheme is wrong: the time says nothing about the key
        matches = hmac.compare_digest(token.strip(), self._key)
        return matches and scheme.lower() == b"bearer"
