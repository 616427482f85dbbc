"""ONNX encoders run with onnxruntime + tokenizers: the sentence embedder (and its graph fixes)
and the optional cross-encoder reranker."""
