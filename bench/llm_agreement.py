"""Greedy agreement with llama.cpp: imported-model folders against the GGUF they came from.

    python bench/llm_agreement.py GGUF FOLDER [FOLDER ...]

Three prompts (the benchmark's prose, three cuts), 32 greedy steps each, end-of-sequence not
special. llama.cpp's tokens come from tests/helpers/llama_reference.py in .venv-llama; each
folder runs through onnxruntime-genai (2 threads). Prints, per folder, how many of the 32 tokens
match before the first difference, per prompt, and how many match in all.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STEPS = 32


def prompts(tokenizer_json: Path) -> list[list[int]]:
    from bench_llm import PROMPT_TEXT
    from tokenizers import Tokenizer

    ids = Tokenizer.from_file(str(tokenizer_json)).encode(PROMPT_TEXT, add_special_tokens=False).ids
    return [ids[:20], ids[40:90], ids[100:200]]


def genai_greedy(folder: Path, asked: list[list[int]], steps: int = STEPS) -> list[list[int]]:
    import onnxruntime_genai as og

    from engine.llm.local import append_prompt

    config = og.Config(str(folder))
    config.clear_providers()
    config.overlay(json.dumps({"model": {"decoder": {"session_options": {"intra_op_num_threads": 2}}}}))
    model = og.Model(config)
    runs = []
    for ids in asked:
        params = og.GeneratorParams(model)
        total = len(ids) + steps
        params.set_search_options(max_length=total, min_length=total, do_sample=False)
        generator = og.Generator(model, params)
        append_prompt(generator, ids)
        tokens = []
        while len(tokens) < steps:
            generator.generate_next_token()
            tokens.append(int(generator.get_next_tokens()[0]))
        runs.append(tokens)
    return runs


def prefix(a: list[int], b: list[int]) -> int:
    same = 0
    for x, y in zip(a, b):
        if x != y:
            break
        same += 1
    return same


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(ROOT))
    from tests.helpers.llama_reference import run_llama_reference

    gguf, folders = Path(argv[0]), [Path(f) for f in argv[1:]]
    asked = prompts(folders[0] / "tokenizer.json")
    reference = run_llama_reference(ROOT / ".venv-llama/bin/python", {"ref": gguf}, asked, STEPS)["ref"]
    for folder in folders:
        runs = genai_greedy(folder, asked)
        prefixes = [prefix(r, ref["tokens"]) for r, ref in zip(runs, reference)]
        matches = sum(x == y for r, ref in zip(runs, reference) for x, y in zip(r, ref["tokens"]))
        print(f"{folder.name}: same tokens before the first difference {prefixes} of {STEPS}; "
              f"{matches}/{STEPS * len(asked)} positions equal", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
