"""The dense index: a cache of the embeddings SQLite holds, exact or approximate by size.

Exact search (a flat inner-product index) keeps every vector in memory (1.5 KB a chunk) and
reads them all for each query: about 0.2 us a vector on one core here, 200 ms at a million
chunks. From IndexPolicy.approximate_from chunks on, the index is IVF with an 8-bit scalar
quantizer (384 B a chunk): a query scans the lists nearest to it, and the store re-scores the
candidates exactly from the float vectors in SQLite, so what it returns is ranked as exact
search ranks it (docs/benchmarks.md, issue 32, measures how often the true top ten are found).

The index follows the collection's size, with no setting (IndexPolicy.rebuild_as):
- exact below approximate_from chunks, approximate from there on;
- an approximate index goes back to exact only under half of that, so that a collection
  near the limit is not rebuilt at every document added or removed;
- chunks added later go into the trained lists; when the collection has grown so far that
  it calls for twice the lists the index has (4x the chunks it was trained on), it is
  trained again.
Files are faiss's own format (write_index / read_index), never pickle.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import faiss
import numpy as np

EXACT = "exact"
APPROXIMATE = "approximate"


@dataclass(frozen=True)
class IndexPolicy:
    """When the index is approximate and how it is shaped. The defaults are measured in
    docs/benchmarks.md (issue 32); tests pass a small approximate_from."""

    approximate_from: int = 50_000  # chunks: exact search's p95 ~10 ms quiet, 26-44 ms on a busy 2 cores
    lists_per_root: float = 4.0  # IVF lists = 4 sqrt(chunks): 4,000 at a million
    train_per_list: int = 40  # training vectors per list (faiss warns under 39)
    probes_share: float = 1 / 64  # lists scanned per query, above min_probes (4,096 lists and more)
    min_probes: int = 64  # recall@10 at 100k (894 lists): 0.969 with 32, 0.985 with 64; 0.992 at 1M
    candidates_per_hit: int = 2  # candidates re-scored per result asked for

    def kind_for(self, count: int, current: str) -> str:
        if current == APPROXIMATE:
            return APPROXIMATE if count >= self.approximate_from // 2 else EXACT
        return APPROXIMATE if count >= self.approximate_from else EXACT

    def lists_for(self, count: int) -> int:
        """As many lists as 4 sqrt(count), but never fewer training vectors than each needs."""
        return max(1, min(int(self.lists_per_root * math.sqrt(count)), count // self.train_per_list))

    def probes_for(self, lists: int) -> int:
        return min(lists, max(self.min_probes, round(lists * self.probes_share)))

    def rebuild_as(self, index: "DenseIndex") -> str | None:
        """The kind to rebuild `index` as for its size, or None when it fits."""
        kind = self.kind_for(index.ntotal, index.kind)
        if kind != index.kind:
            return kind
        if kind == APPROXIMATE and self.lists_for(index.ntotal) >= 2 * index.lists:
            return kind
        return None


class DenseIndex:
    """Chunk ids and their vectors, searched by inner product (cosine: vectors are normalised).
    An exact one is IndexIDMap2(IndexFlatIP); an approximate one IndexIVFScalarQuantizer, which
    keeps the chunk ids in its lists itself (an IDMap around IVF cannot remove ids)."""

    def __init__(self, index):
        self._index = index
        self._ivf = faiss.extract_index_ivf(index) if isinstance(index, faiss.IndexIVF) else None

    @classmethod
    def exact(cls, dimension: int) -> "DenseIndex":
        return cls(faiss.IndexIDMap2(faiss.IndexFlatIP(dimension)))

    @classmethod
    def trained(cls, sample: np.ndarray, lists: int) -> "DenseIndex":
        """An empty approximate index whose lists and quantizer are trained on `sample`."""
        index = faiss.index_factory(sample.shape[1], f"IVF{lists},SQ8", faiss.METRIC_INNER_PRODUCT)
        index.train(np.ascontiguousarray(sample, dtype=np.float32))
        return cls(index)

    @classmethod
    def read(cls, handle, dimension: int) -> "DenseIndex | None":
        """The index in an open file, or None when it is not one of ours (then it is rebuilt)."""
        try:
            index = faiss.read_index(faiss.PyCallbackIOReader(handle.read))
        except RuntimeError:  # faiss reports a malformed file this way
            return None
        ours = isinstance(index, (faiss.IndexIDMap2, faiss.IndexIVFScalarQuantizer))
        if not ours or index.d != dimension or index.metric_type != faiss.METRIC_INNER_PRODUCT:
            return None
        return cls(index)

    def write(self, write) -> None:
        """Streams the index to `write(bytes)`: no second copy of it in memory."""
        faiss.write_index(self._index, faiss.PyCallbackIOWriter(write))

    def copy(self) -> "DenseIndex":
        return DenseIndex(faiss.clone_index(self._index))

    @property
    def kind(self) -> str:
        return EXACT if self._ivf is None else APPROXIMATE

    @property
    def lists(self) -> int:
        return 0 if self._ivf is None else self._ivf.nlist

    @property
    def ntotal(self) -> int:
        return self._index.ntotal

    def nbytes(self) -> int:
        """About the size of its file (what a full disk is told it needed)."""
        per_vector = self._index.d * (4 if self._ivf is None else 1) + 8
        return self.ntotal * per_vector + self.lists * self._index.d * 4

    def ids(self) -> np.ndarray:
        if self._ivf is None:
            return faiss.vector_to_array(self._index.id_map).astype(np.int64, copy=False)
        return np.concatenate([np.zeros(0, dtype=np.int64)] + [self._list_ids(i) for i in range(self._ivf.nlist)])

    def _list_ids(self, number: int) -> np.ndarray:
        lists = self._ivf.invlists
        size = lists.list_size(number)
        if not size:
            return np.zeros(0, dtype=np.int64)
        pointer = lists.get_ids(number)
        try:
            return faiss.rev_swig_ptr(pointer, size).astype(np.int64)
        finally:
            lists.release_ids(number, pointer)

    def max_id(self) -> int:
        ids = self.ids()
        return int(ids.max()) if ids.size else 0

    def add(self, ids, vectors: np.ndarray) -> None:
        matrix = np.ascontiguousarray(vectors, dtype=np.float32)
        self._index.add_with_ids(matrix, np.asarray(ids, dtype=np.int64))

    def remove(self, ids) -> None:
        self._index.remove_ids(faiss.IDSelectorBatch(np.asarray(ids, dtype=np.int64)))

    def search(self, query: np.ndarray, k: int, policy: IndexPolicy) -> list[tuple[int, float]]:
        """The k best (exact), or policy.candidates_per_hit * k candidates with approximate
        scores for the caller to re-score."""
        if self._ivf is not None:
            k *= policy.candidates_per_hit
        k = min(int(k), self._index.ntotal)
        if k <= 0:
            return []
        params = None if self._ivf is None else faiss.SearchParametersIVF(nprobe=policy.probes_for(self.lists))
        scores, ids = self._index.search(query, k, params=params)
        return [(int(i), float(s)) for i, s in zip(ids[0], scores[0]) if i >= 0]
