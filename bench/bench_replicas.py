#!/usr/bin/env python
"""Server replicas behind a load balancer (issue 33): one replica killed under 16 clients.

The NUT manuals (tests/.manuals: `make manuals`) are indexed once with the built-in models into
bench/.cache/replicas, built into a signed bundle and installed into the data dir that the
replicas share. N `offline-assistant-cli serve --llm-workers 1` processes run on it on loopback,
with an API key, behind a real HAProxy (`haproxy` on PATH; Debian: apt-get install haproxy) whose
config is tests/helpers/replicas.py's, the one docs/deploy.md gives: health check GET /ready with
the key, leastconn, retry-on conn-failure empty-response response-timeout, option redispatch.

16 clients, each the product's thin-kiosk client (engine.answer.central.CentralServer, which asks
again when an answer breaks off), ask the answerable NUT questions in turn through HAProxy,
streamed (/v1/ask). After --kill-at seconds one replica and its model process get SIGKILL; the
clients go on until --duration. Counted: answers completed, answers that broke off and were asked
again, answers lost (failed even after the retries), completion times before and after the kill,
and the time until HAProxy marked the killed replica down.

    python bench/bench_replicas.py                    # prints the table, writes docs/benchmarks.md
    python bench/bench_replicas.py --replicas 3 --clients 16 --duration 120 --kill-at 50 --no-doc
"""

from __future__ import annotations

import argparse
import os
import platform
import secrets
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.benchdoc import update_section  # noqa: E402
from engine.evaluation.qa import load_qa  # noqa: E402
from engine.paths import AppPaths  # noqa: E402
from tests.helpers.replicas import HAPROXY, balancer, bundled_data_dir, client, kill, replicas  # noqa: E402

CACHE = ROOT / "bench" / ".cache" / "replicas"
MANUALS = ["nut-user-manual.pdf", "nut-FAQ.pdf", "nut-cables.pdf"]
HEADING = "## Server replicas behind a load balancer (issue 33)"
# short answers: the figure is answers lost, and more answers per minute make it firmer
SETTINGS = "max_new_tokens = 24\npassages = 2\n"


def prepared() -> AppPaths:
    """The replicas' data dir (once): the built-in model prepared, the manuals in a bundle."""
    from engine.models.registry import prepare_builtin_llm

    home = AppPaths(CACHE / "models-home").ensure()
    prepare_builtin_llm(home)
    served = AppPaths(CACHE / "served")
    if not served.collection_db("default").is_file():
        files = [ROOT / "tests" / ".manuals" / name for name in MANUALS]
        if not all(f.is_file() for f in files):
            raise SystemExit("the NUT manuals are missing: make manuals")
        for left in ("admin", "served"):  # from a preparation that was stopped
            shutil.rmtree(CACHE / left, ignore_errors=True)
        for left in ("fleet.key", "manuals-1.tar"):
            (CACHE / left).unlink(missing_ok=True)
        served = bundled_data_dir(CACHE, home.models, files)
    served.settings_file.write_text(SETTINGS, encoding="utf-8")
    return served


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(q * (len(values) - 1)))]


def times(answers) -> str:
    seconds = [a.seconds for a in answers if a.ok]
    if not seconds:
        return "-"
    return f"{statistics.median(seconds):.1f} / {percentile(seconds, 0.95):.1f}"


def run(args) -> tuple[str, dict]:
    paths = prepared()
    questions = [q.question for q in load_qa(ROOT / "tests" / "qa" / "dev_nut.jsonl") if q.answerable]
    key = secrets.token_hex(16)
    answers, stop = [], threading.Event()
    load_before = os.getloadavg()
    with replicas(paths, args.replicas, key) as started, \
            balancer([r.url for r in started], key, CACHE) as front:
        threads = [threading.Thread(target=client, args=(front.url, key, questions, stop, answers, n * 3),
                                    daemon=True) for n in range(args.clients)]
        start = time.monotonic()
        for thread in threads:
            thread.start()
        time.sleep(args.kill_at)
        killed_at = time.monotonic()
        kill(started[0])
        down_s = front.wait_status("r1", "DOWN")
        time.sleep(max(0.0, args.duration - (time.monotonic() - start)))
        stop.set()
        for thread in threads:
            thread.join(180)  # each finishes the answer it is waiting for
        ended = time.monotonic()
    load_after = os.getloadavg()
    before = [a for a in answers if a.started + a.seconds < killed_at]  # ended before the kill
    during = [a for a in answers if a.started < killed_at <= a.started + a.seconds]  # in flight at the kill
    after = [a for a in answers if a.started >= killed_at]
    lost = [a for a in answers if not a.ok]
    figures = {
        "answers": len(answers), "completed": sum(a.ok for a in answers),
        "broke off": sum(a.retried > 0 for a in answers), "retried ok": sum(a.retried > 0 and a.ok for a in answers),
        "lost": len(lost), "retries": sum(a.retried for a in answers), "down_s": down_s, "load": (load_before, load_after), "seconds": ended - start,
        "before": before, "during": during, "after": after, "errors": sorted({a.error for a in lost}),
    }
    return table(args, figures), figures


