"""The operations routes: GET /health (the process answers), GET /ready (the models are loaded),
GET /metrics (Prometheus); and install_metrics(app), the middleware that counts every request
by route and status and times it."""

from __future__ import annotations

import time

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from engine.answer.metrics import CONTENT_TYPE

router = APIRouter(tags=["operations"])
UNMATCHED = "(unmatched)"  # the route label of a path no route serves: one series, whatever was asked


@router.get("/health", summary="Whether the server answers (even while it loads its models)")
async def health():
    return {"status": "ok"}


@router.get("/ready", summary="Whether the models are loaded: 200, else 503")
async def ready(request: Request):
    state = request.app.state.server
    if state.ready:
        return {"status": "ready"}
    if state.load_error:
        return JSONResponse({"status": "failed", "error": state.load_error}, status_code=503)
    return JSONResponse({"status": "loading"}, status_code=503)


@router.get("/metrics", summary="Prometheus metrics: answers, stages, requests, queue")
async def metrics(request: Request):
    return Response(request.app.state.server.metrics.render(), media_type=CONTENT_TYPE)


def install_metrics(app) -> None:
    """Every HTTP request is counted and timed in app.state.server.metrics; add it last, so
    that it is the outermost middleware and sees the 401s and 413s of the others too."""
    app.add_middleware(RequestMetrics)


class RequestMetrics:
    """Pure ASGI (a streamed answer is not buffered): the status when the reply starts, the
    time when its last byte is sent, or when the app returns (a client that went away)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started, status, recorded = time.perf_counter(), [500], [False]

        def record() -> None:
            if not recorded[0]:
                recorded[0] = True
                metrics = scope["app"].state.server.metrics if "app" in scope else None
                if metrics is not None:
                    metrics.record_request(_route(scope), status[0], time.perf_counter() - started)

        async def watching(message):
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                record()

        try:
            await self.app(scope, receive, watching)
        finally:
            record()


def _route(scope) -> str:
    route = scope.get("route")
    return getattr(route, "path", None) or UNMATCHED
