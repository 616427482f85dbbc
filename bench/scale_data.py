"""The collection bench_scale.py measures (issue 32): N chunks made from real manual text.

Embedding a million chunks with the real model on 2 cores would take about nine hours, so:

- seed: the development manuals (tests/.manuals, the files tests/qa/*.jsonl name) indexed
  for real (parse, chunk, embed) once, into bench/.cache/scale/seed;
- sample: SAMPLE variants of seed chunks, each chunk's words with a SHUFFLE share replaced by
  words of other chunks of the same manual, embedded for real (with their headings, as the
  indexer does);
- bulk: every other chunk is such a variant's text (not embedded), and its vector a real one
  (the seed chunk's, or one of its sampled variants') plus Gaussian noise with the mean and
  covariance of the sample's (variant - original) differences, normalised;
- queries: the questions of tests/qa/*.jsonl, embedded for real.

A derived manual takes one seed manual's chunks in order (cycled) until it has
CHUNKS_PER_MANUAL of them.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MANUALS = ROOT / "tests" / ".manuals"
QA_FILES = sorted((ROOT / "tests" / "qa").glob("*.jsonl"))
SHUFFLE = 0.3  # share of a variant's words taken from other chunks (cosine to the original ~0.84)
CHUNKS_PER_MANUAL = 650  # ~200 pages at the seed manuals' ~3.3 chunks a page
SAMPLE = 20_000


@dataclass
class Seed:
    texts: list[str]
    headings: list[tuple[str, ...]]
    pages: np.ndarray  # page of each chunk
    manual: np.ndarray  # index of each chunk's seed manual
    vectors: np.ndarray  # (n, d) float32, normalised

    def chunks_of(self, manual: int) -> np.ndarray:
        return np.flatnonzero(self.manual == manual)


@dataclass
class Sample:
    base: np.ndarray  # the seed chunk each variant was made from
    vectors: np.ndarray  # their real embeddings


def seed_manuals() -> list[Path]:
    names = {json.loads(line)["doc"] for path in QA_FILES for line in path.read_text().splitlines() if line.strip()}
    return sorted(MANUALS / name for name in names if name and (MANUALS / name).is_file())


def seed(cache: Path, embedder) -> Seed:
    """The seed manuals indexed once (reused while the folder exists), read back."""
    from engine.paths import AppPaths
    from engine.store.indexer import Indexer, open_collection

    paths = AppPaths(cache / "seed").ensure()
    with open_collection(paths, embedder=embedder) as store:
        if not store.list_documents():
            started = time.perf_counter()
            for _ in Indexer(store, embedder).run(seed_manuals()):
                pass
            print(f"seed manuals indexed in {time.perf_counter() - started:.0f} s")
    return read_seed(cache)


def read_seed(cache: Path) -> Seed:
    """The seed collection's chunks, as indexed."""
    import sqlite3

    db_path = cache / "seed" / "collections" / "default" / "collection.sqlite3"
    with sqlite3.connect(f"file:{db_path}?mode=ro", uri=True) as db:
        rows = db.execute("SELECT document_id, page, text, heading_path, embedding FROM chunks ORDER BY id").fetchall()
    documents = sorted({row[0] for row in rows})
    vectors = np.frombuffer(b"".join(row[4] for row in rows), dtype=np.float32).reshape(len(rows), -1)
    return Seed(texts=[row[2] for row in rows], headings=[tuple(json.loads(row[3])) for row in rows],
                pages=np.array([row[1] for row in rows]), manual=np.array([documents.index(row[0]) for row in rows]),
                vectors=vectors)


def variant(seed: Seed, chunk: int, rng: random.Random) -> str:
    """The chunk's words, each replaced with probability SHUFFLE by a word of another chunk of
    its manual: a text FTS5 and the embedder both see as new, on the same subject."""
    donors = seed.chunks_of(int(seed.manual[chunk]))
    other = seed.texts[int(donors[rng.randrange(len(donors))])].split() or ["manual"]
    return " ".join(rng.choice(other) if rng.random() < SHUFFLE else w for w in seed.texts[chunk].split())


def embedded(seed: Seed, chunk: int, text: str) -> str:
    """What the indexer gives the embedder: the two nearest headings, then the text."""
    path = seed.headings[chunk][-2:]
    return " > ".join(path) + "\n" + text if path else text


