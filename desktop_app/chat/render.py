"""Safe rich text for answers: an answer is Markdown written by a model, so it is rendered
inertly. Raw HTML is shown as text (MarkdownNoHTML), images become their alt text before any
layout could load them, every link the model wrote is turned into plain text, no browser follows
a link or loads a resource, and the only links are our own "cite:N" ones (the [N] markers and the
source list).

    doc = render_answer(text, font, palette, {1: citation})   # an InertDocument
    append_sources(doc, citations, "Sources", palette)
    browser = SafeBrowser(); browser.show_document(doc)        # cite:N -> citeClicked(N)
"""

from __future__ import annotations

import html
import logging
import math
import re

from PySide6.QtCore import QSize, Qt, QUrl, Signal
from PySide6.QtGui import (
    QFont,
    QFontDatabase,
    QPalette,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
    QTextFormat,
    QTextOption,
)
from PySide6.QtWidgets import QFrame, QSizePolicy, QTextBrowser

from engine.types import Citation, Passage

log = logging.getLogger(__name__)

MARKDOWN = (QTextDocument.MarkdownFeature.MarkdownDialectGitHub
            | QTextDocument.MarkdownFeature.MarkdownNoHTML)
WRAP = QTextOption()
WRAP.setWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
CITE_MARK = re.compile(r"\[(\d{1,2})\]")

def page_label(passage: Passage) -> str:
    pages = passage.pages
    if len(pages) > 1:
        return f"pages {pages[0]}–{pages[-1]}"
    return f"page {passage.page}"


# -- safe rendering ---------------------------------------------------------------------------
class InertDocument(QTextDocument):
    """A document that loads no resource: nothing named in an answer is ever read."""

    def loadResource(self, type_, name):  # noqa: N802 (Qt's name)
        log.info("refused to load a resource named in an answer: %s", name.toString())
        return None


def render_answer(text: str, font: QFont, palette: QPalette, citations: dict[int, Citation] | None = None,
                  parent=None) -> InertDocument:
    """The answer's Markdown as an inert document: no HTML, no images, no links of the model's;
    with `citations`, its [N] markers become cite:N links."""
    doc = InertDocument(parent)
    doc.setDefaultFont(font)
    doc.setDocumentMargin(2)
    doc.setDefaultTextOption(WRAP)
    doc.setMarkdown(text, MARKDOWN)
    _make_inert(doc, font, palette)
    if citations:
        _link_citations(doc, citations, palette)
    return doc


def _make_inert(doc: QTextDocument, font: QFont, palette: QPalette) -> None:
    """Images -> their alt text, links -> plain text, code in the system's fixed font on a
    tinted background, code blocks wrapped. Runs before any layout, so no image is loaded."""
    fixed = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont).families()
    tint = palette.color(QPalette.ColorRole.AlternateBase)
    edits = []  # (position, length, what, alt); applied from the end, so positions hold
    block = doc.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            fragment = it.fragment()
            fmt = fragment.charFormat()
            if fmt.isImageFormat():
                alt = str(fmt.property(QTextFormat.Property.ImageAltText) or "").strip()
                edits.append((fragment.position(), fragment.length(), "image", alt))
            elif (fmt.isAnchor() or fmt.hasProperty(QTextFormat.Property.AnchorHref)
                  or _is_code(fmt)):
                edits.append((fragment.position(), fragment.length(), "restyle", ""))
            it += 1
        if block.blockFormat().nonBreakableLines() or block.blockFormat().hasProperty(
                QTextFormat.Property.BlockCodeFence):
            edits.append((block.position(), 0, "code block", ""))
        block = block.next()
    cursor = QTextCursor(doc)
    for position, length, what, alt in sorted(edits, key=lambda e: e[0], reverse=True):
        cursor.setPosition(position)
        if what == "code block":
            fmt = QTextBlockFormat(cursor.blockFormat())
            fmt.setNonBreakableLines(False)  # long lines wrap instead of hiding off the edge
            fmt.setBackground(tint)
            fmt.setLeftMargin(6)
            fmt.setRightMargin(6)
            cursor.setBlockFormat(fmt)
            cursor.movePosition(QTextCursor.MoveOperation.EndOfBlock, QTextCursor.MoveMode.KeepAnchor)
            chars = QTextCharFormat()
            chars.setFontFamilies(fixed)
            cursor.mergeCharFormat(chars)
            continue
        cursor.setPosition(position + length, QTextCursor.MoveMode.KeepAnchor)
        if what == "image":
            cursor.insertText(f"[image: {alt}]" if alt else "[image]", QTextCharFormat())
            continue
        fmt = cursor.charFormat()
        if fmt.isAnchor() or fmt.hasProperty(QTextFormat.Property.AnchorHref):
            fmt.setAnchor(False)
            fmt.clearProperty(QTextFormat.Property.AnchorHref)
            fmt.clearProperty(QTextFormat.Property.AnchorName)
            fmt.clearForeground()
            fmt.setFontUnderline(False)
        if _is_code(fmt):
            fmt.setFontFamilies(fixed)
            fmt.setBackground(tint)
        cursor.setCharFormat(fmt)


