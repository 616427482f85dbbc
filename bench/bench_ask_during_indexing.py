#!/usr/bin/env python
"""A question asked while manuals are being indexed (issue 18): first-token time, idle vs busy.

In one process, as the app does: an Assistant on a small collection (R-intro + R-FAQ; the built-in
LLM in its own child process, as always), and an Indexer running over the other R manuals in a
thread, into a second collection (the CPU it takes is the same as indexing into the asked one).
Questions from tests/qa/r_manuals_dev.jsonl, asked one after another, max_new_tokens=1: the time
from the question to its first token, retrieval included (AnswerStats.time_to_first_token_s).

Modes, each a fresh indexing run (the questions asked while it lasts):
  idle        no indexing
  busy        the Indexer with the default embedder (threads = physical cores)
  busy-1t     the indexer's embedder on 1 thread (one core left to the question)
  busy-yield  the indexer waits between embedding steps while a question is being answered
              (Indexer(pause=...), as the window runs it)

    python bench/bench_ask_during_indexing.py                # all modes, 5 questions each
    python bench/bench_ask_during_indexing.py --modes idle,busy --questions 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.answer.assistant import AssistantSettings  # noqa: E402
from engine.answer.session import open_assistant  # noqa: E402
from engine.encoders.embedder import Embedder  # noqa: E402
from engine.evaluation.qa import load_qa  # noqa: E402
from engine.models.registry import prepare_builtin_llm, resolve_embedder  # noqa: E402
from engine.paths import AppPaths  # noqa: E402
from engine.store.indexer import Indexer, default_embedder, open_collection  # noqa: E402

MANUALS = ROOT / "tests" / ".manuals"
ASKED = ("R-intro", "R-FAQ")
INDEXED = ("R-admin", "R-data", "R-exts", "R-lang", "R-ints")
QA = ROOT / "tests" / "qa" / "r_manuals_dev.jsonl"
MODES = ("idle", "busy", "busy-1t", "busy-yield")


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def build_asked_collection(paths: AppPaths) -> None:
    embedder = default_embedder(paths)
    store = open_collection(paths, embedder=embedder)
    try:
        for _ in Indexer(store, embedder).run([MANUALS / f"{name}.pdf" for name in ASKED]):
            pass
    finally:
        store.close()


def indexing_thread(paths: AppPaths, mode: str, answering: threading.Event,
                    stop: threading.Event) -> threading.Thread:
    threads = 1 if mode == "busy-1t" else None
    embedder = Embedder.from_files(resolve_embedder(paths), threads=threads).load()
    store = open_collection(paths, f"indexing-{mode}", embedder)
    pause = answering if mode == "busy-yield" else None
    state = {"pages": 0, "started": time.perf_counter()}

    def work():
        try:
            for event in Indexer(store, embedder, pause=pause).run([MANUALS / f"{name}.pdf" for name in INDEXED], stop):
                if event.outcome is not None:
                    state["pages"] += event.outcome.pages
        finally:
            state["wall_s"] = time.perf_counter() - state["started"]
            store.close()

    thread = threading.Thread(target=work, name=f"index-{mode}", daemon=True)
    thread.state = state
    thread.start()
    return thread


def ask_all(assistant, questions: list[str], answering: threading.Event,
            busy: threading.Thread | None) -> list[float]:
    times = []
    for question in questions:
        if busy is not None and not busy.is_alive():
            log("indexing ended before all questions were asked")
            break
        answering.set()
        try:
            done = [e for e in assistant.ask(question) if e.kind == "done"][0]
        finally:
            answering.clear()
        if done.stats.time_to_first_token_s is not None:
            times.append(done.stats.time_to_first_token_s)
    return times


def run(args) -> dict:
    questions = [item.question for item in load_qa(QA) if item.answerable
                 and item.doc in {f"{n}.pdf" for n in ASKED}][:args.questions]
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench_ask_") as folder:
        paths = AppPaths(Path(folder)).ensure()
        log("indexing the asked collection ...")
        build_asked_collection(paths)
        llm_folder = prepare_builtin_llm(paths)
        settings = replace(AssistantSettings(), max_new_tokens=1)
        with open_assistant(paths, llm_folder=llm_folder, settings=settings) as assistant:
            ask_all(assistant, questions[:1], threading.Event(), None)  # warm up the LLM
            for mode in args.modes.split(","):
                answering, stop = threading.Event(), threading.Event()
                busy = None if mode == "idle" else indexing_thread(paths, mode, answering, stop)
                if busy is not None:
                    time.sleep(args.settle)  # parsing and embedding under way before the first question
                times = ask_all(assistant, questions, answering, busy)
                row = {"first_token_s": times, "median_s": statistics.median(times) if times else None}
                if busy is not None:
                    stop.set()
                    busy.join()
                    row.update(indexed_pages=busy.state["pages"], indexing_wall_s=busy.state["wall_s"])
                results[mode] = row
                log(f"{mode}: median first token {row['median_s']} s over {len(times)}")
    return results


def section(results: dict) -> str:
    idle = results.get("idle", {}).get("median_s")
    lines = ["## A question during indexing (issue 18)", "",
             "| mode | first token, median | x idle | questions | indexing meanwhile |", "|---|---|---|---|---|"]
    for mode, row in results.items():
        ratio = f"{row['median_s'] / idle:.2f}" if idle and row["median_s"] else "-"
        median = f"{row['median_s']:.2f} s" if row["median_s"] is not None else "-"
        indexing = (f"{row['indexed_pages']} pages in {row['indexing_wall_s']:.0f} s"
                    if "indexed_pages" in row else "-")
        lines.append(f"| {mode} | {median} | {ratio} | {len(row['first_token_s'])} | {indexing} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)}")
    parser.add_argument("--questions", type=int, default=5)
    parser.add_argument("--settle", type=float, default=5.0, help="seconds of indexing before the first question")
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args(argv)
    results = run(args)
    print(section(results))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
