"""The int8-activation rewrite: on tiny generated graphs, and on the built-in all-MiniLM-L6-v2."""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from engine.encoders.embedder import Embedder
from engine.encoders.embedder_graph import (
    EXACT_INT8_CONFIG,
    FUSED_OP,
    drop_softmax_nan_guards,
    find_matches,
    fuse_int8_matmuls,
    int8_activation_model,
)
from engine.models.registry import builtin_embedder_files

K, N = 64, 48


def int8_linear(name: str, source: str, rng, scale_shape=(1, N)) -> tuple[list, list]:
    """Nodes and initializers for `source` @ (int8 W -> Cast -> Mul(scale)) + bias."""
    weight = rng.integers(-127, 128, (K, N)).astype(np.int8)
    scale = (rng.random(scale_shape).astype(np.float32) + 0.5) / 50
    inits = [numpy_helper.from_array(weight, f"{name}_q"), numpy_helper.from_array(scale, f"{name}_scale"),
             numpy_helper.from_array(rng.standard_normal(N).astype(np.float32), f"{name}_bias")]
    nodes = [helper.make_node("Cast", [f"{name}_q"], [f"{name}_f"], to=TensorProto.FLOAT),
             helper.make_node("Mul", [f"{name}_f", f"{name}_scale"], [f"{name}_w"]),
             helper.make_node("MatMul", [source, f"{name}_w"], [f"{name}_mm"], name=f"{name}_matmul"),
             helper.make_node("Add", [f"{name}_mm", f"{name}_bias"], [name])]
    return nodes, inits


