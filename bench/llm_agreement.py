"""Greedy agreement with llama.cpp, and llama.cpp's own with a float32 run (issues 19, 31).

    python bench/llm_agreement.py [--shape qwen3-1.7b] [--variants fp32,exact,zp4,zp8] [--json PATH]
    python bench/llm_agreement.py GGUF FOLDER [FOLDER ...]     # folders imported already

The built-in SmolLM2 (or a random-weight GGUF of a real shape, bench/gguf_shapes.py) is imported
once per variant into bench/.cache/ (bench_llm.prepare_ours). llama.cpp (tests/helpers/
llama_reference.py, in .venv-llama) runs every prompt greedily for --steps tokens; each variant
runs through onnxruntime-genai (2 threads), twice per prompt:
- free-running greedy: tokens equal before the first difference, per prompt, and positions equal;
- fed llama.cpp's tokens one by one ("forced"): at each step, whether our best token is
  llama.cpp's (top-1 agreement: every step counts, none is lost after a first difference), and
  how far our logits are from llama.cpp's (largest difference over the largest logit).
The fp32 variant is our exact import with float32 activations and every weight exact (4-bit
blocks, their offsets exact; any other type as float32): a float32 run of the file's own weights. Its row against llama.cpp is llama.cpp's
agreement with float32, the bar for the others. "vs fp32" compares each variant's forced best
tokens with fp32's on the same steps.

Prompts: the benchmark's prose (built-in model) cut at --prompts places, 20 to 100 tokens
each; random token ids for a random-weight shape.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
STEPS = 32
VARIANTS = {  # name -> bench_llm's "ours:..." import variant
    "fp32": "ours:accuracy_level=0+offsets=exact+f32_wide",
    "exact": "ours:offsets=exact",
    "zp4": "ours:offsets=zero_points",
    "zp8": "ours:offsets=zero_points_8bit",
}


def text_prompts(tokenizer_json: Path, count: int) -> list[list[int]]:
    from bench_llm import PROMPT_TEXT
    from tokenizers import Tokenizer

    ids = Tokenizer.from_file(str(tokenizer_json)).encode(PROMPT_TEXT, add_special_tokens=False).ids
    return [ids[start:start + length] for start, length in _cuts(count, len(ids))]


def random_prompts(vocab: int, count: int) -> list[list[int]]:
    rng = np.random.default_rng(7)
    return [rng.integers(300, vocab, size=length).tolist() for _, length in _cuts(count, 10 ** 6)]


def _cuts(count: int, available: int) -> list[tuple[int, int]]:
    """(start, length) of each prompt: lengths 20..100, starts spread over the text."""
    lengths = [20 + (80 * i) // max(1, count - 1) for i in range(count)]
    return [((i * 37) % max(1, available - length), length) for i, length in enumerate(lengths)]


def _model(folder: Path):
    import onnxruntime_genai as og

    config = og.Config(str(folder))
    config.clear_providers()
    config.overlay(json.dumps({"model": {"decoder": {"session_options": {"intra_op_num_threads": 2}}}}))
    return og, og.Model(config)


def _generator(og, model, ids: list[int], steps: int):
    params = og.GeneratorParams(model)
    total = len(ids) + steps + 1
    params.set_search_options(max_length=total, min_length=total, do_sample=False)  # no end token
    generator = og.Generator(model, params)
    from engine.llm.local import append_prompt

    append_prompt(generator, ids)
    return generator


def genai_greedy(folder: Path, asked: list[list[int]], steps: int = STEPS) -> list[list[int]]:
    og, model = _model(folder)
    runs = []
    for ids in asked:
        generator, tokens = _generator(og, model, ids, steps), []
        while len(tokens) < steps:
            generator.generate_next_token()
            tokens.append(int(generator.get_next_tokens()[0]))
        runs.append(tokens)
    return runs


def genai_forced(folder: Path, asked: list[list[int]], forced: list[list[int]]) -> list[np.ndarray]:
    """Our logits at each step of the given token sequences, fed one token at a time."""
    og, model = _model(folder)
    runs = []
    for ids, tokens in zip(asked, forced):
        generator, logits = _generator(og, model, ids, len(tokens)), []
        for token in tokens:
            logits.append(np.array(generator.get_logits(), np.float32)[0, -1])
            generator.append_tokens([token])
        runs.append(np.stack(logits))
    return runs


def prefix(a: list[int], b: list[int]) -> int:
    same = 0
    for x, y in zip(a, b):
        if x != y:
            break
        same += 1
    return same


def compare(free: list[list[int]], forced: list[np.ndarray], reference: list[dict]) -> dict:
    """A variant against llama.cpp: free-running prefixes and positions, forced top-1 and logits."""
    ref_tokens = [r["tokens"] for r in reference]
    best = [f.argmax(axis=-1) for f in forced]
    differences = [np.abs(f - r["logits"]).max(axis=-1) / np.abs(r["logits"]).max(axis=-1)
                   for f, r in zip(forced, reference)]
    return {
        "prefixes": [prefix(a, b) for a, b in zip(free, ref_tokens)],
        "positions": sum(x == y for a, b in zip(free, ref_tokens) for x, y in zip(a, b)),
        "top1": int(sum((b == np.asarray(t)).sum() for b, t in zip(best, ref_tokens))),
        "steps": sum(len(t) for t in ref_tokens),
        "logit_diff_median": float(np.median(np.concatenate(differences))),
        "logit_diff_max": float(np.concatenate(differences).max()),
        "best": [b.tolist() for b in best],
    }


def with_fp32(results: dict) -> None:
    """Each variant's forced best tokens against fp32's on the same steps."""
    if "fp32" not in results:
        return
    reference = results["fp32"]["best"]
    for row in results.values():
        row["vs_fp32"] = int(sum(np.sum(np.asarray(a) == np.asarray(b)) for a, b in zip(row["best"], reference)))


def prepared(shape: str | None, names: list[str]) -> tuple[Path, dict[str, Path]]:
    from bench_llm import CACHE, gguf_path, ours_folder, prepare_ours
    from gguf_shapes import shape_file

    gguf = shape_file(shape, CACHE / "shapes") if shape else gguf_path()
    folders = {}
    for name in names:
        variant = VARIANTS.get(name, name)
        folders[name] = prepare_ours(gguf, ours_folder(variant, shape), variant)
    return gguf, folders


def measure(gguf: Path, folders: dict[str, Path], asked: list[list[int]], steps: int) -> dict:
    from tests.helpers.llama_reference import run_llama_reference

    started = time.perf_counter()
    n_ctx = max(len(a) for a in asked) + steps + 16
    reference = run_llama_reference(ROOT / ".venv-llama/bin/python", {"ref": gguf}, asked, steps, n_ctx)["ref"]
    print(f"llama.cpp: {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    results = {}
    for name, folder in folders.items():
        started = time.perf_counter()
        forced = genai_forced(folder, asked, [r["tokens"] for r in reference])
        results[name] = compare(genai_greedy(folder, asked, steps), forced, reference)
        print(f"{name}: {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    with_fp32(results)
    return results


def table(results: dict, prompts: int, steps: int) -> str:
    lines = [f"| variant | free-running: same tokens before the first difference (of {steps}), per prompt | "
             f"positions equal | forced top-1 = llama.cpp's | forced top-1 = fp32's | "
             "logit difference / largest, median (max) |", "|---|---|---|---|---|---|"]
    for name, row in results.items():
        lines.append(
            f"| {name} | {', '.join(map(str, row['prefixes']))} | {row['positions']}/{prompts * steps} | "
            f"{row['top1']}/{row['steps']} | {row.get('vs_fp32', '-')}/{row['steps']} | "
            f"{row['logit_diff_median']:.2e} ({row['logit_diff_max']:.2e}) |")
    return "\n".join(lines)


def legacy(argv: list[str]) -> int:
    """GGUF FOLDER...: the folders as they are, three prose prompts (issue 19's form)."""
    gguf, folders = Path(argv[0]), {Path(f).name: Path(f) for f in argv[1:]}
    asked = text_prompts(next(iter(folders.values())) / "tokenizer.json", 3)
    print(table(measure(gguf, folders, asked, STEPS), len(asked), STEPS))
    return 0


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(ROOT))
    if argv and not argv[0].startswith("-"):
        return legacy(argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", help="a random-weight shape of bench/gguf_shapes.py (default: the built-in model)")
    parser.add_argument("--variants", default=",".join(VARIANTS),
                        help=f"comma-separated: {', '.join(VARIANTS)} or bench_llm 'ours:...' variants")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--json", type=Path, help="write the results (and the prompts) here")
    args = parser.parse_args(argv)
    from gguf_shapes import SHAPES

    names = [n.strip() for n in args.variants.split(",") if n.strip()]
    gguf, folders = prepared(args.shape, names)
    if args.shape:
        asked = random_prompts(SHAPES[args.shape].vocab, args.prompts)
    else:
        asked = text_prompts(next(iter(folders.values())) / "tokenizer.json", args.prompts)
    results = measure(gguf, folders, asked, args.steps)
    print(table(results, len(asked), args.steps))
    if args.json:
        args.json.write_text(json.dumps({"gguf": gguf.name, "prompts": asked, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
