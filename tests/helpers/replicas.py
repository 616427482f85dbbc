"""Replicas of `offline-assistant-cli serve` behind a real HAProxy, on loopback: for the replica
test (tests/engine/server/test_replicas.py) and bench/bench_replicas.py.

    paths = bundled_data_dir(root, models, manuals)        # one signed bundle, installed
    with replicas(paths, 2, KEY) as urls, balancer(urls, KEY, root) as front:
        ... CentralServer(front.url, KEY).ask(question) ...
        kill(urls, 0)                                       # SIGKILL to the replica and its model
        front.down_after("r1")                              # seconds until HAProxy marked it down

The replicas share one data dir, as on one machine: an installed bundle switches all of them at
their next question. HAProxy's config is the one docs/deploy.md gives.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from engine.answer.central import CentralServer
from engine.errors import CentralServerError
from engine.paths import AppPaths
from tests.helpers.http_engines import free_port

REPO = Path(__file__).resolve().parents[2]
HAPROXY = shutil.which("haproxy") or shutil.which("haproxy", path="/usr/sbin:/sbin")  # not on a user's PATH


def bundled_data_dir(root: Path, models: Path, manuals: list[Path], settings: str = "") -> AppPaths:
    """The replicas' data dir: `manuals` indexed by an admin with the built-in embedder, built
    into a signed bundle and installed here; the prepared models of `models` linked in."""
    from engine.fleet import bundle as fleet
    from engine.store.indexer import Indexer, default_embedder, open_collection

    admin, served = AppPaths(root / "admin").ensure(), AppPaths(root / "served").ensure()
    for paths in (admin, served):
        if not paths.models.exists():
            paths.models.symlink_to(models, target_is_directory=True)
    embedder = default_embedder(admin)
    try:
        with open_collection(admin, "default", embedder) as store:
            for _ in Indexer(store, embedder).run(manuals):
                pass
        key = fleet.generate_keys(root / "fleet.key")
        fleet.build_bundle(admin, "default", key, root / "manuals-1.tar", version=1)
        fleet.install_bundle(served, root / "manuals-1.tar", [fleet.public_key_text(key)],
                             expected_embedder=embedder.model_id)
    finally:
        embedder.close()
    served.settings_file.write_text(settings, encoding="utf-8")
    return served


@dataclass
class Replica:
    url: str
    process: subprocess.Popen


@contextlib.contextmanager
def replicas(paths: AppPaths, count: int, api_key: str, timeout_s: float = 180) -> Iterator[list[Replica]]:
    """`count` serve processes on `paths`, one model process each, every one ready."""
    from engine.encoders.onnx_session import physical_cores

    started = []
    env = {**os.environ, "OFFLINE_ASSISTANT_API_KEY": api_key}  # not in the process list
    threads = str(max(1, physical_cores() // count))  # each its part of the cores, as deploy.md says
    try:
        for _ in range(count):
            port = free_port()
            command = [sys.executable, "-m", "engine", "serve", "--data-dir", str(paths.root), "--port",
                       str(port), "--llm-workers", "1", "--threads", threads, "--provider", "cpu", "--log-level", "warning"]
            # its own process group: a kill takes the model process with it, as a machine's death would
            process = subprocess.Popen(command, cwd=REPO, env=env, start_new_session=True,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            started.append(Replica(f"http://127.0.0.1:{port}", process))
        deadline = time.monotonic() + timeout_s
        for replica in started:
            _wait_ready(replica, api_key, deadline)
        yield started
    finally:
        for replica in started:
            _stop(replica)


def kill(replica: Replica) -> None:
    """SIGKILL to the replica and its model process: nothing is closed cleanly."""
    os.killpg(replica.process.pid, signal.SIGKILL)
    replica.process.wait(10)


def _stop(replica: Replica) -> None:
    if replica.process.poll() is None:
        replica.process.send_signal(signal.SIGTERM)
        try:
            replica.process.wait(30)
        except subprocess.TimeoutExpired:
            pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(replica.process.pid, signal.SIGKILL)  # a model process left behind
    replica.process.wait(10)


def _poll(condition, timeout_s: float, every_s: float) -> float | None:
    """Seconds until condition() held, or None after timeout_s. Polled: a replica's /ready and
    HAProxy's view of its servers are other processes' state, with nothing to wait on here."""
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > timeout_s:
            return None
        time.sleep(every_s)
    return time.monotonic() - start


def _wait_ready(replica: Replica, api_key: str, deadline: float) -> None:
    def ready() -> bool:
        if replica.process.poll() is not None:
            raise RuntimeError(f"serve on {replica.url} exited with {replica.process.returncode}")
        with contextlib.suppress(httpx.HTTPError):
            return httpx.get(replica.url + "/ready", headers={"Authorization": f"Bearer {api_key}"},
                             timeout=2).status_code == 200
        return False

    if _poll(ready, deadline - time.monotonic(), 0.3) is None:
        raise RuntimeError(f"serve on {replica.url} was not ready in time")


def haproxy_config(port: int, servers: list[str], api_key: str, stats_socket: Path) -> str:
    """HAProxy's config (2.6) in front of `servers` (host:port), as docs/deploy.md gives it."""
    lines = "\n".join(f"    server r{n} {address} check" for n, address in enumerate(servers, 1))
    return f"""global
    stats socket {stats_socket} mode 600 level admin

defaults
    mode http
    timeout connect 1s
    timeout client 150s
    timeout server 150s
    timeout queue 150s
    retries 3
    retry-on conn-failure empty-response response-timeout
    option redispatch 1

frontend answers
    bind 127.0.0.1:{port}
    default_backend replicas

backend replicas
    balance leastconn
    option httpchk
    http-check send meth GET uri /ready hdr Authorization "Bearer {api_key}"
    http-check expect status 200
    default-server inter 1s fastinter 500ms downinter 2s fall 2 rise 2
{lines}
"""


