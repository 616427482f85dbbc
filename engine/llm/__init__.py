"""The language model: LocalLLM (onnxruntime-genai in this process), its child-process client
with the same API (process, the way the app runs it), RemoteLLM with that API again on a remote
OpenAI-compatible engine (remote), token counting in the caller (tokens), and the
execution-provider choice."""
