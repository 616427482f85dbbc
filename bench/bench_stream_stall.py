#!/usr/bin/env python
"""How long one stream's text stops while another request's long prompt goes in, in the same
model process (issue 33: a server's process answers --llm-streams requests at once).

Stream A writes a long answer on the built-in model (one process, one thread, two streams, as
`serve` runs each of its processes on a 2-core machine). After A's 20th piece, request B comes
with an uncached prompt of --prompt-tokens tokens. Measured per repetition: the longest gap
between two of A's pieces while B's prompt goes in, A's median gap (its pace), and B's first
token. Medians over repetitions.

    python bench/bench_stream_stall.py --data-dir bench/.cache/server-data --reps 5
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.llm.process import LLMClient  # noqa: E402
from engine.paths import AppPaths  # noqa: E402

SENTENCE = "The pump must be primed with water before it is started. "
STORY = [{"role": "user", "content": "Write a long story about a dragon who loves tea."}]


def one_run(client: LLMClient, prompt_tokens: int, salt: int) -> dict:
    per_sentence = client.count_tokens(SENTENCE)
    long_chat = [{"role": "user", "content": f"Note {salt}. " + SENTENCE * (prompt_tokens // per_sentence)}]
    arrivals: list[float] = []
    b_started = threading.Event()
    b_times: dict[str, float] = {}

    def ask_b() -> None:
        b_times["sent"] = time.perf_counter()
        stream = client.stream(long_chat, max_new_tokens=4, temperature=0)
        for _ in stream:
            b_times.setdefault("first", time.perf_counter())
        b_times["prompt_tokens"] = stream.stats.prompt_tokens

    b_thread = threading.Thread(target=ask_b)
    for piece in client.stream(STORY, max_new_tokens=160, temperature=0):
        arrivals.append(time.perf_counter())
        if len(arrivals) == 20 and not b_started.is_set():
            b_started.set()
            b_thread.start()
    b_thread.join()
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:])]
    during = [b - a for a, b in zip(arrivals, arrivals[1:]) if b > b_times["sent"] and a < b_times["first"]]
    return {"stall": max(during or [0.0]), "pace": statistics.median(gaps[:18]),
            "b_first": b_times["first"] - b_times["sent"], "prompt_tokens": b_times["prompt_tokens"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=ROOT / "bench" / ".cache" / "server-data")
    parser.add_argument("--prompt-tokens", type=int, default=1000)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    model_dir = next(p for p in AppPaths(args.data_dir).models.iterdir() if (p / "genai_config.json").is_file())
    with LLMClient(model_dir, provider="cpu", threads=1, streams=2) as client:
        client.generate(STORY, max_new_tokens=4)  # warm-up
        runs = [one_run(client, args.prompt_tokens, salt) for salt in range(args.reps)]
    for key in ("stall", "pace", "b_first"):
        print(f"{key:8} median {statistics.median(r[key] for r in runs):.3f} s   "
              f"runs {', '.join(f'{r[key]:.3f}' for r in runs)}")
    print(f"B's prompt: {runs[0]['prompt_tokens']} tokens")
    return 0


if __name__ == "__main__":
    sys.exit(main())
