"""Int8 activations for models that store int8 weights: a graph rewrite done in memory.

Exports such as the built-in all-MiniLM-L6-v2 keep each linear layer's weight as int8 with a
per-output-channel scale and turn it back into float32 in the graph:

    W_q (int8 [K, N]) -> Cast(float) -> Mul(scale [1, N]) -> MatMul(A, .)

onnxruntime folds that into a float32 weight at load time, so all the maths stays float32.
`fuse_int8_matmuls` replaces each such MatMul by com.microsoft.DynamicQuantizeMatMul(A, W_q,
scale [N], zero point [N] = 0): the stored int8 weights are used as they are, and only the
activations are quantized, per call, inside the kernel. Anything else is left as it is.
Run the result with EXACT_INT8_CONFIG set in the session options.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# A session option to set with the rewritten model. On x86 without VNNI, onnxruntime's
# u8 x s8 kernel adds pairs of products in saturating 16-bit registers, which gives wrong
# outputs for some inputs; with this it uses its exact (slower) u8 x u8 kernel on those CPUs
# only. The stored weights stay as they are either way.
EXACT_INT8_CONFIG = ("session.x64quantprecision", "1")

MS_DOMAIN = "com.microsoft"
FUSED_OP = "DynamicQuantizeMatMul"
_INT8_TYPES = (TensorProto.INT8, TensorProto.UINT8)


@dataclass(frozen=True)
class _Match:
    matmul: onnx.NodeProto
    weight: str  # the int8 initializer, used as B unchanged
    scale: np.ndarray  # [N] float32
    chain: tuple[onnx.NodeProto, ...]  # the Mul and the Cast, dropped once nothing reads them
    bias: onnx.NodeProto | None = None  # Add(MatMul, [N] initializer), folded into the fused op


def int8_activation_model(model_path: str | Path) -> bytes | None:
    """The model at `model_path` rewritten for int8 activations, serialised for
    onnxruntime; None when it has no int8-weight MatMul (a float model: load it as it is)."""
    model = onnx.load(str(model_path))
    if fuse_int8_matmuls(model) == 0:
        return None
    return model.SerializeToString()


def fuse_int8_matmuls(model: onnx.ModelProto, fold_bias: bool = False) -> int:
    """Rewrites `model` in place; returns how many MatMuls became DynamicQuantizeMatMul.
    `fold_bias`: a bias Add that alone reads the MatMul becomes the fused op's bias input
    (one pass over the output less)."""
    graph = model.graph
    matches = find_matches(graph)
    if fold_bias:
        matches = [_with_bias(graph, match) for match in matches]
    for number, match in enumerate(matches):
        _replace(graph, match, f"int8act_{number}")
    if matches:
        _remove_unused(graph, [node for match in matches for node in match.chain])
        _ensure_opset(model)
    return len(matches)


def find_matches(graph: onnx.GraphProto) -> list[_Match]:
    """Every MatMul whose B is Mul(Cast(int8 initializer), per-column scale)."""
    producers = {out: node for node in graph.node for out in node.output}
    initializers = {init.name: init for init in graph.initializer}
    matches = []
    for node in graph.node:
        if node.op_type == "MatMul" and node.domain in ("", "ai.onnx"):
            found = _weight_of(node.input[1], producers, initializers)
            if found is not None:
                matches.append(_Match(node, *found))
    return matches


def _weight_of(name: str, producers: dict, initializers: dict) -> tuple | None:
    """(int8 initializer name, [N] scale, (Mul, Cast)) when `name` is Mul(Cast(int8), scale)."""
    mul = producers.get(name)
    if mul is None or mul.op_type != "Mul" or mul.domain not in ("", "ai.onnx"):
        return None
    for cast_output, scale_name in (mul.input, reversed(mul.input)):
        weight = _cast_int8_source(producers.get(cast_output), initializers)
        if weight is not None and scale_name in initializers:
            columns = int(initializers[weight].dims[-1])
            scale = _column_scale(numpy_helper.to_array(initializers[scale_name]), columns)
            if scale is not None:
                return weight, scale, (mul, producers[cast_output])
    return None


def _with_bias(graph: onnx.GraphProto, match: _Match) -> _Match:
    """`match` with the Add of a [N] float bias that is the only reader of its MatMul."""
    output = match.matmul.output[0]
    readers = [node for node in graph.node if output in node.input]
    if len(readers) != 1 or readers[0].op_type != "Add" or readers[0].domain not in ("", "ai.onnx"):
        return match
    add = readers[0]
    other = add.input[1] if add.input[0] == output else add.input[0]
    init = next((i for i in graph.initializer if i.name == other), None)
    if init is None or init.data_type != TensorProto.FLOAT or list(init.dims) != [match.scale.size]:
        return match
    return _Match(match.matmul, match.weight, match.scale, match.chain, add)


def _cast_int8_source(cast: onnx.NodeProto | None, initializers: dict) -> str | None:
    """The int8 (or uint8) 2-D initializer that `cast` turns into float32, if it does."""
    if cast is None or cast.op_type != "Cast":
        return None
    target = next((a.i for a in cast.attribute if a.name == "to"), None)
    source = initializers.get(cast.input[0])
    if target != TensorProto.FLOAT or source is None:
        return None
    if source.data_type not in _INT8_TYPES or len(source.dims) != 2:
        return None
    return source.name


def _column_scale(scale: np.ndarray, columns: int) -> np.ndarray | None:
    """`scale` as one float per column ([N]), if it is per column or per tensor.
    A per-row scale ([K, 1]) cannot be moved out of the sum, so it does not match."""
    if scale.dtype != np.float32 or scale.ndim > 2:
        return None
    if scale.ndim == 2 and scale.shape[0] != 1:
        return None
    if scale.size not in (1, columns):
        return None
    return np.ascontiguousarray(np.broadcast_to(scale.reshape(-1), (columns,)))


def _replace(graph: onnx.GraphProto, match: _Match, prefix: str) -> None:
    weight_type = next(i.data_type for i in graph.initializer if i.name == match.weight)
    zero_type = helper.tensor_dtype_to_np_dtype(weight_type)
    graph.initializer.extend([
        numpy_helper.from_array(match.scale, f"{prefix}_scale"),
        numpy_helper.from_array(np.zeros(match.scale.shape, zero_type), f"{prefix}_zero_point"),
    ])
    inputs = [match.matmul.input[0], match.weight, f"{prefix}_scale", f"{prefix}_zero_point"]
    outputs = list(match.matmul.output)
    if match.bias is not None:
        inputs.append(next(name for name in match.bias.input if name != match.matmul.output[0]))
        outputs = list(match.bias.output)
        graph.node.remove(match.bias)
    fused = helper.make_node(FUSED_OP, inputs, outputs, name=f"{prefix}_{match.matmul.name}",
                             domain=MS_DOMAIN)
    # Same place in the node list, so the graph stays topologically sorted.
    index = list(graph.node).index(match.matmul)
    graph.node.remove(match.matmul)
    graph.node.insert(index, fused)


def _remove_unused(graph: onnx.GraphProto, chain: list[onnx.NodeProto]) -> None:
    """Drops the matched Mul and Cast nodes (Mul first) once nothing reads them, then their
    scales; a weight that is also read elsewhere keeps its chain."""
    unique = list({node.output[0]: node for node in chain}.values())  # a Mul may feed two MatMuls
    readers = _readers(graph)  # counted once and lowered per removal: a recount each time made a load quadratic
    for node in unique:
        if not any(readers[name] for name in node.output):
            graph.node.remove(node)
            readers.subtract(node.input)
    candidates = {name for node in unique for name in node.input}
    read = {name for name, count in readers.items() if count > 0} | {value.name for value in graph.input}
    for init in [i for i in graph.initializer if i.name in candidates and i.name not in read]:
        graph.initializer.remove(init)


def _readers(graph: onnx.GraphProto) -> Counter:
    """How many times each name is read: by the graph's outputs and its nodes' inputs, once
    more when a subgraph reads it."""
    readers = Counter(out.name for out in graph.output)
    for node in graph.node:
        readers.update(node.input)
        for attribute in node.attribute:
            for subgraph in [attribute.g] * attribute.HasField("g") + list(attribute.graphs):
                readers.update(_names_read(subgraph))
    return readers


def _names_read(graph: onnx.GraphProto) -> set[str]:
    """Every name an input of a node reads, in subgraphs too, and the graph's outputs."""
    names = {out.name for out in graph.output}
    for node in graph.node:
        names.update(node.input)
        for attribute in node.attribute:
            for subgraph in [attribute.g] * attribute.HasField("g") + list(attribute.graphs):
                names |= _names_read(subgraph)
    return names


