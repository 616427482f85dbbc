"""The external-data files an ONNX graph names, read without the onnx package.

    external_locations(Path("model.onnx").read_bytes())   # {"model.onnx.data"}; DecodeError if unreadable

Checking a model folder reads them each time the model's process starts, and importing onnx
(with ml_dtypes) costs that process more than a second; protobuf alone costs a few ms. The
schema below is onnx.proto's ModelProto cut down to the fields that lead to tensors, with
onnx.proto's field numbers (proto2, as onnx.proto is): every other field is skipped as unknown.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_PACKAGE = "offline_assistant.onnx_subset"
_EXTERNAL = 1  # TensorProto.DataLocation.EXTERNAL
_INT32, _STRING = "int32", "string"
# message: (field name, number, type, repeated)
_SCHEMA = {
    "ModelProto": [("graph", 7, "GraphProto", False)],
    "GraphProto": [("node", 1, "NodeProto", True), ("initializer", 5, "TensorProto", True),
                   ("sparse_initializer", 15, "SparseTensorProto", True)],
    "NodeProto": [("attribute", 5, "AttributeProto", True)],
    "AttributeProto": [("t", 5, "TensorProto", False), ("g", 6, "GraphProto", False),
                       ("tensors", 10, "TensorProto", True), ("graphs", 11, "GraphProto", True)],
    "SparseTensorProto": [("values", 1, "TensorProto", False), ("indices", 2, "TensorProto", False)],
    "TensorProto": [("external_data", 13, "StringStringEntryProto", True), ("data_location", 14, _INT32, False)],
    "StringStringEntryProto": [("key", 1, _STRING, False), ("value", 2, _STRING, False)],
}


def external_locations(data: bytes) -> set[str]:
    """The `location` of every tensor the graph keeps as external data (initializers, sparse
    initializers, node attributes, in subgraphs too). Raises protobuf's DecodeError when
    `data` is no protobuf message."""
    model = _model_class()()
    model.ParseFromString(data)
    locations = set()
    for tensor in _graph_tensors(model.graph):
        if tensor.data_location == _EXTERNAL:
            entries = {entry.key: entry.value for entry in tensor.external_data}
            locations.add(entries.get("location", ""))
    return locations


def _graph_tensors(graph) -> Iterator:
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield sparse.values
        yield sparse.indices
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.HasField("t"):
                yield attribute.t
            yield from attribute.tensors
            subgraphs = list(attribute.graphs) + ([attribute.g] if attribute.HasField("g") else [])
            for subgraph in subgraphs:
                yield from _graph_tensors(subgraph)


@functools.cache
def _model_class():
    pool = descriptor_pool.DescriptorPool()  # its own pool: never clashes with onnx's names
    pool.Add(_file_descriptor())
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.ModelProto"))


def _file_descriptor() -> descriptor_pb2.FileDescriptorProto:
    file = descriptor_pb2.FileDescriptorProto(name="onnx_subset.proto", package=_PACKAGE, syntax="proto2")
    for name, fields in _SCHEMA.items():
        message = file.message_type.add(name=name)
        for field_name, number, kind, repeated in fields:
            message.field.add(name=field_name, number=number, **_field_type(kind, repeated))
    return file


def _field_type(kind: str, repeated: bool) -> dict:
    field = descriptor_pb2.FieldDescriptorProto
    label = field.LABEL_REPEATED if repeated else field.LABEL_OPTIONAL
    if kind == _INT32:
        return {"label": label, "type": field.TYPE_INT32}
    if kind == _STRING:
        return {"label": label, "type": field.TYPE_STRING}
    return {"label": label, "type": field.TYPE_MESSAGE, "type_name": f".{_PACKAGE}.{kind}"}
