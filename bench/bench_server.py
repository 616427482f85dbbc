#!/usr/bin/env python
"""Server benchmark (issue 16): concurrent streaming clients against our server and llama.cpp's.

Every server is started as a subprocess on loopback and driven by the same asyncio/httpx client:
N concurrent clients (N = 1, 4, 16, 64) each send streaming /v1/chat/completions requests
(stream=true, stream_options.include_usage, temperature 0, the same fixed prompts in the same
order) until the level's request count is done or its time is up. Per level and server: p50/p95
time to first token and to the end of the stream, aggregate generated tokens/s, errors, 429s and
lost or malformed streams (each must parse, carry a finish_reason and end with [DONE]); the RSS
of the server and its child processes is sampled from /proc throughout.

    python bench/bench_server.py                  # all servers, 2 rounds, docs/benchmarks.md
    python bench/bench_server.py --quick          # smoke run: our server alone, 4 clients
    python bench/bench_server.py --servers ours-w1,llama.cpp --rounds 1 --no-doc
    python bench/bench_server.py --install        # builds llama-cpp-python[server] if missing
    python bench/bench_server.py --servers ours-w1,ours-w2,llama-server-np4,llama-server-np8 --soak 0
                                                  # against llama.cpp's own server (issue 33)

Servers: `ours-wW` is `offline-assistant-cli serve --llm-workers W`; `ours-wW-tT` is the same
with the model's genai_config.json session_options.intra_op_num_threads = T (a patched copy of
the prepared model in bench/.cache); `-nocache` runs ours with --prompt-cache-mib 0 (every prompt
computed whole); `-sS` runs it with --llm-streams S (requests each process answers at once);
`llama.cpp` is `python -m llama_cpp.server` on the same
GGUF with --n_threads 2 (and --interrupt_requests False: by default it cuts the running stream
short whenever another request waits); `llama-server-npN` is llama.cpp's own C++ server (built by
`make llama-server-native` into bench/.cache/llama-server) with N slots decoded together
(continuous batching), and a run with one writes its own section of docs/benchmarks.md. Servers
take turns per level, and the order rotates per round, so that a noisy neighbour does not land on
one server only. After the rounds, the best
of our servers is driven on until it has answered --soak requests, for its RSS trend.
Scratch files go to bench/.cache/.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from benchdoc import update_section  # bench/ is on sys.path when run as a script

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "bench" / ".cache"
DOC = ROOT / "docs" / "benchmarks.md"
SECTION = "## The server under load (issue 16)"
PEER_SECTION = "## Serving against llama.cpp's own server (issue 33)"  # runs with a llama-server-npN
LLAMA_VENV = ROOT / ".venv-llama"  # `make llama-server` builds it too
LLAMA_PACKAGE = "llama-cpp-python[server]==0.3.36"  # the Makefile's pin
CLI = Path(sys.executable).with_name("offline-assistant-cli")
DEFAULT_SERVERS = "ours-w1,ours-w2,ours-w1-t2,llama.cpp"
DEFAULT_LEVELS = "1:4,4:12,16:32,64:64"  # clients:requests per round
THREADS = 2  # this machine's cores: llama.cpp's --n_threads, the most our variants use
LLAMA_SERVER = CACHE / "llama-server" / "bin" / "llama-server"  # bench/build_llama_server.sh
SLOT_CTX = 2048  # context per llama-server slot, as llama_cpp.server's --n_ctx

# Prompts: a manual excerpt and a question, about the size of a short retrieval answer's prompt.
SYSTEM = ("You answer questions about a technical manual. Use only the excerpt below; if it does "
          "not say, answer that the manual does not say.")
EXCERPTS = [
    ("Before opening any cover, switch the machine off at the main isolator, lock it, and wait at "
     "least ten minutes for the capacitors to discharge. Check the coolant level through the sight "
     "glass on the left side of the tank; it should sit between the two marks. Top it up with the "
     "mixture given in table 7, never with plain water, which corrodes the impeller."),
    ("Inspect the suction strainer every two hundred operating hours. Remove the four wing nuts, "
     "lift the strainer out and rinse it in warm water from the clean side towards the dirty side. "
     "Replace the gasket if it is cracked, flattened or hard to the touch."),
    ("If the display shows error E12, the flow sensor reports no flow while the pump runs. Make "
     "sure valve V3 is open, then check the sensor cable for damage. Error E15 means the coolant "
     "temperature exceeded the limit in parameter P41: let the unit cool down and clean the fins."),
    ("To install the package, download the archive, unpack it into a folder of your choice and run "
     "the installer from a terminal with administrator rights. The installer asks for the licence "
     "key, the installation folder and whether to create a desktop shortcut."),
    ("The printer keeps its settings in the configuration menu. Hold the menu key for three "
     "seconds, choose Network with the arrow keys and press OK. The printer shows its address; "
     "write it down before you add the printer on a computer."),
    ("Record every intervention in the maintenance log with the date, the hours counter reading, "
     "the parts replaced and your initials, so that the next technician knows what was done. Call "
     "the service department when an error returns three times within one shift."),
]
QUESTIONS = [
    "How long should I wait before opening a cover?",
    "How often is the suction strainer inspected?",
    "What does error E12 mean and what do I check first?",
    "What does the installer ask for?",
    "How do I find the printer's network address?",
    "What goes into the maintenance log?",
]


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def messages_for(index: int) -> list[dict]:
    """The index-th chat: excerpts and questions paired in a fixed order."""
    excerpt = EXCERPTS[index % len(EXCERPTS)]
    question = QUESTIONS[(index * 5 + 1) % len(QUESTIONS)]
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Excerpt:\n{excerpt}\n\nQuestion: {question}"}]


# --------------------------------------------------------------------------------------------
# memory of a process tree, from /proc


def rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def descendants(pid: int) -> list[int]:
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        parents.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        children = parents.get(todo.pop(), [])
        found += children
        todo += children
    return found


def tree_rss_mib(pid: int) -> tuple[float, int]:
    """RSS of the process and all its descendants (MiB), and how many processes that is."""
    pids = [pid, *descendants(pid)]
    return sum(rss_kib(p) for p in pids) / 1024, len(pids)


# --------------------------------------------------------------------------------------------
# servers


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def gguf_file() -> Path:
    from engine.models.registry import BUILTIN_LLM, find_package_file

    return find_package_file(BUILTIN_LLM.files[0])


@dataclass
class Server:
    name: str
    command: list[str]
    env: dict = field(default_factory=dict)
    port: int = 0
    process: subprocess.Popen | None = None
    done: int = 0  # requests answered (any outcome), for the RSS trend
    samples: list = field(default_factory=list)  # (seconds, done, rss MiB, processes)
    _stop: threading.Event = field(default_factory=threading.Event)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        CACHE.mkdir(parents=True, exist_ok=True)
        with open(CACHE / f"server-{self.name}.log", "w") as log_file:  # the child keeps its copy
            self.process = subprocess.Popen(self.command, stdout=log_file, stderr=subprocess.STDOUT,
                                            env={**os.environ, **self.env}, cwd=ROOT)
        threading.Thread(target=self._sample, daemon=True).start()

    def _sample(self) -> None:
        started = time.perf_counter()
        while not self._stop.wait(0.5):
            rss, count = tree_rss_mib(self.process.pid)
            self.samples.append((time.perf_counter() - started, self.done, rss, count))

    def stop(self) -> None:
        self._stop.set()
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def ours(name: str, workers: int, threads: int | None, data_dir: Path, cache_prompt: bool = True,
         streams: int | None = None) -> Server:
    if threads is not None:
        data_dir = threaded_data_dir(data_dir, threads)
    port = free_port()
    command = [str(CLI), "serve", "--data-dir", str(data_dir), "--port", str(port),
               "--llm-workers", str(workers), "--queue-size", "128", "--log-level", "warning"]
    if not cache_prompt:
        command += ["--prompt-cache-mib", "0"]
    if streams is not None:
        command += ["--llm-streams", str(streams)]
    return Server(name, command, port=port)


def llama_cpp(name: str, python: Path, gguf: Path, interrupt: bool) -> Server:
    port = free_port()
    command = [str(python), "-m", "llama_cpp.server", "--model", str(gguf),
               "--n_threads", str(THREADS), "--n_threads_batch", str(THREADS), "--n_ctx", "2048",
               "--port", str(port), "--interrupt_requests", str(interrupt), "--verbose", "False"]
    return Server(name, command, port=port)


def prepare_data_dir(data_dir: Path) -> Path:
    """A data folder with the built-in model prepared (a few seconds once)."""
    subprocess.run([str(CLI), "models", "prepare", "--data-dir", str(data_dir)], check=True,
                   stdout=subprocess.DEVNULL)
    return data_dir


def threaded_data_dir(data_dir: Path, threads: int) -> Path:
    """A copy of the data folder whose LLM runs `threads` intra-op threads: genai_config.json's
    session_options changed, the manifest written again (links to the other files)."""
    from engine.models.manifest import read_manifest, write_manifest

    target = CACHE / f"server-data-t{threads}"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(data_dir, target, copy_function=os.link)
    for folder in (target / "models").iterdir():
        config_file = folder / "genai_config.json"
        if not config_file.is_file():
            continue
        config = json.loads(config_file.read_text())
        config["model"]["decoder"].setdefault("session_options", {})["intra_op_num_threads"] = threads
        source = read_manifest(folder)["source"]
        for name in ("genai_config.json", "manifest.json"):
            (folder / name).unlink()  # a link: never write through it
        config_file.write_text(json.dumps(config, indent=2))
        write_manifest(folder, source)
    return target


def llama_server(name: str, slots: int, gguf: Path, cache_prompt: bool = True,
                 threads: int = THREADS) -> Server:
    """llama.cpp's own server: `slots` sequences decoded together in one batch (continuous
    batching), each with SLOT_CTX of context; the rest wait in its queue. By default a slot
    keeps its last prompt's KV cache and reuses the longest common prefix (the bench's 6 chats
    come round again); cache_prompt False turns that off, as ours has no prompt cache."""
    if not LLAMA_SERVER.exists():
        raise SystemExit(f"{LLAMA_SERVER} is missing: run `make llama-server-native` "
                         "(or --install-llama-server).")
    port = free_port()
    command = [str(LLAMA_SERVER), "-m", str(gguf), "--host", "127.0.0.1", "--port", str(port),
               "-np", str(slots), "-c", str(SLOT_CTX * slots), "-t", str(threads),
               "-tb", str(threads), "--cont-batching"] + ([] if cache_prompt else ["--no-cache-prompt"])
    return Server(name, command, port=port)


def install_llama_server() -> None:
    """Builds llama-server from the llama-cpp-python sdist's llama.cpp (20 min on 2 busy cores)."""
    log_file = CACHE / "build-llama-server.log"
    CACHE.mkdir(parents=True, exist_ok=True)
    log(f"building {LLAMA_SERVER} (log: {log_file}); takes minutes")
    with open(log_file, "w") as out:
        rc = subprocess.call(["bash", str(ROOT / "bench" / "build_llama_server.sh")],
                             stdout=out, stderr=subprocess.STDOUT,
                             env=dict(os.environ, PYTHON=sys.executable))
    if rc != 0 or not LLAMA_SERVER.exists():
        raise SystemExit(f"building llama-server failed (see {log_file})")


