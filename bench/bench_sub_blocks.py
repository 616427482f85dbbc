"""Decode speed of Q2_K/Q3_K/Q6_K weights kept exactly in blocks of 16 against re-quantized to
blocks of 32 (gguf_weights.SUB_BLOCKS_OF_16), on one random GGUF, both in the same run.

    python bench/bench_sub_blocks.py [--type Q6_K] [--hidden 1024] [--ffn 2816] [--layers 6]

Prints the median ms per decoded token (5 runs of 64 tokens after a 64-token prompt) and the
folder size of each build.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.models import gguf_weights  # noqa: E402
from engine.models.gguf_import import import_gguf  # noqa: E402
from tests.engine.models.test_gguf_quant_types import random_tensor_data  # noqa: E402
from tests.helpers import gguf_factory  # noqa: E402

PROMPT, STEPS, RUNS = 64, 64, 5


def _session(folder: Path, threads: int) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    return ort.InferenceSession(str(folder / "model.onnx"), options, providers=["CPUExecutionProvider"])


def _decode_ms(session: ort.InferenceSession, config: dict) -> float:
    """ms per token of STEPS greedy steps after a PROMPT-token prompt."""
    layers, kv, head = config["num_hidden_layers"], config["num_key_value_heads"], config["head_size"]
    past = {f"past_key_values.{i}.{k}": np.zeros((1, kv, 0, head), np.float32)
            for i in range(layers) for k in ("key", "value")}
    ids = list(np.random.default_rng(0).integers(3, 200, PROMPT))
    names = [o.name for o in session.get_outputs()]
    started = None
    for step in range(STEPS + 1):
        if step == 1:
            started = time.perf_counter()  # the prompt's own pass is not decode
        feeds = {"input_ids": np.array([ids if step == 0 else ids[-1:]], np.int64),
                 "attention_mask": np.ones((1, len(ids)), np.int64), **past}
        results = dict(zip(names, session.run(None, feeds)))
        past = {n.replace("present", "past_key_values"): v for n, v in results.items() if n.startswith("present")}
        ids.append(int(results["logits"][0, -1].argmax()))
    return (time.perf_counter() - started) * 1000 / STEPS


def _write_gguf(path: Path, args) -> Path:
    """The factory's random decoder; Q2_K/Q3_K blocks (which it cannot write) come from the
    quant-type tests' writer."""
    original = gguf_factory._add_tensor

    def add(writer, rng, name, rows, cols, kind, scale):
        if kind.name not in ("Q2_K", "Q3_K") or not scale:
            return original(writer, rng, name, rows, cols, kind, scale)
        writer.add_tensor(name, random_tensor_data(kind, rows, cols, rng), raw_dtype=kind)

    gguf_factory._add_tensor = add
    return gguf_factory.write_tiny_gguf(path, weight_type=args.type, embed_type="Q8_0", hidden=args.hidden,
                                        ffn=args.ffn, layers=args.layers, heads=16, kv_heads=4,
                                        tied_output=False, context_length=512)


def _build(source: Path, out: Path, sub_blocks: bool) -> Path:
    gguf_weights.SUB_BLOCKS_OF_16 = sub_blocks
    return import_gguf(source, out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--type", default="Q6_K")
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--ffn", type=int, default=2816)
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        source = _write_gguf(tmp / "m.gguf", args)
        folders = {"blocks of 16 (exact)": _build(source, tmp / "b16", True),
                   "blocks of 32 (re-quantized)": _build(source, tmp / "b32", False)}
        config = json.loads((folders["blocks of 16 (exact)"] / "genai_config.json").read_text())["model"]["decoder"]
        sessions = {name: _session(folder, args.threads) for name, folder in folders.items()}
        times = {name: [] for name in folders}
        for _ in range(RUNS):  # interleaved, so that both see the same machine
            for name, session in sessions.items():
                times[name].append(_decode_ms(session, config))
        for name, folder in folders.items():
            size = sum(p.stat().st_size for p in folder.iterdir()) / 1e6
            print(f"{args.type} {name}: {statistics.median(times[name]):.2f} ms/token "
                  f"(runs {', '.join(f'{t:.2f}' for t in times[name])}), folder {size:.1f} MB")


if __name__ == "__main__":
    main()
