"""A PDF page's text as PDFium reads it (what a viewer shows, selects and copies), made fit to
index and quote, with a map back to PDFium's characters.

    text = PageText.clean(raw)               # raw: PdfTextPage.get_text_range(), or QtPdf's getAllText(page)
    text.text                                # what is indexed and quoted
    text.raw_range(start, end)               # PDFium's characters of text.text[start:end]

Ingestion and the source view run the same cleaning on the same PDFium text, so a quote's
span in the index is found in the page as the viewer holds it, and its words are highlighted
from PDFium's own character boxes. What the cleaning does:
  - "\\r\\n" line ends become "\\n"; lines stay lines (headings, list items, table rows, code);
  - U+FFFE, PDFium's mark for a word hyphenated at a line end, joins the word ("infor-mation"),
    or stays a hyphen where the word is hyphenated anyway ("full-upgrade", "64-bit"): the
    document's own words decide (`hyphen_words`), else the parts do;
  - ligatures (U+FB00-FB06) are spelled out, odd spaces are spaces, soft hyphens and zero
    widths go; a math minus, an asterisk operator and TeX's accents in typewriter text become
    the ASCII a person types ("-", "*", "~", "^");
  - a list's bullet, whatever glyph the producer drew (LibreOffice's "●", Word's Symbol-font
    bullet in private use, "■", "➢"), is read as "•" ("◦" when hollow), so the item is a
    list item to the chunker and the lead, one space after it;
  - what a font cannot draw goes: control characters (a symbol font's glyphs), private-use
    and unassigned code points, U+FFFD, lone combining marks, and lines made only of
    ornaments (the corners TeX draws round a box: "☛ ✟").
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

SOFT_BREAK = "\ufffe"
_REPLACE = {
    "\r\n": "\n", "\r": "\n",
    "\u2212": "-", "\u2010": "-", "\u2011": "-", "\u2217": "*", "\u02dc": "~", "\u02c6": "^",
    **{chr(c): " " for c in (0x00A0, 0x202F, 0x205F, 0x3000, *range(0x2000, 0x200B))},
    **{chr(c): unicodedata.normalize("NFKC", chr(c)) for c in range(0xFB00, 0xFB07)},
}
# code points a font cannot be trusted to draw, and marks with no letter to sit on
_DROP = (r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u00ad\u200b-\u200d\u2060\ufeff\ufffd\uffff"
         r"\ue000-\uf8ff\ud800-\udfff\U000f0000-\U0010ffff]|(?<![^\W\d_])[\u0300-\u036f]+")
# Bullets that start a line's item (a space or tab, then text); Symbol's and Wingdings' are private use.
_BULLETS = {**dict.fromkeys("●■►▶➢❖♦✓✔\uf0b7\uf0a7\uf076\uf0d8\uf0fc\uf06e", "•"), **dict.fromkeys("○□", "◦")}
_BULLET = r"(?P<bullet>(?m:^)[ \t]*[" + "".join(_BULLETS) + r"][ \t]+(?=\S))"
_ORNAMENT_LINE = r"(?m:^)[ \t]*[\u2600-\u27bf](?:[ \t]*[\u2600-\u27bf])*[ \t]*(?=\r?\n|\Z)"
_SINGLE = "[" + "".join(re.escape(k) for k in _REPLACE if len(k) == 1 and k != "\r") + "]"
_PATTERN = re.compile("|".join([_BULLET, _ORNAMENT_LINE, "\r\n?", SOFT_BREAK, _DROP, _SINGLE]))
_BROKEN_WORD = re.compile(r"\w*" + SOFT_BREAK + r"\w*")
_LETTERS = re.compile(r"[^\W\d_]+")


@dataclass(frozen=True)
class PageText:
    """A page's cleaned text, and for each of its characters the index of the raw character
    it came from (`index`, one longer than the text: its last entry is the raw length)."""

    text: str
    index: tuple[int, ...]

    @classmethod
    def clean(cls, raw: str, words: "HyphenWords | None" = None) -> "PageText":
        """The page's text cleaned (see the module's docstring); `words` are the document's,
        for the hyphens at line ends (None: the parts of each word decide)."""
        pieces: list[str] = []
        index: list[int] = []
        at = 0
        for match in _PATTERN.finditer(raw):
            _keep(raw, at, match.start(), pieces, index)
            replacement = _replacement(raw, match, words)
            pieces.append(replacement)
            index.extend([match.start()] * len(replacement))
            at = match.end()
        _keep(raw, at, len(raw), pieces, index)
        index.append(len(raw))
        return cls("".join(pieces), tuple(index))

    def raw_range(self, start: int, end: int) -> tuple[int, int]:
        """PDFium's characters [first, last + 1) that text[start:end] came from."""
        start = min(max(0, start), len(self.text))
        end = min(max(start, end), len(self.text))
        if end == start:
            return self.index[start], self.index[start]
        return self.index[start], self.index[end - 1] + 1


