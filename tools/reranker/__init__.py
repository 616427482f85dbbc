"""Developer tools for the reranker (issue 28): mining pairs from manuals, training, export."""
