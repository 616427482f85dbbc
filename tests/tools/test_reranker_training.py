"""tools/reranker/train.py end to end on a handful of pairs: train a step or two, export to
ONNX, quantise to int8, and the app's CrossEncoder loads and runs what it wrote. Needs the
train extra (torch, transformers): `pip install -e ".[train]"` (make test-deps does)."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from engine.encoders.reranker import CrossEncoder  # noqa: E402
from tools.reranker import train  # noqa: E402

pytestmark = pytest.mark.train

QUESTIONS = [
    ("How do I make the server listen on another port?", "Listen\nThe port the server accepts connections on."),
    ("How do I list every entry of the history?", "history -l\nLists all the entries of the history."),
    ("Which option sets the size of the cache?", "cache_size\nThe number of pages the cache holds."),
    ("How do I create a new table?", "CREATE TABLE\nMakes a new table with the columns given."),
    ("How do I undo the last commit?", "git reset HEAD~1 moves the branch back by one commit."),
    ("Why does the print come out blank?", "A blank page: the toner is empty or its seal is still on."),
]


def write_pairs(folder) -> None:
    """Each question with its passage and the next question's passage as a negative, in both
    splits (the trainer reads the train split, and checks on the valid one)."""
    rows = []
    for i, (question, passage) in enumerate(QUESTIONS):
        negative = QUESTIONS[(i + 1) % len(QUESTIONS)][1]
        for split in ("train", "valid"):
            common = {"query": question, "kind": "entry", "package": "test", "page": "p.html", "split": split}
            rows.append({**common, "passage": passage, "label": 1, "negative": None})
            rows.append({**common, "passage": negative, "label": 0, "negative": "bm25"})
    (folder / "pairs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def test_a_handful_of_pairs_trains_exports_and_loads_in_the_app(tmp_path):
    write_pairs(tmp_path)
    out = tmp_path / "model"
    assert train.main(["--pairs", str(tmp_path), "--out", str(out), "--layers", "1", "--max-tokens", "32",
                       "--questions", "6", "--valid", "6", "--batch", "3", "--threads", "2"]) == 0

    record = json.loads((out / "train.json").read_text(encoding="utf-8"))
    assert (record["questions"], record["training"]["steps"], record["layers"]) == (6, 2, 1)
    assert 0 < record["valid_mrr_after"] <= 1
    config = json.loads((out / "config.json").read_text(encoding="utf-8"))
    assert config["architectures"] == [train.ARCHITECTURE] and config["num_hidden_layers"] == 1
    assert not (out / "model.float.onnx").exists()  # scratch stays in .work

    import onnx

    ops = {node.op_type for node in onnx.load(str(out / "model.onnx")).graph.node}
    assert {"DynamicQuantizeLinear", "MatMulInteger"} <= ops  # int8, quantised by onnxruntime
    with CrossEncoder.from_folder(out) as reranker:
        assert reranker.max_tokens == 32  # from the sentence_bert_config.json it wrote
        assert reranker.input_names == ("input_ids", "attention_mask", "token_type_ids")
        scores = reranker.predict(QUESTIONS)
    assert scores.shape == (len(QUESTIONS),) and np.isfinite(scores).all()
