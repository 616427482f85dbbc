"""Real HTTP engines on loopback for the tests of engine.llm.remote: llama.cpp's
OpenAI-compatible server in its own process, and small standard-library servers that misbehave
in one chosen way (refuse the key, hang, die mid-stream, send garbage), over real sockets.

    with scripted_engine("dies") as engine:      # engine.url, engine.requests, engine.client_left
    with scripted_engine("ok", port=port):       # back on the port it had before
    with llama_server(gguf_path) as server:      # server.url; server.stop() makes it go away
    url = refused_url()                          # nothing listens there
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

LLAMA_ENV = "OFFLINE_ASSISTANT_LLAMA_SERVER"  # a python that has llama_cpp.server
LLAMA_VENV_PYTHON = Path(__file__).resolve().parents[2] / ".venv-llama" / "bin" / "python"  # make llama-server
STARTUP_S = 120
WORDS = [f" word{i}" for i in range(200)]  # what the "ok" engine streams, one per chunk
MODEL_ID = "scripted-model"
BEHAVIOURS = ("ok", "unauthorized", "busy", "fails", "hangs", "dies", "garbled", "cut")


class ScriptedEngine:
    def __init__(self, behaviour: str, context_length: int | None):
        assert behaviour in BEHAVIOURS, behaviour
        self.behaviour = behaviour
        self.context_length = context_length
        self.requests: list[dict] = []  # the JSON bodies of the chat requests, as received
        self.headers: list[dict] = []  # the headers of every request
        self.client_left = threading.Event()  # a write failed: the client closed the stream
        self.release = threading.Event()  # lets a hanging handler end
        self.url = ""


def _handler(engine: ScriptedEngine):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # quiet
            pass

        def do_GET(self):  # noqa: N802
            engine.headers.append(dict(self.headers))
            if engine.behaviour == "unauthorized":
                return self._reply(401, {"error": {"message": "Invalid API key", "type": "auth"}})
            model = {"id": MODEL_ID, "object": "model"}
            if engine.context_length:
                model["max_model_len"] = engine.context_length
            self._reply(200, {"object": "list", "data": [model]})

        def do_POST(self):  # noqa: N802
            engine.headers.append(dict(self.headers))
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            engine.requests.append(body)
            b = engine.behaviour
            if b == "unauthorized":
                return self._reply(401, {"error": {"message": "Invalid API key", "type": "auth"}})
            if b == "busy":
                return self._reply(429, {"error": {"message": "queue full", "type": "busy"}})
            if b == "fails":
                return self._reply(500, {"error": {"message": "out of memory", "type": "server"}})
            if b == "hangs":
                engine.release.wait(30)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Connection", "close")
            self.close_connection = True
            self.end_headers()
            try:
                self._stream(body)
            except (BrokenPipeError, ConnectionResetError):
                engine.client_left.set()

        def _stream(self, body: dict) -> None:
            self._event({"choices": [{"index": 0, "delta": {"role": "assistant"}}]})
            words = WORDS[:min(int(body.get("max_tokens", 16)), len(WORDS))]
            for i, word in enumerate(words):
                if engine.behaviour == "dies" and i == 2:
                    self.connection.shutdown(socket.SHUT_RDWR)  # no last chunk: a broken body
                    self.close_connection = True
                    return
                if engine.behaviour == "garbled" and i == 2:
                    self._write(b"data: {not json\n\n")
                    continue
                self._event({"choices": [{"index": 0, "delta": {"content": word}}]})
                engine.release.wait(0.01)  # a token's time: the client can leave between two
            if engine.behaviour != "cut":  # "cut": [DONE] with no finish reason, as an interrupted stream
                self._event({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]})
            self._event({"choices": [], "usage": {"prompt_tokens": 17, "completion_tokens": len(words)}})
            self._write(b"data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")

        def _event(self, data: dict) -> None:
            self._write(b"data: " + json.dumps(data).encode() + b"\n\n")

        def _write(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        def _reply(self, status: int, data: dict) -> None:
            payload = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.send_header("Connection", "close")  # a server that goes away leaves no connection open
            self.close_connection = True
            self.end_headers()
            self.wfile.write(payload)

    return Handler


@contextlib.contextmanager
def scripted_engine(behaviour: str = "ok", context_length: int | None = None,
                    port: int = 0) -> Iterator[ScriptedEngine]:
    """A scripted engine on `port` (0: one the kernel picks; a given one: an engine back where
    it was before it went away)."""
    engine = ScriptedEngine(behaviour, context_length)
    server = ThreadingHTTPServer(("127.0.0.1", port), _handler(engine))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name=f"engine-{behaviour}", daemon=True)
    thread.start()
    engine.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield engine
    finally:
        engine.release.set()
        server.shutdown()
        server.server_close()
        thread.join(10)


def free_port() -> int:
    """A port on loopback that the kernel just gave and took back: nothing listens there."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def refused_url() -> str:
    """An address on loopback where nothing listens."""
    return f"http://127.0.0.1:{free_port()}"


def llama_python() -> Path:
    """The python that runs llama.cpp's server: $OFFLINE_ASSISTANT_LLAMA_SERVER, else the one
    `make llama-server` builds (make test does). Where there is none the test is skipped, and
    fails in CI, which builds it."""
    named = os.environ.get(LLAMA_ENV)
    python = Path(named) if named else LLAMA_VENV_PYTHON
    if not python.exists():
        missing = (f"llama.cpp's server is not installed: run `make llama-server` (or set {LLAMA_ENV} "
                   "to a python that has llama-cpp-python[server])")
        if os.environ.get("CI"):
            pytest.fail(missing)
        pytest.skip(missing)
    return python


class LlamaServer:
    def __init__(self, process: subprocess.Popen, url: str):
        self.process = process
        self.url = url
        self.reader: threading.Thread | None = None  # reads its log

    def stop(self) -> None:
        """The engine goes away: its process is ended, its port closed."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(15)
        if self.reader is not None:
            self.reader.join(15)  # its log ended with the process
        if self.process.stderr is not None:
            self.process.stderr.close()


@contextlib.contextmanager
def llama_server(gguf: Path, context_length: int = 2048) -> Iterator[LlamaServer]:
    """llama.cpp's OpenAI-compatible server on `gguf`, on a free loopback port, ready."""
    python = llama_python()
    port = int(refused_url().rsplit(":", 1)[1])
    process = subprocess.Popen(
        [str(python), "-m", "llama_cpp.server", "--model", str(gguf), "--host", "127.0.0.1",
         "--port", str(port), "--n_ctx", str(context_length), "--interrupt_requests", "False"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, errors="replace")
    server = LlamaServer(process, f"http://127.0.0.1:{port}")
    try:
        server.reader = _wait_ready(process)
        yield server
    finally:
        server.stop()


def _wait_ready(process: subprocess.Popen) -> threading.Thread:
    """Until uvicorn says it listens (read from its log, in a thread, so a silent server times out)."""
    ready = threading.Event()
    log: list[str] = []

    def read() -> None:
        for line in process.stderr:
            log.append(line)
            if "Uvicorn running on" in line:
                ready.set()
        ready.set()  # it ended

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    if not ready.wait(STARTUP_S) or process.poll() is not None:
        process.kill()
        raise RuntimeError("llama.cpp's server did not start:\n" + "".join(log[-20:]))
    return reader
