"""A tiny cross-encoder (ONNX) with a score that can be checked by hand, for fast tests.

The logit of a (query, passage) pair is the number of passage tokens (token type 1, not a
special token) that also occur in the query (token type 0), counting only unmasked positions:
("pump valve", "check the pump valve pump") scores 3. Padding, masking, segment and
truncation mistakes all change that number. The tokenizer is tiny_embedder's WordPiece one,
whose pair template is "[CLS] A [SEP] B [SEP]" with token type ids 0 and 1.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tests.helpers.tiny_embedder import SPECIAL, vocabulary, write_tokenizer

LAST_SPECIAL_ID = len(SPECIAL) - 1  # ids above this are words and word pieces
SEP_ID = vocabulary()["[SEP]"]
SECOND_LABEL_BASE = 100.0  # the 2-label variant's first column is 100 - score


def overlap_score(ids: list[int], type_ids: list[int]) -> int:
    """The score the tiny model computes, in plain Python, from one pair's encoding."""
    query = {i for i, t in zip(ids, type_ids) if t == 0}
    return sum(1 for i, t in zip(ids, type_ids) if t == 1 and i > LAST_SPECIAL_ID and i in query)


def _constant(name: str, value) -> TensorProto:
    return numpy_helper.from_array(np.asarray(value), name)


def _segment_nodes(token_type_ids: bool) -> list:
    """'types' (int64): the input itself, or, for a model without that input, 1 for every
    position after the first [SEP] (an exclusive running count of [SEP]s is above 0)."""
    if token_type_ids:
        return [helper.make_node("Identity", ["token_type_ids"], ["types"])]
    return [
        helper.make_node("Equal", ["input_ids", "sep_id"], ["is_sep"]),
        helper.make_node("Cast", ["is_sep"], ["sep_count"], to=TensorProto.INT64),
        helper.make_node("CumSum", ["sep_count", "axis1_scalar"], ["seps_before"], exclusive=1),
        helper.make_node("Greater", ["seps_before", "zero"], ["after_sep"]),
        helper.make_node("Cast", ["after_sep"], ["types"], to=TensorProto.INT64),
    ]


def _score_nodes() -> list:
    """score [batch, 1] = sum over passage positions j of (ids[j] occurs in the query)."""
    node = helper.make_node
    return [
        node("Cast", ["attention_mask"], ["mask_f"], to=TensorProto.FLOAT),
        node("Cast", ["types"], ["types_f"], to=TensorProto.FLOAT),
        node("Sub", ["one_f", "types_f"], ["query_f"]),
        node("Mul", ["mask_f", "query_f"], ["in_query"]),  # [B, S]
        node("Greater", ["input_ids", "last_special"], ["is_word"]),
        node("Cast", ["is_word"], ["word_f"], to=TensorProto.FLOAT),
        node("Mul", ["mask_f", "types_f"], ["masked_passage"]),
        node("Mul", ["masked_passage", "word_f"], ["in_passage"]),  # [B, S]
        node("Unsqueeze", ["input_ids", "axis2"], ["ids_rows"]),  # [B, S, 1]
        node("Unsqueeze", ["input_ids", "axis1"], ["ids_columns"]),  # [B, 1, S]
        node("Equal", ["ids_rows", "ids_columns"], ["same"]),  # [B, S, S]
        node("Cast", ["same"], ["same_f"], to=TensorProto.FLOAT),
        node("Unsqueeze", ["in_query", "axis1"], ["query_columns"]),
        node("Mul", ["same_f", "query_columns"], ["matches"]),
        node("ReduceMax", ["matches", "axis2"], ["occurs_in_query"], keepdims=0),  # [B, S]
        node("Mul", ["occurs_in_query", "in_passage"], ["counted"]),
        node("ReduceSum", ["counted", "axis1"], ["score"], keepdims=1),  # [B, 1]
    ]


def _logits_nodes(labels: int, output: str) -> list:
    if labels == 1:
        return [helper.make_node("Identity", ["score"], [output])]
    # A different first column, so that using it instead of the last one shows.
    return [helper.make_node("Sub", ["label_base", "score"], ["other"]),
            helper.make_node("Concat", ["other", "score"], [output], axis=1)]


def _constants(nodes: list) -> list:
    """The constants the nodes read (onnxruntime warns about unused ones)."""
    used = {name for node in nodes for name in node.input}
    constants = [
        _constant("sep_id", np.int64(SEP_ID)), _constant("zero", np.int64(0)),
        _constant("axis1_scalar", np.int64(1)),
        _constant("last_special", np.int64(LAST_SPECIAL_ID)),
        _constant("one_f", np.float32(1.0)), _constant("label_base", np.float32(SECOND_LABEL_BASE)),
        _constant("axis1", np.array([1], np.int64)), _constant("axis2", np.array([2], np.int64)),
    ]
    return [constant for constant in constants if constant.name in used]


def write_model(path: Path, *, token_type_ids: bool = True, labels: int = 1,
                output: str = "logits", extra_input: str | None = None) -> Path:
    """Inputs input_ids, attention_mask (and token_type_ids), int64 [batch, sequence];
    output `output` float [batch, labels]. `extra_input` adds an input nothing can fill."""
    nodes = _segment_nodes(token_type_ids) + _score_nodes() + _logits_nodes(labels, output)
    names = ["input_ids", "attention_mask"] + (["token_type_ids"] if token_type_ids else [])
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "sequence"])
              for n in names + ([extra_input] if extra_input else [])]
    outputs = [helper.make_tensor_value_info(output, TensorProto.FLOAT, ["batch", labels])]
    graph = helper.make_graph(nodes, "tiny_cross_encoder", inputs, outputs, _constants(nodes))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 9
    onnx.checker.check_model(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(model.SerializeToString())
    return path


def write_tiny_cross_encoder(folder: Path, *, in_onnx_folder: bool = False,
                             max_positions: int = 512, **options) -> Path:
    """An optimum-style export folder: model.onnx (or onnx/model.onnx), tokenizer.json and a
    config.json declaring BertForSequenceClassification; `options` go to write_model."""
    folder.mkdir(parents=True, exist_ok=True)
    write_model(folder / ("onnx/model.onnx" if in_onnx_folder else "model.onnx"), **options)
    write_tokenizer(folder / "tokenizer.json")
    config = {"architectures": ["BertForSequenceClassification"], "model_type": "bert",
              "max_position_embeddings": max_positions, "num_labels": options.get("labels", 1)}
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return folder
