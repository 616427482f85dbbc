"""The text page of the source view: a document in another format than PDF (or a PDF that QtPdf
cannot open) shown as text, with the cited passage marked.

    page = TextPage(parent)              # a read-only QTextBrowser that never follows links
    page.set_text(text_document(parsed.pages), key)   # the pages, as the index holds them
    where = page.find(index, passage, spans)          # the passage's characters, or None
    page.mark(where, index)              # marked and scrolled to: (its text, its page) or None
    page.go_to(number); page.page_at_top()            # pages by their numbers
    page.zoom_points = 2.0; page.apply_zoom(base_font)   # the zoom follows the app's font

The pages are read by a SourceReader (controllers.sources: a parse pool child, off the GUI
thread), the same text the index holds, so the spans mark the passage exactly (found by its
text when they are empty, as in conversations saved before spans were kept). Table cells are
set apart by tabs, as ingestion reads tables; the tab stops sit past the widest cell shown.
"""

from __future__ import annotations

from bisect import bisect_right
from contextlib import contextmanager
from dataclasses import dataclass

from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QColor, QFont, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import QTextBrowser, QTextEdit, QWidget

from engine.ingest.locate import locate_passage, same_letters
from engine.types import Page, Span

HIGHLIGHT_TEXT_BACKGROUND = QColor("#ffe566")
MAX_CELL_CHARS = 30  # a longer cell wraps onto the next tab stop rather than widening them all
HIGHLIGHT_TEXT_FOREGROUND = QColor("#1b1b1b")  # dark on yellow, in the dark theme too


@dataclass(frozen=True)
class TextDocument:
    text: str
    starts: tuple[int, ...]  # where each page begins in text
    starts16: tuple[int, ...]  # the same, as QTextDocument positions (UTF-16 code units)
    labels: tuple[str, ...]
    numbers: tuple[int, ...]
    exact: tuple[bool, ...]  # the page's text is as the index holds it (no line ends changed)


def text_document(pages: tuple[Page, ...]) -> TextDocument:
    """The document's pages as one text, as our parser reads them."""
    parts, starts, starts16, labels, numbers, exact = [], [], [], [], [], []
    at = at16 = 0
    for page in pages:
        text = page.text.replace("\r\n", "\n").replace("\r", "\n")
        starts.append(at)
        starts16.append(at16)
        labels.append(page.label)
        numbers.append(page.number)
        exact.append(len(text) == len(page.text))
        parts.append(text)
        at += len(text) + 2
        at16 += utf16_offset(text, len(text)) + 2
    return TextDocument("\n\n".join(parts), tuple(starts), tuple(starts16), tuple(labels),
                        tuple(numbers), tuple(exact))


def utf16_offset(text: str, index: int) -> int:
    """A Python index of `text` as a QTextDocument position (UTF-16 code units)."""
    head = text[:index]
    return index if head.isascii() else len(head.encode("utf-16-le", "surrogatepass")) // 2


def span_range(document: TextDocument, spans: tuple[Span, ...], passage: str) -> tuple[int, int] | None:
    """The passage's characters in the document, from its stored spans, when they still
    fit the file (None for empty spans, as saved before spans were kept)."""
    starts, ends = [], []
    for span in spans:
        if span.end <= span.start or span.page not in document.numbers:
            continue
        index = document.numbers.index(span.page)
        if not document.exact[index]:
            return None  # line ends changed: the offsets no longer count the same
        page_end = (document.starts[index + 1] - 2 if index + 1 < len(document.starts)
                    else len(document.text))
        begin = document.starts[index]
        if begin + span.end > page_end:
            return None
        starts.append(begin + span.start)
        ends.append(begin + span.end)
    if not starts:
        return None
    where = min(starts), max(ends)
    return where if same_letters(document.text[where[0]:where[1]], passage) else None


def located(document: TextDocument, index: int, passage: str) -> tuple[int, int] | None:
    """The passage found by its text: on its page and the next (it may run on across the
    break), else anywhere."""
    start = document.starts[index]
    count = len(document.starts)
    end = document.starts[index + 2] if index + 2 < count else len(document.text)
    where = locate_passage(document.text, passage, start, end)
    return where if where is not None else locate_passage(document.text, passage)


def page_index(document: TextDocument, page: int) -> int:
    if not document.numbers:
        return 0
    if page in document.numbers:
        return document.numbers.index(page)
    return min(max(0, page - 1), len(document.numbers) - 1)


def index_at(starts: tuple[int, ...], position: int) -> int:
    """The index of the page that `position` lies on, given the pages' starts."""
    return max(0, bisect_right(starts, position) - 1)


