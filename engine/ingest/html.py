"""HTML: visible text in sections by h1-h3, list items with the numbers and bullets a browser
draws, read with the standard library's html.parser."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

from engine.errors import DocumentError
from engine.ingest.text import Sections, decode_text, list_marker, number_or
from engine.types import ParsedDocument

_SKIPPED = {"script", "style", "nav", "noscript", "template"}  # not text a person reads
_SECTION_HEADINGS = {"h1": 1, "h2": 2, "h3": 3}
_BLOCKS = {
    "address", "article", "aside", "blockquote", "br", "dd", "div", "dl", "dt", "figcaption",
    "figure", "footer", "form", "h4", "h5", "h6", "header", "hr", "li", "main", "ol", "p",
    "pre", "section", "table", "tr", "ul", "caption",
}
_HEADINGS = {"h4", "h5", "h6"}
_CELLS = {"td", "th"}
_IN_CELL = {"p", "div", "br"}  # a cell's paragraphs: one line of its row (Sphinx, Asciidoctor write them)
_ROW_CHARS = 1000  # a longer row is a page laid out in a table: its paragraphs stay paragraphs
_PARAGRAPHS = {"p", "pre", "table", "ul", "ol", "dl", "blockquote"}  # a blank line after each
_LISTS = {"ol", "ul"}
_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
_SPACES = re.compile(r"\s+")


def parse_html(path: str | Path) -> ParsedDocument:
    """An HTML file as one page per h1-h3 section, labelled with the heading path."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DocumentError.of("unreadable", path, exc.strerror or str(exc)) from exc
    charset = _CHARSET.search(data[:4096])
    text, warnings = decode_text(data, path, charset.group(1).decode("ascii") if charset else None)
    reader = _HTMLText(path.stem)
    reader.feed(text)
    reader.close()
    document = reader.sections.document(path, warnings, reader.title_text())
    if not document.pages:
        raise DocumentError.of("empty", path, "it has no visible text")
    return document


