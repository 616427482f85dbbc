"""ONNX encoders run with onnxruntime + tokenizers: onnx_session (the session, tokenizer and
padding both share), the sentence embedder (and its graph fixes) and the cross-encoder reranker."""
