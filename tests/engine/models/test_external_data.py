"""Initializers written to model.onnx.data as they are made (issue 19: an import held the whole
model in memory, about 5x its weights): the runtime reads them back exactly, at page-aligned
offsets, and an imported model carries the same weights as one built in memory."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from engine.models import gguf_import
from engine.models.decoder_graph import build_decoder
from engine.models.external_data import ALIGN, ExternalData
from tests.helpers.gguf_factory import write_tiny_gguf


def test_tensors_come_back_exactly_from_aligned_offsets(tmp_path):
    rng = np.random.default_rng(0)
    arrays = {"a": rng.standard_normal((3, 700)).astype(np.float32),
              "b": rng.integers(0, 256, (5, 333), dtype=np.uint8),
              "c": rng.standard_normal(7).astype(np.float32)}  # small: stays inside the graph
    with ExternalData(tmp_path / "model.onnx.data") as store:
        tensors = [store(array, name) for name, array in arrays.items()]
    external = {t.name: {e.key: e.value for e in t.external_data} for t in tensors if t.external_data}
    assert sorted(external) == ["a", "b"]
    assert all(int(e["offset"]) % ALIGN == 0 and e["location"] == "model.onnx.data" for e in external.values())

    nodes = [helper.make_node("Identity", [name], [f"{name}_out"]) for name in arrays]
    outputs = [helper.make_tensor_value_info(f"{name}_out", helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
               for name, a in arrays.items()]
    model = helper.make_model(helper.make_graph(nodes, "g", [], outputs, tensors),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    onnx.save_model(model, str(tmp_path / "model.onnx"))
    session = ort.InferenceSession(str(tmp_path / "model.onnx"), providers=["CPUExecutionProvider"])
    for name, got in zip(arrays, session.run(None, {})):
        assert got.dtype == arrays[name].dtype and np.array_equal(got, arrays[name])


def test_an_import_writes_the_weights_a_model_built_in_memory_holds(tmp_path):
    source = write_tiny_gguf(tmp_path / "tiny.gguf", weight_type="Q4_1", embed_type="Q4_K", hidden=256, ffn=256,
                             tied_output=False)
    folder = gguf_import.import_gguf(source, tmp_path / "model")
    reader = gguf_import.open_gguf(source)
    weights = gguf_import._weights({t.name: t for t in reader.tensors}, source)
    in_memory = build_decoder(gguf_import.decoder_spec(reader, source), weights)
    written = onnx.load(str(folder / "model.onnx"))  # the external data read back
    assert [t.name for t in written.graph.initializer] == [t.name for t in in_memory.graph.initializer]
    for got, want in zip(written.graph.initializer, in_memory.graph.initializer):
        assert np.array_equal(numpy_helper.to_array(got), numpy_helper.to_array(want)), got.name
    assert any(t.data_location == TensorProto.EXTERNAL for t in onnx.load(
        str(folder / "model.onnx"), load_external_data=False).graph.initializer)