class _HTMLText(HTMLParser):
    """Collects visible text line by line; h1-h3 start new sections."""

    def __init__(self, fallback_title: str):
        super().__init__(convert_charrefs=True)
        self.sections = Sections(fallback_title)
        self._skip_depth = 0
        self._pre_depth = 0
        self._line: list[str] = []
        self._heading: tuple[int, list[str]] | None = None  # an h1-h3 being read
        self._title: list[str] | None = None  # inside <title>
        self._title_parts: list[str] = []
        self._lists: list[list] = []  # open lists, innermost last: [numbering type or "", next number]
        self._marker = ""  # an item's number or bullet, put before its first text
        self._item_break = False  # after an item's paragraph: a break only if another paragraph of it follows
        self._link_depth = 0
        self._in_cell = False  # between <td> or <th> and its end (or its row's, when the end is left out)

    def title_text(self) -> str:
        return _SPACES.sub(" ", "".join(self._title_parts)).strip()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag in _SKIPPED:
            self._skip_depth += 1
        elif tag == "title" and not self._title_parts:  # not an SVG's <title> later on
            self._title = self._title_parts
        elif tag in _SECTION_HEADINGS:
            self._end_line()
            self._heading = (_SECTION_HEADINGS[tag], [])
            self._in_cell = False  # a table that lays out a page
        elif tag in _CELLS:
            self._start_cell()
        elif self._in_row_line(tag):
            self._space()
        elif tag in _BLOCKS:
            self._end_line()
        if tag in ("tr", "table"):
            self._in_cell = False
        if tag == "pre":
            self._pre_depth += 1
        if tag == "a" and attrs.get("href"):
            self._link_depth += 1
        if tag in _LISTS:
            self._lists.append(_list_state(tag, attrs))
        elif tag == "li" and self._lists and not self._skip_depth:
            self._marker = self._item_marker(attrs)
            self._item_break = False  # the items of a list are one block, as PDF text reads them
            self._link_depth = 0  # a link left open (bad HTML) ends with its item

    def handle_endtag(self, tag):
        if tag in _SKIPPED:
            self._skip_depth = max(0, self._skip_depth - 1)
        elif tag == "title":
            self._title = None
        elif tag in _SECTION_HEADINGS and self._heading is not None:
            self._end_heading()
        elif self._in_row_line(tag):
            self._space()
            return  # a cell's paragraph ends: its row's line goes on
        elif tag in _BLOCKS:
            self._end_line()
        if tag in _CELLS or tag in ("tr", "table"):
            self._in_cell = False
        if tag == "pre":
            self._pre_depth = max(0, self._pre_depth - 1)
        if tag == "a" and self._link_depth:
            self._link_depth -= 1
        if tag in _LISTS and self._lists:
            self._lists.pop()
            self._marker = ""
            if self._lists:  # a list inside an item: its items go on without a break
                return
        if tag == "p" and self._lists:
            self._item_break = True
        elif tag in _PARAGRAPHS and not self._skip_depth:
            self.sections.add_break()

    def handle_data(self, data):
        if self._skip_depth:
            return
        if self._title is not None:
            self._title.append(data)
            return
        if self._heading is not None:
            self._heading[1].append(data)
            return
        if self._item_break and data.strip():
            self._item_break = False
            self.sections.add_break()
        if self._marker and data.strip():  # the item's first text, inside its <p> too
            if not self._link_depth:  # an item that starts with a link is a contents entry: no marker
                self._line.append(self._marker)
            self._marker = ""
        if self._pre_depth:
            self._pre_text(data)
        else:
            data = _SPACES.sub(" ", data)
            self._line.append(data.lstrip() if self._line and self._line[-1][-1:] in (" ", "\t") else data)

    def close(self):
        super().close()
        if self._heading is not None:
            self._end_heading()
        self._end_line()

    def _start_cell(self) -> None:
        """Cells apart by a tab, as a PDF's are: the lead reads a row."""
        self._in_cell = True
        line = "".join(self._line)
        if line.strip():
            self._line = [line.rstrip(" "), "\t"]  # an empty cell keeps its tab

    def _in_row_line(self, tag: str) -> bool:
        """Whether a paragraph's start or end inside a cell goes on its row's line; a table
        that lays out a page (a row too long, or a heading in a cell) is read as paragraphs."""
        if self._in_cell and (tag in _HEADINGS or len("".join(self._line)) > _ROW_CHARS):
            self._in_cell = False
        return self._in_cell and tag in _IN_CELL

    def _space(self) -> None:
        if self._line and self._line[-1][-1:] not in (" ", "\t"):
            self._line.append(" ")

    def _pre_text(self, data: str) -> None:
        first, *rest = data.split("\n")
        self._line.append(first)
        for line in rest:
            self._end_line(keep_spaces=True)
            self._line.append(line)

    def _item_marker(self, attrs: dict) -> str:
        """What a browser draws before a list item: "3. ", "b. " or a bullet ("◦" when nested)."""
        state = self._lists[-1]
        numbering, number = state
        if not numbering:
            return list_marker("bullet", 0, sum(1 for kind, _ in self._lists if not kind) - 1) + " "
        number = number_or(attrs.get("value"), number)
        state[1] = number + 1
        return list_marker(numbering, number) + ". "

    def _end_heading(self) -> None:
        level, parts = self._heading
        self._heading = None
        title = _SPACES.sub(" ", "".join(parts)).strip()
        if title:
            self.sections.heading(level, title)
            self.sections.add(title)
            self.sections.add_break()

    def _end_line(self, keep_spaces: bool = False) -> None:
        line = "".join(self._line)
        self._line = []
        line = line.rstrip() if keep_spaces or self._pre_depth else line.strip()
        if line or self._pre_depth:
            self.sections.add(line)


def _list_state(tag: str, attrs: dict) -> list:
    if tag != "ol":
        return ["", 0]
    numbering = attrs.get("type") or "1"
    return [numbering if numbering in ("1", "a", "A", "i", "I") else "1", number_or(attrs.get("start"), 1)]

