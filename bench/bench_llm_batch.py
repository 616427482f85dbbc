#!/usr/bin/env python
"""What batching would give a model process (issue 33): onnxruntime-genai's Generator with B
sequences (prompts left-padded) against B generations one after the other, on the built-in
model.

    python bench/bench_llm_batch.py [--threads 2] [--data-dir bench/.cache/server-data]

Prints, per batch size: the prefill's time (the batch's padded prompts in one call), one decode
step's time, tokens/s over 8 chats of bench_server.py, and how many answers have the text of the
same chat generated alone (greedy, 32 new tokens).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from bench_server import CLI, messages_for  # bench/ is on sys.path when run as a script

ROOT = Path(__file__).resolve().parents[1]
NEW = 32
PAD = 0  # <|endoftext|>, never inside a chat; the config's pad id 2 is <|im_end|>, in every chat


def run(model, eos: int, rows: list[list[int]]) -> dict:
    """One generator over the rows, left-padded to the longest: tokens per row and timings."""
    import onnxruntime_genai as og

    width = max(len(r) for r in rows)
    ids = np.full((len(rows), width), PAD, dtype=np.int32)
    for i, row in enumerate(rows):
        ids[i, width - len(row):] = row
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=width + NEW, batch_size=len(rows), do_sample=False)
    generator = og.Generator(model, params)
    started = time.perf_counter()
    generator.append_tokens(ids)
    prefill = time.perf_counter() - started
    out, live, steps = [[] for _ in rows], [True] * len(rows), 0
    while steps < NEW and any(live):
        generator.generate_next_token()
        steps += 1
        for i, token in enumerate(generator.get_next_tokens()):
            if live[i] and int(token) == eos:
                live[i] = False
            elif live[i]:
                out[i].append(int(token))
    total = time.perf_counter() - started
    return {"out": out, "total": total, "prefill": prefill, "step": (total - prefill) / max(1, steps)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--data-dir", type=Path, default=ROOT / "bench" / ".cache" / "server-data")
    args = parser.parse_args()
    import onnxruntime_genai as og

    from engine.llm.local import LocalLLM

    subprocess.run([str(CLI), "models", "prepare", "--data-dir", str(args.data_dir)], check=True,
                   stdout=subprocess.DEVNULL)
    folder = next(p for p in (args.data_dir / "models").iterdir() if (p / "genai_config.json").is_file())
    llm = LocalLLM(folder, threads=args.threads).load()
    prompts = [llm.prompt_ids(messages_for(i), NEW) for i in range(8)]
    config = og.Config(str(folder))
    config.clear_providers()
    config.overlay(json.dumps({"model": {"pad_token_id": PAD, "decoder": {"session_options": {
        "intra_op_num_threads": args.threads, "inter_op_num_threads": 1}}}}))
    model = og.Model(config)
    eos = int(json.loads((folder / "genai_config.json").read_text())["model"]["eos_token_id"])
    run(model, eos, [prompts[0]])  # warm-up
    alone = [run(model, eos, [p]) for p in prompts]
    tokens = sum(len(a["out"][0]) for a in alone)
    seconds = sum(a["total"] for a in alone)
    print(f"prompts {[len(p) for p in prompts]} tokens; {args.threads} threads")
    print(f"B=1, one after the other: {tokens / seconds:.1f} tok/s, prefill "
          f"{statistics.median(a['prefill'] for a in alone) * 1000:.0f} ms, decode step "
          f"{statistics.median(a['step'] for a in alone) * 1000:.1f} ms")
    copies = run(model, eos, [prompts[0]] * 4)["out"]
    print(f"4 copies of one chat (no padding): {sum(o == alone[0]['out'][0] for o in copies)}/4 texts "
          f"as alone")
    for size in (2, 4, 8):
        runs = [(start, run(model, eos, prompts[start:start + size])) for start in range(0, 8, size)]
        tokens = sum(len(o) for _, r in runs for o in r["out"])
        seconds = sum(r["total"] for _, r in runs)
        same = sum(o == alone[start + i]["out"][0] for start, r in runs for i, o in enumerate(r["out"]))
        prefill = statistics.median(r["prefill"] for _, r in runs)
        print(f"B={size}: {tokens / seconds:.1f} tok/s, prefill {prefill * 1000:.0f} ms, "
              f"decode step {statistics.median(r['step'] for _, r in runs) * 1000:.1f} ms, "
              f"{same}/8 texts as alone")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
