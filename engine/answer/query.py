"""Query: a question, derived once at the start of an answer and read by every stage after it.

    query = Query.of(text, store, embedder)     # retrieval, the gate, the lead and the quotes read it
    query.terms, query.weights, query.code, query.vector, query.names, query.asks_cause_or_remedy

Its topic words (crude stems), how rare each is in the collection (IDF weights), the tokens a
person types exactly (codes, options, names with dots) and its embedding are worked out here
once; nothing down the line re-tokenises or re-embeds the question.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from engine.answer.terms import (
    ABBREVIATIONS,
    WORD,
    bare_tokens,
    code_tokens,
    compounds,
    covers,
    query_terms,
    typed_words,
)

# A question that asks why, or what to do about what it states: the manual's answer is often the
# sentence after the one that states the same symptom ("... received random incorrect values from
# the UPS" over "It turned out that gpm ... was using the serial port").
_CAUSE_OR_REMEDY = re.compile(
    r"\bwhy\b|\bwhat (?:could|might|would|can|may) (?:cause|be causing)\b|\bwhat causes\b"
    r"|\bwhat (?:should|do|can|must) I (?:do|check|try)\b"
    r"|\bhow (?:do|can|should) I (?:fix|solve|repair|cure|stop|prevent|avoid)\b"
    r"|\bwhat does (?:this|that|it) mean\b|\bwhat(?:'s| is) (?:wrong|the (?:problem|cause|fix|remedy|solution))\b",
    re.IGNORECASE)

# A name the question calls a field, a flag, ... ("the V field", "flag LOWBATT"); not "which SDCC
# option", a program's option
_NAME_WORD = r"(?:field|flag|option|parameter|setting|register|bit|column|variable|directive|keyword|symbol)s?"
_CALLED = re.compile(rf"\bthe\s+([A-Z][A-Z0-9_]*)\s+{_NAME_WORD}\b|\b{_NAME_WORD}\s+([A-Z][A-Z0-9_]*)\b")

_SLASHED = re.compile(r"[A-Za-z]{1,2}(?:/[A-Za-z]{1,2})+")  # "I/O", "A/D", "TX/RX": words, not names

# What a question quotes, as a screen or a log shows it: "packets found but none were usable".
_QUOTED = re.compile(r'"([^"\n]{3,120})"|“([^”\n]{3,120})”')
_TRAILING_DOTS = re.compile(r"(?:\.\.\.|…)$")

# A question that asks for a default: what holds when nothing is set.
_DEFAULT = re.compile(r"\bdefaults?\b|\bout[- ]of[- ]the[- ]box\b|\bfactory\b|\binitial(?:ly)?\b"
                      r"|\bif (?:I|you) (?:don't|do not|leave|never)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Query:
    text: str  # as searched: a follow-up is joined with the question before it
    terms: tuple[str, ...]  # topic stems, in order
    frequencies: Mapping[str, float]  # of each stem: the share of the collection's chunks holding it
    code: tuple[str, ...]  # tokens typed exactly: "E-4711", "read.fwf", "--vanilla"
    typed: Mapping[str, str]  # each stem as first typed ("Jupyter" for "jupyter")
    vector: np.ndarray | None = field(default=None, compare=False)  # the embedding (normalised)
    joined: tuple[str, ...] = ()  # two of its words written as one, as the collection has them

    @classmethod
    def of(cls, text: str, frequency: Callable[[str], float] | None = None, embedder=None) -> "Query":
        """The query for `text`; `frequency(stem)` is the Retriever's frequency (None: every
        word is as rare as any), `embedder` the collection's (None: no vector)."""
        terms = tuple(query_terms(text))
        frequencies = {t: frequency(t) for t in terms} if frequency is not None else {}
        vector = embedder.encode_queries([text])[0] if embedder is not None else None
        joined = tuple(j for j in compounds(text) if frequency is not None and frequency(j) > 0)
        return cls(text, terms, frequencies, tuple(code_tokens(text)), typed_words(text), vector, joined)

    @cached_property
    def names(self) -> frozenset[str]:
        """What the question names as a manual heads an entry with it, case-folded: a code typed
        with inner punctuation or dashes ("--acall-ajmp", "E-07", "read.csv"), a number of 3
        digits or more ("error 177"), or a name in capitals that a word like "field" or "flag"
        calls one ("the V field", "flag LOWBATT"; not "which SDCC option"). Not a plain word in
        capitals or with a digit alone ("SVG", "libc6"), nor an abbreviation with a slash
        ("I/O"): those name a topic as often as an entry."""
        numbers = [t for t in bare_tokens(self.text) if len(t) >= 3 and t.isdigit()]
        called = [a or b for a, b in _CALLED.findall(self.text) if (a or b).isupper()]
        typed = [c for c in self.code if not c.isalnum() and not _SLASHED.fullmatch(c)]
        return frozenset(t.casefold() for t in numbers + called + typed)

    @cached_property
    def quoted(self) -> tuple[str, ...]:
        """What the question quotes, two words or more, case-folded, spaces as one, without the
        "..." that marks it cut ('"can't bind /var/state/ups/..."')."""
        found = (folded(_TRAILING_DOTS.sub("", a or b)) for a, b in _QUOTED.findall(self.text))
        return tuple(q for q in found if len(q.split()) >= 2)

    @cached_property
    def asks_cause_or_remedy(self) -> bool:
        """Whether it asks why, or what to do ("What could cause this?", "What should I do?")."""
        return bool(_CAUSE_OR_REMEDY.search(self.text))

    @cached_property
    def asks_default(self) -> bool:
        """Whether it asks what holds when nothing is set ("by default", "if I leave it")."""
        return bool(_DEFAULT.search(self.text))

    @cached_property
    def weights(self) -> dict[str, float]:
        """Each topic stem's weight: BM25's idf of its frequency (1.0 each without frequencies)."""
        if not self.frequencies:
            return {t: 1.0 for t in self.terms}
        return {t: idf(self.frequencies.get(t, 0.0)) for t in self.terms}

    def share(self, words: set[str]) -> float:
        """The weighted share of the topic stems that some of these (case-folded) words stand for
        (terms.covers)."""
        weights = self.weights
        total = sum(weights.values())
        if not total:
            return 0.0
        return sum(w for t, w in weights.items() if any(covers(word, t) for word in words)) / total

    def marks(self, text: str) -> tuple[tuple[int, int], ...]:
        """Where the text carries the question's topic, as (start, end), in order: each word (or
        part of a name joined by "_") that a topic stem stands for, in full or short form ("MAX" of
        "maximum"), each code the question typed and each phrase it quotes."""
        found = [span for m in WORD.finditer(text) for span in self._marked_parts(m.group(), m.start())]
        found += [m.span() for code in self.code for m in re.finditer(re.escape(code), text)]
        found += [m.span() for phrase in self.quoted for m in _phrase_pattern(phrase).finditer(text)]
        return _merged(found)

    def _marked_parts(self, word: str, start: int) -> list[tuple[int, int]]:
        spans = []
        for part in word.split("_"):
            folded = part.casefold()
            if part and any(covers(form, t) for form in (folded, ABBREVIATIONS.get(folded, folded))
                            for t in self.terms):
                spans.append((start, start + len(part)))
            start += len(part) + 1
        return spans

    def matched(self, words: set[str]) -> set[str]:
        """The topic stems some of these words stand for."""
        return {t for t in self.terms if any(covers(word, t) for word in words)}


def _merged(spans: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return tuple(merged)


def _phrase_pattern(phrase: str) -> re.Pattern:
    """A folded phrase as a text may write it: any case, any spaces, either apostrophe."""
    words = (re.escape(word).replace("'", "['’]") for word in phrase.split())
    return re.compile(r"\s+".join(words), re.IGNORECASE)


def folded(text: str) -> str:
    """Text as a phrase is looked for in another: case-folded, spaces as one, typographic
    apostrophes plain."""
    return " ".join(text.replace("’", "'").split()).casefold()


def idf(fraction: float) -> float:
    """BM25's idf on a fraction of chunks; a word found nowhere weighs the most."""
    fraction = min(max(fraction, 0.0), 1.0)
    return math.log(1 + (1 - fraction + 1e-4) / (fraction + 1e-4))
