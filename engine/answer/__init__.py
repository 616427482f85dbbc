"""From a question to a cited answer: retrieval (dense + keyword, fused, reranked), grounding (the
relevance gate and the prompt), the lead sentences, the answer guard, and the Assistant that
streams typed events."""