def _ensure_opset(model: onnx.ModelProto) -> None:
    if not any(o.domain == MS_DOMAIN for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid(MS_DOMAIN, 1))


# -- NaN guards after softmax -----------------------------------------------------------------
def drop_softmax_nan_guards(model: onnx.ModelProto) -> int:
    """Removes `Where(IsNaN(softmax), 0, softmax)` guards and returns how many.

    Exporters add them for attention rows whose keys are all masked; every text the embedder
    feeds has at least its [CLS] token unmasked, so no row is, and the guard only costs time
    (12-15% of a run here). Outputs are unchanged."""
    graph = model.graph
    producers = {out: node for node in graph.node for out in node.output}
    constants = {init.name: init for init in graph.initializer}
    outputs = {output.name for output in graph.output}
    dropped = []
    for where in graph.node:
        if where.op_type != "Where" or len(where.input) != 3 or where.output[0] in outputs:
            continue
        is_nan = producers.get(where.input[0])
        softmax = producers.get(where.input[2])
        if not (is_nan is not None and is_nan.op_type == "IsNaN" and softmax is not None
                and softmax.op_type == "Softmax" and is_nan.input[0] == softmax.output[0]
                and _is_zero(where.input[1], constants, producers)):
            continue
        _rename_input(graph, where.output[0], softmax.output[0])
        dropped.append((where, is_nan))
    for where, is_nan in dropped:
        graph.node.remove(where)
        if is_nan.output[0] not in _names_read(graph):
            graph.node.remove(is_nan)
    return len(dropped)


