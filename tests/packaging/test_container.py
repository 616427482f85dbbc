"""The container image (packaging/docker), built from this checkout and used as a client would (issue 16).

packaging/docker/build.sh makes the Debian base with mmdebstrap, then the image (about 3 minutes
from nothing). Then:
- with the host's network, on a free port and an API key: /ready, /health (no key), /v1/models
  and /generate answer, a request without the key gets 401, the server runs as uid 10001, and
  the image's own HEALTHCHECK passes;
- with no network at all (`--network none`) and no key given: the server generates a key, prints
  it, loads the baked-in models and answers /generate to a client inside the container.
The test's containers and image are removed at the end (build.sh removes its build stage), and
the base too unless it was there before.

Needs Linux, root (mmdebstrap) and a docker daemon (.ci/run starts one). With no daemon it skips,
saying so, even under CI; other missing parts fail under CI. About 5 minutes.
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest

from tests.helpers.http_engines import free_port

pytestmark = [pytest.mark.slow, pytest.mark.packaging]

REPO = Path(__file__).resolve().parents[2]
BASE = "offline-assistant-base:bookworm"
USER_ID = "10001"
READY_CMD = "python /opt/offline-assistant/bin/container-health.py /ready"
IN_CONTAINER_CLIENT = """
import json, urllib.request, urllib.error
key = open("/data/api-key").read().strip()
def call(path, body=None, key=key):
    headers = {"Content-Type": "application/json", **({"Authorization": "Bearer " + key} if key else {})}
    data = None if body is None else json.dumps(body).encode()
    try:
        with urllib.request.urlopen(urllib.request.Request("http://127.0.0.1:8080" + path, data, headers), timeout=120) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, None
reached = True
try:
    urllib.request.urlopen("https://pypi.org/simple/", timeout=5)
except OSError:
    reached = False
print(json.dumps({"models": call("/v1/models"), "no_key": call("/v1/models", key=None)[0],
                  "generate": call("/generate", {"prompt": "What is 2 + 2?", "max_new_tokens": 16}),
                  "outside_reached": reached}))
"""


def _docker(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(["docker", *args], check=False, capture_output=True, text=True, timeout=timeout)
    if check:
        assert done.returncode == 0, f"docker {' '.join(args)}: {done.stderr[-3000:]}"
    return done


def _no_daemon() -> str | None:
    if not shutil.which("docker"):
        return "no docker client (apt-get install docker.io)"
    info = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], check=False, capture_output=True,
                          text=True, timeout=60)
    if info.returncode != 0:
        return f"no docker daemon answers: {info.stderr.strip()[-300:]}"
    return None


def _why_not() -> str | None:
    if not sys.platform.startswith("linux"):
        return "the image is built on Linux only"
    if os.geteuid() != 0:
        return "building the base with mmdebstrap needs root"
    if not shutil.which("mmdebstrap"):
        return "mmdebstrap is not installed (apt-get install mmdebstrap)"
    return None


@pytest.fixture(scope="module")
def image():
    no_daemon = _no_daemon()
    if no_daemon:  # the one reason CI may skip: .ci/run says so too
        pytest.skip(f"the container test cannot run: {no_daemon}")
    reason = _why_not()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"the container test cannot run: {reason}")
        pytest.skip(reason)
    had_base = _docker("image", "inspect", BASE, check=False).returncode == 0
    tag = f"offline-assistant:test-{uuid.uuid4().hex[:8]}"
    started = time.perf_counter()
    built = subprocess.run([str(REPO / "packaging/docker/build.sh"), tag], check=False, cwd=REPO,
                           capture_output=True, text=True, timeout=1800)
    seconds = time.perf_counter() - started
    try:
        assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
        size = int(_docker("image", "inspect", "-f", "{{.Size}}", tag).stdout)
        print(f"\nimage {tag}: built in {seconds:.0f} s (base {'kept' if had_base else 'built too'}), "
              f"{size / 1e6:.0f} MB")
        yield tag
    finally:
        _docker("rmi", "-f", tag, check=False)
        if not had_base:
            _docker("rmi", "-f", BASE, check=False)


@pytest.fixture
def container():
    """start(*docker run options, image): a detached container, removed at the test's end."""
    names = []

    def start(*options: str) -> str:
        name = f"offline-assistant-test-{uuid.uuid4().hex[:8]}"
        names.append(name)
        _docker("run", "-d", "--name", name, "--health-cmd", READY_CMD, "--health-interval", "1s",
                "--health-start-period", "300s", *options, timeout=300)
        return name

    yield start
    for name in names:
        _docker("rm", "-f", name, check=False)


