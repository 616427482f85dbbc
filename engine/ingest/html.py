"""HTML: visible text in sections by h1-h3, with the standard library's html.parser."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

from engine.errors import DocumentError
from engine.ingest.text import Sections, decode_text
from engine.types import ParsedDocument

_SKIPPED = {"script", "style", "nav", "noscript", "template"}  # not text a person reads
_SECTION_HEADINGS = {"h1": 1, "h2": 2, "h3": 3}
_BLOCKS = {
    "address", "article", "aside", "blockquote", "br", "dd", "div", "dl", "dt", "figcaption",
    "figure", "footer", "form", "h4", "h5", "h6", "header", "hr", "li", "main", "ol", "p",
    "pre", "section", "table", "tr", "ul", "caption",
}
_CELLS = {"td", "th"}
_PARAGRAPHS = {"p", "pre", "table", "ul", "ol", "dl", "blockquote"}  # a blank line after each
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

    def title_text(self) -> str:
        return _SPACES.sub(" ", "".join(self._title_parts)).strip()

    def handle_starttag(self, tag, attrs):
        if tag in _SKIPPED:
            self._skip_depth += 1
        elif tag == "title" and not self._title_parts:  # not an SVG's <title> later on
            self._title = self._title_parts
        elif tag in _SECTION_HEADINGS:
            self._end_line()
            self._heading = (_SECTION_HEADINGS[tag], [])
        elif tag in _CELLS and "".join(self._line).strip():
            self._line[-1] = self._line[-1].rstrip(" ")  # an empty cell keeps its tab
            self._line.append("\t")  # cells apart, as a PDF's are: the lead reads a row
        elif tag in _BLOCKS:
            self._end_line()
        if tag == "pre":
            self._pre_depth += 1

    def handle_endtag(self, tag):
        if tag in _SKIPPED:
            self._skip_depth = max(0, self._skip_depth - 1)
        elif tag == "title":
            self._title = None
        elif tag in _SECTION_HEADINGS and self._heading is not None:
            self._end_heading()
        elif tag in _BLOCKS:
            self._end_line()
        if tag == "pre":
            self._pre_depth = max(0, self._pre_depth - 1)
        if tag in _PARAGRAPHS and not self._skip_depth:
            self.sections.add_break()

    def handle_data(self, data):
        if self._skip_depth:
            return
        if self._title is not None:
            self._title.append(data)
        elif self._heading is not None:
            self._heading[1].append(data)
        elif self._pre_depth:
            self._pre_text(data)
        else:
            data = _SPACES.sub(" ", data)
            self._line.append(data.lstrip() if self._line and self._line[-1] == "\t" else data)

    def close(self):
        super().close()
        if self._heading is not None:
            self._end_heading()
        self._end_line()

    def _pre_text(self, data: str) -> None:
        first, *rest = data.split("\n")
        self._line.append(first)
        for line in rest:
            self._end_line(keep_spaces=True)
            self._line.append(line)

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
