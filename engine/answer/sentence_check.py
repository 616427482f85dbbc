"""Checking the model's answer sentence by sentence against the passages it was given.

    sentences = check_sentences(answer, passages, embedder)   # tuple[CheckedSentence, ...]
    lead_words(answer, query.terms, lead_text) < LEAD_WORDS     # True: "check the sources"

The answer is split into sentences, code-aware ("read.csv(" and "e.g." end none; a fenced code
block is one piece; a list item starts a new one). Each sentence with content (MIN_TERMS topic
words, or a code name) is scored against each passage the prompt numbered, [n] = passages[n-1]:
    terms   the share of its topic stems (terms.py) that some word of the passage starts with
    cosine  its embedding's cosine with the passage's closest sentence; the passages' sentences
            are split as the lead splits them (lead.py), shortlisted by shared words, and
            embedded with the answer's sentences in one batch
    code    the share of its code names (backticked, called "f(", or typed like "read.csv",
            "--vanilla") that the passage holds as a whole token; a made-up name drags it down
score = code * (COSINE_WEIGHT * cosine + (1 - COSINE_WEIGHT) * terms), in 0..1.
A sentence is supported when its best passage scores at least THRESHOLD; that passage is its
source, or the [n] it cites when that one scores THRESHOLD too. A sentence without content
("Here is how:") is supported by nothing and marked by nothing: supported, no source.

The caution ("check the sources", AnswerStats.well_supported): an answer gets it when it holds
an address, command or value no passage holds (below), or fewer than LEAD_WORDS of its topic
words beyond the question's are words of the lead's quotes (lead_words): the model turned the
question round ("You can configure upsmon to only shut down when both UPSes are critical.") or
wrote past what the manual says. The share of supported sentences was the rule before; it did not
tell right answers from wrong ones, so it marks sentences and no longer decides the caution.

Addresses, phone numbers and shell commands (actions.py), and values (a number: "35 Nm",
"7.31", "1209600") are never taken on trust: a sentence that holds one is checked against the
passages that hold it verbatim, and is unsupported when none does, however well its words
match. A small model copies a passage's sentence and swaps its number ("tighten to 3.5 Nm"
where the table says 9 Nm); a technician acts on the number. Such a sentence always calls for the caution
(unsupported_actions); one a passage does hold keeps that passage as its source, so it is
shown with its citation. Of 115 stored answers of the built-in model (the tuning sample
below), 2 held an address, and both were made up (a CRAN and an Apache URL no passage had).

The caution, chosen on the answers to all 268 development questions (built-in models, 2026-12-07;
right = keyword_hit_generated: 19 of 190 written answers); the share of answers that carry it:
                                                        on wrong   on right
    sentence share < 0.5, or a value no passage holds     0.433      0.211 (4)
    lead words < 2                                         0.655      0.105 (2)
    lead words < 2, or a value no passage holds            0.760      0.158 (3)   chosen
    the same, or sentence share < 0.5                      0.795      0.263 (5)
    lead words < 3, or a value no passage holds            0.842      0.421 (8)
    the cited passages' words for the lead's, < 4          0.760      0.158 (3)
    the same, < 3                                          0.649      0.158 (3)
Left out one family at a time (the most wrong answers cautioned, a right one costing three),
LEAD_WORDS = 2 was chosen in every fold. Two of the three right answers it cautions hold what no
passage does (upsd's MAXAGE "to 25"; a mailing procedure for reportbug): the keyword is there,
the rest is made up.
The sentence check's weights were chosen on 115 answers outside the eval sample: cosine weight
0.5 and threshold 0.5 over a grid of 0-1 and 0.4-0.75 (shortlist 2: p50 0.09 s, p95 0.37 s an
answer). Of the sentences with content about half are unsupported, and very few of those hold a
question keyword; leaving them out kept keyword_hit_generated the same (7 of 115 either way), so
they are marked, not left out: the reader still sees what the model claimed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from engine.answer.actions import actions, holds
from engine.answer.grounding import cited_numbers, strip_invalid_citations
from engine.answer.sentences import ABBREVIATIONS, answer_sentences, is_code_block, text_sentences
from engine.answer.terms import code_tokens, covers, query_terms, words_of
from engine.types import CheckedSentence, Passage

COSINE_WEIGHT = 0.5
THRESHOLD = 0.5
SUPPORTED_SHARE = 0.5  # of the sentences with content: the caution of stats from an older server
MIN_TERMS = 3  # fewer topic words and no code name: nothing to check ("Here is how to fix it:")
SHORTLIST = 2  # passage sentences embedded per answer sentence and passage, the best by shared words
LEAD_WORDS = 2  # fewer of the lead's words beyond the question's: "check the sources" (the caution, above)


@dataclass(frozen=True)
class CheckSettings:
    cosine_weight: float = COSINE_WEIGHT
    threshold: float = THRESHOLD
    min_terms: int = MIN_TERMS
    shortlist: int = SHORTLIST


DEFAULT_SETTINGS = CheckSettings()


def check_sentences(answer: str, passages: Sequence[Passage], embedder=None,
                    settings: CheckSettings = DEFAULT_SETTINGS) -> tuple[CheckedSentence, ...]:
    """Each sentence of `answer` (spans of that very text), checked against `passages`, which
    the prompt numbered [1]..[n]. Without an embedder, words and code names alone are scored."""
    pieces = [_Piece(answer, start, end, settings.min_terms) for start, end in answer_sentences(answer)]
    scored = [p for p in pieces if p.has_content]
    if scored and passages:
        numbered = [_PassageText(n, p) for n, p in enumerate(passages, 1)]
        _score(scored, numbered, embedder, settings)
        for piece in scored:
            piece.holders = {p.number for p in numbered if all(holds(p.text, a) for a in piece.actions)
                             and all(holds_value(p.text, v) for v in piece.values)}
    return tuple(p.checked(settings.threshold, len(passages)) for p in pieces)


def has_content(sentence: CheckedSentence) -> bool:
    """A sentence with something to check: one supported has a source, one not is marked."""
    return not sentence.supported or sentence.source is not None


NOT_IN_MANUALS = "not in the manuals"


def mark_of(answer: str, sentence: CheckedSentence) -> str | int | None:
    """What the views add after a checked sentence: NOT_IN_MANUALS when the passages do not say
    it, its source's number when the sentence does not cite that passage already, else None.
    The CLI and the window draw this; neither decides it."""
    if not sentence.supported:
        return NOT_IN_MANUALS
    if sentence.source is None or sentence.source in cited_numbers(answer[sentence.start:sentence.end], 1000):
        return None
    return sentence.source


def unsupported_actions(answer: str, sentences: Sequence[CheckedSentence]) -> list[str]:
    """The addresses, phone numbers, commands and values in the answer's unsupported sentences:
    any one means the answer gets the caution, however well the rest is supported."""
    found = [a for s in sentences if not s.supported
             for a in actions(answer[s.start:s.end]) + values(_plain(answer[s.start:s.end]))]
    return list(dict.fromkeys(found))


_VALUE = re.compile(r"(?<![\w.,])\d+(?:[.,]\d+)?(?![\w]|[.,]\d)")


def values(text: str) -> list[str]:
    """The numbers of `text` as written ("35", "3.5", "0,8"), once each; not those inside a
    name ("M6", "X200", "E-42" are names the code check reads)."""
    return list(dict.fromkeys(m.group() for m in _VALUE.finditer(text) if not _inside_name(text, m)))


def _inside_name(text: str, match: re.Match) -> bool:
    before = text[max(0, match.start() - 2):match.start()]
    return bool(re.search(r"[A-Za-z_]-$", before))  # "E-42": the error's name


def holds_value(passage: str, value: str) -> bool:
    """Whether the passage holds the number, with a decimal point or comma either way."""
    forms = {value, value.replace(",", "."), value.replace(".", ",")}
    return any(re.search(rf"(?<![\d.,]){re.escape(f)}(?![\d]|[.,]\d)", passage) for f in forms)


def _plain(text: str) -> str:
    """A sentence without its citations and list numbers, whose digits are not values."""
    return _MARKUP.sub(" ", strip_invalid_citations(text, 0))


def lead_words(answer: str, question_terms: Sequence[str], lead: str) -> int:
    """How many of the answer's topic words, beyond the question's own, the lead's quotes hold:
    an answer that only turns the question round ("Configure upsmon to shut down when both UPSes
    are critical.") or writes past the manual's words holds few."""
    own = set(query_terms(strip_invalid_citations(answer, 0))) - set(question_terms)
    return len(own & set(query_terms(lead))) if own else 0


def needs_caution(answer: str, sentences: Sequence[CheckedSentence], well_supported: bool) -> bool:
    """Whether the views say "check it against the sources": too little is supported, or an
    address or command is not in the passages. An answer the guard cut to nothing (a copy of
    the prompt's example) says nothing to check: the lead and the passages stand alone."""
    if not answer.strip():
        return False
    return not well_supported or bool(unsupported_actions(answer, sentences))


NO_TEXT_OF_ITS_OWN = ("The model wrote no answer of its own from these passages; the manual's words above "
                      "and the sources are what the manuals say.")


def no_text_of_its_own(answer: str, answerable: bool) -> bool:
    """Whether the views say NO_TEXT_OF_ITS_OWN: the manuals cover the question but the guard
    left none of the model's text (a copy of the prompt's example), or the model wrote none."""
    return answerable and not answer.strip()


def sources(sentences: Sequence[CheckedSentence]) -> list[int]:
    """The passages the supported sentences came from, in order of first use, once each."""
    return list(dict.fromkeys(s.source for s in sentences if s.supported and s.source is not None))


def without_unsupported(answer: str, sentences: Sequence[CheckedSentence]) -> str:
    """The answer with its unsupported sentences left out."""
    kept, at = [], 0
    for s in sentences:
        if not s.supported:
            kept.append(answer[at:s.start])
            at = s.end
    kept.append(answer[at:])
    return re.sub(r"[ \t]+\n|\n{3,}", "\n", "".join(kept)).strip()


# -- what a sentence says ------------------------------------------------------------------------
_BACKTICKED = re.compile(r"`([^`\n]+)`")
_CALLED = re.compile(r"([A-Za-z_][\w.]*)\s?\(")
_OPTION = re.compile(r"(?<![\w-])--?[A-Za-z][\w-]*")  # "-fpng", "--vanilla"
_COMPOUND = re.compile(r"[A-Za-z]+(?:-[A-Za-z]+)+")  # "command-line", "FOP-specific": words, not code
# A source's header as the prompt writes it, which a small model copies: "[2] R-exts.pdf, page 155:";
# printed page labels too ("page iv", "T-1").
_SOURCE_HEADER = re.compile(r"^[ \t]*\[\d{1,3}\][ \t]+[^\n]*?,[ \t]+pages?[ \t]+[\w.\-, ]+:[ \t]*$", re.MULTILINE)
_IDENTIFIER = re.compile(r"[A-Za-z_][\w.:\-]*\w|[A-Za-z_]")
_MARKUP = re.compile(r"```\w*|[`*_#]{1,3}(?=\w)|(?<=\w)[`*_]{1,3}|^\s*(?:[-*•]|\d{1,2}[.)])\s+", re.MULTILINE)


class _Piece:
    """One sentence of the answer and its best passage so far."""

    def __init__(self, answer: str, start: int, end: int, min_terms: int):
        self.start, self.end = start, end
        raw = _SOURCE_HEADER.sub(" ", answer[start:end])
        self.cited = cited_numbers(raw, 1000)
        self.is_code = is_code_block(raw)
        self.text = " ".join(_MARKUP.sub(" ", strip_invalid_citations(raw, 0)).split())
        self.terms = query_terms(self.text)
        self.names = code_names(raw, self.is_code)
        self.actions = actions(raw)
        self.values = values(self.text)
        self.has_content = bool(self.names or self.actions or self.values) or len(self.terms) >= min_terms
        self.scores: dict[int, float] = {}  # passage number -> score
        self.holders: set[int] = set()  # the passages that hold all its actions verbatim

    def checked(self, threshold: float, count: int) -> CheckedSentence:
        if not self.has_content:
            return CheckedSentence(self.start, self.end, True, None, round(max(self.scores.values(), default=0.0), 4))
        if self.actions or self.values:  # only a passage that holds its address, command or value can support it
            self.scores = {n: v for n, v in self.scores.items() if n in self.holders}
        best = max(self.scores, key=lambda n: (self.scores[n], -n), default=None)
        score = self.scores.get(best, 0.0)
        cited = [n for n in self.cited if n <= count and self.scores.get(n, 0.0) >= threshold]
        source = cited[0] if cited else best
        supported = score >= threshold
        return CheckedSentence(self.start, self.end, supported, source if supported else None,
                               round(self.scores.get(source, 0.0) if supported else score, 4))


def code_names(text: str, is_code: bool = False) -> list[str]:
    """Names a person would type exactly: backticked, called ("hist("), or code-like tokens
    ("read.csv", "--vanilla", "X11"); in a code block, every identifier."""
    if is_code:
        body = "\n".join(line for line in text.split("\n") if not is_code_block(line))
        return list(dict.fromkeys(n for n in _IDENTIFIER.findall(body) if len(n) > 1))
    names = [n for span in _BACKTICKED.findall(text) for n in _IDENTIFIER.findall(span)]
    plain = _BACKTICKED.sub(" ", text)
    names += _CALLED.findall(plain) + _OPTION.findall(plain)
    names += [t.split("(")[0] for t in code_tokens(plain) if not _COMPOUND.fullmatch(t)]
    names = (n.strip(".").lstrip("-") for n in names)
    return list(dict.fromkeys(n for n in names if n and n.casefold() not in ABBREVIATIONS))


class _PassageText:
    """A numbered passage: its words, its text for whole-token search, its sentences."""

    def __init__(self, number: int, passage: Passage):
        self.number = number
        self.text = passage.text
        self.words = words_of(passage.text)
        spans = text_sentences(passage.text, passage.heading_path)
        self.sentences = [" ".join(passage.text[s:e].split()) for s, e in spans]
        self.sentence_words = [words_of(s) for s in self.sentences]
        self._names: dict[str, bool] = {}

    def holds(self, name: str) -> bool:
        if name not in self._names:
            pattern = rf"(?<![\w]){re.escape(name)}(?![\w])"
            self._names[name] = re.search(pattern, self.text, re.IGNORECASE) is not None
        return self._names[name]


def _share(terms: Sequence[str], words: set[str]) -> float:
    """The share of the stems that some word stands for (terms.covers)."""
    if not terms:
        return 0.0
    return sum(any(covers(w, t) for w in words) for t in terms) / len(terms)


# -- scoring -------------------------------------------------------------------------------------
def _score(pieces: list[_Piece], passages: list[_PassageText], embedder, settings: CheckSettings) -> None:
    cosines = _cosines(pieces, passages, embedder, settings.shortlist) if embedder is not None else {}
    w = settings.cosine_weight if embedder is not None else 0.0
    for i, piece in enumerate(pieces):
        for p in passages:
            code = sum(p.holds(n) for n in piece.names) / len(piece.names) if piece.names else 1.0
            terms = _share(piece.terms, p.words)
            cosine = max(cosines.get((i, p.number), 0.0), 0.0)
            piece.scores[p.number] = code * (w * cosine + (1 - w) * terms)


def _cosines(pieces: list[_Piece], passages: list[_PassageText], embedder,
             shortlist: int) -> dict[tuple[int, int], float]:
    """(piece index, passage number) -> the best cosine of the piece with a shortlisted sentence
    of that passage; all texts embedded in one call."""
    wanted: dict[tuple[int, int], list[str]] = {}
    for i, piece in enumerate(pieces):
        for p in passages:
            ranked = sorted(range(len(p.sentences)), key=lambda k: -_share(piece.terms, p.sentence_words[k]))
            wanted[(i, p.number)] = [p.sentences[k] for k in ranked[:shortlist]]
    texts = list(dict.fromkeys([piece.text for piece in pieces] + [s for found in wanted.values() for s in found]))
    if not texts:
        return {}
    vectors = dict(zip(texts, embedder.encode_documents(texts)))
    return {key: max((float(vectors[s] @ vectors[pieces[key[0]].text]) for s in found), default=0.0)
            for key, found in wanted.items()}