def _wait_healthy(name: str, timeout: float = 300) -> None:
    """Until docker reports the container healthy (its health command, here /ready, passed);
    fails with the container's log if it stops first or the time runs out."""
    if _docker("inspect", "-f", "{{.State.Health.Status}}", name).stdout.strip() == "healthy":
        return
    deadline = time.monotonic() + timeout
    seen = []
    with subprocess.Popen(
            ["docker", "events", "--since", "0", "--filter", f"container={name}", "--filter",
             "event=health_status", "--filter", "event=die", "--format", "{{.Status}}"],
            stdout=subprocess.PIPE, text=True) as events, selectors.DefaultSelector() as selector:
        selector.register(events.stdout, selectors.EVENT_READ)
        while (left := deadline - time.monotonic()) > 0 and selector.select(left):
            seen.append(events.stdout.readline().strip())
            if seen[-1] in ("health_status: healthy", "die", ""):
                break
        events.kill()
    if seen and seen[-1] == "health_status: healthy":
        return
    logs = _docker("logs", name, check=False)
    pytest.fail(f"{name} never became ready (events: {seen}):\n{(logs.stdout + logs.stderr)[-4000:]}")


def test_the_image_serves_at_once_as_a_non_root_user(image, container):
    port, key = free_port(), uuid.uuid4().hex
    name = container("--network", "host", "-e", f"PORT={port}", "-e", f"OFFLINE_ASSISTANT_API_KEY={key}", image)
    started = time.perf_counter()
    _wait_healthy(name)
    print(f"\nready {time.perf_counter() - started:.1f} s after `docker run` returned")

    auth = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as client:
        assert client.get("/health").json() == {"status": "ok"}  # a probe's: no key
        assert client.get("/v1/models").status_code == 401
        models = client.get("/v1/models", headers=auth)
        assert models.status_code == 200
        assert [m["id"] for m in models.json()["data"]] == ["SmolLM2-135M-Instruct"]
        reply = client.post("/generate", headers=auth, json={"prompt": "What is 2 + 2?", "max_new_tokens": 16})
        assert reply.status_code == 200, reply.text
        assert reply.json()["generated_text"].strip() and reply.json()["tokens_generated"] > 0

    users = _docker("top", name, "-eo", "uid,pid,args").stdout.splitlines()[1:]
    assert users and all(line.split()[0] == USER_ID for line in users), users
    config = json.loads(_docker("image", "inspect", "-f", "{{json .Config}}", image).stdout)
    assert config["User"] == f"{USER_ID}:{USER_ID}" and "8080/tcp" in config["ExposedPorts"]
    assert "container-health.py" in " ".join(config["Healthcheck"]["Test"])
    # the image's own HEALTHCHECK command (/health), as docker runs it
    assert _docker("exec", name, *config["Healthcheck"]["Test"][1:], check=False).returncode == 0


def test_the_image_needs_no_network_and_makes_its_own_api_key(image, container):
    name = container("--network", "none", image)
    _wait_healthy(name)

    logs = _docker("logs", name)
    printed = [line.rsplit(": ", 1)[1] for line in logs.stderr.splitlines() if line.startswith("API key")]
    kept = _docker("exec", name, "cat", "/data/api-key").stdout.strip()
    assert printed == [kept] and len(kept) >= 32

    asked = _docker("exec", name, "python", "-c", IN_CONTAINER_CLIENT, timeout=300)
    result = json.loads(asked.stdout)
    assert result["outside_reached"] is False  # truly no network
    assert result["no_key"] == 401
    assert result["models"][0] == 200 and result["models"][1]["data"][0]["id"] == "SmolLM2-135M-Instruct"
    status, generated = result["generate"]
    assert status == 200 and generated["generated_text"].strip() and generated["tokens_generated"] > 0
