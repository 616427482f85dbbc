"""An HTML page as a flat list of text blocks (headings, paragraphs, list items, definition
terms and descriptions), with the anchors that point into it and the links it holds.

Only the structure the pair miner needs: which text is a heading (and its level), which is a
term of a definition list and which its description. Standard library only (html.parser), so
the miner runs in the app's own venv.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

BLOCK_TAGS = {"p", "li", "dt", "dd", "pre", "td", "th", "caption", "blockquote", "div",
              "h1", "h2", "h3", "h4", "h5", "h6", "title", "tr", "table", "ul", "ol", "dl",
              "section", "article", "body", "br"}
SKIP_TAGS = {"script", "style", "nav", "header", "aside", "footer", "noscript", "head"}
_KINDS = {"dt", "dd", "h1", "h2", "h3", "h4", "h5", "h6"}
_SPACE = re.compile(r"\s+")


@dataclass
class Block:
    kind: str  # "h" (heading), "dt", "dd" or "p" (anything else with text)
    text: str
    level: int = 0  # 1-6 for headings


@dataclass
class Page:
    title: str = ""
    blocks: list[Block] = field(default_factory=list)
    anchors: dict[str, int] = field(default_factory=dict)  # id or name -> index of the next block
    links: list[tuple[str, str]] = field(default_factory=list)  # (link text, href)
    keywords: list[str] = field(default_factory=list)  # <meta itemprop="keywords"> (LibreOffice's index)


class _Reader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.page = Page()
        self._text: list[str] = []
        self._open: list[str] = []  # open block tags, innermost last
        self._skip = 0
        self._link: tuple[str, list[str]] | None = None
        self._in_title = False

    # -- parser callbacks -------------------------------------------------------------------
    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "meta" and attrs.get("itemprop") == "keywords" and attrs.get("content"):
            self.page.keywords.append(attrs["content"])
        if tag in SKIP_TAGS and tag != "head":
            self._skip += 1
        if tag == "title":
            self._in_title = True
        for key in ("id", "name"):
            if attrs.get(key) and (tag == "a" or key == "id"):
                self.page.anchors.setdefault(attrs[key], len(self.page.blocks))
        if tag == "a" and attrs.get("href"):
            self._link = (attrs["href"], [])
        if tag in BLOCK_TAGS:
            self._flush()
            if tag != "br":
                self._open.append(tag)

    def handle_endtag(self, tag):
        if tag in SKIP_TAGS and tag != "head" and self._skip:
            self._skip -= 1
        if tag == "title":
            self._in_title = False
        if tag == "a" and self._link is not None:
            href, words = self._link
            text = _clean(" ".join(words))
            if text:
                self.page.links.append((text, href))
            self._link = None
        if tag in BLOCK_TAGS:
            self._flush()
            if tag in self._open:
                del self._open[len(self._open) - 1 - self._open[::-1].index(tag):]

    def handle_data(self, data):
        if self._in_title:
            self.page.title += data
            return
        if self._skip:
            return
        self._text.append(data)
        if self._link is not None:
            self._link[1].append(data)

    # -- blocks -----------------------------------------------------------------------------
    def _flush(self) -> None:
        text = _clean("".join(self._text))
        self._text = []
        if not text:
            return
        # A paragraph inside a description is still the description: dt, dd and headings win.
        tag = next((t for t in reversed(self._open) if t in _KINDS), "p")
        if tag[0] == "h" and tag[1:].isdigit():
            self.page.blocks.append(Block("h", text, int(tag[1:])))
        elif tag in ("dt", "dd"):
            self.page.blocks.append(Block(tag, text))
        else:
            self.page.blocks.append(Block("p", text))


def _clean(text: str) -> str:
    return _SPACE.sub(" ", text.replace("\u00b6", "")).strip()  # ¶: Sphinx's permalink mark


def read_page(html: str) -> Page:
    reader = _Reader()
    reader.feed(html)
    reader.close()
    reader._flush()
    reader.page.title = _clean(reader.page.title)
    return reader.page
