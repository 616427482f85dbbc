"""A real uvicorn server on loopback, in a thread of the test process, for clients that speak
HTTP for real (the `openai` client, httpx, a benchmark's load).

    with live_server(app) as base_url:          # "http://127.0.0.1:PORT"
        OpenAI(base_url=base_url + "/v1", api_key="-")...

The port is chosen by the kernel (port 0), so tests never collide; the server is stopped and
joined on exit. The app's lifespan (model loading) runs as under `serve`.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import uvicorn

STARTUP_TIMEOUT_S = 60


@contextlib.contextmanager
def live_server(app, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """`port` 0: one the kernel chooses; a given one serves a server that comes back on it."""
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on",
                            timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="live-uvicorn", daemon=True)
    thread.start()
    try:
        _wait_started(server, thread)
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


def _wait_started(server: uvicorn.Server, thread: threading.Thread) -> None:
    started = threading.Event()

    def watch() -> None:  # uvicorn sets a plain bool: look at it until it or the thread ends
        while not server.started and thread.is_alive():
            started.wait(0.01)
        started.set()

    threading.Thread(target=watch, daemon=True).start()
    if not started.wait(STARTUP_TIMEOUT_S) or not server.started:
        raise RuntimeError("uvicorn did not start (see its log above)")
