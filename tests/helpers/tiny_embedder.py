"""A tiny BERT-like embedding model (ONNX) and WordPiece tokenizer.json, for fast tests.

One masked self-attention layer and a small feed-forward layer, 16 wide: big enough that
padding, masking and truncation mistakes show up in the vectors, small enough to build in
milliseconds.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from engine.models.registry import EmbedderFiles

WIDTH = 16
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = ("the a an and of to in is it for on with as by at this that be are or from "
         "pump valve filter oil water pressure install remove check replace motor engine "
         "manual page chapter section step open close turn start stop safety warning "
         "cat dog car red blue green fast slow hello world").split()
CHARACTERS = list("abcdefghijklmnopqrstuvwxyz0123456789.,;:!?()-'\"/")


def vocabulary() -> dict[str, int]:
    tokens = SPECIAL + WORDS + CHARACTERS + ["##" + c for c in CHARACTERS]
    return {token: i for i, token in enumerate(dict.fromkeys(tokens))}


def write_tokenizer(path: Path, fixed_length: int = 16) -> Path:
    """A BERT-style uncased WordPiece tokenizer. Like real exports it ships with fixed
    padding and truncation, which the Embedder must switch off and replace."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    vocab = vocabulary()
    tokenizer = Tokenizer(models.WordPiece(vocab=vocab, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    tokenizer.decoder = decoders.WordPiece()
    tokenizer.enable_padding(length=fixed_length, pad_id=0, pad_token="[PAD]")
    tokenizer.enable_truncation(max_length=fixed_length)
    tokenizer.save(str(path))
    return path


def _weight(rng, name: str, *shape: int, scale: float = 0.5):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def _constant(name: str, value) -> TensorProto:
    return numpy_helper.from_array(np.asarray(value), name)


def _embedding_nodes(rng, token_type_ids: bool, max_positions: int, inits: list) -> list:
    inits += [_weight(rng, "word", len(vocabulary()), WIDTH), _weight(rng, "position",
              max_positions, WIDTH), _constant("zero", np.int64(0)),
              _constant("one", np.int64(1)), _constant("axis1", np.array([1], np.int64))]
    nodes = [
        helper.make_node("Gather", ["word", "input_ids"], ["words"]),
        helper.make_node("Shape", ["input_ids"], ["shape"]),
        helper.make_node("Gather", ["shape", "one"], ["length"]),
        helper.make_node("Range", ["zero", "length", "one"], ["positions"]),
        helper.make_node("Gather", ["position", "positions"], ["position_vectors"]),
        helper.make_node("Add", ["words", "position_vectors"], ["embedded"]),
    ]
    if token_type_ids:
        inits.append(_weight(rng, "token_type", 2, WIDTH))
        nodes += [helper.make_node("Gather", ["token_type", "token_type_ids"], ["types"]),
                  helper.make_node("Add", ["embedded", "types"], ["embedded_all"])]
    else:
        nodes.append(helper.make_node("Identity", ["embedded"], ["embedded_all"]))
    return nodes


def _layer_norm(source: str, target: str, inits: list) -> list:
    if not any(i.name == "ln_scale" for i in inits):
        inits += [_constant("ln_scale", np.ones(WIDTH, np.float32)),
                  _constant("ln_bias", np.zeros(WIDTH, np.float32))]
    return [helper.make_node("LayerNormalization", [source, "ln_scale", "ln_bias"], [target],
                             axis=-1, epsilon=1e-5)]


def _attention_nodes(rng, inits: list) -> list:
    """Single-head self-attention; padded positions get -1e4 before the softmax, as BERT does."""
    inits += [_weight(rng, n, WIDTH, WIDTH) for n in ("wq", "wk", "wv", "wo")]
    inits += [_constant("scale", np.float32(1 / np.sqrt(WIDTH))),
              _constant("one_f", np.float32(1.0)), _constant("big_neg", np.float32(-1e4))]
    return [
        helper.make_node("MatMul", ["x0", "wq"], ["q"]),
        helper.make_node("MatMul", ["x0", "wk"], ["k"]),
        helper.make_node("MatMul", ["x0", "wv"], ["v"]),
        helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["q", "kt"], ["raw_scores"]),
        helper.make_node("Mul", ["raw_scores", "scale"], ["scores"]),
        helper.make_node("Cast", ["attention_mask"], ["mask_f"], to=TensorProto.FLOAT),
        helper.make_node("Sub", ["one_f", "mask_f"], ["masked"]),
        helper.make_node("Mul", ["masked", "big_neg"], ["bias2d"]),
        helper.make_node("Unsqueeze", ["bias2d", "axis1"], ["bias"]),
        helper.make_node("Add", ["scores", "bias"], ["biased"]),
        helper.make_node("Softmax", ["biased"], ["probs"], axis=-1),
        helper.make_node("MatMul", ["probs", "v"], ["context"]),
        helper.make_node("MatMul", ["context", "wo"], ["attended"]),
        helper.make_node("Add", ["x0", "attended"], ["x1_raw"]),
    ]


def _feed_forward_nodes(rng, inits: list) -> list:
    inits += [_weight(rng, "w1", WIDTH, 2 * WIDTH), _weight(rng, "w2", 2 * WIDTH, WIDTH)]
    return [
        helper.make_node("MatMul", ["x1", "w1"], ["hidden"]),
        helper.make_node("Tanh", ["hidden"], ["activated"]),
        helper.make_node("MatMul", ["activated", "w2"], ["projected"]),
        helper.make_node("Add", ["x1", "projected"], ["x2_raw"]),
    ]


def write_model(path: Path, *, token_type_ids: bool = True, pooled: bool = False,
                max_positions: int = 64, seed: int = 0,
                output: str = "last_hidden_state") -> Path:
    """Outputs `output` [batch, seq, 16]; with `pooled`, also an unmasked
    sentence_embedding [batch, 16] that differs from masked mean pooling on purpose."""
    rng = np.random.default_rng(seed)
    inits: list = []
    nodes = _embedding_nodes(rng, token_type_ids, max_positions, inits)
    nodes += _layer_norm("embedded_all", "x0", inits)
    nodes += _attention_nodes(rng, inits)
    nodes += _layer_norm("x1_raw", "x1", inits)
    nodes += _feed_forward_nodes(rng, inits)
    nodes += _layer_norm("x2_raw", output, inits)
    names = ["input_ids", "attention_mask"] + (["token_type_ids"] if token_type_ids else [])
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "sequence"])
              for n in names]
    outputs = [helper.make_tensor_value_info(output, TensorProto.FLOAT,
                                             ["batch", "sequence", WIDTH])]
    if pooled:
        inits.append(_constant("seq_axis", np.array([1], np.int64)))
        nodes.append(helper.make_node("ReduceMean", [output, "seq_axis"],
                                      ["sentence_embedding"], keepdims=0))
        outputs.append(helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT,
                                                     ["batch", WIDTH]))
    graph = helper.make_graph(nodes, "tiny_embedder", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 9
    onnx.checker.check_model(model)
    path.write_bytes(model.SerializeToString())
    return path


def write_tiny_embedder(folder: Path, *, max_positions: int = 64, **options) -> EmbedderFiles:
    """A sentence-transformers-like export folder: model.onnx, tokenizer.json, config.json;
    `options` go to write_model."""
    folder.mkdir(parents=True, exist_ok=True)
    model = write_model(folder / "model.onnx", max_positions=max_positions, **options)
    tokenizer = write_tokenizer(folder / "tokenizer.json")
    config = {"max_position_embeddings": max_positions, "hidden_size": WIDTH}
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return EmbedderFiles(model, tokenizer)
