"""Words of a question that carry its topic: stopwords out, crude stems, code-like tokens kept.

Shared by keyword search (what to match) and the relevance gate (what must be covered).
"""

from __future__ import annotations

import re

# Words that carry no topic: question scaffolding and contraction stubs ("didn't" -> "didn").
STOPWORDS = frozenset("""
a about after again all also an and any are aren as at back be been before being but by can
cannot could couldn did didn do does doesn doing don down for from get gets got had has have
haven how i if in into is isn it its just like me more most my need no not now of on once only
or other our out over own please same should shouldn so some such than that the their them then
there these they this those through to too under up us use used using very was wasn way we were
weren what when where which while who why will with won would wouldn you your
make making made sure find found work works look go goes put keep still many much first
everything another without during between against inside whether check thing things
something anything
""".split())

WORD = re.compile(r"\w+")
# Short forms manuals print where a person types the word: "MAX_FEED_OVERRIDE" answers "maximum feed".
ABBREVIATIONS = {"max": "maximum", "min": "minimum", "temp": "temperature", "config": "configuration",
                 "param": "parameter", "params": "parameters", "info": "information", "spec": "specification",
                 "freq": "frequency", "addr": "address", "init": "initial", "auto": "automatic",
                 "num": "number", "pos": "position", "dir": "directory", "err": "error", "msg": "message"}
_SUFFIXES = ("ing", "ed", "es", "s", "ly")
PREFIX_MIN = 4  # shorter stems are whole words: as prefixes 'ob' would find 'object', 'na' 'name'


def covers(word: str, stem_: str) -> bool:
    """Whether a (case-folded) word is one the stem stands for: any word it starts, or for a
    short stem the word itself and its plural ("OB", "LED" and "LEDs", not "object")."""
    if len(stem_) >= PREFIX_MIN:
        return word.startswith(stem_)
    return word == stem_ or word in (stem_ + "s", stem_ + "es")


def stem(word: str) -> str:
    """A crude stem, enough to match 'prints' with 'print' and 'stopped' with 'stop'; its
    ly is an adverb's, not that of 'supply' or 'assembly' (once cut to 'sup')."""
    word = word.casefold()
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 4 and not word.endswith(("ply", "bly")):
            word = word[:-len(suffix)]
            if word[-1] == word[-2] and word[-1] not in "aeiouls":  # stopped -> stop
                word = word[:-1]
            break
    return word


def query_terms(question: str) -> list[str]:
    """The stems of the question's topic words, in order, once each."""
    words = (w.casefold() for w in WORD.findall(question))
    return list(dict.fromkeys(stem(w) for w in words if w not in STOPWORDS and len(w) > 1))


def compounds(question: str) -> list[str]:
    """Two topic words side by side, written as one ("log scale" -> "logscale", "feed rate" ->
    "feedrate", "data file" -> "datafile"), as prefixes: manuals name their commands, settings
    and sections that way, and people type them apart."""
    words = [w.casefold() for w in WORD.findall(question)]
    found = [first + stem(second) for first, second in zip(words, words[1:])
             if _joinable(first) and _joinable(second)]
    return list(dict.fromkeys(found))


def _joinable(word: str) -> bool:
    """A topic word of letters: not a stopword, a single letter ("cite R") or a number."""
    return word.isalpha() and len(word) > 1 and word not in STOPWORDS


def typed_words(question: str) -> dict[str, str]:
    """Each topic stem of the question (as query_terms gives them) with the word first typed
    for it."""
    found: dict[str, str] = {}
    for word in WORD.findall(question):
        if word.casefold() not in STOPWORDS and len(word) > 1:
            found.setdefault(stem(word), word)
    return found


def bare_tokens(text: str) -> list[str]:
    """The text's whitespace-separated tokens without the punctuation around them ("(177)," -> "177")."""
    return [token.strip(".,;:!?()[]{}'\"`") for token in text.split()]


def code_tokens(text: str) -> list[str]:
    """Tokens a person types exactly: names with inner punctuation ('read.fwf', 'R_LIBS_USER',
    'E-4711', '--vanilla') and words with digits ('pdf2', 'X11')."""
    found = []
    for token in bare_tokens(text):
        inner = re.search(r"\w[._\-/:]+\w", token) or token.startswith("--")
        if (inner or re.search(r"\d", token)) and any(ch.isalpha() for ch in token):
            found.append(token)
    return list(dict.fromkeys(found))


_JOINED_CODE = re.compile(r"\b([A-Za-z]{1,3})-?(\d{1,5})\b")  # E12, e-12, ERR-4
_SPACED_CODE = re.compile(r"\b([A-Z]{1,3}) (\d{1,5})\b")  # E 12 (capitals: "a 14 mm" is not one)


def code_forms(text: str) -> list[str]:
    """Each alarm or error code the text names, in the two ways manuals print it: "E12" and
    "E-12" (a phrase that also finds "E 12"), so that a code typed one way finds the manual that
    prints it the other."""
    forms = []
    for letters, digits in _JOINED_CODE.findall(text) + _SPACED_CODE.findall(text):
        forms += [letters + digits, f"{letters}-{digits}"]
    return list(dict.fromkeys(forms))


def words_of(text: str) -> set[str]:
    """The text's words, case folded, with the parts of names joined by "_" ("max_feed_override":
    also "max", "feed", "override") and the full form of a short one ("max": also "maximum")."""
    words = {w.casefold() for w in WORD.findall(text)}
    words |= {part for w in words if "_" in w for part in w.split("_") if part}
    return words | {ABBREVIATIONS[w] for w in words if w in ABBREVIATIONS}
