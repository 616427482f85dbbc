"""Tests of engine/models/: the registry, GGUF import (weights, tokenizer, templates), checks."""
