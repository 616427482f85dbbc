"""create_app: the FastAPI application, its routes and its error replies.

    app = create_app(ServerConfig(paths), llm_folder)
    uvicorn.run(app, host=..., port=...)      # what `offline-assistant-cli serve` does

Every error reply has OpenAI's shape and a status from one table (engine/server/replies.py).
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError

from engine import __version__
from engine.errors import EngineError
from engine.server import generation, manuals, ops, security
from engine.server.config import ServerConfig
from engine.server.replies import error_reply, reply_for
from engine.server.state import ServerState


def create_app(config: ServerConfig, llm_folder: Path | None, *, make_llm=None, embedder=None,
               load: bool = True) -> FastAPI:
    """`make_llm` makes one unloaded LLM client (default: LLMClient on llm_folder, or with
    config.engine_url a RemoteLLM on that engine, and llm_folder None); `embedder`
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


def _install_error_replies(app: FastAPI) -> None:
    @app.exception_handler(EngineError)
    async def engine_error(request: Request, exc: EngineError):
        return reply_for(exc)

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError):
        problems = "; ".join(_problem(e) for e in exc.errors()[:5])
        return error_reply(422, f"The request is not valid: {problems}.", code="invalid_request")


def _problem(error: dict) -> str:
    if error.get("type") == "json_invalid":  # its loc is ("body", the character's position)
        reason = (error.get("ctx") or {}).get("error", "")
        return f"the body is not valid JSON ({reason or error.get('msg')}, at character {error['loc'][-1]})"
    where = ".".join(str(part) for part in error.get("loc", ()) if part != "body") or "body"
    return f"{where}: {error.get('msg', 'invalid')}"