def parse_server(spec: str, data_dir: Path, llama_python: Path | None, gguf: Path) -> Server:
    match = re.fullmatch(r"ours-w(\d+)(?:-s(\d+))?(?:-t(\d+))?(-nocache)?", spec)
    if match:
        threads = int(match[3]) if match[3] else None
        return ours(spec, int(match[1]), threads, data_dir, cache_prompt=not match[4],
                    streams=int(match[2]) if match[2] else None)
    match = re.fullmatch(r"llama-server-np(\d+)(?:-t(\d+))?(-nocache)?", spec)
    if match:
        return llama_server(spec, int(match[1]), gguf, cache_prompt=not match[3],
                            threads=int(match[2] or THREADS))
    if spec in ("llama.cpp", "llama.cpp-interrupting"):
        if llama_python is None:
            raise SystemExit("llama.cpp: no Python with llama_cpp.server (give --llama-python "
                             "or --install).")
        return llama_cpp(spec, llama_python, gguf, interrupt=spec != "llama.cpp")
    raise SystemExit(f"unknown server {spec!r}: ours-wW[-sS][-tT][-nocache], llama-server-npN[-tT][-nocache], llama.cpp "
                     f"or llama.cpp-interrupting (its default --interrupt_requests True)")


def has_llama_server(python: Path) -> bool:
    return python.exists() and subprocess.call(
        [str(python), "-c", "import llama_cpp.server"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) == 0


def find_llama_python(given: str | None, install: bool) -> Path | None:
    if given:
        return Path(given)
    venv_python = LLAMA_VENV / "bin" / "python"
    if has_llama_server(venv_python):
        return venv_python
    if has_llama_server(Path(sys.executable)):
        return Path(sys.executable)
    if not install:
        return None
    return install_llama_venv(venv_python)


def install_llama_venv(venv_python: Path) -> Path:
    """llama-cpp-python[server] compiled from source into .venv-llama (~4 min, 2 cores)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    log_file = CACHE / "pip-llama-cpp-server.log"
    log(f"building llama-cpp-python[server] into {LLAMA_VENV} (log: {log_file}); takes minutes")
    env = dict(os.environ, CMAKE_ARGS=os.environ.get("CMAKE_ARGS", "-DGGML_NATIVE=ON"))
    with open(log_file, "w") as out:
        subprocess.run([sys.executable, "-m", "venv", str(LLAMA_VENV)], check=True)
        rc = subprocess.call([str(venv_python), "-m", "pip", "install", "--no-binary",
                              "llama-cpp-python", LLAMA_PACKAGE],
                             stdout=out, stderr=subprocess.STDOUT, env=env)
    if rc != 0 or not has_llama_server(venv_python):
        raise SystemExit(f"building llama-cpp-python[server] failed (see {log_file})")
    return venv_python


# --------------------------------------------------------------------------------------------
# the client


@dataclass
class Outcome:
    kind: str  # ok | error | 429 | lost
    first_token_s: float | None = None
    total_s: float = 0.0
    tokens: int = 0
    usage: bool = False  # the token count came from the server's usage chunk
    detail: str = ""
    prompt_tokens: int | None = None  # the usage chunk's: shows each chat template's length


def request_body(index: int, max_tokens: int) -> dict:
    return {"model": "default", "messages": messages_for(index), "stream": True,
            "max_tokens": max_tokens, "temperature": 0,
            "stream_options": {"include_usage": True}}


async def one_request(client, url: str, index: int, max_tokens: int, count_tokens) -> Outcome:
    """One streaming chat completion, checked: every event parses, one finish_reason, [DONE]."""
    import httpx

    started = time.perf_counter()
    first, text, usage, finish, done = None, [], None, None, False
    try:
        async with client.stream("POST", f"{url}/v1/chat/completions",
                                 json=request_body(index, max_tokens)) as reply:
            if reply.status_code == 429:
                await reply.aread()
                return Outcome("429", total_s=time.perf_counter() - started)
            if reply.status_code != 200:
                body = (await reply.aread())[:200].decode("utf-8", "replace")
                return Outcome("error", detail=f"HTTP {reply.status_code}: {body}")
            async for line in reply.aiter_lines():
                if not line.startswith("data:"):
                    continue  # blank separators, ': ping' comments
                data = line[5:].strip()
                if data == "[DONE]":
                    done = True
                    break
                event = json.loads(data)
                if "error" in event:
                    return Outcome("error", detail=str(event["error"])[:200])
                if event.get("usage"):
                    usage = event["usage"]
                for choice in event.get("choices") or []:
                    piece = (choice.get("delta") or {}).get("content") or ""
                    if piece:
                        if first is None:
                            first = time.perf_counter() - started
                        text.append(piece)
                    finish = choice.get("finish_reason") or finish
    except (ValueError, KeyError, TypeError) as exc:
        return Outcome("lost", detail=f"malformed event: {exc}")
    except (httpx.HTTPError, OSError) as exc:  # connection reset, timeout: the stream was lost
        return Outcome("lost", detail=f"{type(exc).__name__}: {exc}")
    total = time.perf_counter() - started
    if not done or finish is None:
        return Outcome("lost", first, total,
                       detail="no [DONE]" if not done else "no finish_reason")
    if usage and "completion_tokens" in usage:
        return Outcome("ok", first, total, int(usage["completion_tokens"]), usage=True,
                       prompt_tokens=usage.get("prompt_tokens"))
    return Outcome("ok", first, total, count_tokens("".join(text)))


async def drive(server: Server, clients: int, requests: int, limit_s: float, max_tokens: int,
                count_tokens, start_index: int = 0) -> tuple[list[Outcome], float]:
    """`clients` concurrent clients share `requests` requests (fewer if `limit_s` runs out)."""
    import httpx

    next_index = start_index
    deadline = time.perf_counter() + limit_s
    outcomes: list[Outcome] = []
    limits = httpx.Limits(max_connections=clients + 4, max_keepalive_connections=clients + 4)
    timeout = httpx.Timeout(300.0, connect=30.0)

    async def client_loop(client):
        nonlocal next_index
        while next_index < start_index + requests and time.perf_counter() < deadline:
            index = next_index
            next_index += 1
            outcomes.append(await one_request(client, server.url, index, max_tokens, count_tokens))
            server.done += 1

    started = time.perf_counter()
    async with httpx.AsyncClient(limits=limits, timeout=timeout) as client:
        await asyncio.gather(*(client_loop(client) for _ in range(clients)))
    return outcomes, time.perf_counter() - started


async def wait_ready(server: Server, limit_s: float = 180.0) -> None:
    """Until a one-token chat completion succeeds (our server answers 503 while loading)."""
    import httpx

    deadline = time.perf_counter() + limit_s
    async with httpx.AsyncClient(timeout=60.0) as client:
        while time.perf_counter() < deadline:
            if server.process.poll() is not None:
                raise RuntimeError(f"{server.name} exited with {server.process.returncode} "
                                   f"(see {CACHE / f'server-{server.name}.log'})")
            try:
                body = {**request_body(0, 1), "stream": False}
                body.pop("stream_options")
                reply = await client.post(f"{server.url}/v1/chat/completions", json=body)
                if reply.status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.5)
    raise RuntimeError(f"{server.name} was not ready within {limit_s:.0f} s")


# --------------------------------------------------------------------------------------------
# figures


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    rank = q * (len(ordered) - 1)
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def level_figures(outcomes: list[Outcome], wall_s: float) -> dict:
    ok = [o for o in outcomes if o.kind == "ok"]
    firsts = [o.first_token_s for o in ok if o.first_token_s is not None]
    totals = [o.total_s for o in ok]
    tokens = sum(o.tokens for o in ok)
    kinds = {k: sum(o.kind == k for o in outcomes) for k in ("ok", "error", "429", "lost")}
    details = sorted({o.detail for o in outcomes if o.detail})[:3]
    prompts = [o.prompt_tokens for o in ok if o.prompt_tokens]
    return {"prompt_tokens": statistics.median(prompts) if prompts else None,
            "load1": round(os.getloadavg()[0], 2), "requests": len(outcomes), **kinds, "tokens": tokens, "wall_s": round(wall_s, 3),
            "tok_s": round(tokens / wall_s, 1) if wall_s > 0 else 0.0,
            "ttft_p50": percentile(firsts, 0.5), "ttft_p95": percentile(firsts, 0.95),
            "total_p50": percentile(totals, 0.5), "total_p95": percentile(totals, 0.95),
            "usage_counted": all(o.usage for o in ok) if ok else False, "details": details}


def median_of(runs: list[dict], key: str) -> float | None:
    values = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(values) if values else None


def combine(runs: list[dict]) -> dict:
    """Medians over rounds of the rates and percentiles; sums of the counts."""
    out = {k: median_of(runs, k) for k in ("tok_s", "ttft_p50", "ttft_p95", "total_p50", "total_p95",
                                           "load1", "prompt_tokens")}
    out.update({k: sum(r[k] for r in runs) for k in ("requests", "ok", "error", "429", "lost")})
    out["usage_counted"] = all(r["usage_counted"] for r in runs)
    out["details"] = sorted({d for r in runs for d in r["details"]})[:3]
    return out


def rss_trend(server: Server, warmup: int) -> dict:
    """RSS after the first `warmup` requests, at the end, and the most, in MiB."""
    samples = server.samples
    if not samples:
        return {}
    after = [s for s in samples if s[1] >= warmup] or samples[-1:]
    return {"requests": server.done, "warm_mib": round(after[0][2], 1),
            "end_mib": round(samples[-1][2], 1), "peak_mib": round(max(s[2] for s in samples), 1),
            "processes": samples[-1][3], "warmup": warmup}


def seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def table(levels: list[tuple[int, int]], names: list[str], results: dict, load: bool = False) -> str:
    """One row per level and server; `load`: with the 1-minute load average as the level
    started (median over rounds)."""
    head = ("| clients | server | tok/s | first token p50 / p95 (s) | complete p50 / p95 (s) "
            "| ok | errors | 429 | lost |" + (" load |" if load else "") +
            "\n|---:|---|---:|---:|---:|---:|---:|---:|---:|" + ("---:|" if load else "") + "\n")
    rows = []
    for clients, _ in levels:
        for name in names:
            runs = results[name].get(clients)
            if not runs:
                continue
            c = combine(runs)
            rows.append(f"| {clients} | {name} | {c['tok_s']:.1f} | {seconds(c['ttft_p50'])} / "
                        f"{seconds(c['ttft_p95'])} | {seconds(c['total_p50'])} / "
                        f"{seconds(c['total_p95'])} | {c['ok']} | {c['error']} | {c['429']} | "
                        f"{c['lost']} |" + (f" {c['load1'] or 0:.1f} |" if load else ""))
    return head + "\n".join(rows) + "\n"


def rss_table(trends: dict) -> str:
    head = ("| server | requests | processes | RSS after warm-up (MiB) | RSS at end (MiB) "
            "| peak (MiB) |\n|---|---:|---:|---:|---:|---:|\n")
    rows = [f"| {name} | {t['requests']} | {t['processes']} | {t['warm_mib']:.0f} "
            f"(after {t['warmup']}) | {t['end_mib']:.0f} | {t['peak_mib']:.0f} |"
            for name, t in trends.items() if t]
    return head + "\n".join(rows) + "\n"


# --------------------------------------------------------------------------------------------
# the run


def parse_levels(text: str) -> list[tuple[int, int]]:
    levels = []
    for part in text.split(","):
        clients, _, requests = part.partition(":")
        levels.append((int(clients), int(requests or clients)))
    return levels


def make_token_counter(data_dir: Path):
    """Tokens of a streamed text, for a server that sends no usage chunk: the model's own
    tokenizer, without special tokens."""
    from tokenizers import Tokenizer

    folder = next(p for p in (data_dir / "models").iterdir() if (p / "tokenizer.json").is_file())
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    return lambda text: len(tokenizer.encode(text, add_special_tokens=False).ids)


async def run(args, servers: list[Server], levels, count_tokens) -> tuple[dict, dict]:
    results: dict = {s.name: {} for s in servers}
    for server in servers:
        server.start()
    for server in servers:
        await wait_ready(server)
        await drive(server, 2, 4, 60, args.max_tokens, count_tokens)  # warm-up, not counted
        log(f"{server.name} ready on {server.url}")
    index = 0
    for round_no in range(args.rounds):
        for level_no, (clients, requests) in enumerate(levels):
            shift = (round_no + level_no) % len(servers)
            for server in servers[shift:] + servers[:shift]:  # rotated: no one always first
                outcomes, wall = await drive(server, clients, requests, args.level_limit,
                                             args.max_tokens, count_tokens, index)
                figures = level_figures(outcomes, wall)
                results[server.name].setdefault(clients, []).append(figures)
                log(f"round {round_no + 1} {clients:>2} clients {server.name}: "
                    f"{figures['tok_s']:.1f} tok/s, first token p95 {seconds(figures['ttft_p95'])} s, "
                    f"ok {figures['ok']}/{figures['requests']}, lost {figures['lost']}, "
                    f"errors {figures['error']}, 429 {figures['429']} {figures['details'] or ''}")
            index += requests
    await soak(args, servers, results, count_tokens, index)
    warmup = args.warmup
    trends = {s.name: rss_trend(s, warmup) for s in servers}
    return results, trends


async def soak(args, servers, results, count_tokens, index) -> None:
    """Our best server (most tokens/s at the highest level) driven on to --soak requests."""
    ours_servers = [s for s in servers if s.name.startswith("ours")]
    if not ours_servers or args.soak <= 0:
        return
    top = max(c for c, _ in parse_levels(args.levels))
    best = max(ours_servers, key=lambda s: combine(results[s.name].get(top, []) or [
        {"tok_s": 0, "ttft_p50": None, "ttft_p95": None, "total_p50": None, "total_p95": None,
         "requests": 0, "ok": 0, "error": 0, "429": 0, "lost": 0, "usage_counted": False,
         "details": []}])["tok_s"] or 0)
    remaining = args.soak - best.done
    if remaining <= 0:
        return
    log(f"soak: {best.name} on to {args.soak} requests ({remaining} more, 16 clients)")
    outcomes, wall = await drive(best, 16, remaining, args.soak_limit, args.max_tokens,
                                 count_tokens, index)
    figures = level_figures(outcomes, wall)
    results[best.name]["soak"] = [figures]
    log(f"soak {best.name}: {figures['tok_s']:.1f} tok/s, ok {figures['ok']}/{figures['requests']}, "
        f"lost {figures['lost']}, errors {figures['error']}, 429 {figures['429']}")


def versions(llama_python: Path | None, names: list[str]) -> str:
    import importlib.metadata as md

    ours_v = {d: md.version(d) for d in ("onnxruntime-genai", "onnxruntime", "uvicorn")}
    text = ", ".join(f"{k} {v}" for k, v in ours_v.items())
    if llama_python:
        llama_v = subprocess.run(
            [str(llama_python), "-c", "import llama_cpp; print(llama_cpp.__version__)"],
            capture_output=True, text=True, check=False).stdout.strip()
        text += f"; llama-cpp-python {llama_v or '?'} (built from source)"
    if any(n.startswith("llama-server") for n in names) and LLAMA_SERVER.exists():
        built = subprocess.run([str(LLAMA_SERVER), "--version"], capture_output=True, text=True,
                               check=False)
        line = next((x for x in (built.stdout + built.stderr).splitlines() if x.startswith("version")), "?")
        text += f"; llama-server {line.removeprefix('version:').strip()}"
    return text


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            return next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), "?")
    except OSError:
        return platform.processor() or "?"


def section(report: dict) -> str:
    names, levels, results = report["names"], report["levels"], report["results"]
    soak_text = "".join(
        f"Soak ({n}, 16 clients, after the rounds): {combine(r['soak'])['ok']} ok of "
        f"{combine(r['soak'])['requests']}, {combine(r['soak'])['tok_s']:.1f} tok/s, lost "
        f"{combine(r['soak'])['lost']}, errors {combine(r['soak'])['error']}, 429 "
        f"{combine(r['soak'])['429']}.\n\n" for n, r in results.items() if "soak" in r)
    counted = "; ".join(
        f"{n}: {'its usage chunk' if combine([x for v in results[n].values() for x in v])['usage_counted'] else 'the tokenizer on the streamed text (no usage chunk)'}"
        for n in names if results.get(n))
    return (
        f"{SECTION}\n\n"
        f"`python bench/bench_server.py` ({report['started'][:16].replace('T', ' ')}, "
        f"{report['machine']}, shared and noisy; {report['rounds']} rounds, servers taking turns "
        f"per level, medians over rounds; counts are sums). {report['versions']}.\n\n"
        f"Streaming `/v1/chat/completions` on loopback, at most {report['max_tokens']} new tokens, "
        f"temperature 0, 6 fixed chats (~{report['prompt_tokens']} tokens of content). `ours-wW`: "
        f"`serve --llm-workers W`; `-tT`: the model's intra-op threads set to T (without it: "
        f"each process's share of the physical cores); `llama.cpp`: `llama_cpp.server --n_threads {THREADS} "
        f"--n_ctx 2048 --interrupt_requests False`, the same GGUF. Tokens counted by {counted}.\n\n"
        f"{table(levels, names, results)}\n{verdict(report)}\n{soak_text}"
        f"Resident memory of each server with its child processes (sampled every 0.5 s):\n\n"
        f"{rss_table(report['trends'])}\n{READING}"
    )


READING = """\
How to read it. llama-cpp-python's server runs one completion at a time behind one lock (its
2 threads on one request; the others wait), with a Python step per token; with its default
`--interrupt_requests True` a waiting request cuts the running stream short (no finish_reason,
counted as lost: try `--servers llama.cpp-interrupting`), so it is measured with that off. Ours
runs W model processes, each on its share of the physical cores (2 cores: W=1 runs 2 threads,
W=2 one each), so W=2 uses both cores once 2 or more requests wait, and W=1 streams a lone
request faster. Where the spinning intra-op threads compete with the HTTP server and the clients
on the same cores, 2 threads can lose to 1: compare `-t1` and `-t2`. First-token times at 16 and 64 clients are mostly queueing (first come first
served: p95 is about the queue's depth over W times one request's time). No 429s: the queue
(128 here; `serve` defaults to 64) holds every waiting client. RSS sums each process's resident
pages (shared ones counted per process): the server process holds the embedder, each model
process about 300 MiB more.
"""


def verdict(report: dict) -> str:
    """Against the issue's target: per level, tokens/s at least the peer's and p95 first-token
    time no worse, the peer being llama-server -np 4 (with 2 threads, and with 1 where that ran)
    or else llama-cpp-python's server; and which of ours serves each level best."""
    names, results = report["names"], report["results"]
    peers = [n for n in ("llama-server-np4", "llama-server-np4-t1") if n in names and results.get(n)]
    if not peers and "llama.cpp" in names and results.get("llama.cpp"):
        peers = ["llama.cpp"]
    lines = []
    for name in (n for n in names if n.startswith("ours") and results.get(n)):
        for peer in peers:
            misses = []
            for clients, _ in report["levels"]:
                if clients not in results[name] or clients not in results[peer]:
                    continue
                ours_c, peer_c = combine(results[name][clients]), combine(results[peer][clients])
                if ours_c["tok_s"] < peer_c["tok_s"]:
                    misses.append(f"{clients} clients: {ours_c['tok_s']:.1f} < {peer_c['tok_s']:.1f} tok/s")
                if (ours_c["ttft_p95"] or 0) > (peer_c["ttft_p95"] or 0):
                    misses.append(f"{clients} clients: first-token p95 {seconds(ours_c['ttft_p95'])} > "
                                  f"{seconds(peer_c['ttft_p95'])} s")
                if ours_c["lost"] or ours_c["error"]:
                    misses.append(f"{clients} clients: {ours_c['lost']} lost, {ours_c['error']} errors")
            against = f" against {peer}" if len(peers) > 1 or peer != "llama.cpp" else ""
            lines.append(f"- {name}{against}: " + ("meets the target at every level." if not misses
                                                   else "misses it at " + "; ".join(misses) + "."))
    best = []
    for clients, _ in report["levels"]:
        ranked = [(combine(results[n][clients])["tok_s"], n) for n in names
                  if n.startswith("ours") and clients in results.get(n, {})]
        if ranked:
            best.append(f"{clients}: {max(ranked)[1]}")
    if best:
        lines.append(f"- Most tokens/s of ours, per level: {', '.join(best)}.")
    return "\n".join(lines) + "\n"


