"""Offline Assistant engine: everything the app does, without Qt, in the order data flows.

ingest/ (files -> pages -> chunks) -> encoders/ (embedder, reranker) -> store/ (SQLite + faiss)
-> answer/ (retrieval, gate, prompt, Assistant events) -> llm/ (the model, in its own process).
Beside them: kiosk/ (PIN, audit, crash loop), models/ (finding and importing models),
evaluation/ (QA sets and scores), cli/ (offline-assistant-cli). Shared vocabulary at the top:
types (records, and the CancelFlag and LanguageModel interfaces), errors, paths (every file
location), config, conversations, atomic_file, hashing (a file's SHA-256), child_process,
safe_text (text from documents and models made inert for terminals and logs).
Imports go down layers only (tests/engine/test_layout.py): cli; server, evaluation; answer,
fleet; store; ingest, llm, kiosk; models; encoders; the shared vocabulary.
"""

import os

# onnxruntime 1.32 and onnxruntime-genai 0.18 keep a device id and queue usage events under
# ~/.cache/Microsoft unless this is set before they load; an offline app records nothing.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

__version__ = "0.1.0"