def clean_text(raw: str, words: "HyphenWords | None" = None) -> str:
    """PageText.clean(raw, words).text, without building the map (ingestion needs only the text)."""
    return _PATTERN.sub(lambda match: _replacement(raw, match, words), raw)


def _keep(raw: str, start: int, end: int, pieces: list[str], index: list[int]) -> None:
    if end > start:
        pieces.append(raw[start:end])
        index.extend(range(start, end))


def _replacement(raw: str, match: re.Match, words: "HyphenWords | None") -> str:
    found = match.group()
    if found == SOFT_BREAK:
        return "" if _joins(raw, match.start(), words) else "-"
    if found[0] in "\r\n":
        return "\n"
    if match.group("bullet"):  # one space after it: a tab there is no table's column
        bullet = found.rstrip(" \t")
        return bullet[:-1] + _BULLETS[bullet[-1]] + " "
    return _REPLACE.get(found, "")


# -- words hyphenated at a line end ----------------------------------------------------------
class HyphenWords:
    """What a document's own text says of its words: the words it prints whole, and the
    hyphenated compounds it prints with their hyphen; a word broken at a line end is joined
    or keeps its hyphen as the rest of the document writes it."""

    def __init__(self, raws: Iterable[str]):
        self.whole: set[str] = set()
        self.compounds: set[str] = set()
        for raw in raws:
            lowered = raw.lower()
            self.whole.update(_LETTERS.findall(_BROKEN_WORD.sub(" ", lowered)))
            self.compounds.update(re.findall(r"[^\W\d_]+-[^\W\d_]+", lowered))


def _joins(raw: str, at: int, words: HyphenWords | None) -> bool:
    """Whether the word broken by PDFium's mark at raw[at] is one word (joined) or a compound
    that keeps its hyphen."""
    left = _word_before(raw, at)
    right = _word_after(raw, at + 1)
    if not left or not right or left[-1].isdigit() or right[0].isdigit():
        return False  # "64-bit", "-t", a hyphen before a number
    if left.isupper() != right.isupper() and not right.islower():
        return False  # "X-Ray", "Debian-GNU": a capital after the break
    if words is None:
        return True  # most breaks at a line end are a hyphenation, and joining them is
    joined, lower_left, lower_right = (left + right).lower(), left.lower(), right.lower()
    if joined in words.whole:
        return True
    if f"{lower_left}-{lower_right}" in words.compounds:
        return False
    return not (len(lower_left) > 1 and len(lower_right) > 1
                and lower_left in words.whole and lower_right in words.whole)


def _word_before(raw: str, at: int) -> str:
    start = at
    while start > 0 and (raw[start - 1].isalnum()):
        start -= 1
    return raw[start:at]


def _word_after(raw: str, at: int) -> str:
    end = at
    while end < len(raw) and raw[end].isalnum():
        end += 1
    return raw[at:end]
