"""Each supported GGUF architecture, imported and run through onnxruntime-genai, against llama.cpp
on the same file: the same 32 greedy tokens from three prompts, and logits within a tolerance.

The files are tiny random decoders with each family's real tensor names and metadata
(tests/helpers/gguf_arch_factory.py). llama.cpp runs once for all of them, in .venv-llama's
python (tests/helpers/llama_reference.py); the test venv never imports llama_cpp.

Tolerances (the largest logit difference over the largest logit, at each of the 32 steps of
llama.cpp's greedy sequence, fed to us token by token), measured here: float weights 7e-5 to
1.2e-3 (llama.cpp keeps its KV cache in float16), allowed 5e-3; quantized weights 2.2e-3 to 5.1e-2
(both engines quantize activations to 8 bits, each its own way, and a random model without q/k
norms, Llama 3's Q4_K here, amplifies that most; 2.6e-2 with our float activations), allowed 1e-1:
4-bit codes with their nibbles swapped move them by 0.28 to 0.54 (each type's exact mapping is
tested value by value in test_gguf_quant_types.py). In float, a wrong
rotary kind, rope base, rope factors, LongRoPE factor, NoPE layer, q/k norm, post norm, window (by
one token), attention scale, embedding scale or activation moves them by 1.4e-2 to 1 or more:
every feature was checked so (changed in the importer and run again).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from engine.models.gguf_import import import_gguf
from tests.helpers.gguf_arch_factory import family, write_family_gguf
from tests.helpers.http_engines import llama_python
from tests.helpers.llama_reference import run_llama_reference

PROMPTS = [[5, 77, 120, 33, 201, 9, 64, 150], [40, 41, 42], list(range(100, 140))]
STEPS = 32
FLOAT_TOLERANCE = 5e-3
QUANT_TOLERANCE = 1e-1

FAMILY_NAMES = ["llama", "llama3", "mistral", "qwen3", "smollm3", "gemma3", "gemma3_scaled", "phi3"]
CASES = [(name, kind) for name in FAMILY_NAMES for kind in ("F32", "F16", "Q8_0", "Q4_0")]
# k-quants need rows of 256: a wider model of the families whose real files are mostly Q4_K_M
K_CASES = [("qwen3", "Q4_K"), ("llama3", "Q4_K"), ("gemma3", "Q4_K")]
# types with per-block offsets, run on both paths: exact offsets, and integer zero points
OFFSET_CASES = [("llama", "Q4_1"), ("qwen3", "Q4_1"), *K_CASES]


def _write(folder: Path, name: str, kind: str) -> Path:
    fam = family(name)
    if kind == "Q4_K":
        fam = family(name, hidden=256, ffn=512, head_dim=64)
    embed = kind if kind in ("F32", "F16") else "Q8_0"
    return write_family_gguf(folder / f"{name}-{kind}.gguf", fam, weight_type=kind, embed_type=embed)


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> dict[tuple[str, str], Path]:
    folder = tmp_path_factory.mktemp("arch_gguf")
    return {case: _write(folder, *case) for case in CASES + OFFSET_CASES}


@pytest.fixture(scope="module")
def llama_cpp(sources) -> dict[tuple[str, str], list[dict]]:
    """llama.cpp's greedy tokens and their logits for every file, in one run (~10 s)."""
    answer = run_llama_reference(llama_python(), {f"{n}/{k}": path for (n, k), path in sources.items()},
                                 PROMPTS, STEPS)
    return {tuple(key.split("/")): records for key, records in answer.items()}


def genai_runs(folder: Path, prompts: list[list[int]], theirs: list[dict]) -> list[dict]:
    """Through onnxruntime-genai, per prompt: our own greedy tokens, and our logits at each step
    of llama.cpp's token sequence (fed to us token by token), to compare every step's logits."""
    import onnxruntime_genai as og

    model = og.Model(str(folder))
    runs = []
    for prompt, reference in zip(prompts, theirs):
        forced = _generator(og, model, prompt, len(reference["tokens"]))
        logits = []
        for token in reference["tokens"]:
            logits.append(np.array(forced.get_logits(), np.float64)[0, -1])
            forced.append_tokens([token])
        runs.append({"tokens": _greedy(og, model, prompt, len(reference["tokens"])), "logits": np.stack(logits)})
    return runs


def _generator(og, model, prompt: list[int], steps: int):
    params = og.GeneratorParams(model)
    params.set_search_options(do_sample=False, max_length=len(prompt) + steps + 1)
    generator = og.Generator(model, params)
    generator.append_tokens(prompt)
    return generator


def _greedy(og, model, prompt: list[int], steps: int) -> list[int]:
    generator, tokens = _generator(og, model, prompt, steps), []
    while len(tokens) < steps and not generator.is_done():
        generator.generate_next_token()
        tokens.append(int(generator.get_next_tokens()[0]))
    return tokens