def ratios(report: dict) -> str:
    """Per level: the best of ours (most tokens/s) against each llama-server run, as ratios."""
    names, results = report["names"], report["results"]
    peers = [n for n in names if n.startswith("llama-server") and results.get(n)]
    head = ("| clients | best of ours | " + " | ".join(
        f"tok/s ours / {p} | first-token p95 ours / {p}" for p in peers) + " |\n|---:|---|" +
        "---:|---:|" * len(peers) + "\n")
    rows = []
    for clients, _ in report["levels"]:
        ranked = [(combine(results[n][clients])["tok_s"], n) for n in names
                  if n.startswith("ours") and clients in results.get(n, {})]
        if not ranked:
            continue
        best = combine(results[max(ranked)[1]][clients])
        cells = []
        for peer in peers:
            other = combine(results[peer].get(clients, []) or [{}]) if clients in results[peer] else None
            if other is None:
                cells += ["—", "—"]
                continue
            cells.append(f"{best['tok_s'] / other['tok_s']:.2f}x" if other["tok_s"] else "—")
            cells.append(f"{best['ttft_p95'] / other['ttft_p95']:.2f}x"
                         if best["ttft_p95"] and other["ttft_p95"] else "—")
        rows.append(f"| {clients} | {max(ranked)[1]} ({best['tok_s']:.1f} tok/s) | " + " | ".join(cells) + " |")
    return head + "\n".join(rows) + "\n"