def _is_code(fmt: QTextCharFormat) -> bool:
    return fmt.fontFixedPitch() or "monospace" in (fmt.fontFamilies() or [])


def _link_citations(doc: QTextDocument, citations: dict[int, Citation], palette: QPalette) -> None:
    cursor = QTextCursor(doc)
    for match in reversed(list(CITE_MARK.finditer(doc.toPlainText()))):
        number = int(match.group(1))
        if number not in citations:
            continue
        cursor.setPosition(match.start())
        cursor.setPosition(match.end(), QTextCursor.MoveMode.KeepAnchor)
        if doc.findBlock(match.start()).blockFormat().nonBreakableLines():
            continue
        fmt = QTextCharFormat()
        fmt.setAnchor(True)
        fmt.setAnchorHref(f"cite:{number}")
        fmt.setForeground(palette.color(QPalette.ColorRole.Link))
        fmt.setFontWeight(QFont.Weight.DemiBold)
        cursor.mergeCharFormat(fmt)


def append_sources(doc: QTextDocument, citations: list[Citation], heading: str, palette: QPalette) -> None:
    """The numbered source list under an answer, "[1] R-intro.pdf, page 12 — quote", each a
    cite:N link; written with the cursor API (no HTML is parsed)."""
    cursor = QTextCursor(doc)
    cursor.movePosition(QTextCursor.MoveOperation.End)
    block = QTextBlockFormat()
    block.setTopMargin(12)
    block.setBottomMargin(2)
    bold = QTextCharFormat()
    bold.setFontWeight(QFont.Weight.Bold)
    if doc.isEmpty():
        cursor.setBlockFormat(block)
        cursor.setCharFormat(bold)
    else:
        cursor.insertBlock(block, bold)
    cursor.insertText(heading)
    item = QTextBlockFormat()
    item.setTopMargin(2)
    item.setBottomMargin(2)
    for citation in citations:
        p = citation.passage
        link = QTextCharFormat()
        link.setAnchor(True)
        link.setAnchorHref(f"cite:{citation.number}")
        link.setForeground(palette.color(QPalette.ColorRole.Link))
        link.setFontUnderline(True)
        cursor.insertBlock(item, QTextCharFormat())
        cursor.insertText(f"[{citation.number}] {p.document}, {page_label(p)}", link)
        if citation.quote:
            quote = QTextCharFormat()
            quote.setFontItalic(True)
            cursor.insertText(" — ", QTextCharFormat())
            cursor.insertText(f"“{citation.quote}”", quote)


def evidence_html(citations: list[Citation]) -> str:
    parts = []
    for citation in citations:
        p = citation.passage
        where = " › ".join(p.heading_path)
        text = html.escape(" ".join(p.text.split()))
        parts.append(f'<p style="margin:6px 0 0 0"><b>[{citation.number}] {html.escape(p.document)}, '
                     f'{html.escape(page_label(p))}</b>'
                     + (f' <span style="color:gray">{html.escape(where)}</span>' if where else "")
                     + f'</p><p style="margin:2px 0 6px 0">{text}</p>')
    return "".join(parts)


class SafeBrowser(QTextBrowser):
    """A read-only, auto-height text browser that follows no link and loads no resource. Its
    cite:N links emit citeClicked(N); every other link is ignored."""

    citeClicked = Signal(int)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setOpenLinks(False)
        self.setOpenExternalLinks(False)
        self.setAcceptDrops(False)  # a drop anywhere goes to the window (documents), not here
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextBrowserInteraction)
        self.setWordWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)  # long paths too
        self.viewport().setAutoFillBackground(False)
        self.anchorClicked.connect(self._on_anchor)
        self.refused: list[str] = []  # resources something asked us to load (never loaded)
        self._watch(self.document())

    def show_document(self, doc: QTextDocument) -> None:
        """Shows `doc` (an inert one); the editor owns it and deletes the previous one."""
        doc.setParent(self)
        self.setDocument(doc)
        self._watch(doc)
        self._fit()

    def loadResource(self, type_, name):  # noqa: N802 (Qt's name)
        self.refused.append(name.toString())
        return None

    def sizeHint(self) -> QSize:  # noqa: N802
        return QSize(super().sizeHint().width(), self.height())

    def resizeEvent(self, event) -> None:  # noqa: N802
        super().resizeEvent(event)
        self._fit()

    def _watch(self, doc: QTextDocument) -> None:
        doc.documentLayout().documentSizeChanged.connect(self._fit)

    def _fit(self, *_args) -> None:
        doc = self.document()
        doc.setTextWidth(self.viewport().width())
        height = math.ceil(doc.size().height()) + 2 * self.frameWidth() + 2
        if height != self.height():
            self.setFixedHeight(height)

    def _on_anchor(self, url: QUrl) -> None:
        if url.scheme() == "cite" and url.path().isdigit():
            self.citeClicked.emit(int(url.path()))
        else:
            log.info("ignored a link in an answer: %s", url.toString())


def html_document(markup: str, font: QFont, palette: QPalette) -> InertDocument:
    doc = InertDocument()
    doc.setDefaultFont(font)
    doc.setDocumentMargin(2)
    doc.setDefaultTextOption(WRAP)
    doc.setHtml(markup)  # our own markup: every dynamic string in it is escaped
    return doc
