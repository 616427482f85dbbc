"""Lead sentences: the manual's own sentences that answer the question, shown before the model writes.

    quotes = lead_sentences(question, passages, query_vector, embedder)   # 1-3 Quote, best first

Each candidate sentence of the retrieved passages is scored by measuring, not by position alone:
    score = cosine * the sentence's embedding and the question's
          + terms  * share of the question's topic words (IDF-weighted) the sentence contains
          + rank   * 1 / (the passage's rank)
          + heading * share of the topic words in the passage's heading path
          + code   * whether it names a command, option or function (how-to answers do)
The best leads; the next best follow while they score within `keep_within` of it. The weights
were chosen on the development sets (bench/bench_lead.py; the figures are in its docstring).
Fragments (headings, table-of-contents lines, page headers, runs with few words) never qualify.

Each quote keeps where it sits on its page, Span(page, start, end) in the page's text (pypdf's
for PDFs), so the source view can highlight exactly that sentence. A PDF's printed page labels
are not kept by ingestion, so a quote's page is the physical page, as every citation's is.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import product

import numpy as np

from engine.answer.terms import WORD, query_terms
from engine.ingest.chunking import trimmed
from engine.types import Passage, Quote, Span

MAX_CANDIDATES = 40  # embedded in one batch: the lead is due <= 0.5 s after Enter on 2 cores
MIN_CHARS = 25
MIN_WORDS = 4
MAX_CHARS = 400  # a longer "sentence" is a code block or a table: taken apart at its lines
MAX_WORD_CHARS = 45  # a longer run without spaces is a table of contents glued together


@dataclass(frozen=True)
class LeadWeights:
    cosine: float = 1.0
    terms: float = 0.5
    rank: float = 0.1
    heading: float = 0.1
    code: float = 0.2  # a sentence that names a command, option or function
    keep_within: float = 0.25  # a second or third quote scores within this of the best
    follow: bool = False  # the best sentence's next one comes with it (it often holds the how)


DEFAULT_WEIGHTS = LeadWeights()


def lead_sentences(question: str, passages: Sequence[Passage], query_vector: np.ndarray | None = None,
                   embedder=None, limit: int = 3, weights: LeadWeights = DEFAULT_WEIGHTS,
                   frequency: Callable[[str], float] | None = None) -> list[Quote]:
    """The `limit` (at most) sentences of `passages` that best answer `question`, best first.
    `query_vector` is the question's embedding as retrieval computed it; without it (and with an
    `embedder`) the question is embedded with the sentences. `frequency(stem)` (the store's
    prefix_frequency) weighs rare topic words more; without it every word weighs the same."""
    found = shortlist(candidates(question, passages, frequency), weights)
    if embedder is not None and weights.cosine:
        add_cosines(found, question, query_vector, embedder)
    return choose(found, weights, limit)


# -- candidates ---------------------------------------------------------------------------------
def candidates(question: str, passages: Sequence[Passage],
               frequency: Callable[[str], float] | None = None) -> list[Candidate]:
    """Every sentence of the passages that is not a fragment, with its word measures."""
    terms = query_terms(question)
    term_weights = {t: _idf(frequency(t)) if frequency else 1.0 for t in terms}
    found = [c for n, p in enumerate(passages, 1) for c in _candidates(n, p)]
    for c in found:
        c.terms = _share(term_weights, c.words)
        c.heading = _share(term_weights, words_of(" ".join(c.passage.heading_path)))
        c.rank = 1.0 / c.number
    return found


def shortlist(found: list[Candidate], weights: LeadWeights) -> list[Candidate]:
    """The MAX_CANDIDATES best by the measures that need no embedding."""
    return sorted(found, key=lambda c: -score(c, weights, with_cosine=False))[:MAX_CANDIDATES]


def add_cosines(found: list[Candidate], question: str, query_vector, embedder) -> None:
    """Each candidate's cosine with the question, all sentences embedded in one call."""
    if not found:
        return
    texts = [c.text for c in found]
    if query_vector is None:
        vectors = embedder.encode_documents([*texts, question])
        query_vector, vectors = vectors[-1], vectors[:-1]
    else:
        vectors = embedder.encode_documents(texts)
    for c, cosine in zip(found, vectors @ np.asarray(query_vector, dtype=np.float32)):
        c.cosine = float(cosine)