def assert_same_as_llama_cpp(ours: list[dict], theirs: list[dict], tolerance: float) -> dict:
    """Logits within `tolerance` of the largest at every step, and the same greedy tokens.

    A step where llama.cpp's two best tokens are closer than twice the typical (root mean square)
    difference of our logits from its own is a tie that the two engines' rounding may break
    either way: there our choice may differ, and from the first one our own greedy run may go
    another way. Our run also ends at an end token. Returns the largest difference, and how many
    of the greedy tokens were compared."""
    worst, compared = 0.0, 0
    for prompt, (got, expected) in enumerate(zip(ours, theirs)):
        reference = np.asarray(expected["logits"], np.float64)
        difference = got["logits"] - reference
        worst = max(worst, float((np.abs(difference).max(axis=-1) / np.abs(reference).max(axis=-1)).max()))
        top2 = np.sort(reference, axis=-1)[:, -2:]
        tied = (top2[:, 1] - top2[:, 0]) < 2 * np.sqrt((difference ** 2).mean(axis=-1))
        agree = (got["logits"].argmax(axis=-1) == np.asarray(expected["tokens"])) | tied
        assert agree.all(), f"prompt {prompt}: step {int(np.argmin(agree))} chose another token"
        # onnxruntime-genai stops at an end token; llama.cpp's loop goes on
        fork = min(int(np.argmax(tied)) if tied.any() else len(tied), len(got["tokens"]))
        assert got["tokens"][:fork] == expected["tokens"][:fork], f"prompt {prompt}: greedy tokens differ"
        compared += fork
    assert worst <= tolerance, f"logits differ by {worst:.2e} of the largest (tolerance {tolerance:.0e})"
    return {"worst": worst, "compared": compared}


@pytest.mark.parametrize(("name", "kind"), CASES + K_CASES)
def test_imported_model_matches_llama_cpp(tmp_path, sources, llama_cpp, name, kind):
    folder = import_gguf(sources[(name, kind)], tmp_path / "model")
    tolerance = FLOAT_TOLERANCE if kind in ("F32", "F16") else QUANT_TOLERANCE
    theirs = llama_cpp[(name, kind)]
    seen = assert_same_as_llama_cpp(genai_runs(folder, PROMPTS, theirs), theirs, tolerance)
    print(f"{name} {kind}: largest difference {seen['worst']:.2e}, greedy tokens compared {seen['compared']}")


@pytest.mark.parametrize("offsets", ["exact", "zero_points_8bit"])
@pytest.mark.parametrize(("name", "kind"), OFFSET_CASES)
def test_both_offset_paths_match_llama_cpp(tmp_path, sources, llama_cpp, name, kind, offsets):
    """Q4_1/Q4_K offsets kept exactly, or folded into 8-bit blocks with integer zero points
    (issue 31), at the default accuracy level 4."""
    folder = import_gguf(sources[(name, kind)], tmp_path / "model", offsets=offsets)
    theirs = llama_cpp[(name, kind)]
    seen = assert_same_as_llama_cpp(genai_runs(folder, PROMPTS, theirs), theirs, QUANT_TOLERANCE)
    print(f"{name} {kind} {offsets}: largest difference {seen['worst']:.2e}, greedy tokens compared {seen['compared']}")


BUILTIN_PROMPTS = [
    "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>user\nHow do I replace the filter of a pump?<|im_end|>\n<|im_start|>assistant\n",
    "The safety valve opens when the pressure",
]
# Measured: 4.4e-2 to 5.3e-2 with float activations (our exact import matches a float64 numpy
# forward pass to 1e-4: this is llama.cpp's own 8-bit activations and float16 KV cache over 30
# layers), 6.9e-2 with the default build's 8-bit activations.
BUILTIN_TOLERANCE = 1e-1


@pytest.mark.slow
def test_builtin_model_matches_llama_cpp(builtin_llm_dir):
    """The built-in SmolLM2 as the app runs it (the default build: 8-bit activations), against
    llama.cpp on the same Q4_1 file."""
    from tokenizers import Tokenizer

    from engine.models.registry import BUILTIN_LLM, find_package_file

    gguf_path = find_package_file(BUILTIN_LLM.files[0])
    tokenizer = Tokenizer.from_file(str(builtin_llm_dir / "tokenizer.json"))
    prompts = [tokenizer.encode(text).ids for text in BUILTIN_PROMPTS]
    theirs = run_llama_reference(llama_python(), {"builtin": gguf_path}, prompts, STEPS, n_ctx=512)["builtin"]
    seen = assert_same_as_llama_cpp(genai_runs(builtin_llm_dir, prompts, theirs), theirs, BUILTIN_TOLERANCE)
    print(f"built-in: largest difference {seen['worst']:.2e}, greedy tokens compared {seen['compared']}")
