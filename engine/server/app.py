"""create_app: the FastAPI application, its routes and its error replies.

    app = create_app(ServerConfig(paths), llm_folder)
    uvicorn.run(app, host=..., port=...)      # what `offline-assistant-cli serve` does

Every error reply has OpenAI's shape, {"error": {"message", "type", "code"}}, so that the
`openai` client and hand-written callers read the same message; a full queue is 429 with
Retry-After, a collection that does not exist 404, a server still loading 503.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from engine import __version__
from engine.errors import EngineError
from engine.server import generation, manuals, ops, security
from engine.server.config import ServerConfig
from engine.server.pool import PoolClosed, QueueFull, QueueTimeout
from engine.server.state import CollectionNotFound, NotReady, ServerState

RETRY_AFTER_S = 2  # what a 429 tells the client to wait


def create_app(config: ServerConfig, llm_folder: Path, *, make_llm=None, embedder=None,
               load: bool = True) -> FastAPI:
    """`make_llm` makes one unloaded LLM client (default: LLMClient on llm_folder); `embedder`
    is a loaded one to use instead of the built-in one; with load=False the models are loaded
    by whoever calls app.state.server.start_loading()."""
    state = ServerState(config, llm_folder, make_llm, embedder)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        if load:
            state.start_loading()
        try:
            yield
        finally:
            state.close()

    app = FastAPI(title="Offline Assistant", version=__version__, lifespan=lifespan,
                  description="Answers over your own manuals, and the local model, on this machine.")
    app.state.server = state
    security.install(app, config)
    for module in (generation, manuals, ops):
        app.include_router(module.router)
    _install_error_replies(app)
    return app


def server_of(request: Request) -> ServerState:
    return request.app.state.server


def error_body(message: str, kind: str, code: str | None = None) -> dict:
    return {"error": {"message": message, "type": kind, "code": code}}


def error_reply(status: int, message: str, kind: str, code: str | None = None, headers=None) -> JSONResponse:
    return JSONResponse(error_body(message, kind, code), status_code=status, headers=headers)


def status_of(exc: EngineError) -> int:
    """The HTTP status for an engine error."""
    if isinstance(exc, QueueFull):
        return 429
    if isinstance(exc, CollectionNotFound):
        return 404
    if isinstance(exc, (QueueTimeout, PoolClosed, NotReady)):
        return 503
    return 400 if type(exc) is EngineError else 500


def reply_for(exc: EngineError) -> JSONResponse:
    status = status_of(exc)
    headers = {"Retry-After": str(RETRY_AFTER_S)} if status in (429, 503) else None
    return error_reply(status, str(exc), _kind(status), type(exc).__name__, headers)


def _kind(status: int) -> str:
    return {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
            413: "invalid_request_error", 422: "invalid_request_error", 429: "rate_limit_error"
            }.get(status, "server_error")


def _install_error_replies(app: FastAPI) -> None:
    @app.exception_handler(EngineError)
    async def engine_error(request: Request, exc: EngineError):
        return reply_for(exc)

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError):
        problems = "; ".join(_problem(e) for e in exc.errors()[:5])
        return error_reply(422, f"The request is not valid: {problems}.", _kind(422), "invalid_request")


def _problem(error: dict) -> str:
    where = ".".join(str(part) for part in error.get("loc", ()) if part != "body") or "body"
    return f"{where}: {error.get('msg', 'invalid')}"
