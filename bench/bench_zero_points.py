"""One matmul, three ways of keeping Q4_1/Q4_K offsets (issue 31): ms per call.

    python bench/bench_zero_points.py [--threads 2] [--reps 7]

  exact  4-bit MatMulNBits + the offset subgraph (Reshape, ReduceSum, MatMul, Add), as imported
         with offsets="exact"
  zp4    4-bit MatMulNBits with uint8 zero points (offsets="zero_points")
  zp8    8-bit MatMulNBits with uint8 zero points (offsets="zero_points_8bit")

Random weights of the built-in SmolLM2's and Qwen3-1.7B's matmul shapes, through the decoder's
own _matmul (engine.models.decoder_graph), accuracy level 4, one row (a decode step) and 128 rows
(a prompt chunk). The three run interleaved; medians of --reps rounds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SHAPES = {"SmolLM2 gate/up 576->3072": (576, 3072), "SmolLM2 down 1536->576": (1536, 576),
          "Qwen3-1.7B gate/up 2048->12288": (2048, 12288), "Qwen3-1.7B down 6144->2048": (6144, 2048)}
WAYS = {"exact": "exact", "zp4": "zero_points", "zp8": "zero_points_8bit"}


def weight(k: int, n: int, offsets: str, rng):
    from engine.models.gguf_weights import BlockWeight, fold_offsets, pack_nibbles

    codes = rng.integers(0, 16, size=(n, k // 32, 32))
    scales = (0.01 + 0.01 * rng.random((n, k // 32))).astype(np.float32)
    exact = BlockWeight(4, pack_nibbles(codes), scales, None, (-0.5 * scales * rng.random((n, k // 32))).astype(np.float32))
    bits = {"exact": None, "zero_points": 4, "zero_points_8bit": 8}[offsets]
    return exact if bits is None else fold_offsets(exact, bits)


def session(k: int, n: int, offsets: str, threads: int):
    import onnxruntime as ort
    from onnx import TensorProto, helper

    from engine.models.decoder_graph import MS, _Graph, _matmul

    g = _Graph(accuracy_level=4)
    _matmul(g, "x", weight(k, n, offsets, np.random.default_rng(0)), "mm")
    g.nodes[-1].output[0] = "y"  # the last node: MatMulNBits, or the offsets' Add
    graph = helper.make_graph(g.nodes, "one", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, None, k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, None, n])], g.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(MS, 1)])
    model.ir_version = 10
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def timed(run, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        run()
    return (time.perf_counter() - start) / calls * 1000


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(ROOT))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args(argv)
    print("| matmul | rows | exact ms | zp4 ms | zp8 ms | zp4 speed / exact's | zp8 speed / exact's |")
    print("|---|---|---|---|---|---|---|")
    for label, (k, n) in SHAPES.items():
        sessions = {way: session(k, n, offsets, args.threads) for way, offsets in WAYS.items()}
        for rows in (1, 128):
            x = np.random.default_rng(1).standard_normal((1, rows, k)).astype(np.float32)
            calls = max(3, 2000 * 576 * 576 // (k * n * rows))
            samples = {way: [] for way in WAYS}
            for _ in range(args.reps):
                for way, s in sessions.items():
                    samples[way].append(timed(lambda: s.run(None, {"x": x}), calls))
            ms = {way: statistics.median(v) for way, v in samples.items()}
            print(f"| {label} | {rows} | {ms['exact']:.3f} | {ms['zp4']:.3f} | {ms['zp8']:.3f} | "
                  f"x{ms['exact'] / ms['zp4']:.2f} | x{ms['exact'] / ms['zp8']:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