def tiny_model(nodes, inits, output: str, width: int = N) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "tokens", K])],
        [helper.make_tensor_value_info(output, TensorProto.FLOAT, ["batch", "tokens", width])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def run(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    options = ort.SessionOptions()
    options.add_session_config_entry(*EXACT_INT8_CONFIG)
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


def int8_reference(x: np.ndarray, model: onnx.ModelProto, name: str) -> np.ndarray:
    """What the fused layer `name` must compute: x quantized to uint8 as DynamicQuantizeLinear
    does (per tensor), times the stored int8 weight, in exact integers, then scaled."""
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    low, high = min(x.min(), 0.0), max(x.max(), 0.0)
    x_scale = (high - low) / 255
    zero = np.clip(np.round(-low / x_scale), 0, 255)
    quantized = np.clip(np.round(x / x_scale) + zero, 0, 255) - zero
    product = quantized.astype(np.int64) @ inits[f"{name}_q"].astype(np.int64)
    return product * x_scale * inits[f"{name}_scale"].reshape(-1) + inits[f"{name}_bias"]


def ops(model: onnx.ModelProto) -> Counter:
    return Counter(node.op_type for node in model.graph.node)


@pytest.fixture()
def rng():
    return np.random.default_rng(7)


def test_rewrite_computes_int8_activations_times_the_stored_weights(rng):
    nodes, inits = int8_linear("layer", "x", rng)
    model = tiny_model(nodes, inits, "layer")
    x = rng.standard_normal((3, 5, K)).astype(np.float32) * 4
    x[..., :4] = 30  # activations far from their zero point with full-range weights: the case
    # that saturates onnxruntime's u8 x s8 kernel on x86 without VNNI
    expected = int8_reference(x, model, "layer")
    assert fuse_int8_matmuls(model) == 1
    assert np.abs(run(model, x) - expected).max() < 1e-4 * np.abs(expected).max()


def test_rewrite_gives_outputs_close_to_the_float_graph(rng):
    nodes, inits = int8_linear("first", "x", rng)
    more, more_inits = int8_linear("second", "x", rng, scale_shape=(N,))
    model = tiny_model(nodes + more + [helper.make_node("Add", ["first", "second"], ["y"])],
                       inits + more_inits, "y")
    x = rng.standard_normal((3, 5, K)).astype(np.float32)
    expected = run(model, x)

    assert fuse_int8_matmuls(model) == 2
    onnx.checker.check_model(model)
    assert ops(model)[FUSED_OP] == 2
    assert ops(model)["MatMul"] == ops(model)["Cast"] == ops(model)["Mul"] == 0
    names = {init.name for init in model.graph.initializer}
    assert {"first_q", "second_q"} <= names and "first_scale" not in names
    got = run(model, x)
    assert np.abs(got - expected).max() < 0.03 * np.abs(expected).max()
    assert not np.array_equal(got, expected)  # the int8 kernel really ran


def test_the_stored_int8_weights_are_used_unchanged(rng):
    nodes, inits = int8_linear("layer", "x", rng)
    model = tiny_model(nodes, inits, "layer")
    before = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    fuse_int8_matmuls(model)
    after = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    assert np.array_equal(after["layer_q"], before["layer_q"])
    fused = next(n for n in model.graph.node if n.op_type == FUSED_OP)
    assert fused.domain == "com.microsoft" and fused.input[1] == "layer_q"
    assert np.array_equal(after[fused.input[2]], before["layer_scale"].reshape(N))
    assert not after[fused.input[3]].any() and after[fused.input[3]].dtype == np.int8


def test_a_float_graph_is_untouched(rng, tmp_path):
    weight = numpy_helper.from_array(rng.standard_normal((K, N)).astype(np.float32), "w")
    model = tiny_model([helper.make_node("MatMul", ["x", "w"], ["y"])], [weight], "y")
    original = model.SerializeToString()
    assert fuse_int8_matmuls(model) == 0
    assert model.SerializeToString() == original
    onnx.save(model, tmp_path / "model.onnx")
    assert int8_activation_model(tmp_path / "model.onnx") is None


def test_what_does_not_match_is_left_alone(rng):
    per_row, inits = int8_linear("rows", "x", rng, scale_shape=(K, 1))  # not per column
    shared, shared_inits = int8_linear("shared", "x", rng)
    # the shared weight is also read by a Gather, so its Cast and Mul must stay
    gather = helper.make_node("Gather", ["shared_w", "index"], ["picked"])
    index = numpy_helper.from_array(np.array(0, np.int64), "index")
    model = tiny_model(per_row + shared + [gather, helper.make_node("Add", ["rows", "shared"], ["y"])],
                       inits + shared_inits + [index], "y")
    model.graph.output.append(helper.make_tensor_value_info("picked", TensorProto.FLOAT, [N]))

    assert [m.weight for m in find_matches(model.graph)] == ["shared_q"]
    assert fuse_int8_matmuls(model) == 1
    assert ops(model) == Counter({"Cast": 2, "Mul": 2, "MatMul": 1, FUSED_OP: 1, "Add": 3, "Gather": 1})
    onnx.checker.check_model(model)


def test_a_float_embedder_gives_the_same_vectors_either_way(tmp_path):
    from tests.helpers.tiny_embedder import write_tiny_embedder

    files = write_tiny_embedder(tmp_path)
    texts = ["check the oil", "replace the filter before you start the pump"]
    with Embedder.from_files(files, int8_activations=True) as rewritten, \
            Embedder.from_files(files, int8_activations=False) as exact:
        assert np.array_equal(rewritten.encode_documents(texts), exact.encode_documents(texts))


# -- the built-in model -----------------------------------------------------------------------
SENTENCES = [
    "R is an integrated suite of software facilities for data manipulation, calculation and "
    "graphical display.",
    "The function lm() fits linear models, and summary() prints the coefficients.",
    "To install a package from a local tarball, run R CMD INSTALL with the file name.",
    "Missing values are written NA and most functions have an na.rm argument.",
    "Use Rprof to find where an R program spends its time.",
]


@pytest.mark.slow
def test_builtin_model_all_linear_layers_are_replaced():
    files = builtin_embedder_files()
    if files is None:
        pytest.skip("the built-in embedder package is not installed")
    model = onnx.load(str(files.model))
    assert fuse_int8_matmuls(model) == 36  # 6 layers x (q, k, v, output, two feed-forward)
    assert find_matches(model.graph) == []
    assert ops(model)["Cast"] == 3  # only the token and position embedding chains (Gather) stay


@pytest.mark.slow
def test_builtin_model_int8_activations_agree_with_the_exact_path():
    files = builtin_embedder_files()
    if files is None:
        pytest.skip("the built-in embedder package is not installed")
    with Embedder.from_files(files, int8_activations=True) as fast, \
            Embedder.from_files(files, int8_activations=False) as exact:
        cosines = (fast.encode_documents(SENTENCES) * exact.encode_documents(SENTENCES)).sum(axis=1)
    assert cosines.min() > 0.98
    assert cosines.max() < 0.99999  # the two paths really differ


# -- NaN guards after softmax -----------------------------------------------------------------
def _guarded_softmax_model(fill: float) -> onnx.ModelProto:
    nodes = [
        helper.make_node("Softmax", ["x"], ["probs"], axis=-1),
        helper.make_node("IsNaN", ["probs"], ["nan"]),
        helper.make_node("Where", ["nan", "fill", "probs"], ["guarded"]),
        helper.make_node("MatMul", ["guarded", "w"], ["y"]),
    ]
    inits = [numpy_helper.from_array(np.array(fill, np.float32), "fill"),
             numpy_helper.from_array(np.eye(4, dtype=np.float32), "w")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _run_graph(model: onnx.ModelProto, feeds: dict) -> np.ndarray:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


def test_softmax_nan_guards_are_dropped_and_outputs_unchanged():
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    model = _guarded_softmax_model(0.0)
    expected = _run_graph(model, {"x": x})
    assert drop_softmax_nan_guards(model) == 1
    assert {n.op_type for n in model.graph.node} == {"Softmax", "MatMul"}
    np.testing.assert_array_equal(_run_graph(model, {"x": x}), expected)


def test_a_where_that_fills_something_else_is_kept():
    model = _guarded_softmax_model(1.0)
    assert drop_softmax_nan_guards(model) == 0
    assert len(model.graph.node) == 4


@pytest.mark.slow
def test_builtin_model_without_its_guards_gives_the_same_outputs():
    files = builtin_embedder_files()
    original = onnx.load(str(files.model))
    trimmed = onnx.load(str(files.model))
    assert drop_softmax_nan_guards(trimmed) == 6
    texts = ["Open the valve.", "Close the valve slowly before you stop the pump. " * 10]
    encodings = Embedder.from_files(files)._encoder.encode_batch(texts)
    width = max(len(e.ids) for e in encodings)
    ids = np.array([e.ids + [0] * (width - len(e.ids)) for e in encodings], np.int64)
    mask = np.array([[1] * len(e.ids) + [0] * (width - len(e.ids)) for e in encodings], np.int64)
    feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    np.testing.assert_array_equal(_run_graph(trimmed, feeds), _run_graph(original, feeds))
