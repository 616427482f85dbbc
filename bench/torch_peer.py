#!/usr/bin/env python
"""sentence-transformers on PyTorch as a child process, for benchmarks whose venv has no torch.

    /tmp/torchvenv/bin/python bench/torch_peer.py MODEL_FOLDER THREADS

Reads JSON lines {"texts": [...], "batch": n} on stdin; writes one JSON line per request:
{"seconds": encode time, "shape": [n, d], "vectors": base64 float32 unit vectors}.
Imports nothing from the app, so any Python with torch and sentence-transformers runs it.
"""

from __future__ import annotations

import base64
import json
import sys
import time

import numpy as np


def main(folder: str, threads: int) -> int:
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(threads)
    model = SentenceTransformer(folder, device="cpu")
    for line in sys.stdin:
        request = json.loads(line)
        started = time.perf_counter()
        vectors = model.encode(request["texts"], batch_size=request["batch"], normalize_embeddings=True,
                               convert_to_numpy=True, show_progress_bar=False)
        seconds = time.perf_counter() - started
        vectors = np.ascontiguousarray(vectors, np.float32)
        print(json.dumps({"seconds": seconds, "shape": list(vectors.shape),
                          "vectors": base64.b64encode(vectors.tobytes()).decode()}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2])))