def sample(cache: Path, seed: Seed, size: int, embedder) -> Sample:
    """`size` shuffled variants embedded for real (cached: ~30 chunks/s here)."""
    path = cache / f"sample-{size}.npz"
    if path.is_file():
        data = np.load(path)
        return Sample(data["base"], data["vectors"])
    rng = random.Random(32)
    base = np.array([rng.randrange(len(seed.texts)) for _ in range(size)])
    texts = [embedded(seed, int(i), variant(seed, int(i), rng)) for i in base]
    started, parts = time.perf_counter(), []
    for start in range(0, size, 512):
        parts.append(embedder.encode_documents(texts[start:start + 512], batch_size=8))
        print(f"  sample embedded {start + len(parts[-1])}/{size} "
              f"({(start + len(parts[-1])) / (time.perf_counter() - started):.1f} chunks/s)", flush=True)
    vectors = np.concatenate(parts).astype(np.float32)
    np.savez(path, base=base, vectors=vectors)
    return Sample(base, vectors)


class Noise:
    """Gaussian noise with the mean and covariance of real (variant - original) differences."""

    def __init__(self, seed: Seed, sample: Sample):
        differences = sample.vectors - seed.vectors[sample.base]
        self.mean = differences.mean(axis=0)
        covariance = np.cov(differences - self.mean, rowvar=False)
        values, vectors = np.linalg.eigh(covariance)
        self._transform = (vectors * np.sqrt(np.clip(values, 0, None))).T.astype(np.float32)
        self.median_cosine = float(np.median((sample.vectors * seed.vectors[sample.base]).sum(axis=1)))

    def __call__(self, rng: np.random.Generator, rows: int) -> np.ndarray:
        z = rng.standard_normal((rows, self._transform.shape[0]), dtype=np.float32)
        return z @ self._transform + self.mean


@dataclass
class Derived:
    """What derived manuals are made of: the seed, the sample and the noise, with the real
    vectors each seed chunk has (its own and its sampled variants')."""

    seed: Seed
    sample: Sample
    noise: Noise

    def __post_init__(self):
        self._variants: dict[int, list[int]] = {}
        for row, chunk in enumerate(self.sample.base):
            self._variants.setdefault(int(chunk), []).append(row)

    def manual(self, number: int, chunks: int = CHUNKS_PER_MANUAL):
        """Manual `number` (the same every time): its Chunk records and their vectors."""
        from engine.types import Chunk

        rng = random.Random(number)
        generator = np.random.default_rng(number)
        members = self.seed.chunks_of(number % (int(self.seed.manual.max()) + 1))
        start = rng.randrange(len(members))
        picked = [int(members[(start + i) % len(members)]) for i in range(chunks)]
        records, bases = [], []
        for i, chunk in enumerate(picked):
            text = variant(self.seed, chunk, rng)
            records.append(Chunk(page=i // 3 + 1, start=0, end=len(text), text=text,
                                 heading_path=self.seed.headings[chunk]))
            bases.append(self._real_vector(chunk, rng))
        vectors = np.stack(bases) + self.noise(generator, len(picked))
        return records, vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    def _real_vector(self, chunk: int, rng: random.Random) -> np.ndarray:
        rows = self._variants.get(chunk, [])
        pick = rng.randrange(len(rows) + 1)
        return self.seed.vectors[chunk] if pick == len(rows) else self.sample.vectors[rows[pick]]


def load(cache: Path, size: int = SAMPLE) -> Derived:
    """The seed and a sample made before, read back (for child processes: no embedder needed)."""
    seed = read_seed(cache)
    data = np.load(cache / f"sample-{size}.npz")
    sample = Sample(data["base"], data["vectors"])
    return Derived(seed, sample, Noise(seed, sample))


def embedder_id(cache: Path) -> str:
    import sqlite3

    with sqlite3.connect(cache / "seed" / "collections" / "default" / "collection.sqlite3") as db:
        return db.execute("SELECT value FROM meta WHERE key = 'embedder_id'").fetchone()[0]


def add_manual(store, derived: Derived, number: int, chunks: int = CHUNKS_PER_MANUAL) -> int:
    """Derived manual `number` stored as /plant/manual-NNNNN.pdf; returns its chunk count."""
    records, vectors = derived.manual(number, chunks)
    path = f"/plant/manual-{number:05d}.pdf"
    store.add_document(path, hashlib.sha256(path.encode()).hexdigest(), 1, 0.0, f"Manual {number}",
                       records[-1].page, records, vectors)
    return len(records)


def queries(cache: Path, embedder) -> tuple[list[str], np.ndarray]:
    """The development questions and their real embeddings (cached)."""
    path = cache / "queries.npz"
    texts = [json.loads(line)["question"] for file in QA_FILES for line in file.read_text().splitlines()
             if line.strip()]
    if path.is_file():
        data = np.load(path)
        if int(data["count"]) == len(texts):
            return texts, data["vectors"]
    vectors = embedder.encode_queries(texts).astype(np.float32)
    np.savez(path, count=len(texts), vectors=vectors)
    return texts, vectors
