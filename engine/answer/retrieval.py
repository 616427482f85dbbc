"""Retriever: a question -> the passages of the manuals most likely to answer it.

    dense (faiss, cosine) ─┐
                           ├─> fuse (weighted reciprocal rank) ─> rerank (optional) ─> merge neighbours
    keyword (FTS5, BM25) ──┘

Dense search finds paraphrases; keyword search finds the exact names a person types (a part
number, an error code, a function name) that an embedding blurs. Every candidate also gets its
cosine similarity to the question, read from the stored embeddings, because the relevance gate
and the cross-stage scores need one scale for all of them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from engine.answer.query import Query
from engine.answer.sentences import DOT_LEADERS, ends_sentence
from engine.answer.terms import PREFIX_MIN, code_forms
from engine.answer.timing import StageTimes
from engine.encoders.embedder import Embedder
from engine.store.index_store import IndexStore
from engine.types import Passage, Span

CONTENTS_LINES = 4  # a contents listing or an index has at least this many "Title . . . . 12" lines
# "Title . . . . 12", "iv"; an index's "apt-file, 39" and "[EMC] Section, 158, 160-162"
_LEADERS_LINE = re.compile(DOT_LEADERS.pattern + r"\s*[\dixvlcIXVLC]+\s*$")
_CONTENTS_LINE = re.compile(_LEADERS_LINE.pattern + r"|^\D.{0,80}?,\s*\d+(?:\s*[,–-]\s*\d+)*\s*$")


@dataclass(frozen=True)
class RetrievalSettings:
    candidates: int = 40  # taken from each of dense and keyword search
    fusion: str = "rrf"  # "rrf", "dense" or "keyword" (the last two for measuring)
    rrf_k: int = 20  # issue 13, with dense_weight 1.5: hit@5 0.82 -> 0.86 on five families (k=60)
    dense_weight: float = 1.5  # issue 13: 1.0 -> 1.5 raised hit@5 and MRR@5 over five families
    keyword_weight: float = 1.0
    rerank_candidates: int = 20
    merge_neighbours: bool = True
    keyword_rows: int = 60_000  # chunks BM25 may rank for one question (see _keyword_terms)
    max_merged_chunks: int = 3
    merge_pool: int = 12  # a neighbour ranked this high is merged in; fixed so that the top
    # passages do not depend on how many are asked for


@dataclass
class RetrievalResult(StageTimes):
    passages: list[Passage] = field(default_factory=list)


@dataclass
class _Candidate:
    chunk_id: int
    similarity: float = 0.0
    keyword_score: float | None = None
    score: float = 0.0
    rerank_score: float | None = None


class Retriever:
    def __init__(self, store: IndexStore, embedder: Embedder, reranker=None,
                 settings: RetrievalSettings | None = None):
        self.store = store
        self.embedder = embedder
        self.reranker = reranker  # an engine.encoders.reranker.CrossEncoder, or None
        self.settings = settings or RetrievalSettings()

    def query(self, text: str) -> Query:
        """The question as every stage reads it: its words weighed in this collection, embedded."""
        return Query.of(text, self.frequency, self.embedder)

    def frequency(self, stem: str) -> float:
        """The share of chunks holding a word the stem stands for, as keyword search matches it:
        a short stem as a whole word, a longer one as a prefix."""
        return self.store.prefix_frequency(stem, whole_word=len(stem) < PREFIX_MIN)

    def search(self, query: str | Query, k: int = 5) -> list[Passage]:
        return self.retrieve(query, k).passages

    def retrieve(self, query: str | Query, k: int = 5) -> RetrievalResult:
        """The best k passages, with how long each stage took and which stages ran (a question
        given as text is made a Query first: "embed")."""
        result = RetrievalResult()
        if isinstance(query, str):
            with result.timed("embed"):
                query = self.query(query)
        candidates = self._candidates(query, result)
        with result.timed("fuse"):
            ranked = self._fused(candidates)
        if self.reranker is not None and ranked:
            with result.timed("rerank"):
                ranked = self._reranked(query.text, ranked)
        with result.timed("merge"):
            result.passages = self._passages(ranked, candidates, k)
        return result

    # -- stages ------------------------------------------------------------------------------

    def _candidates(self, query: Query, result: RetrievalResult) -> dict[int, _Candidate]:
        s = self.settings
        found: dict[int, _Candidate] = {}
        if s.fusion != "keyword":
            with result.timed("dense"):
                for chunk_id, score in self.store.search_dense(query.vector, s.candidates):
                    found[chunk_id] = _Candidate(chunk_id, similarity=float(score))
        if s.fusion != "dense":
            with result.timed("keyword"):
                for chunk_id, score in self._keyword_hits(query):
                    found.setdefault(chunk_id, _Candidate(chunk_id, similarity=np.nan)).keyword_score = score
                self._fill_similarities(found, query.vector)
        return found

    def _keyword_hits(self, query: Query) -> list[tuple[int, float]]:
        """BM25 on the question's topic words: stems as prefixes ('install' finds 'installing'),
        short words and code-like tokens ('read.fwf' as the phrase "read fwf") exactly.
        Question scaffolding ('how do I') would only add noise."""
        terms = self._keyword_terms(query)
        exact = list(query.code) + code_forms(query.text) + [t for t in terms if len(t) < PREFIX_MIN]
        prefixes = [t for t in terms if len(t) >= PREFIX_MIN] + list(query.joined)
        return self.store.search_keyword(" ".join(exact), self.settings.candidates, prefixes)

    def _keyword_terms(self, query: Query) -> list[str]:
        """The topic stems to rank by: all of them, unless together they match more than
        keyword_rows chunks (only in a collection of some 100,000 chunks or more); then the
        rarest that fit. BM25 ranks every chunk a word matches, ~2 us each here (a word in a
        tenth of a million chunks: 0.2 s), and such a common word adds little to its ranking;
        dense search still reads the whole question."""
        total = self.store.counted_chunks()
        rows = {t: query.frequencies.get(t, 0.0) * total for t in query.terms}
        if sum(rows.values()) <= self.settings.keyword_rows:
            return list(query.terms)
        kept, used = set(), 0.0
        for term in sorted(query.terms, key=rows.get):
            if used + rows[term] > self.settings.keyword_rows:
                break
            kept.add(term)
            used += rows[term]
        return [t for t in query.terms if t in kept]

    def _fill_similarities(self, found: dict[int, _Candidate], vector: np.ndarray) -> None:
        """Keyword-only hits get their cosine from the stored embeddings."""
        missing = [c.chunk_id for c in found.values() if np.isnan(c.similarity)]
        stored = self.store.embeddings(missing)
        for chunk_id in missing:
            embedding = stored.get(chunk_id)
            found[chunk_id].similarity = float(embedding @ vector) if embedding is not None else 0.0

    def _fused(self, found: dict[int, _Candidate]) -> list[_Candidate]:
        s = self.settings
        by_dense = sorted(found.values(), key=lambda c: -c.similarity)
        by_keyword = sorted((c for c in found.values() if c.keyword_score is not None),
                            key=lambda c: -c.keyword_score)
        dense_weight = 0.0 if s.fusion == "keyword" else s.dense_weight
        keyword_weight = 0.0 if s.fusion == "dense" else s.keyword_weight
        for rank, candidate in enumerate(by_dense):
            candidate.score = dense_weight / (s.rrf_k + rank + 1)
        for rank, candidate in enumerate(by_keyword):
            candidate.score += keyword_weight / (s.rrf_k + rank + 1)
        return sorted(found.values(), key=lambda c: (-c.score, -c.similarity))

    def _reranked(self, query: str, ranked: list[_Candidate]) -> list[_Candidate]:
        head = ranked[:self.settings.rerank_candidates]
        texts = {c["id"]: c["text"] for c in self.store.chunks(c.chunk_id for c in head)}
        head = [c for c in head if c.chunk_id in texts]
        scores = self.reranker.predict([(query, texts[c.chunk_id]) for c in head])
        for candidate, score in zip(head, scores):
            candidate.rerank_score = candidate.score = float(score)
        return sorted(head, key=lambda c: -c.score) + ranked[self.settings.rerank_candidates:]

    def _passages(self, ranked: list[_Candidate], found: dict[int, _Candidate], k: int) -> list[Passage]:
        pool = {c.chunk_id for c in ranked[:self.settings.merge_pool]}
        used: set[int] = set()
        shown: set[str] = set()  # the chunks' texts in the passages so far
        passages = []
        for candidate in ranked:
            if len(passages) >= k:
                break
            if candidate.chunk_id in used:
                continue
            group = self._group(candidate.chunk_id, pool, used)
            if not group:
                continue  # removed since the search (another process deleted the document)
            text = next(c["text"] for c in group if c["id"] == candidate.chunk_id)
            if _same_text(text) in shown or contents_listing(text):
                used.add(candidate.chunk_id)  # a manual indexed twice, a warning on many pages: once;
                continue  # a table of contents or an index names every topic and answers none
            used.update(chunk["id"] for chunk in group)
            shown.update(_same_text(chunk["text"]) for chunk in group)
            passages.append(_passage(group, candidate, found))
        return self._labelled(passages)

    def _labelled(self, passages: list[Passage]) -> list[Passage]:
        """The passages with the printed labels of their pages, and which of their pages were
        recognised by OCR, each read in one query."""
        pages = [(p.document_id, page) for p in passages for page in p.pages]
        labels = self.store.page_labels(pages)
        recognised = self.store.recognised_pages(pages)
        if not labels and not recognised:
            return passages
        return [replace(p, page_labels=tuple((page, labels[p.document_id, page]) for page in p.pages
                                             if (p.document_id, page) in labels),
                        ocr_pages=tuple(page for page in p.pages if (p.document_id, page) in recognised))
                for p in passages]

    def _group(self, chunk_id: int, pool: set[int], used: set[int]) -> list[dict]:
        """The chunk, with the neighbours of its section that also ranked well, or that finish
        its sentence across a page break, up to max_merged_chunks; none already in another
        passage."""
        if not self.settings.merge_neighbours:
            return self.store.chunks([chunk_id])
        limit = self.settings.max_merged_chunks
        near = self.store.neighbours(chunk_id, before=limit - 1, after=limit - 1)
        at = next((i for i, c in enumerate(near) if c["id"] == chunk_id), None)
        if at is None:
            return []
        first = last = at

        def joins(chunk: dict, beside: dict, after: bool) -> bool:
            if chunk["id"] in used:
                return False
            ranked_well = chunk["id"] in pool and chunk["heading_path"] == beside["heading_path"]
            return ranked_well or (after and _runs_on(beside, chunk))

        while last - first + 1 < limit and last + 1 < len(near) and joins(near[last + 1], near[last], True):
            last += 1
        while last - first + 1 < limit and first > 0 and joins(near[first - 1], near[first], False):
            first -= 1
        return near[first:last + 1]


def contents_listing(text: str) -> bool:
    """A table of contents or a book's index: most of its lines end in a page number, after dot
    leaders or a comma; a chunk of a few lines, all of them, after dot leaders."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < CONTENTS_LINES:  # dot leaders take many tokens: a listing's chunks may hold 1-3 lines
        return bool(lines) and all(_LEADERS_LINE.search(line) for line in lines)
    listed = sum(bool(_CONTENTS_LINE.search(line)) for line in lines)
    return listed >= CONTENTS_LINES and listed * 2 > len(lines)