def peer_section(report: dict) -> str:
    """The issue-33 section: ours against llama.cpp's own llama-server."""
    names, levels, results = report["names"], report["levels"], report["results"]
    prompts = "; ".join(
        f"{n}: {combine([x for v in results[n].values() for x in v])['prompt_tokens']:.0f}"
        for n in names if results.get(n)
        and combine([x for v in results[n].values() for x in v])["prompt_tokens"])
    loads = [r.get("load1") for n in names for v in results.get(n, {}).values() for r in v
             if r.get("load1") is not None]
    load_text = (f"1-minute load average {min(loads):.1f} to {max(loads):.1f} at the levels' starts "
                 f"(median {statistics.median(loads):.1f})" if loads else "load not recorded")
    return (
        f"{PEER_SECTION}\n\n"
        f"`python bench/bench_server.py --servers {','.join(names)} --rounds {report['rounds']} "
        f"--soak 0` ({report['started'][:16].replace('T', ' ')}, {report.get('cpu', '?')}, "
        f"{report['machine']}, shared: {load_text}; servers taking turns per level, the order "
        f"rotating per round; medians over rounds, counts summed). {report['versions']}.\n\n"
        f"Streaming `/v1/chat/completions` on loopback, `max_tokens` {report['max_tokens']}, "
        f"temperature 0, `stream_options.include_usage`, the same 6 chats in the same order for "
        f"every server. `llama-server-npN`: llama.cpp's own server built from the llama.cpp in the "
        f"llama-cpp-python 0.3.36 sdist (`make llama-server-native`), `-np N -c {SLOT_CTX}*N -t "
        f"{THREADS} -tb {THREADS} --cont-batching` on the GGUF our built-in model is imported from "
        f"(N sequences decoded together in one batch; it keeps each slot's last prompt in its KV "
        f"cache and reuses the common prefix, so a chat that comes round again skips most of its "
        f"prefill; `-nocache`: `--no-cache-prompt`, prefill every time as ours does; `-tT`: T threads instead of {THREADS}); "
        f"`llama.cpp`: llama-cpp-python's server, "
        f"one request at a time; `ours-wW`: `serve --llm-workers W`, its processes keeping recent "
        f"greedy prompts' KV caches (`--prompt-cache-mib`, 256 shared by the processes by default: a chat "
        f"that comes round again computes its answer's header only, and its text is the same); "
        f"`ours-wW-nocache`: `--prompt-cache-mib 0`, every prompt computed whole; `-sS`: `--llm-streams S`, "
        f"the requests each process answers at once, a token of each in turn (default 2; 1: one "
        f"request at a time, as before). Prompt tokens per request "
        f"(median, from the usage chunk): {prompts or 'none reported'}.\n\n"
        f"{table(levels, names, results, load=True)}\n"
        f"The best of ours at each level against llama-server (ratios of medians; above 1x ours "
        f"is faster in tokens/s, slower in first token):\n\n{ratios(report)}\n"
        f"Against the target (tokens/s >= llama-server -np 4, p95 first token no worse):\n\n"
        f"{verdict(report)}"
    )


