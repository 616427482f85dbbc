"""ONNX encoders run with onnxruntime + tokenizers: onnx_session (OnnxEncoder, the base both
build on, and the session, tokenizer and padding they share), the sentence embedder (and its
graph fixes) and the cross-encoder reranker."""