def _same_text(text: str) -> str:
    """A chunk's text as compared for repeats: spacing and case ignored."""
    return " ".join(text.split()).casefold()


def _runs_on(chunk: dict, following: dict) -> bool:
    """True when a page ends mid-sentence and its text carries on at the top of the next page."""
    return following["page"] == chunk["page"] + 1 and not ends_sentence(chunk["text"])


def _passage(group: list[dict], best: _Candidate, found: dict[int, _Candidate]) -> Passage:
    members = [found[c["id"]] for c in group if c["id"] in found]
    keyword_scores = [m.keyword_score for m in members if m.keyword_score is not None]
    first = group[0]
    return Passage(
        document_id=first["document_id"], path=first["path"], title=first["title"],
        chunk_ids=tuple(c["id"] for c in group),
        anchor=next(i for i, c in enumerate(group) if c["id"] == best.chunk_id),
        spans=tuple(Span(c["page"], c["start"], c["end"]) for c in group),
        text=_joined(group), heading_path=_heading_of(group, best.chunk_id),
        score=best.score, similarity=max(m.similarity for m in members),
        keyword_score=max(keyword_scores) if keyword_scores else None,
        rerank_score=best.rerank_score,
    )


def _heading_of(group: Sequence[dict], chunk_id: int) -> tuple[str, ...]:
    return next(c["heading_path"] for c in group if c["id"] == chunk_id)


def _joined(group: list[dict]) -> str:
    """The chunks' text once: the overlap a chunk repeats from the one before is cut."""
    text = group[0]["text"]
    for before, chunk in zip(group, group[1:]):
        piece = chunk["text"]
        if chunk["page"] == before["page"] and chunk["start"] < before["end"]:
            piece = piece[before["end"] - chunk["start"]:].lstrip()
        if piece:
            text += ("\n" if chunk["page"] != before["page"] else " ") + piece
    return text
