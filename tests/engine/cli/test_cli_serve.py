"""`offline-assistant-cli serve` as a person starts it: the refusals it says before loading
anything, and (slow) the real server on the built-in model, answering, then stopped by SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from engine.cli.main import main
from engine.llm.remote import ENV_KEY, ENV_URL
from engine.server.config import API_KEY_ENV
from tests.engine.cli.test_cli import REPO, private_env
from tests.helpers.http_engines import MODEL_ID, WORDS, free_port, scripted_engine


def test_a_host_on_the_network_needs_an_api_key(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv(API_KEY_ENV, raising=False)
    assert main(["serve", "--data-dir", str(tmp_path), "--host", "0.0.0.0"]) == 1
    error = capsys.readouterr().err
    assert "Refusing to serve on 0.0.0.0 without an API key" in error and "--api-key" in error


def test_a_port_in_use_is_said_before_the_model_loads(tmp_path, capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve", "--data-dir", str(tmp_path), "--port", str(port)]) == 1
    assert f"Cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err
    assert not (tmp_path / "models" / "SmolLM2-135M-Instruct").exists()  # nothing was prepared


@pytest.mark.parametrize("option", ["--llm-workers", "--threads"])
def test_workers_and_threads_must_be_one_or_more(tmp_path, capsys, option):
    assert main(["serve", "--data-dir", str(tmp_path), option, "0"]) == 1
    assert f"{option} must be 1 or more" in capsys.readouterr().err


def test_an_engine_url_that_is_not_http_is_said_before_anything_loads(tmp_path, capsys):
    assert main(["serve", "--data-dir", str(tmp_path), "--engine-url", "gpu-box:8080"]) == 1
    assert "The engine URL 'gpu-box:8080' is not an http:// or https:// address" in capsys.readouterr().err


def test_serve_on_an_engine_generates_there_with_no_model_process(tmp_path):
    """`serve --engine-url URL`, with the engine's key in the environment (not in a process list):
    the engine's model and text, no model process of the server's own, no model prepared."""
    port, data = free_port(), tmp_path / "data"
    env = {**private_env(tmp_path / "home"), ENV_KEY: "k-env"}
    env.pop(ENV_URL, None)
    base = f"http://127.0.0.1:{port}"
    with scripted_engine("ok") as engine:
        command = [sys.executable, "-m", "engine", "serve", "--data-dir", str(data), "--port", str(port),
                   "--engine-url", engine.url]
        with subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True) as process:
            try:
                wait_ready(base, process)
                models = get(base + "/v1/models")[1]
                body = post(base + "/generate", {"prompt": "Hello", "max_new_tokens": 3})
                children = model_processes(process.pid)
            finally:
                process.send_signal(signal.SIGTERM)
                _, log = process.communicate(timeout=60)
    assert models["data"][0]["id"] == MODEL_ID and body["generated_text"] == "".join(WORDS[:3])
    assert children == [], "a model process was started"
    assert all(h.get("Authorization") == "Bearer k-env" for h in engine.headers)
    assert f"generating on the engine at {engine.url}" in log and "k-env" not in log
    assert not (data / "models").exists() or not any((data / "models").iterdir())  # nothing prepared


def get(url: str, timeout: float = 5.0) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def wait_ready(base: str, process: subprocess.Popen) -> None:
    deadline_checks = 600  # each waits up to 0.2 s on the process: two minutes in all
    for _ in range(deadline_checks):
        try:
            if get(base + "/ready")[0] == 200:
                return
        except OSError:
            pass  # not listening yet
        try:
            process.wait(0.2)
            raise AssertionError(f"serve exited with {process.returncode}: {process.stderr.read()}")
        except subprocess.TimeoutExpired:
            continue
    raise AssertionError("serve was not ready within two minutes")


@pytest.mark.slow
def test_the_real_server_answers_and_stops_on_sigterm(builtin_data_dir, tmp_path):
    port = free_port()
    command = [sys.executable, "-m", "engine", "serve", "--data-dir", str(builtin_data_dir), "--port", str(port)]
    base = f"http://127.0.0.1:{port}"
    with subprocess.Popen(command, cwd=REPO, env=private_env(tmp_path / "home"), stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True) as process:
        try:
            wait_ready(base, process)
            status, models = get(base + "/v1/models")
            assert status == 200 and models["data"][0]["id"] == "SmolLM2-135M-Instruct"
            body = post(base + "/generate", {"prompt": "Name the capital of France.", "max_new_tokens": 16,
                                             "temperature": 0})
            assert "Paris" in body["generated_text"] and 0 < body["tokens_generated"] <= 16
            children = model_processes(process.pid)
            assert children, "the model runs in a child process of the server"
        finally:
            process.send_signal(signal.SIGTERM)
            _, log = process.communicate(timeout=60)
    # uvicorn shuts down, then ends by the signal it was sent, as a service manager expects
    assert process.returncode in (0, -signal.SIGTERM) and "Application shutdown complete" in log, log
    assert not [pid for pid in children if os.path.exists(f"/proc/{pid}")], "a model process outlived the server"


def post(url: str, body: dict) -> dict:
    request = urllib.request.Request(url, method="POST", headers={"Content-Type": "application/json"},
                                     data=json.dumps(body).encode())
    with urllib.request.urlopen(request, timeout=120) as reply:
        return json.loads(reply.read())


def model_processes(pid: int) -> list[int]:
    """The spawned children of `pid` (the model's), not multiprocessing's resource tracker,
    which leaves only once its parent has gone."""
    tasks = f"/proc/{pid}/task"
    found: list[int] = []
    for task in os.listdir(tasks):
        try:
            with open(f"{tasks}/{task}/children") as children:
                found += [int(child) for child in children.read().split()]
        except FileNotFoundError:  # a thread that ended since the listing has no children
            continue
    return [child for child in found if b"spawn_main" in _command_line(child)]


def _command_line(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as line:
            return line.read()
    except FileNotFoundError:  # it ended since it was listed
        return b""
