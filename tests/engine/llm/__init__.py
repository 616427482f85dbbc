"""Tests of engine/llm/: the LLM in its child process and RemoteLLM against real HTTP engines."""
