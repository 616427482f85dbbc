"""Safe rich text for answers: an answer is Markdown written by a model, so it is rendered
inertly. Raw HTML is shown as text (MarkdownNoHTML), images become their alt text before any
layout could load them, every link the model wrote is turned into plain text followed by where
it pointed ("the support site (http://evil.example/fw.exe)": a friendly name never hides an
address), no browser follows a link or loads a resource, and the only links are our own "cite:N"
ones (the [N] markers and the source list). Whether the passages hold such an address is the
sentence check's to say (sentence_check.py): one they do not is marked "not in the manuals".

    doc = render_answer(text, font, palette, {1: citation})   # an InertDocument
    mark_sentences(doc, text, checked_sentences, {1: citation}, palette)   # once the answer is done
    append_sources(doc, citations, "Sources", palette)
    browser = SafeBrowser(); browser.show_document(doc)        # cite:N -> citeClicked(N)
    nearest_html(citations, {2}, palette)   # a refusal's nearest passages, one line each, [2] open
"""

from __future__ import annotations

import html
import logging
import math
import re
from bisect import bisect_right
from difflib import SequenceMatcher

from PySide6.QtCore import QSize, Qt, QUrl, Signal
from PySide6.QtGui import (
    QColor,
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

from engine.answer.sentence_check import NOT_IN_MANUALS, mark_of
from engine.ingest.chunking import trimmed
from engine.types import CheckedSentence, Citation, Passage

log = logging.getLogger(__name__)

MARKDOWN = (QTextDocument.MarkdownFeature.MarkdownDialectGitHub
            | QTextDocument.MarkdownFeature.MarkdownNoHTML)
WRAP = QTextOption()
WRAP.setWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
CITE_MARK = re.compile(r"\[(\d{1,2})\]")
UNSUPPORTED_TAG = NOT_IN_MANUALS
UNSUPPORTED_TIP = "The passages the answer was written from do not say this; check it before relying on it."
UNSUPPORTED = int(QTextFormat.Property.UserProperty) + 1  # marks an unsupported sentence's characters
NEAREST_TITLE = "Nearest passages"
HEADING_CHARS = 48  # a passage's heading on its one line, beside its document and page
OCR_TAG = "OCR"
OCR_TIP = "Read from a scanned page by text recognition (OCR): check the page itself."

def page_label(passage: Passage) -> str:
    """"page 12", "pages 12–13", or "page 5 (PDF page 10)" where the printed label differs."""
    pages = passage.pages
    if len(pages) > 1:
        return passage.pages_text((pages[0], pages[-1]), joiner="–")
    return passage.pages_text((passage.page,))


def read_by_ocr(passage: Passage) -> bool:
    """Whether some of the passage's text was recognised from a scanned page's image."""
    return bool(passage.ocr_pages)


def ocr_tag_format(font: QFont, palette: QPalette) -> QTextCharFormat:
    """The small "OCR" tag beside a citation: a tinted, bold, smaller run with its tooltip."""
    fmt = QTextCharFormat()
    fmt.setBackground(tint(palette, QPalette.ColorRole.Link, 0.18))
    fmt.setForeground(palette.color(QPalette.ColorRole.Link))
    fmt.setFontPointSize(max(7.0, font.pointSizeF() * 0.8))
    fmt.setFontWeight(QFont.Weight.Bold)
    fmt.setToolTip(OCR_TIP)
    return fmt


def ocr_tag_html(palette: QPalette) -> str:
    """The same tag in our own markup (the nearest passages, the lead sentences)."""
    background = tint(palette, QPalette.ColorRole.Link, 0.18).name()
    ink = palette.color(QPalette.ColorRole.Link).name()
    return (f' <span title="{html.escape(OCR_TIP)}" style="background-color:{background}; color:{ink}; '
            f'font-size:small; font-weight:bold">\u00a0{OCR_TAG}\u00a0</span>')


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
    links = []  # (start, end, href) of each run of the model's link text
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
                if fmt.anchorHref():
                    _extend_links(links, fragment.position(), fragment.length(), fmt.anchorHref())
            it += 1
        if block.blockFormat().nonBreakableLines() or block.blockFormat().hasProperty(
                QTextFormat.Property.BlockCodeFence):
            edits.append((block.position(), 0, "code block", ""))
        elif block.blockFormat().headingLevel():
            edits.append((block.position(), 0, "heading", ""))
        block = block.next()
    edits += [(end, 0, "address", href) for start, end, href in links
              if not _shows_address(doc, start, end, href)]
    cursor = QTextCursor(doc)
    for position, length, what, alt in sorted(edits, key=lambda e: (e[0], e[2] == "address"), reverse=True):
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
        if what == "address":
            cursor.insertText(f" ({alt})", QTextCharFormat())
            continue
        if what == "heading":  # a chat answer's "# Title" is a bold line, not a poster
            cursor.movePosition(QTextCursor.MoveOperation.EndOfBlock, QTextCursor.MoveMode.KeepAnchor)
            chars = QTextCharFormat(cursor.charFormat())
            chars.clearProperty(QTextFormat.Property.FontSizeAdjustment)
            chars.setFontWeight(QFont.Weight.Bold)
            cursor.setCharFormat(chars)
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


def _extend_links(links: list, position: int, length: int, href: str) -> None:
    """Adds a fragment of link text; one link's fragments (bold inside it...) make one run."""
    if links and links[-1][1] == position and links[-1][2] == href:
        links[-1] = (links[-1][0], position + length, href)
    else:
        links.append((position, position + length, href))


def _shows_address(doc: QTextDocument, start: int, end: int, href: str) -> bool:
    """Whether the link's text already is its address (an autolinked "www.x.org", "a@b.org")."""
    text = "".join(doc.characterAt(i) for i in range(start, end)).strip()
    bare = re.sub(r"^(?:[a-z]+:(?://)?)", "", href, flags=re.IGNORECASE).rstrip("/")
    return text.rstrip("/") in (href.rstrip("/"), bare)


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
        if read_by_ocr(p):
            cursor.insertText(" ", QTextCharFormat())
            cursor.insertText(f"\u00a0{OCR_TAG}\u00a0", ocr_tag_format(doc.defaultFont(), palette))
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
        self.keyboard_used = False  # whether the last link was followed from the keyboard
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

    def keyPressEvent(self, event) -> None:  # noqa: N802
        self.keyboard_used = True
        super().keyPressEvent(event)

    def mousePressEvent(self, event) -> None:  # noqa: N802
        self.keyboard_used = False
        super().mousePressEvent(event)

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


# -- the checked sentences ---------------------------------------------------------------------
def tint(palette: QPalette, role: QPalette.ColorRole, share: float) -> QColor:
    """The base colour with `share` of `role`'s mixed in: a background that reads in either theme."""
    base, ink = palette.color(QPalette.ColorRole.Base), palette.color(role)
    mix = [round(b + (i - b) * share) for b, i in zip(base.getRgb()[:3], ink.getRgb()[:3], strict=True)]
    return QColor(*mix)


class _Alignment:
    """Offsets of the Markdown the model wrote, mapped to positions of the rendered document
    (markup gone, soft breaks joined): the two texts aligned by their common runs."""

    def __init__(self, raw: str, shown: str):
        blocks = SequenceMatcher(None, raw, shown, autojunk=False).get_matching_blocks()
        self._blocks = [b for b in blocks if b.size]
        self._starts = [b.a for b in self._blocks]

    def start(self, offset: int) -> int | None:
        """Where the character at `offset` is shown, or the next shown one after it."""
        i = bisect_right(self._starts, offset) - 1
        if i >= 0 and offset < self._blocks[i].a + self._blocks[i].size:
            return self._blocks[i].b + offset - self._blocks[i].a
        return self._blocks[i + 1].b if i + 1 < len(self._blocks) else None

    def end(self, offset: int) -> int | None:
        """Where the text ending just before `offset` ends when shown."""
        i = bisect_right(self._starts, offset - 1) - 1
        if i < 0:
            return None
        block = self._blocks[i]
        return block.b + min(offset - block.a, block.size)


def mark_sentences(doc: QTextDocument, answer: str, sentences: tuple[CheckedSentence, ...],
                   citations: dict[int, Citation], palette: QPalette) -> None:
    """Marks the answer's unsupported sentences (a tint, a wavy underline and a small "not in
    the manuals" tag, readable without colour) and gives each supported sentence the citation of
    the passage it came from, unless the model already cited that one there. `answer` is the text
    `doc` was rendered from (render_answer); the sentences' offsets are into it."""
    align = _Alignment(answer, doc.toRawText())
    inserts = []  # (position, text, format); applied from the end, so positions hold
    for sentence in sentences:
        start, end = trimmed(answer, max(0, sentence.start), min(len(answer), sentence.end))
        shown_start, shown_end = align.start(start), align.end(end)
        if shown_start is None or shown_end is None or shown_start >= shown_end:
            continue
        mark = mark_of(answer, sentence)
        if mark == NOT_IN_MANUALS:
            _mark_unsupported(doc, shown_start, shown_end, palette)
            inserts.append((shown_end, UNSUPPORTED_TAG, _tag_format(doc, palette)))
        elif mark in citations:
            inserts.append((_before_stop(doc, shown_start, shown_end), f"[{mark}]", _link_format(mark, palette)))
        elif mark is not None:
            log.info("sentence's source [%s] is not among the answer's citations", mark)
    cursor = QTextCursor(doc)
    for position, text, fmt in sorted(inserts, key=lambda i: i[0], reverse=True):
        cursor.setPosition(position)
        cursor.insertText(text, fmt)
        cursor.setPosition(position)
        # a plain gap (no tint, no link); a citation keeps to the word before it
        cursor.insertText(" " if text == UNSUPPORTED_TAG else "\u00a0", QTextCharFormat())


def unsupported_ranges(doc: QTextDocument) -> list[str]:
    """The texts marked unsupported in `doc`, in order (what mark_sentences marked)."""
    found, run = [], []
    block = doc.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            fragment = it.fragment()
            if fragment.charFormat().boolProperty(UNSUPPORTED):
                run.append(fragment.text())
            elif run:
                found.append("".join(run))
                run = []
            it += 1
        block = block.next()
    return found + (["".join(run)] if run else [])


def _before_stop(doc: QTextDocument, start: int, end: int) -> int:
    """A sentence's citation goes before its closing full stop, as the model writes them."""
    last = doc.characterAt(end - 1)
    return end - 1 if end - 1 > start and last in ".!?:;" else end


def _mark_unsupported(doc: QTextDocument, start: int, end: int, palette: QPalette) -> None:
    fmt = QTextCharFormat()
    fmt.setBackground(tint(palette, QPalette.ColorRole.BrightText, 0.14))
    fmt.setUnderlineStyle(QTextCharFormat.UnderlineStyle.WaveUnderline)
    fmt.setUnderlineColor(palette.color(QPalette.ColorRole.BrightText))
    fmt.setToolTip(UNSUPPORTED_TIP)
    fmt.setProperty(UNSUPPORTED, True)
    cursor = QTextCursor(doc)
    cursor.setPosition(start)
    cursor.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
    cursor.mergeCharFormat(fmt)


def _tag_format(doc: QTextDocument, palette: QPalette) -> QTextCharFormat:
    fmt = QTextCharFormat()
    fmt.setBackground(tint(palette, QPalette.ColorRole.BrightText, 0.28))
    fmt.setForeground(palette.color(QPalette.ColorRole.Text))
    fmt.setFontPointSize(max(7.0, doc.defaultFont().pointSizeF() * 0.8))
    fmt.setFontItalic(True)
    fmt.setToolTip(UNSUPPORTED_TIP)
    return fmt


def _link_format(number: int, palette: QPalette) -> QTextCharFormat:
    fmt = QTextCharFormat()
    fmt.setAnchor(True)
    fmt.setAnchorHref(f"cite:{number}")
    fmt.setForeground(palette.color(QPalette.ColorRole.Link))
    fmt.setFontWeight(QFont.Weight.DemiBold)
    return fmt


# -- a refusal's nearest passages --------------------------------------------------------------
def nearest_html(citations: list[Citation], expanded: set[int], palette: QPalette) -> str:
    """The nearest passages, one line each ("[1] R-intro.pdf, page 12 · Heading"), every line a
    cite:N link; the passages numbered in `expanded` show their text beneath. Every string from
    a manual is escaped."""
    muted = palette.color(QPalette.ColorRole.PlaceholderText).name()
    parts = [f'<p style="margin:0 0 2px 0"><b>{NEAREST_TITLE}</b></p>']
    for citation in citations:
        p = citation.passage
        shown = citation.number in expanded
        arrow = "\u25be" if shown else "\u25b8"  # a small triangle, down when open
        where = html.escape(f"[{citation.number}] {p.document}, {page_label(p)}")
        heading = html.escape(_heading_line(p.heading_path))
        heading = f'<span style="color:{muted}"> \u00b7 {heading}</span>' if heading else ""
        tag = ocr_tag_html(palette) if read_by_ocr(p) else ""
        parts.append(f'<p style="margin:3px 0 3px 0"><a href="cite:{citation.number}" '
                     f'style="text-decoration:none">{arrow} <u>{where}</u>{heading}</a>{tag}</p>')
        if shown:
            parts.append(f'<p style="margin:0 0 8px 18px">{_passage_html(p.text, citation.quote)}</p>')
    return "".join(parts)


def _heading_line(heading_path: tuple[str, ...]) -> str:
    """The innermost heading, cut to fit one line."""
    line = " ".join(heading_path[-1].split()) if heading_path else ""
    return line if len(line) <= HEADING_CHARS else line[:HEADING_CHARS - 1].rstrip() + "\u2026"


def _passage_html(text: str, quote: str) -> str:
    """The passage's text, its best sentence (the citation's quote) in bold."""
    text = " ".join(text.split())
    quote = quote.rstrip("\u2026").strip()
    at = text.find(quote) if len(quote) >= 12 else -1
    if at < 0:
        return html.escape(text)
    end = at + len(quote)
    return f"{html.escape(text[:at])}<b>{html.escape(text[at:end])}</b>{html.escape(text[end:])}"
