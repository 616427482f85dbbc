"""Initializers written to a model's external data file as they are made.

onnx.save_model(save_as_external_data=True) needs every tensor in the ModelProto first: the
whole model in memory, then copies of it while saving (an import peaked at about 5x the weights).
ExternalData instead appends each array's bytes to the file at once and returns a TensorProto
that only points at them (location, offset, length), so an import holds one tensor at a time
plus the graph.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper

ALIGN = 4096  # offsets on page boundaries, so that the runtime can map each tensor directly
SIZE_THRESHOLD = 1024  # smaller tensors stay inside model.onnx, as onnx.save_model does


class ExternalData:
    """A callable (array, name) -> TensorProto over an open data file; use as a context manager."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._file = None

    def __enter__(self) -> ExternalData:
        self._file = open(self.path, "wb")
        return self

    def __exit__(self, *exc) -> None:
        self._file.close()

    def __call__(self, array: np.ndarray, name: str) -> TensorProto:
        array = np.ascontiguousarray(array)
        if array.nbytes < SIZE_THRESHOLD:
            return numpy_helper.from_array(array, name)
        offset = self._aligned_end()
        self._file.write(memoryview(array.reshape(-1)).cast("B"))  # no copy of the array
        tensor = TensorProto(name=name, dims=array.shape, data_type=helper.np_dtype_to_tensor_dtype(array.dtype))
        tensor.data_location = TensorProto.EXTERNAL
        for key, value in (("location", self.path.name), ("offset", str(offset)), ("length", str(array.nbytes))):
            entry = tensor.external_data.add()
            entry.key, entry.value = key, value
        return tensor

    def _aligned_end(self) -> int:
        end = self._file.tell()
        padding = -end % ALIGN
        if padding:
            self._file.write(b"\0" * padding)
        return end + padding

