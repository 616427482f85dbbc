"""The HTTP server (`offline-assistant-cli serve`): FastAPI routes over the same Assistant and
LLM processes the window uses; requests wait in a bounded queue for an LLM child process."""