class TextPage(QTextBrowser):
    """A document's pages as read-only text, the passage marked; see the module's docstring."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setOpenLinks(False)
        self.setOpenExternalLinks(False)
        self.setReadOnly(True)
        self.setAccessibleName("Text of the source")
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextBrowserInteraction)
        self.text_doc: TextDocument | None = None
        self.text_key: tuple | None = None  # the file's version the text was read from
        self.programmatic_scroll = False
        self.zoom_points = 0.0  # points added to the application's font size

    def set_text(self, document: TextDocument, key: tuple) -> None:
        self.setPlainText(document.text)
        self.set_cell_stops()
        self.text_doc, self.text_key = document, key

    def find(self, index: int, passage: str, spans: tuple[Span, ...]) -> tuple[int, int] | None:
        """The passage's characters: from its spans, else found by its text near page `index`."""
        return span_range(self.text_doc, spans, passage) or located(self.text_doc, index, passage)

    def mark(self, where: tuple[int, int] | None, index: int) -> tuple[str, int] | None:
        """Mark `where` and scroll its start a little below the top (without it, the start of
        page `index`): (the text marked, its page's number), or None."""
        document = self.text_doc
        text = document.text
        cursor = QTextCursor(self.document())
        selections = []
        marked = None
        if where is not None:
            start, end = where
            cursor.setPosition(utf16_offset(text, start))
            cursor.setPosition(utf16_offset(text, end), QTextCursor.MoveMode.KeepAnchor)
            marker = QTextEdit.ExtraSelection()
            marker.cursor = QTextCursor(cursor)
            char_format = QTextCharFormat()
            char_format.setBackground(HIGHLIGHT_TEXT_BACKGROUND)
            char_format.setForeground(HIGHLIGHT_TEXT_FOREGROUND)
            marker.format = char_format
            selections.append(marker)
            marked = text[start:end], document.numbers[index_at(document.starts, start)]
        else:
            cursor.setPosition(document.starts16[index] if document.starts16 else 0)
        self.setExtraSelections(selections)
        with self.quiet_scrolling():
            self.setTextCursor(cursor)  # scrolls it into view, anywhere
        # the start of the passage (or page) a little below the top, rather than at the bottom
        self.scroll_to(cursor.selectionStart(), self.viewport().height() // 5)
        return marked

    def go_to(self, page: int) -> bool:
        """Scroll page number `page` to the top; False when the text has no such page."""
        if self.text_doc is None or page not in self.text_doc.numbers:
            return False
        start = self.text_doc.starts[self.text_doc.numbers.index(page)]
        cursor = QTextCursor(self.document())
        cursor.setPosition(utf16_offset(self.text_doc.text, start))
        with self.quiet_scrolling():
            self.setTextCursor(cursor)
        self.scroll_to(cursor.position(), 0)
        return True

    def page_at_top(self) -> int:
        """The number of the page near the top of the view."""
        viewport = self.viewport()
        probe = viewport.rect().topLeft() + QPoint(0, viewport.height() // 4)
        position = self.cursorForPosition(probe).position()
        return self.text_doc.numbers[index_at(self.text_doc.starts16, position)]

    def scroll_to(self, position: int, below_top: int) -> None:
        """Scroll so that `position` is `below_top` pixels under the top of the view."""
        cursor = QTextCursor(self.document())
        cursor.setPosition(position)
        bar = self.verticalScrollBar()
        with self.quiet_scrolling():
            bar.setValue(bar.value() + self.cursorRect(cursor).top() - below_top)

    @contextmanager
    def quiet_scrolling(self):
        """Our own scrolling: the page shown is the one we chose, not the one at the top."""
        self.programmatic_scroll = True
        try:
            yield
        finally:
            self.programmatic_scroll = False

    def apply_zoom(self, base: QFont) -> None:
        """The font: the application's (`base`) plus the zoom, so that it follows a change of
        font size in the settings (QTextEdit.zoomIn would pin it)."""
        font = QFont(base)
        font.setPointSizeF(base.pointSizeF() + self.zoom_points)
        self.setFont(font)
        self.set_cell_stops()

    def set_cell_stops(self) -> None:
        """Tab stops past the widest table cell shown (a tab sets cells apart, as ingestion reads
        tables), so that "Base plate<tab>M16" never runs together; capped for a long cell."""
        metrics = self.fontMetrics()
        cells = [cell for line in self.toPlainText().splitlines() if "\t" in line
                 for cell in line.split("\t")[:-1]]
        widest = max((metrics.horizontalAdvance(cell[:MAX_CELL_CHARS]) for cell in cells), default=0)
        self.setTabStopDistance(max(widest, metrics.horizontalAdvance("x" * 8)) +
                                metrics.horizontalAdvance("   "))
