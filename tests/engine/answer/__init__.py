"""Tests of engine/answer/: retrieval, grounding, the lead, sentence checks, the guard, the Assistant."""