def score(c: Candidate, w: LeadWeights, with_cosine: bool = True) -> float:
    cosine = w.cosine * c.cosine if with_cosine else 0.0
    return cosine + w.terms * c.terms + w.rank * c.rank + w.heading * c.heading + w.code * c.code


def choose(found: list[Candidate], weights: LeadWeights, limit: int) -> list[Quote]:
    """The best, and up to limit - 1 more that score nearly as well; never the same text twice."""
    ranked = sorted(found, key=lambda c: -score(c, weights))
    chosen: list[Candidate] = []
    if weights.follow and ranked and ranked[0].next is not None:
        ranked = [ranked[0], ranked[0].next] + [c for c in ranked[1:] if c is not ranked[0].next]
    for i, c in enumerate(ranked):
        if weights.follow and i == 1 and c is ranked[0].next:
            chosen.append(c)
            continue
        if len(chosen) >= limit or score(c, weights) < score(ranked[0], weights) - weights.keep_within:
            break
        if all(c.text != o.text for o in chosen):
            chosen.append(c)
    return [c.quote() for c in chosen]


@dataclass
class Candidate:
    """A sentence that may lead, with its measures (cosine filled in for the shortlist only)."""

    number: int
    passage: Passage
    span: Span
    text: str
    words: set[str]
    terms: float = 0.0
    heading: float = 0.0
    rank: float = 0.0
    cosine: float = 0.0
    code: float = 0.0
    next: Candidate | None = None  # the sentence after it in the passage, if one qualifies

    def quote(self) -> Quote:
        return Quote(self.number, self.text, self.passage, self.span)


def _candidates(number: int, passage: Passage) -> list[Candidate]:
    found = []
    for run in page_runs(passage):
        for start, end in _sentences(passage.text, run, passage.heading_path):
            text = " ".join(passage.text[start:end].split())
            if _is_fragment(text):
                continue
            span = Span(run.page, run.page_offset(start), run.page_offset(end))
            found.append(Candidate(number, passage, span, text, words_of(text), code=float(_names_code(text))))
    for c, following in zip(found, found[1:]):
        c.next = following if following.span.page == c.span.page else None
    return found


_CODE = re.compile(r"\w\(|(?:^|\s)--?\w|\w=|\\\w|<\w|\w\.\w|\w_\w")


def _names_code(text: str) -> bool:
    return bool(_CODE.search(text))


def words_of(text: str) -> set[str]:
    """The text's words, case folded."""
    return {w.casefold() for w in WORD.findall(text)}


def _share(weights: dict[str, float], words: set[str]) -> float:
    """The weighted share of the topic words that some word starts with (crude stems)."""
    total = sum(weights.values())
    if not total:
        return 0.0
    return sum(w for t, w in weights.items() if any(word.startswith(t) for word in words)) / total


def _idf(fraction: float) -> float:
    fraction = min(max(fraction, 0.0), 1.0)
    return float(np.log(1 + (1 - fraction + 1e-4) / (fraction + 1e-4)))


# -- where a passage's characters sit on its pages -----------------------------------------------
@dataclass(frozen=True)
class PageRun:
    """Characters [start, end) of a passage's text that come from one page, and where each
    of its pieces starts on that page: (text offset, page offset) pairs, in order."""

    page: int
    start: int
    end: int
    pieces: tuple[tuple[int, int], ...]

    def page_offset(self, at: int) -> int:
        """The page offset of text offset `at` (start..end). Between two pieces the passage
        has one separator where the page may have more whitespace; no sentence starts there."""
        text_start, page_start = next(p for p in reversed(self.pieces) if p[0] <= at)
        return page_start + at - text_start


