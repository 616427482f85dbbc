"""llama.cpp as the reference for imported models: greedy tokens and logits on the same GGUF.

Run with the python of .venv-llama (llama-cpp-python built from source), never imported into the
test venv:  python llama_reference.py < request.json > answer.json
The request: {"models": {name: path}, "prompts": [[ids...], ...], "steps": 32, "n_ctx": 256}.
The answer: {name: one record per prompt}, each record {"tokens": [32 greedy ids], "logits":
base64 of float32 [steps, vocab]}, where logits[i] is what chose tokens[i] (0: after the prompt).
Many models go in one run: loading llama-cpp-python costs a second or more, a tiny model little.

`run_llama_reference` (imported by the tests) runs this file in a subprocess.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path


def run_llama_reference(python: Path, models: dict[str, Path], prompts: list[list[int]], steps: int = 32,
                        n_ctx: int = 256) -> dict[str, list[dict]]:
    """{name: [{"tokens": [steps ids], "logits": float32 [steps, vocab]} per prompt]}"""
    import numpy as np

    request = {"models": {name: str(path) for name, path in models.items()}, "prompts": prompts,
               "steps": steps, "n_ctx": n_ctx}
    done = subprocess.run([str(python), __file__], input=json.dumps(request),
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"llama.cpp failed: {done.stderr[-3000:]}")
    answer = json.loads(done.stdout)
    for records in answer.values():
        for record in records:
            logits = np.frombuffer(base64.b64decode(record["logits"]), np.float32)
            record["logits"] = logits.reshape(len(record["tokens"]), -1)
    return answer


def _greedy(llm, prompt: list[int], steps: int) -> dict:
    import numpy as np

    llm.reset()
    llm.eval(prompt)
    tokens, logits = [], []
    for _ in range(steps):
        logits.append(np.asarray(llm.scores[llm.n_tokens - 1], dtype=np.float32))
        tokens.append(int(logits[-1].argmax()))
        llm.eval([tokens[-1]])
    return {"tokens": tokens, "logits": base64.b64encode(np.stack(logits).tobytes()).decode("ascii")}


def main() -> None:
    from llama_cpp import Llama

    request = json.load(sys.stdin)
    answer = {}
    for name, path in request["models"].items():
        llm = Llama(model_path=path, n_ctx=request["n_ctx"], n_threads=2, n_threads_batch=2,
                    logits_all=True, verbose=False)
        answer[name] = [_greedy(llm, p, request["steps"]) for p in request["prompts"]]
        llm.close()
    json.dump(answer, sys.stdout)


if __name__ == "__main__":
    main()
