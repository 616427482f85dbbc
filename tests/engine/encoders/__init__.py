"""Tests of engine/encoders/: the ONNX embedder, its int8 graph rewrite and the cross-encoder reranker."""
