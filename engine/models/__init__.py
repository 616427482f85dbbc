"""Finding, verifying, importing and preparing models.

- registry.py      the built-in models (from PyPI packages) and what is installed in the data dir
- prepare.py       converting the built-in model once, in a child process
- gguf_import.py   GGUF -> ONNX GenAI folder, numpy + onnx + gguf only (no torch)
- gguf_file.py     a GGUF's header: opening it, its fields, the context an import keeps
- gguf_tokenizer.py tokenizer.json / tokenizer_config.json from a GGUF's vocabulary
- genai_folder.py  checking, inferring and importing ONNX GenAI folders
- onnx_subset.py   the external-data files a graph names, read with protobuf alone (no onnx import)
- manifest.py      atomic folder writes and SHA-256 manifests
- catalog.py       what a model picker shows, with the speeds measured (engine.llm.speed measures)
- hardware.py      the execution provider a model runs on: CUDA -> DirectML -> CoreML -> CPU

It sits below engine.llm (which runs the models) and never imports it.
"""