def load_report(path: Path) -> dict:
    report = json.loads(path.read_text())
    report["levels"] = [tuple(level) for level in report["levels"]]
    report["results"] = {n: {(int(k) if k.isdigit() else k): v for k, v in r.items()}
                         for n, r in report["results"].items()}
    return report


def write_outputs(args, report: dict) -> None:
    print(table(report["levels"], report["names"], report["results"], load=True))
    if any(n.startswith("llama-server") for n in report["names"]):
        print(ratios(report))
    print(rss_table(report["trends"]))
    if args.json:
        saved = {**report, "results": {n: {str(k): v for k, v in r.items()}
                                       for n, r in report["results"].items()}}
        args.json.write_text(json.dumps(saved, indent=1))
    if not args.no_doc:
        peer = any(n.startswith("llama-server") for n in report["names"])
        heading, text = (PEER_SECTION, peer_section(report)) if peer else (SECTION, section(report))
        update_section(DOC, heading, text)
        log(f"wrote {DOC.relative_to(ROOT)} ({heading})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--servers", default=DEFAULT_SERVERS)
    parser.add_argument("--levels", default=DEFAULT_LEVELS, help="clients:requests per round, ...")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--level-limit", type=float, default=60.0, help="seconds per level at most")
    parser.add_argument("--soak", type=int, default=1000, help="requests in all for our best server")
    parser.add_argument("--soak-limit", type=float, default=240.0)
    parser.add_argument("--warmup", type=int, default=100, help="requests before the RSS baseline")
    parser.add_argument("--data-dir", type=Path, default=CACHE / "server-data")
    parser.add_argument("--llama-python", help="a Python with llama_cpp.server")
    parser.add_argument("--install", action="store_true", help="build llama-cpp-python[server] "
                        "into .venv-llama when no Python has it")
    parser.add_argument("--install-llama-server", action="store_true", help="build llama.cpp's "
                        "llama-server into bench/.cache/llama-server (bench/build_llama_server.sh)")
    parser.add_argument("--quick", action="store_true", help="smoke run: ours-w1, 4 clients, 8 requests")
    parser.add_argument("--no-doc", action="store_true")
    parser.add_argument("--json", type=Path, help="every level's figures as JSON")
    parser.add_argument("--from-json", type=Path, help="write the table of a saved --json run")
    args = parser.parse_args()
    if args.from_json:
        write_outputs(args, load_report(args.from_json))
        return 0
    if args.quick:
        args.servers, args.levels, args.rounds, args.soak, args.no_doc = "ours-w1", "4:8", 1, 0, True
        args.warmup = 4
    started = datetime.datetime.now()
    names = args.servers.split(",")
    if args.install_llama_server and not LLAMA_SERVER.exists():
        install_llama_server()
    wants_llama = any(n.startswith("llama.cpp") for n in names)
    llama_python = find_llama_python(args.llama_python, args.install) if wants_llama else None
    data_dir = prepare_data_dir(args.data_dir)
    count_tokens = make_token_counter(data_dir)
    args.prompt_tokens = round(statistics.median(
        sum(count_tokens(m["content"]) for m in messages_for(i)) for i in range(len(EXCERPTS))))
    gguf = gguf_file()
    levels = parse_levels(args.levels)
    servers = [parse_server(n, data_dir, llama_python, gguf) for n in names]
    try:
        results, trends = asyncio.run(run(args, servers, levels, count_tokens))
    finally:
        for server in servers:
            server.stop()
    report = {"started": started.isoformat(), "names": names, "levels": levels,
              "rounds": args.rounds, "max_tokens": args.max_tokens,
              "prompt_tokens": args.prompt_tokens, "versions": versions(llama_python, names),
              "cpu": cpu_model(),
              "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
              "results": results, "trends": trends}
    write_outputs(args, report)
    bad = sum(combine(v)["lost"] + combine(v)["error"] for r in results.values() for v in r.values())
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