def _is_zero(name: str, constants: dict, producers: dict) -> bool:
    return _is_constant(name, 0.0, constants, producers)


def _rename_input(graph: onnx.GraphProto, old: str, new: str) -> None:
    for node in graph.node:
        for index, name in enumerate(node.input):
            if name == old:
                node.input[index] = new


# -- Gelu ------------------------------------------------------------------------------------
def fuse_gelu(model: onnx.ModelProto) -> int:
    """Replaces the exported erf Gelu, x * (0.5 * (1 + erf(x / sqrt 2))) in five nodes, by one
    com.microsoft.Gelu (the same formula in one pass); returns how many."""
    graph = model.graph
    constants = {init.name: init for init in graph.initializer}
    producers = {out: node for node in graph.node for out in node.output}
    found = []
    for mul in graph.node:
        chain = _gelu_chain(mul, producers, constants)
        if chain is not None:
            found.append((mul, chain))
    for number, (mul, (x, nodes)) in enumerate(found):
        gelu = helper.make_node("Gelu", [x], list(mul.output), name=f"gelu_{number}", domain=MS_DOMAIN)
        graph.node.insert(list(graph.node).index(mul), gelu)
        for node in nodes:
            graph.node.remove(node)
    if found:
        _ensure_opset(model)
        read = _names_read(graph)
        for init in [i for i in graph.initializer if i.name not in read]:
            graph.initializer.remove(init)
    return len(found)


def _gelu_chain(mul: onnx.NodeProto, producers: dict, constants: dict):
    """(x, the five nodes) when `mul` ends Mul(x, Mul(0.5, Add(Erf(Div(x, sqrt 2)), 1)))."""
    if mul.op_type != "Mul":
        return None
    for x, half_name in (mul.input, reversed(mul.input)):
        half = producers.get(half_name)
        if half is None or half.op_type != "Mul":
            continue
        add = _other_than_constant(half, 0.5, producers, constants)
        erf = _other_than_constant(add, 1.0, producers, constants) if add is not None and add.op_type == "Add" else None
        div = producers.get(erf.input[0]) if erf is not None and erf.op_type == "Erf" else None
        if div is None or div.op_type != "Div" or div.input[0] != x:
            continue
        if not _is_constant(div.input[1], float(np.sqrt(2.0)), constants, producers):
            continue
        return x, [mul, half, add, erf, div]
    return None


def _other_than_constant(node, value: float, producers: dict, constants: dict):
    """The producer of `node`'s input that is not the constant `value`, if the other is."""
    for a, b in (node.input, reversed(node.input)):
        if _is_constant(b, value, constants, producers):
            return producers.get(a)
    return None


def _is_constant(name: str, value: float, constants: dict, producers: dict) -> bool:
    if name in constants:
        tensor = constants[name]
    else:
        node = producers.get(name)
        if node is None or node.op_type != "Constant" or not node.attribute:
            return False
        tensor = node.attribute[0].t
    values = numpy_helper.to_array(tensor)
    return values.size == 1 and abs(float(values.reshape(-1)[0]) - value) < 1e-6 * max(1.0, value)


def prepared_model(model_path: str | Path, int8_activations: bool) -> tuple[bytes | None, bool]:
    """The model to load: serialised when a rewrite applied (else None, load the file as it
    is), and whether int8 activations were applied. With int8 activations, the linear
    layers' biases go into the fused ops and the Gelus become one node each."""
    model = onnx.load(str(model_path))
    guards = drop_softmax_nan_guards(model)
    fused = fuse_int8_matmuls(model, fold_bias=True) if int8_activations else 0
    gelus = fuse_gelu(model) if fused else 0
    if guards == 0 and fused == 0:
        return None, False
    return model.SerializeToString(), fused > 0 or gelus > 0
