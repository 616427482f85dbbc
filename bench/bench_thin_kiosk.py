#!/usr/bin/env python
"""A thin kiosk against its central server (issue 33): the lead shown after Enter, and the word
that the server is gone.

The NUT manuals (tests/.manuals: `make manuals`) are indexed once into bench/.cache/thin with the
built-in models; `offline-assistant-cli serve` runs on them on loopback, as a plant's central
machine would. Each answerable question of tests/qa/dev_nut.jsonl is asked in turn, interleaved,
by a thin session (settings.server_url: the answer comes from the server) and by a local session
on the same collection (the kiosk that holds its bundle), and the time from the question to its
lead and to its first generated text is taken; medians and p95. Then the server is stopped and
the thin session asked again: the time until it says so.

    python bench/bench_thin_kiosk.py              # prints the table (markdown)
    python bench/bench_thin_kiosk.py --questions 10
    python bench/bench_thin_kiosk.py --questions 10 --busy 3   # 3 other clients keep the model busy

With --busy N, N other clients ask the server in a loop meanwhile (streamed /v1/ask), so that the
measured questions queue for the server's model process as they would in a plant.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.answer.session import AnswerSession, SessionConfig  # noqa: E402
from engine.config import Settings  # noqa: E402
from engine.evaluation.qa import load_qa  # noqa: E402
from engine.paths import AppPaths  # noqa: E402

CACHE = ROOT / "bench" / ".cache" / "thin"
MANUALS = ["nut-user-manual.pdf", "nut-FAQ.pdf", "nut-cables.pdf"]


def prepared() -> AppPaths:
    """The data dir with the built-in model prepared and the NUT manuals indexed (once)."""
    from engine.models.registry import prepare_builtin_llm
    from engine.store.indexer import Indexer, default_embedder, open_collection

    paths = AppPaths(CACHE).ensure()
    prepare_builtin_llm(paths)
    if not paths.collection_db("default").is_file():
        files = [ROOT / "tests" / ".manuals" / name for name in MANUALS]
        embedder = default_embedder(paths)
        with open_collection(paths, "default", embedder) as store:
            for event in Indexer(store, embedder).run([f for f in files if f.is_file()]):
                if event.outcome:
                    print(f"indexed {event.outcome.path}: {event.outcome.status}", file=sys.stderr)
        embedder.close()
    return paths


def serve(paths: AppPaths) -> tuple[subprocess.Popen, str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "engine", "serve", "--data-dir", str(paths.root),
                               "--port", str(port), "--llm-workers", "1", "--provider", "cpu"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/ready", timeout=2).status_code == 200:
                return server, url
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    server.kill()
    raise SystemExit("the server did not become ready within 300 s")


def timed(session: AnswerSession, question: str) -> tuple[float, float | None]:
    """Seconds from the question to its lead (or refusal text), and to its first generated text."""
    start, lead, first = time.perf_counter(), None, None
    for event in session.ask(question):
        now = time.perf_counter() - start
        if event.kind in ("lead", "text") and lead is None:
            lead = now
        elif event.kind == "text" and first is None:
            first = now
    return lead if lead is not None else time.perf_counter() - start, first


def keep_busy(url: str, questions: list[str], stop: threading.Event) -> None:
    """Asks the server one question after another (streamed) until `stop`."""
    with httpx.Client(timeout=300) as client:
        for n in range(10**9):
            if stop.is_set():
                return
            body = {"question": questions[n % len(questions)], "stream": True}
            with client.stream("POST", url + "/v1/ask", json=body) as reply:
                for _ in reply.iter_lines():
                    if stop.is_set():
                        return


def figures(values: list[float]) -> str:
    values = sorted(v for v in values if v is not None)
    if not values:
        return "-"
    p95 = values[min(len(values) - 1, round(0.95 * (len(values) - 1)))]
    return f"{statistics.median(values):.3f} / {p95:.3f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--busy", type=int, default=0, help="other clients asking the server meanwhile")
    args = parser.parse_args()
    paths = prepared()
    questions = [q.question for q in load_qa(ROOT / "tests" / "qa" / "dev_nut.jsonl") if q.answerable]
    questions = questions[:args.questions]
    server, url = serve(paths)
    kiosk = AppPaths(CACHE.parent / "thin-kiosk").ensure()  # no manuals, no model of its own
    times: dict[str, list] = {"thin": [], "local": []}
    stop = threading.Event()
    busy = [threading.Thread(target=keep_busy, args=(url, questions[::-1], stop), daemon=True)
            for _ in range(args.busy)]
    try:
        with AnswerSession(kiosk) as thin, AnswerSession(paths) as local:
            thin.open(SessionConfig(Settings(server_url=url, max_new_tokens=32)))
            local.open(SessionConfig(Settings(max_new_tokens=32)))
            timed(thin, questions[0]), timed(local, questions[0])  # warm both
            for thread in busy:
                thread.start()
            time.sleep(2.0 if busy else 0.0)  # their questions queue first
            for n, question in enumerate(questions):
                for name, session in (("thin", thin), ("local", local))[:: 1 if n % 2 else -1]:
                    times[name].append(timed(session, question))
            stop.set()
            server.terminate()
            server.wait(30)
            start = time.perf_counter()
            said = [e for e in thin.ask(questions[0]) if e.kind == "error"]
            gone_s = time.perf_counter() - start
    finally:
        if server.poll() is None:
            server.kill()
    load = os.getloadavg()[0]
    print(f"{len(questions)} questions, {args.busy} other clients, load average {load:.1f}, "
          f"{os.cpu_count()} CPUs\n")
    print("| session | lead shown, p50 / p95 s | first generated text, p50 / p95 s |")
    print("|---|---|---|")
    for name, rows in times.items():
        print(f"| {name} | {figures([r[0] for r in rows])} | {figures([r[1] for r in rows])} |")
    ratio = statistics.median(r[0] for r in times["thin"]) / statistics.median(r[0] for r in times["local"])
    print(f"\nthin / local lead p50: x{ratio:.2f}")
    print(f"server stopped: said in {gone_s:.3f} s ({said[0].message if said else 'no error event'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