def table(args, f) -> str:
    load = f"{f['load'][0][0]:.1f} before, {f['load'][1][0]:.1f} after"
    lines = [
        f"`python bench/bench_replicas.py --replicas {args.replicas} --clients {args.clients} --duration "
        f"{args.duration} --kill-at {args.kill_at}` ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
        f"{cpu_model()}, {os.cpu_count()} CPUs, shared; load average (1 min) {load}). "
        f"{args.replicas} `serve --llm-workers 1` on one installed bundle of the NUT manuals "
        f"(`max_new_tokens = 24`, `passages = 2`), behind HAProxy {haproxy_version()} (config: docs/deploy.md); "
        f"{args.clients} thin-kiosk clients (`CentralServer`, asking again up to twice when an "
        f"answer breaks off) ask in turn for {f['seconds']:.0f} s; replica r1 and its model process "
        f"get SIGKILL at {args.kill_at} s.",
        "",
        "| | answers | completed | broke off, asked again | lost after the retry | complete p50 / p95 s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, group in (("ended before the kill", f["before"]), ("in flight at the kill", f["during"]),
                        ("asked after the kill", f["after"])):
        lines.append(f"| {name} | {len(group)} | {sum(a.ok for a in group)} | "
                     f"{sum(a.retried > 0 for a in group)} | {sum(not a.ok for a in group)} | {times(group)} |")
    lines.append(f"| **all** | {f['answers']} | {f['completed']} | {f['broke off']} | **{f['lost']}** | "
                 f"{times(f['before'] + f['during'] + f['after'])} |")
    lines += [
        "",
        f"HAProxy marked r1 down {f['down_s']:.2f} s after the kill (check every 1 s, 500 ms once "
        f"failing, down after 2 failed checks). {len(f['after'])} questions asked after the kill, "
        f"{sum(a.retried > 0 for a in f['after'])} broke off: HAProxy sends on one that cannot connect "
        "to r1 meanwhile (`retry-on conn-failure`, `option redispatch`).",
        "",
        "| measure | target | measured |",
        "|---|---|---|",
        f"| replica killed under {args.clients} clients: answers lost after the client's retry | 0 | "
        f"{f['lost']} of {f['answers']} ({f['broke off']} broke off, {f['retried ok']} of them completed "
        f"when asked again; {f['retries']} tries again in all) |",
    ]
    if f["errors"]:
        lines += ["", "Lost answers said: " + "; ".join(f["errors"][:5])]
    return "\n".join(lines) + "\n"


def haproxy_version() -> str:
    said = subprocess.run([HAPROXY, "-v"], capture_output=True, text=True).stdout.split()
    return said[2] if len(said) > 2 else "?"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--duration", type=float, default=150, help="seconds the clients ask (default: 150)")
    parser.add_argument("--kill-at", type=float, default=60, help="seconds before the kill (default: 60)")
    parser.add_argument("--no-doc", action="store_true", help="print only; leave docs/benchmarks.md alone")
    args = parser.parse_args()
    if HAPROXY is None:
        raise SystemExit("haproxy is not installed (Debian: apt-get install haproxy)")
    if args.replicas < 2:
        raise SystemExit("--replicas must be 2 or more: one is killed")
    text, figures = run(args)
    print(text)
    if not args.no_doc:
        update_section(ROOT / "docs" / "benchmarks.md", HEADING, f"{HEADING}\n\n{text}")
    return 1 if figures["lost"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