def page_runs(passage: Passage) -> list[PageRun]:
    """The passage's text cut at page changes, each piece mapped to its page's offsets.

    A merged passage's text is its chunks' texts joined as retrieval joins them: a chunk that
    overlaps the one before on its page starts after that one's end and its leading whitespace
    (one " " stands for it), a chunk on a new page after a "\\n". The whitespace a chunk's
    overlap skipped is not in the spans; it is found as the counts that make the pieces add
    up to the text, with the separators and the text's characters where they must be."""
    pieces = _pieces(passage)
    if pieces is None:
        return []
    runs: list[PageRun] = []
    for (text_start, text_end), span in pieces:
        page_start = span.end - (text_end - text_start)
        if runs and runs[-1].page == span.page:
            last = runs[-1]
            runs[-1] = PageRun(last.page, last.start, text_end, last.pieces + ((text_start, page_start),))
        else:
            runs.append(PageRun(span.page, text_start, text_end, ((text_start, page_start),)))
    return runs


MAX_SKIPPED_SPACE = 8
MAX_OVERLAPS = 4  # retrieval merges 3 chunks at most; more would make the search slow


def _pieces(passage: Passage) -> list[tuple[tuple[int, int], Span]] | None:
    """((text start, text end), span) for each chunk whose text shows; None when the text does
    not fit the spans (a passage restored from an old conversation)."""
    spans, text = passage.spans, passage.text
    if not spans:
        return None
    kept, overlapped = [spans[0]], []  # overlapped: (index in kept, end of the chunk before)
    starts = [spans[0].start]
    for before, span in zip(spans, spans[1:]):
        overlaps = span.page == before.page and span.start < before.end
        if overlaps and span.end <= before.end:
            continue  # wholly inside the one before: nothing of it shows
        if overlaps:
            overlapped.append((len(kept), before.end))
        kept.append(span)
        starts.append(span.start)
    if len(overlapped) > MAX_OVERLAPS:
        return None
    for skipped in product(range(MAX_SKIPPED_SPACE + 1), repeat=len(overlapped)):
        for (i, before_end), w in zip(overlapped, skipped):
            starts[i] = before_end + w
        laid = _laid_out(kept, starts, text)
        if laid is not None:
            return laid
    return None


def _laid_out(kept: Sequence[Span], page_starts: Sequence[int], text: str):
    laid, at = [], 0
    for i, (span, page_start) in enumerate(zip(kept, page_starts)):
        if i:
            separator = "\n" if span.page != kept[i - 1].page else " "
            if text[at:at + 1] != separator:
                return None
            at += 1
        length = span.end - page_start
        if length <= 0 or at + length > len(text) or text[at].isspace():
            return None
        laid.append(((at, at + length), span))
        at += length
    return laid if at == len(text) else None


# -- sentences ----------------------------------------------------------------------------------
_SENTENCE_END = re.compile(r"[.!?][\"'”’)\]]*\s+(?=[\"'“‘(\[>$]?[A-Z0-9])")
_NUMBERED_HEADING = re.compile(r"^\s*(?:\d+(?:\.\d+)*\.?|[A-Z]\.\d+(?:\.\d+)*|Chapter \d+:?|Appendix [A-Z]:?)"
                               r"\s+\S.{0,80}$")
_PAGE_HEADER = re.compile(r"^\s*(?:(?:Chapter|Appendix|Part)\s+\S+:.*\s\d+|\d+\s+.{0,60}|.{0,60}\s\d+|\d+"
                          r"|[ivxlc]+)\s*$", re.IGNORECASE)
LIST_ITEM = re.compile(r"^\s*(?:[-*•◦▪–·]|\(?\d{1,2}[.)]|\(?[a-z][.)])\s+\S")
_DOT_LEADERS = re.compile(r"(?:\.\s?){4,}")
HEADING_WORDS, HEADING_CHARS = 6, 60  # at most, for a line to be taken for a heading


