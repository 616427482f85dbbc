"""Helper for the crash-safety test: a writer that is meant to be killed.

    python -m tests.helpers.crash_writer FOLDER [--docs N]   run the plan, resuming after a killed run
    python -m tests.helpers.crash_writer FOLDER --hold       hold the writer lock until stdin closes

The plan is a fixed list of steps (add, replace with a new version, remove, record a failure,
flush faiss). Every stored document carries the step that wrote it (in its title, or in the
error of a failure), so a new run resumes after the last step that committed. One line is
printed and flushed before and after each step, so the test can kill at a chosen moment.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.store.index_store import IndexStore
from engine.types import Chunk

EMBEDDER = "crash-test-embedder"
DIM = 64
WORDS = ("pump valve sensor filter pressure manual reset calibrate torque motor belt panel fuse "
         "relay voltage current display alarm service interval lubricate bearing").split()
STEP = re.compile(r"step=(\d+)")


@dataclass(frozen=True)
class Document:
    path: str
    sha256: str
    title_stem: str
    chunks: list[Chunk]
    embeddings: np.ndarray


def plan(docs: int) -> list[tuple[str, int, int]]:
    """(operation, document number, version); a step's number is its index here."""
    steps = []
    for i in range(docs):
        steps.append(("add", i, 1))
        if i % 5 == 4:
            steps.append(("add", i - 2, 2))
        if i % 9 == 8:
            steps.append(("remove", i - 4, 0))
        if i % 11 == 10:
            steps.append(("fail", i, 0))
        if i % 4 == 3:
            steps.append(("flush", 0, 0))
    return steps


def final_state(docs: int) -> dict[str, tuple[str, int]]:
    """path -> (status, version) once the whole plan has run."""
    state: dict[str, tuple[str, int]] = {}
    for operation, number, version in plan(docs):
        if operation == "add":
            state[path_of(number)] = ("ready", version)
        elif operation == "remove":
            state.pop(path_of(number), None)
        elif operation == "fail":
            state[path_of(number)] = ("failed", 0)
    return state


def path_of(number: int) -> str:
    return f"/manuals/doc-{number:04d}.pdf"


def document(number: int, version: int) -> Document:
    """The same random content every time for one (document, version)."""
    rng = np.random.default_rng(number * 10 + version)
    count = int(rng.integers(1, 41))
    texts = [" ".join(rng.choice(WORDS, size=30)) + f" code E-{number:04d}-{version}" for _ in range(count)]
    chunks = [Chunk(page=k + 1, start=0, end=len(t), text=t, heading_path=(f"Doc {number}",))
              for k, t in enumerate(texts)]
    embeddings = rng.standard_normal((count, DIM)).astype(np.float32)
    sha = hashlib.sha256(f"{number}-{version}".encode()).hexdigest()
    return Document(path_of(number), sha, f"doc-{number} v{version} chunks={count}", chunks, embeddings)


def resume_step(store: IndexStore) -> int:
    steps = [int(m.group(1)) for d in store.list_documents() if (m := STEP.search(d.title + d.error))]
    return max(steps) + 1 if steps else 0


def run_step(store: IndexStore, step: int, operation: str, number: int, version: int) -> None:
    if operation == "add":
        doc = document(number, version)
        if not store.is_unchanged(doc.path, doc.sha256):
            store.add_document(doc.path, doc.sha256, size=1000 + number, mtime=float(number),
                               title=f"{doc.title_stem} step={step}", page_count=len(doc.chunks),
                               chunks=doc.chunks, embeddings=doc.embeddings)
    elif operation == "remove":
        store.remove_document(path_of(number))
    elif operation == "fail":
        store.record_failure(path_of(number), sha256=f"broken-{number}", size=1, mtime=0.0,
                             error=f"broken on purpose step={step}")
    else:
        store.flush()


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def run_plan(folder: Path, docs: int) -> None:
    with IndexStore.open(folder, embedder_id=EMBEDDER, dimension=DIM) as store:
        steps = plan(docs)
        first = resume_step(store)
        say(f"resume {first}")
        for step in range(first, len(steps)):
            say(f"begin {step} {steps[step][0]}")
            run_step(store, step, *steps[step])
            say(f"end {step}")
    say("done")


def hold(folder: Path) -> None:
    with IndexStore.open(folder, embedder_id=None, dimension=None):
        say("holding")
        sys.stdin.read()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("folder", type=Path)
    parser.add_argument("--docs", type=int, default=400)
    parser.add_argument("--hold", action="store_true")
    args = parser.parse_args()
    if args.hold:
        hold(args.folder)
    else:
        run_plan(args.folder, args.docs)


if __name__ == "__main__":
    main()
