"""Signs that a page's text layer is not what its reader sees, measured on the text alone.

    quality = TextQuality.of(text)      # the text as the reader gave it (before cleaning)
    quality.problems     # ("words run together",) ... or () for a good page
    quality.badness      # compares two readings of one page: the lower is better

A PDF reader can get a page's text wrong while the page looks right: words run together when
the PDF positions its words instead of writing spaces ("Movingthissliderchanges..."),
characters a font does not map come out as U+FFFD or control characters, text set vertically or letter by letter
comes out one character per line, and sentences lose the space between them ("end.Next").
Ingestion reads such a page with the other reader (or OCR), and names the pages that stay poor.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A run of 18 or more letters in one case is seldom an English word of a manual
# ("internationalization" is 20, and rare): in pypdf's text of XeTeX-made PDFs 16-21% of a
# page's words are such runs, in PDFium's none. Addresses, options and markup are left out
# ("--with-systemdsystemunitdir=PATH", "<inlinemediaobject>", a URL): they are long by nature.
_GLUED = re.compile(r"[A-Z]?[a-z]{17,}|[A-Z]{18,}")
_LONG_BY_NATURE = re.compile(r"://|[=<>@_]|^[-(]*-")
_WORD = re.compile(r"\S+")
_UNREADABLE = re.compile(r"[\ufffd\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ue000-\uf8ff]")
_RUN_ON = re.compile(r"[a-z]{3}[.!?][A-Z][a-z]+ [a-z]")  # "the end.Then open", not "Staff.BarLine.color"
_SENTENCE_END = re.compile(r"[a-z]{2}[.!?](?:\s|$)")
GLUED_SHARE = 0.05  # of a page's words; good pages of the development PDFs stay under 0.01
REPLACED_SHARE = 0.02  # of its visible characters
LETTER_LINES_SHARE = 0.5  # of its lines, with at least MIN_LETTER_LINES of them
MIN_LETTER_LINES = 12
RUN_ON_SHARE = 0.3  # of its sentence ends, with at least MIN_RUN_ONS of them
MIN_RUN_ONS = 4


@dataclass(frozen=True)
class TextQuality:
    words: int
    glued: int  # words holding a glued run of letters
    visible: int  # characters that are not whitespace
    replaced: int  # U+FFFD, control and private-use characters: glyphs the reader could not map
    lines: int  # lines with text
    letter_lines: int  # lines that hold one letter alone
    sentence_ends: int
    run_ons: int  # sentence ends with no space before the next sentence

    @classmethod
    def of(cls, text: str, unreadable: int | None = None) -> "TextQuality":
        """The measures of `text`; `unreadable` counts the glyphs the reader could not map when
        `text` is already cleaned of them (None: counted in `text`)."""
        words = _WORD.findall(text)
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        run_ons = len(_RUN_ON.findall(text))
        if unreadable is None:
            unreadable = count_unreadable(text)
        return cls(len(words), sum(1 for word in words if glued(word)),
                   sum(len(word) for word in words), unreadable, len(lines),
                   sum(1 for line in lines if len(line) == 1 and line.isalpha()),
                   len(_SENTENCE_END.findall(text)) + run_ons, run_ons)

    @property
    def glued_share(self) -> float:
        """The share of the words that hold a glued run of letters."""
        return self.glued / self.words if self.words else 0.0

    @property
    def problems(self) -> tuple[str, ...]:
        """What is wrong with the text, in words for a warning; () when nothing is."""
        found = []
        if self.glued_share > GLUED_SHARE:
            found.append("words run together")
        if self.visible and self.replaced > REPLACED_SHARE * self.visible:
            found.append("characters that could not be read")
        if self.letter_lines >= MIN_LETTER_LINES and self.letter_lines > LETTER_LINES_SHARE * self.lines:
            found.append("one letter per line")
        if self.run_ons >= MIN_RUN_ONS and self.run_ons > RUN_ON_SHARE * self.sentence_ends:
            found.append("no spaces between sentences")
        return tuple(found)

    @property
    def badness(self) -> float:
        """How much of the page reads wrong, 0 (all good) upwards, comparable between two
        readings of the same page."""
        parts = [self.glued_share, self.replaced / self.visible if self.visible else 0.0,
                 self.letter_lines / self.lines if self.lines else 0.0,
                 self.run_ons / self.sentence_ends if self.sentence_ends else 0.0]
        return sum(parts)


def glued(word: str) -> bool:
    """Whether a word (a run without spaces) holds words run together."""
    return bool(_GLUED.search(word)) and not _LONG_BY_NATURE.search(word)


def count_unreadable(text: str) -> int:
    """U+FFFD, control and private-use characters: glyphs a reader could not map to text."""
    return len(_UNREADABLE.findall(text))