def text_sentences(text: str, heading_path: Sequence[str] = ()) -> list[tuple[int, int]]:
    """(start, end) offsets of the sentences of a whole text, split as the lead splits a
    passage (the sentence checks read passages the same way)."""
    return _sentences(text, PageRun(0, 0, len(text), ((0, 0),)), heading_path)


def _sentences(text: str, run: PageRun, heading_path: Sequence[str]) -> list[tuple[int, int]]:
    """(start, end) text offsets of the run's sentences: its lines grouped into blocks
    (headings, page headers and blank lines end a block; a list item starts one), each block
    split after a full stop, and a block too long for a sentence split at its lines."""
    headings = {" ".join(h.split()).casefold() for h in heading_path}
    found: list[tuple[int, int]] = []
    block: list[tuple[int, int]] = []  # the lines of the block being gathered
    lines = line_spans(text, run.start, run.end)
    for i, (start, end) in enumerate(lines):
        line = text[start:end].strip()
        following = text[lines[i + 1][0]:lines[i + 1][1]].strip() if i + 1 < len(lines) else ""
        if not line or _breaks(line, headings) or _untitled_heading(line, following):
            found += _split_block(text, block)
            block = []
            continue
        if LIST_ITEM.match(line):
            found += _split_block(text, block)
            block = []
        block.append((start, end))
    return found + _split_block(text, block)


def line_spans(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """(start, end) of each line of text[start:end], as offsets into `text`."""
    lines, at = [], start
    for line in text[start:end].split("\n"):
        lines.append((at, at + len(line)))
        at += len(line) + 1
    return lines


def _breaks(line: str, headings: set[str]) -> bool:
    """A line that is never part of a sentence: a heading, a page header or footer."""
    if " ".join(line.split()).casefold() in headings:
        return True
    if line[-1] in ".,;:" and not _DOT_LEADERS.search(line):
        return False
    return bool(_NUMBERED_HEADING.match(line) or _PAGE_HEADER.match(line) or _DOT_LEADERS.search(line))


def _untitled_heading(line: str, following: str) -> bool:
    """A short capitalised line with no closing punctuation, before a line that starts a
    sentence: a heading that ingest did not recognise ("Multiple keys" above "It is possible
    ..."), which would otherwise be glued onto the sentence."""
    words = line.split()
    return (len(words) <= HEADING_WORDS and len(line) <= HEADING_CHARS and line[0].isupper()
            and line[-1] not in ".,;:!?-" and not _CODE.search(line)
            and bool(following) and following[0].isupper())


def _split_block(text: str, block: list[tuple[int, int]]) -> list[tuple[int, int]]:
    if not block:
        return []
    start, end = block[0][0], block[-1][1]
    sentences, at = [], start
    for match in _SENTENCE_END.finditer(text, start, end):
        sentences.append((at, match.start() + len(match.group(0).rstrip())))
        at = match.end()
    sentences.append((at, end))
    found = []
    for s, e in sentences:
        s, e = trimmed(text, s, e)
        if e - s > MAX_CHARS:
            found += _by_lines(text, s, e)
        elif e > s:
            found.append((s, e))
    return found


def _by_lines(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """A long run cut at line ends into pieces of at most MAX_CHARS (a longer line alone)."""
    pieces, first, last = [], start, start
    for s, e in line_spans(text, start, end):
        if e - first > MAX_CHARS and last > first:
            pieces.append(trimmed(text, first, last))
            first = s
        last = e
    pieces.append(trimmed(text, first, last))
    return [(s, e) for s, e in pieces if e - s <= MAX_CHARS and e > s]


def _is_fragment(sentence: str) -> bool:
    """Too short, too few words, a table of contents or a run of glued-together names."""
    words = [w for w in sentence.split() if sum(ch.isalpha() for ch in w) >= 2]
    letters = sum(ch.isalpha() for ch in sentence)
    return (len(sentence) < MIN_CHARS or len(words) < MIN_WORDS or letters < 0.5 * len(sentence)
            or bool(_DOT_LEADERS.search(sentence))
            or any(len(w) > MAX_WORD_CHARS for w in sentence.split()))