class Balancer:
    def __init__(self, url: str, process: subprocess.Popen, stats_socket: Path):
        self.url, self.process, self.stats_socket = url, process, stats_socket

    def status(self, server: str) -> str:
        """HAProxy's word for a server: UP, DOWN, (or during a change, e.g. 'UP 1/2')."""
        with socket.socket(socket.AF_UNIX) as stats:
            stats.connect(str(self.stats_socket))
            stats.sendall(b"show stat\n")
            text = b""
            while chunk := stats.recv(65536):
                text += chunk
        header, *rows = text.decode().splitlines()
        column = header.lstrip("# ").split(",").index("status")
        for row in rows:
            fields = row.split(",")
            if len(fields) > column and fields[0] == "replicas" and fields[1] == server:
                return fields[column]
        raise KeyError(server)

    def _status_or_none(self, server: str) -> str | None:
        try:
            return self.status(server)
        except OSError:  # HAProxy is still starting
            return None

    def wait_status(self, server: str, wanted: str, timeout_s: float = 60) -> float:
        """Seconds until HAProxy says `wanted` of `server`."""
        seconds = _poll(lambda: self._status_or_none(server) == wanted, timeout_s, 0.05)
        if seconds is None:
            raise RuntimeError(f"HAProxy did not mark {server} {wanted} within {timeout_s} s")
        return seconds


@contextlib.contextmanager
def balancer(urls: list[str], api_key: str, folder: Path) -> Iterator[Balancer]:
    """A real HAProxy in front of `urls`, once it has every one UP."""
    port, stats_socket = free_port(), folder / "haproxy.sock"
    config = folder / "haproxy.cfg"
    config.write_text(haproxy_config(port, [u.removeprefix("http://") for u in urls], api_key, stats_socket),
                      encoding="utf-8")
    subprocess.run([HAPROXY, "-c", "-q", "-f", str(config)], check=True)
    stats_socket.unlink(missing_ok=True)  # a previous run's
    process = subprocess.Popen([HAPROXY, "-db", "-f", str(config)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    front = Balancer(f"http://127.0.0.1:{port}", process, stats_socket)
    try:
        for n in range(1, len(urls) + 1):
            front.wait_status(f"r{n}", "UP", 30)
        yield front
    finally:
        process.terminate()
        process.wait(10)


@dataclass
class Answer:
    started: float  # time.monotonic() when asked
    seconds: float  # until its last event, retries included
    retried: int  # times it was asked again after breaking off
    ok: bool  # ended with a done event
    error: str = ""


class Answers(list):
    """The clients' answers; a test waits for a count of them (notified on each) instead of polling."""

    def __init__(self):
        super().__init__()
        self._added = threading.Condition()

    def append(self, answer: Answer) -> None:
        with self._added:
            super().append(answer)
            self._added.notify_all()

    def wait_count(self, count: int, timeout_s: float) -> None:
        with self._added:
            if not self._added.wait_for(lambda: len(self) >= count, timeout_s):
                raise TimeoutError(f"{len(self)} answers after {timeout_s} s, not {count}")


def client(url: str, api_key: str, questions: list[str], stop: threading.Event, answers: list[Answer],
           first: int = 0) -> None:
    """Asks `questions` in turn (from `first`) through the product's own thin-kiosk client, with
    its retry, until `stop`; each answer goes to `answers` (list.append is thread-safe)."""
    server = CentralServer(url, api_key)
    n = first
    try:
        while not stop.is_set():
            question, n = questions[n % len(questions)], n + 1
            before, start = server.retried, time.monotonic()
            try:
                events = list(server.ask(question))
                ok = bool(events) and events[-1].kind == "done"
                error = "" if ok else getattr(events[-1], "message", "no events") if events else "no events"
            except CentralServerError as exc:
                ok, error = False, str(exc)
            answers.append(Answer(start, time.monotonic() - start, server.retried - before, ok, error))
    finally:
        server.close()
