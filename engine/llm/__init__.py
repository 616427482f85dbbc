"""The language model: LocalLLM (onnxruntime-genai in this process), its child-process client
with the same API (process, the way the app runs it), RemoteLLM with that API again on a remote
OpenAI-compatible engine (remote), the KV caches of recent prompts a server's processes keep
and how a prompt is cut into the pieces it goes in by (prompt_cache), token counting in the
caller (tokens), measuring how fast a
model writes (speed), and the ModelSupervisor (supervisor), the one owner of the answering model's
life: remote or local, fallback and retry, restart with backoff. The API they share is
engine.types.LanguageModel; the provider choice is engine.models.hardware. This package sits above engine.models: it runs what models finds,
checks and imports, and models never imports it."""

# The system message of a plain chat (the CLI's generate, the server's /v1 endpoints): small
# models follow a short plain instruction better than their own long default persona. Here, not
# in a submodule, so that reading it loads no model runtime.
DEFAULT_SYSTEM = "You are a helpful assistant."
