"""engine/models/onnx_subset.py: the external-data files a graph names, as onnx writes them, read
without importing onnx (which the model's process then never pays for)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from google.protobuf.message import DecodeError
from onnx import TensorProto, helper

from engine.models.onnx_subset import external_locations
from tests.engine.models.test_genai_folder import _external_tensor, genai_folder, write_decoder

REPO = Path(__file__).resolve().parents[3]


def external(name: str, location: str) -> TensorProto:
    tensor = _external_tensor(location)
    tensor.name = name
    return tensor


def graph_with_external_data_everywhere() -> bytes:
    """External tensors as an initializer, a sparse initializer's values and indices, a node's
    tensor attribute and tensor list, and initializers of subgraphs (one and a list)."""
    branch = lambda location: helper.make_graph(  # noqa: E731
        [], "branch", [], [helper.make_tensor_value_info("w", TensorProto.FLOAT, [1])], [external("w", location)])
    indices = helper.make_tensor("i", TensorProto.INT64, [1], [0])
    sparse = helper.make_sparse_tensor(external("s", "values.bin"), indices, [4])
    sparse.indices.CopyFrom(external("i", "indices.bin"))
    nodes = [
        helper.make_node("Constant", [], ["c"], value=external("c", "attribute.bin")),
        helper.make_node("Custom", [], ["d"], tensors=[external("d", "list.bin")], domain="test"),
        helper.make_node("If", ["cond"], ["w"], then_branch=branch("then.bin"), else_branch=branch("else.bin")),
        helper.make_node("Loops", [], ["e"], bodies=[branch("body.bin")], domain="test"),
    ]
    graph = helper.make_graph(nodes, "everywhere", [helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
                              [helper.make_tensor_value_info("w", TensorProto.FLOAT, [1])],
                              [external("weight", "initializer.bin")], sparse_initializer=[sparse])
    return helper.make_model(graph).SerializeToString()


def test_every_place_a_tensor_can_name_external_data_is_read():
    assert external_locations(graph_with_external_data_everywhere()) == {
        "initializer.bin", "values.bin", "indices.bin", "attribute.bin", "list.bin", "then.bin", "else.bin",
        "body.bin"}


def test_tensors_kept_in_the_graph_name_nothing():
    weight = helper.make_tensor("w", TensorProto.FLOAT, [1], [0.5])
    graph = helper.make_graph([], "inline", [], [helper.make_tensor_value_info("w", TensorProto.FLOAT, [1])], [weight])
    assert external_locations(helper.make_model(graph).SerializeToString()) == set()


def test_bytes_that_are_no_protobuf_message_raise():
    with pytest.raises(DecodeError):
        external_locations(b"not a graph")


def test_checking_a_model_folder_does_not_import_onnx(tmp_path):
    folder = genai_folder(tmp_path / "m")
    write_decoder(folder / "model.onnx", external="model.onnx.data")
    (folder / "model.onnx.data").write_bytes(b"\0" * 4)
    code = ("import sys; from engine.models.genai_folder import check_genai_folder; "
            "check_genai_folder(sys.argv[1]); print(sorted(m for m in sys.modules if m.split('.')[0] == 'onnx'))")
    done = subprocess.run([sys.executable, "-c", code, str(folder)], cwd=REPO, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"
