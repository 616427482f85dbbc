"""The embedder's fast path (the default) on the built-in all-MiniLM-L6-v2: int8 activations,
each text alone in its session call. Its vectors do not depend on the batch, they agree with
the exact float path, and the rewrite really applied (folded biases, one Gelu per layer)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
import pytest

from engine.encoders.embedder import Embedder
from engine.encoders.embedder_graph import FUSED_OP, fuse_gelu, fuse_int8_matmuls
from engine.models.registry import builtin_embedder_files
from tests.engine.encoders.test_embedder_graph import int8_linear, run, tiny_model

# Varied lengths, as chunks of a manual are: a heading, sentences, a long paragraph, a table row.
TEXTS = [
    "Installing R under Unix-alikes",
    "Missing values are written NA and most functions have an na.rm argument.",
    "The function lm() fits linear models; summary() prints the coefficients, their standard "
    "errors and the R-squared of the fit. " * 6,
    "Use Rprof to find where an R program spends its time.",
    "x <- c(10.4, 5.6, 3.1, 6.4, 21.7) assigns a vector of five numbers to x.",
    "Index . . . . . . . . . . . . . . . . . . 117",
    "Packages are installed with install.packages() from CRAN or a local file, and loaded into "
    "a session with library(). A package's functions are then on the search path. " * 3,
]


@pytest.fixture(scope="module")
def files():
    found = builtin_embedder_files()
    if found is None:
        pytest.skip("the built-in embedder packages are not installed")
    return found


@pytest.fixture(scope="module")
def fast(files) -> Embedder:
    with Embedder.from_files(files, threads=2) as embedder:
        yield embedder


@pytest.fixture(scope="module")
def exact(files) -> Embedder:
    with Embedder.from_files(files, threads=2, int8_activations=False) as embedder:
        yield embedder


def test_the_default_is_the_fast_path(files, fast):
    assert Embedder.from_files(files).int8_activations is True
    assert fast._session.int8_activations is True and fast._one_per_call


def test_a_chunk_s_vector_does_not_depend_on_its_batch(fast):
    alone = np.stack([fast.encode_documents([text])[0] for text in TEXTS])
    for batch_size in (2, 4, 32):
        batched = fast.encode_documents(TEXTS, batch_size=batch_size)
        assert np.abs(batched - alone).max() <= 1e-6, batch_size
    # the same texts among others, in another order
    mixed = fast.encode_documents(TEXTS[::-1] + ["Close the valve. " * 40, "pump"], batch_size=8)
    assert np.abs(mixed[:len(TEXTS)][::-1] - alone).max() <= 1e-6
    assert np.all(np.abs(alone @ alone.T - np.eye(len(TEXTS))) < 0.999)  # distinct rows


def test_the_exact_path_batched_does_depend_on_nothing_but_float_rounding(exact):
    alone = np.stack([exact.encode_documents([text])[0] for text in TEXTS])
    assert np.abs(exact.encode_documents(TEXTS, batch_size=8) - alone).max() < 1e-5


def test_the_fast_path_agrees_with_the_exact_path(fast, exact):
    cosines = np.sum(fast.encode_documents(TEXTS) * exact.encode_documents(TEXTS), axis=1)
    assert cosines.min() > 0.97 and cosines.mean() > 0.99
    assert cosines.max() < 0.99999  # the int8 kernels really ran


def test_the_fast_path_ranks_like_the_exact_path(fast, exact):
    queries = ["How do I install R on Linux?", "What does NA mean?", "How do I fit a linear model?",
               "How can I profile R code?", "How do I load a package?"]
    expected = [0, 1, 2, 3, 6]
    for embedder in (fast, exact):
        scores = embedder.encode_queries(queries) @ embedder.encode_documents(TEXTS).T
        assert scores.argmax(axis=1).tolist() == expected


def test_the_rewrite_folds_biases_and_fuses_each_gelu(files):
    model = onnx.load(str(files.model))
    adds_before = Counter(n.op_type for n in model.graph.node)["Add"]
    assert fuse_int8_matmuls(model, fold_bias=True) == 36
    assert fuse_gelu(model) == 6
    ops = Counter(n.op_type for n in model.graph.node)
    with_bias = [n for n in model.graph.node if n.op_type == FUSED_OP and len(n.input) == 5]
    # every linear layer's bias Add went into its fused op, and each Gelu's "+ 1" Add went too
    assert len(with_bias) == 36 and ops["Add"] == adds_before - 36 - 6
    assert ops["Gelu"] == 6 and ops["Erf"] == 0
    onnx.checker.check_model(model)


def test_folded_biases_and_fused_gelu_give_the_same_outputs_on_a_tiny_graph():
    rng = np.random.default_rng(3)
    nodes, inits = int8_linear("layer", "x", rng)
    gelu = [onnx.helper.make_node("Div", ["layer", "sqrt2"], ["d"]), onnx.helper.make_node("Erf", ["d"], ["e"]),
            onnx.helper.make_node("Add", ["e", "one"], ["p"]), onnx.helper.make_node("Mul", ["half", "p"], ["h"]),
            onnx.helper.make_node("Mul", ["layer", "h"], ["y"])]
    inits += [onnx.numpy_helper.from_array(np.array(v, np.float32), name)
              for name, v in (("sqrt2", np.sqrt(2.0)), ("one", 1.0), ("half", 0.5))]
    x = rng.standard_normal((2, 5, 64)).astype(np.float32)
    plain = tiny_model(nodes + gelu, inits, "y")
    fuse_int8_matmuls(plain)
    folded = tiny_model(nodes + gelu, inits, "y")
    assert fuse_int8_matmuls(folded, fold_bias=True) == 1 and fuse_gelu(folded) == 1
    assert Counter(n.op_type for n in folded.graph.node) == {FUSED_OP: 1, "Gelu": 1}
    assert {i.name for i in folded.graph.initializer}.isdisjoint({"sqrt2", "one", "half"})
    assert np.abs(run(folded, x) - run(plain, x)).max() < 1e-5
