"""The source view: the cited page of a manual, with the cited passage highlighted.

    view = SourceView()
    view.show_citation(citation)   # or show_passage(passage): its path, page, spans and text
    view.sourceShown               # (path, page, found) once the page is shown, or why not
    view.current_page()        # 1-based, as the citation and a PDF viewer count
    view.highlight_found()     # True when the passage was found on the page and is highlighted

PDFs are rendered by QtPdf (QPdfDocument + QPdfView, one page at a time). The index holds the
page's text as PDFium reads it, cleaned (engine.ingest.pdf_text); QtPdf holds PDFium's raw text
of the same page. `span_on_page` cleans it the same way and maps the passage's stored span back
to PDFium's characters, checked letter for letter, and those characters' boxes
(QPdfDocument.getSelectionAtIndex) are painted over the page as a marker would: exactly the
quoted words. Where the span does not fit (a collection indexed before, with pypdf's text; a
saved conversation), the passage is found by its letters and digits (`locate_passage`). A PDF is opened off the GUI thread by a PdfOpener (QtPdf reads a damaged
file whole to repair it), "Opening…" meanwhile. Other formats (and PDFs that QtPdf cannot open)
are shown as text in a read-only QTextBrowser that never follows links, with the passage
selected: their pages are read by a SourceReader (a parse pool child, within its time and
memory limits, off the GUI thread; "Opening…" meanwhile), the same text the index holds, so the
spans mark the passage exactly (found by its text when they are empty, as in conversations
saved before spans were kept). The view itself never parses a document.

A scanned page (read by OCR when it was indexed) has no text for QtPdf to find: there the
passage's spans (characters of the recognised text the index holds) pick the recognised words
they overlap, whose boxes the index keeps (PageOcr.words), and those are painted, one box per
line. The boxes are read from the store off the GUI thread by `ocr_source` (the window's
IndexController: read_page_ocr(path, page) -> ticket, then pageOcrRead(ticket, PageOcr|None));
sourceShown follows once they have arrived. Nothing is recognised again to show a page.
"""

from __future__ import annotations

import html
import logging
from bisect import bisect_right
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QEvent, QPoint, QPointF, QRectF, QSizeF, Qt, Signal
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontMetrics,
    QGuiApplication,
    QKeySequence,
    QPainter,
    QShortcut,
    QTextCharFormat,
    QTextCursor,
)
from PySide6.QtPdf import QPdfDocument
from PySide6.QtPdfWidgets import QPdfView
from PySide6.QtWidgets import (
    QAbstractSlider,
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QStackedWidget,
    QTextBrowser,
    QTextEdit,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from desktop_app.controllers.sources import PdfOpener, SourceReader
from engine.ingest.locate import locate_passage, same_letters, span_on_page
from engine.types import Page, PageOcr, Span, pages_text

log = logging.getLogger(__name__)

ZOOM_STEP = 1.25
ZOOM_MIN, ZOOM_MAX = 0.25, 6.0
FIT_WIDTH_MAX = 2.5  # a very wide window should not blow a page up to poster size
FIT_MARGIN_PT = 12.0  # paper kept either side of the printed text when fitting its width
FIT_TEXT_MIN = 0.6  # fit at least this share of the paper's width (a page with one short line)
HIGHLIGHT = QColor(255, 226, 64, 150)  # marker yellow; multiplied onto the page, text stays black
HIGHLIGHT_TEXT_BACKGROUND = QColor("#ffe566")
MAX_CELL_CHARS = 30  # a longer cell wraps onto the next tab stop rather than widening them all
HIGHLIGHT_TEXT_FOREGROUND = QColor("#1b1b1b")  # dark on yellow, in the dark theme too
OCR_NOTE = "This page is a scan: its text was recognised (OCR), so check the page itself."


def merge_line_boxes(rects: list[QRectF]) -> list[QRectF]:
    """Character boxes merged into one box per run on a line, a little padded: a marker stroke."""
    boxes: list[QRectF] = []
    for rect in rects:  # in reading order, as PDFium gives them
        if not rect.isValid():
            continue
        last = boxes[-1] if boxes else None
        if last is not None:
            overlap = min(rect.bottom(), last.bottom()) - max(rect.top(), last.top())
            same_line = overlap > 0.5 * min(rect.height(), last.height())
            gap = rect.left() - last.right()
            if same_line and -last.height() < gap < 4 * max(rect.height(), last.height()):
                boxes[-1] = last.united(rect)
                continue
        boxes.append(QRectF(rect))
    return [box.adjusted(-1.5, -1.5, 1.5, 1.5) for box in boxes]


def ocr_boxes(ocr: PageOcr, spans: tuple[Span, ...], page: int, page_size: QSizeF) -> list[QRectF]:
    """The boxes (in points of a page of `page_size`) of the recognised words of `page` that
    overlap the spans on it, one box per line: the passage marked on a scanned page."""
    ranges = [(span.start, span.end) for span in spans if span.page == page and span.end > span.start]
    sx = page_size.width() / ocr.width if ocr.width > 0 else 1.0  # the page as QtPdf sizes it
    sy = page_size.height() / ocr.height if ocr.height > 0 else 1.0
    rects = [QRectF(QPointF(x0 * sx, y0 * sy), QPointF(x1 * sx, y1 * sy))
             for word in ocr.words for x0, y0, x1, y1 in [word.box]
             if any(word.start < end and word.end > start for start, end in ranges)]
    return apart(merge_line_boxes(rects))


def _words_extent(ocr: PageOcr, page_size: QSizeF) -> QRectF:
    """Where the recognised words lie on a page of `page_size` points (empty when none)."""
    if not ocr.words or ocr.width <= 0 or ocr.height <= 0:
        return QRectF()
    sx, sy = page_size.width() / ocr.width, page_size.height() / ocr.height
    return QRectF(QPointF(min(w.box[0] for w in ocr.words) * sx, min(w.box[1] for w in ocr.words) * sy),
                  QPointF(max(w.box[2] for w in ocr.words) * sx, max(w.box[3] for w in ocr.words) * sy))


def apart(boxes: list[QRectF]) -> list[QRectF]:
    """Line boxes that overlap the next line down (a recogniser's boxes are generous) meet
    half way instead, so that the marker reads as one stroke per line."""
    boxes = sorted((QRectF(box) for box in boxes), key=lambda box: box.top())
    for i, upper in enumerate(boxes):
        for lower in boxes[i + 1:]:
            beside = min(upper.right(), lower.right()) > max(upper.left(), lower.left())
            if beside and lower.top() < upper.bottom() and lower.center().y() > upper.center().y():
                middle = (upper.bottom() + lower.top()) / 2
                upper.setBottom(min(upper.bottom(), middle))
                lower.setTop(max(lower.top(), middle))
    return boxes


# -- the PDF page view -----------------------------------------------------------------------
class _PdfPageView(QPdfView):
    """A QPdfView, one page at a time, that paints the passage highlight over its page."""

    userScrolled = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setPageMode(QPdfView.PageMode.SinglePage)
        self.setZoomMode(QPdfView.ZoomMode.Custom)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOn)  # a stable fit width
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.highlight_page = -1  # 0-based, as QtPdf counts
        self.highlight_boxes: list[QRectF] = []  # in page points
        self.scan_text: tuple[int, QRectF] = (-1, QRectF())  # a scanned page's recognised words' extent
        self.fit_width = True  # zoom follows the view's width until the user zooms
        self.follow = True  # keep the highlight in view until the user scrolls
        self.verticalScrollBar().actionTriggered.connect(self._on_user_scroll)
        self.horizontalScrollBar().actionTriggered.connect(self._on_user_scroll)

    def _on_user_scroll(self, action: int) -> None:
        if action != QAbstractSlider.SliderAction.SliderNoAction:
            self.follow = False
            self.userScrolled.emit()

    def screen_scale(self) -> float:
        """Pixels per PDF point, as QPdfView computes it (its screen's logical DPI / 72 × zoom)."""
        screen = QGuiApplication.primaryScreen()
        dpi = screen.logicalDotsPerInch() if screen is not None else 96.0
        return dpi / 72.0 * self.zoomFactor()

    def page_rect(self) -> QRectF:
        """Where the current page lies, in the view's document coordinates (as QPdfView lays
        out a single page: centred, inside documentMargins)."""
        document = self.document()
        if document is None or document.status() != QPdfDocument.Status.Ready:
            return QRectF()
        page = self.pageNavigator().currentPage()
        size = QSizeF(document.pagePointSize(page) * self.screen_scale()).toSize()
        margins = self.documentMargins()
        total_width = size.width() + margins.left() + margins.right()
        x = (max(total_width, self.viewport().width()) - size.width()) // 2
        return QRectF(x, margins.top(), size.width(), size.height())

    def text_columns(self, page: int) -> tuple[float, float]:
        """(left, right) in points of the page's printed text, with a little paper either side:
        what "fit width" fits, since a manual's margins take a quarter of the width or more."""
        document = self.document()
        width = document.pagePointSize(page).width()
        selection = document.getAllText(page)
        box = selection.boundingRectangle() if selection.isValid() else QRectF()
        if (not box.isValid() or box.width() <= 0) and self.scan_text[0] == page:
            box = self.scan_text[1]  # a scan: QtPdf has no text, the recogniser found it here
        if not box.isValid() or box.width() <= 0:
            return 0.0, width
        left = max(0.0, box.left() - FIT_MARGIN_PT)
        right = min(width, box.right() + FIT_MARGIN_PT)
        missing = FIT_TEXT_MIN * width - (right - left)
        if missing > 0:  # little text: widen around it, within the paper
            left = max(0.0, left - missing / 2)
            right = min(width, left + FIT_TEXT_MIN * width)
            left = min(left, right - FIT_TEXT_MIN * width)
        return left, right

    def fit_to_width(self) -> None:
        document = self.document()
        if document is None or document.status() != QPdfDocument.Status.Ready:
            return
        page = max(0, self.pageNavigator().currentPage())
        if document.pagePointSize(page).width() <= 0:
            return
        left, right = self.text_columns(page)
        margins = self.documentMargins()
        available = self.viewport().width() - margins.left() - margins.right()
        scale = self.screen_scale() / self.zoomFactor()
        zoom = min(FIT_WIDTH_MAX, max(ZOOM_MIN, available / ((right - left) * scale)))
        if abs(zoom - self.zoomFactor()) > 1e-3:
            self.setZoomFactor(zoom)
        # the printed text's left edge at the view's left (the page's margin scrolled away)
        x = self.page_rect().left() + left * self.screen_scale() - margins.left()
        self.horizontalScrollBar().setValue(int(max(0.0, x)))

    def scroll_to_highlight(self) -> None:
        if not self.highlight_boxes or self.highlight_page != self.pageNavigator().currentPage():
            return
        page = self.page_rect()
        scale = self.screen_scale()
        top = min(box.top() for box in self.highlight_boxes) * scale + page.top()
        left = min(box.left() for box in self.highlight_boxes) * scale + page.left()
        right = max(box.right() for box in self.highlight_boxes) * scale + page.left()
        self.verticalScrollBar().setValue(int(max(0.0, top - self.viewport().height() * 0.2)))
        bar = self.horizontalScrollBar()
        if right - bar.value() > self.viewport().width() or left < bar.value():
            bar.setValue(int(max(0.0, left - 24)))

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        if self.fit_width:
            self.fit_to_width()
        if self.follow:
            self.scroll_to_highlight()

    def paintEvent(self, event) -> None:
        super().paintEvent(event)
        if not self.highlight_boxes or self.highlight_page != self.pageNavigator().currentPage():
            return
        page = self.page_rect()
        scale = self.screen_scale()
        painter = QPainter(self.viewport())
        painter.translate(page.left() - self.horizontalScrollBar().value(),
                          page.top() - self.verticalScrollBar().value())
        painter.setCompositionMode(QPainter.CompositionMode.CompositionMode_Multiply)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(HIGHLIGHT)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        for box in self.highlight_boxes:
            painter.drawRoundedRect(QRectF(box.topLeft() * scale, box.size() * scale), 2, 2)
        painter.end()


# -- the text view ---------------------------------------------------------------------------
@dataclass(frozen=True)
class _TextDocument:
    text: str
    starts: tuple[int, ...]  # where each page begins in text
    starts16: tuple[int, ...]  # the same, as QTextDocument positions (UTF-16 code units)
    labels: tuple[str, ...]
    numbers: tuple[int, ...]
    exact: tuple[bool, ...]  # the page's text is as the index holds it (no line ends changed)


def _text_document(pages: tuple[Page, ...]) -> _TextDocument:
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
        at16 += _utf16_offset(text, len(text)) + 2
    return _TextDocument("\n\n".join(parts), tuple(starts), tuple(starts16), tuple(labels),
                         tuple(numbers), tuple(exact))


def _file_key(file: Path) -> tuple:
    """What tells a file's versions apart: its real path, change time and size."""
    stat = file.stat()
    return str(file.resolve()), stat.st_mtime_ns, stat.st_size


def _utf16_offset(text: str, index: int) -> int:
    """A Python index of `text` as a QTextDocument position (UTF-16 code units)."""
    head = text[:index]
    return index if head.isascii() else len(head.encode("utf-16-le", "surrogatepass")) // 2


# -- the widget ------------------------------------------------------------------------------
class _TitleLabel(QLabel):
    """A bold one-line title in the application's font, elided in the middle when too long."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.full_text = ""
        self.setTextFormat(Qt.TextFormat.RichText)  # <b>: bold that follows the font size
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.setMinimumWidth(80)

    def set_full_text(self, text: str) -> None:
        self.full_text = text
        self.setAccessibleName(f"Source: {text}")
        self._elide()

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._elide()

    def changeEvent(self, event) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.FontChange:
            self._elide()

    def _elide(self) -> None:
        font = QFont(self.font())
        font.setBold(True)
        shown = QFontMetrics(font).elidedText(self.full_text, Qt.TextElideMode.ElideMiddle,
                                              max(40, self.width()))
        self.setText(f"<b>{html.escape(shown)}</b>")


class SourceView(QWidget):
    """The cited page of a source, with the cited passage highlighted."""

    # path, page (1-based), passage found: once a citation's page is shown, or why it cannot be
    # (the file is gone or unreadable); for text formats after their pages have been read
    sourceShown = Signal(str, int, bool)
    # the PDF zoom the person chose (a factor), or 0.0 for "fit width": to keep it for next time
    zoomChosen = Signal(float)

    def __init__(self, parent: QWidget | None = None, reader: SourceReader | None = None, ocr_source=None):
        super().__init__(parent)
        self.setObjectName("sourceView")
        self.reader = reader if reader is not None else SourceReader(self)
        self.reader.pagesRead.connect(self._on_pages_read)
        self.reader.readFailed.connect(self._on_read_failed)
        self.pdf_opener = PdfOpener(self)
        self.pdf_opener.done.connect(self._on_pdf_opened)
        self._ocr_source = None
        self._ocr_wait: tuple[int, int] | None = None  # ticket, page (1-based) of the boxes asked for
        self._ocr_shown = False  # the highlight (or its absence) is on a scanned page
        self._path = ""
        self._passage = ""
        self._spans: tuple[Span, ...] = ()
        self._ocr_pages: tuple[int, ...] = ()  # the passage's pages that were read by OCR
        self._reading: tuple[int, int, tuple] | None = None  # ticket, page, file key
        self._opening_pdf: tuple[int, int, tuple, Path] | None = None  # ticket, page, file key, file
        self._page = 0  # 1-based; 0 when nothing is shown
        self._mode = "empty"  # empty | opening | pdf | text | missing | error
        self._found = False
        self._highlighted = ""
        self._pdf_key: tuple | None = None
        self._text_doc: _TextDocument | None = None
        self._text_key: tuple | None = None
        self._title_name = ""
        self._programmatic_scroll = False
        self._text_zoom = 0.0  # points added to the application's font size in the text view
        self._pdf_zoom = 0.0  # the PDF zoom kept across pages and documents; 0.0: fit width

        self.title = _TitleLabel(self)
        self.title.setObjectName("sourceTitle")
        self.title.set_full_text("No source open")

        self.previous_button = self._tool_button(
            "Previous page", Qt.ArrowType.LeftArrow, "Ctrl+PgUp", self.previous_page)
        self.next_button = self._tool_button(
            "Next page", Qt.ArrowType.RightArrow, "Ctrl+PgDown", self.next_page)
        self.zoom_out_button = self._tool_button("Zoom out", None, QKeySequence.StandardKey.ZoomOut,
                                                 self.zoom_out, text="−")
        self.zoom_in_button = self._tool_button("Zoom in", None, QKeySequence.StandardKey.ZoomIn,
                                                self.zoom_in, text="+")
        self.fit_button = self._tool_button("Fit width", None, "Ctrl+0", self.fit_width,
                                            text="Fit width")

        self.note = QLabel("")
        self.note.setObjectName("sourceNote")
        self.note.setWordWrap(True)
        self.note.setAccessibleName("Highlight status")

        self.document = QPdfDocument(self)
        self.pdf_view = _PdfPageView(self)
        self.pdf_view.setDocument(self.document)
        self.pdf_view.setAccessibleName("Page of the manual")
        self.pdf_view.pageNavigator().currentPageChanged.connect(self._on_pdf_page_changed)

        self.text_view = QTextBrowser(self)
        self.text_view.setOpenLinks(False)
        self.text_view.setOpenExternalLinks(False)
        self.text_view.setReadOnly(True)
        self.text_view.setAccessibleName("Text of the source")
        self.text_view.setTextInteractionFlags(Qt.TextInteractionFlag.TextBrowserInteraction)
        self.text_view.verticalScrollBar().valueChanged.connect(self._on_text_scrolled)

        self.message = QLabel("Click a citation in an answer to see its source here.")
        self.message.setObjectName("sourceMessage")
        self.message.setWordWrap(True)
        self.message.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse
                                             | Qt.TextInteractionFlag.TextSelectableByKeyboard)
        self.message.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.message.setAccessibleName("Source message")
        self.message.setMargin(24)

        self.stack = QStackedWidget(self)
        for widget in (self.message, self.pdf_view, self.text_view):
            self.stack.addWidget(widget)

        # the title has a row of its own: beside the buttons a narrow pane cut it to "No so… open"
        buttons = QHBoxLayout()
        buttons.setContentsMargins(0, 0, 0, 0)
        buttons.addWidget(self.previous_button)
        buttons.addWidget(self.next_button)
        buttons.addStretch(1)
        for button in (self.zoom_out_button, self.zoom_in_button, self.fit_button):
            buttons.addWidget(button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.setSpacing(4)
        layout.addWidget(self.title)
        layout.addLayout(buttons)
        layout.addWidget(self.note)
        layout.addWidget(self.stack, 1)
        self._show_widget(self.message)
        self._update_controls()
        if ocr_source is not None:
            self.set_ocr_source(ocr_source)

    # -- API ---------------------------------------------------------------------------------
    def set_ocr_source(self, source) -> None:
        """Where the word boxes of scanned pages come from: an IndexController (or anything
        with read_page_ocr(path, page) -> ticket and a pageOcrRead(ticket, PageOcr|None) signal)."""
        self._ocr_source = source
        source.pageOcrRead.connect(self._on_page_ocr)

    def show_citation(self, citation) -> None:
        """Open the cited passage (an engine Citation) at its page, highlighted."""
        self.show_passage(citation.passage)

    def show_passage(self, passage) -> None:
        """Open the passage's document (an engine Passage: path, spans, text) at its page with
        the passage highlighted: at once when its PDF is open already, else once the PDF has
        been opened (or another format's pages read) off the GUI thread. A newer call
        supersedes one still opening."""
        self._stop_reading()
        self._path = str(passage.path)
        self._passage = passage.text or ""
        self._spans = tuple(passage.spans)
        self._ocr_pages = tuple(passage.ocr_pages)
        self._found = False
        self._highlighted = ""
        page = passage.page if passage.spans else 1
        file = Path(self._path)
        self._title_name = file.name
        if not file.is_file():
            self._show_message("missing", page,
                               f"“{file.name}” was moved or deleted; add it again to see this "
                               f"source.\n\n(It was at {file})")
        elif file.suffix.lower() == ".pdf":
            if not self._pdf_is_open(file):
                self._open_pdf(file, page)
                return  # sourceShown follows when it is open
            if self._show_pdf_page(page):
                return  # a scanned page: sourceShown follows when its word boxes arrive
        elif self._open_text(file, page):
            return  # sourceShown follows when the pages arrive
        self._shown()

    def current_page(self) -> int:
        """The page shown, 1-based (0 when nothing is)."""
        return self._page

    def page_count(self) -> int:
        if self._mode == "pdf":
            return self.document.pageCount()
        if self._mode == "text" and self._text_doc is not None:
            return len(self._text_doc.starts)
        return 0

    def highlight_found(self) -> bool:
        """Whether the passage was found on its page and is highlighted."""
        return self._found

    def highlight_on_scan(self) -> bool:
        """Whether the page shown with the passage is a scan, highlighted from its recognised
        words (QtPdf has no text there)."""
        return self._ocr_shown

    def highlight_boxes(self) -> list[QRectF]:
        """The highlight's boxes on the PDF page, in points from its top left (one per line)."""
        return list(self.pdf_view.highlight_boxes) if self._mode == "pdf" else []

    def highlighted_text(self) -> str:
        """The source's own text under the highlight ('' when none); on a scanned page, the
        recognised text of the passage, as the index holds it."""
        return self._highlighted

    def mode(self) -> str:
        """What is shown: "empty", "opening" (a text format's pages are being read), "pdf",
        "text", "missing" (file gone) or "error"."""
        return self._mode

    def source_path(self) -> str:
        return self._path

    def message_text(self) -> str:
        return self.message.text() if self.stack.currentWidget() is self.message else ""

    def title_text(self) -> str:
        return self.title.full_text

    def clear(self) -> None:
        self._stop_reading()
        self._path, self._passage, self._page, self._found, self._highlighted = "", "", 0, False, ""
        self._spans = ()
        self._ocr_pages, self._ocr_shown = (), False
        self._mode = "empty"
        self.pdf_view.highlight_boxes = []
        self.title.set_full_text("No source open")
        self.note.clear()
        self.message.setText("Click a citation in an answer to see its source here.")
        self._show_widget(self.message)
        self._update_controls()

    def next_page(self) -> None:
        self._go_to(self._page + 1)

    def previous_page(self) -> None:
        self._go_to(self._page - 1)

    def zoom_in(self) -> None:
        self._zoom(ZOOM_STEP)

    def zoom_out(self) -> None:
        self._zoom(1 / ZOOM_STEP)

    def set_zoom(self, zoom: float) -> None:
        """The PDF zoom to use from now on (a remembered one): a factor, or 0.0 for fit width."""
        self._pdf_zoom = min(ZOOM_MAX, max(ZOOM_MIN, zoom)) if zoom > 0 else 0.0
        if self._mode == "pdf":
            self._apply_pdf_zoom()
            self.pdf_view.scroll_to_highlight()
        self._update_controls()

    def zoom(self) -> float:
        """The PDF zoom in use: a factor, or 0.0 for fit width."""
        return self._pdf_zoom

    def fit_width(self) -> None:
        if self._mode == "pdf":
            self._pdf_zoom = 0.0
            self._apply_pdf_zoom()
            self.pdf_view.scroll_to_highlight()
            self.zoomChosen.emit(0.0)
        elif self._mode == "text":
            self._text_zoom = 0.0
            self._apply_text_zoom()
        self._update_controls()

    # -- PDF ---------------------------------------------------------------------------------
    def _pdf_is_open(self, file: Path) -> bool:
        return _file_key(file) == self._pdf_key and self.document.status() == QPdfDocument.Status.Ready

    def _open_pdf(self, file: Path, page: int) -> None:
        """Ask the opener for the PDF and say "Opening…" meanwhile (_on_pdf_opened shows it)."""
        self._opening_pdf = (self.pdf_opener.read(file), page, _file_key(file), file)
        self._show_message("opening", page, f"Opening “{file.name}”…")
        self._update_controls()

    def _on_pdf_opened(self, ticket: int, result) -> None:
        if self._opening_pdf is None or self._opening_pdf[0] != ticket:
            return  # superseded: the document, unowned, goes with its last reference
        _, page, key, file = self._opening_pdf
        self._opening_pdf = None
        if isinstance(result, str):
            log.info("%s: %s; showing its text instead", file, result)
            if not self._open_text(file, page):
                self._shown()
            return
        self._adopt_pdf(result, key)
        if not self._show_pdf_page(page):
            self._shown()

    def _adopt_pdf(self, document: QPdfDocument, key: tuple) -> None:
        old, self.document = self.document, document
        document.setParent(self)
        self.pdf_view.setDocument(document)
        self._pdf_key = key
        old.close()
        old.deleteLater()

    def _apply_pdf_zoom(self) -> None:
        self.pdf_view.fit_width = self._pdf_zoom <= 0
        if self.pdf_view.fit_width:
            self.pdf_view.fit_to_width()
        elif abs(self.pdf_view.zoomFactor() - self._pdf_zoom) > 1e-3:
            self.pdf_view.setZoomFactor(self._pdf_zoom)

    def _show_pdf_page(self, page: int) -> bool:
        """Show the page with the passage highlighted. True when it is a scanned page whose
        word boxes have been asked for (the highlight follows in _on_page_ocr)."""
        self._mode = "pdf"
        count = self.document.pageCount()
        page = min(max(1, page), count)
        self._show_widget(self.pdf_view)
        boxes, text = self._pdf_highlight(page - 1, self._passage)
        waiting = not boxes and self._scanned_page(page)
        self.pdf_view.highlight_page = page - 1
        self.pdf_view.highlight_boxes = boxes
        self._found, self._highlighted = bool(boxes), text
        self._ocr_shown = False
        self.pdf_view.scan_text = (-1, QRectF())  # known again once this page's words arrive
        self._page = page
        self.pdf_view.follow = True
        self.pdf_view.pageNavigator().jump(page - 1, QPointF(), self.pdf_view.zoomFactor())
        self._apply_pdf_zoom()
        self.pdf_view.scroll_to_highlight()
        self.pdf_view.viewport().update()
        if waiting:
            self._ocr_wait = (self._ocr_source.read_page_ocr(self._path, page), page)
            self.note.setText("Finding the cited passage on the scanned page…")
        else:
            self._set_note()
        self._set_title()
        return waiting

    def _scanned_page(self, page: int) -> bool:
        """Whether the passage should be marked from the page's recognised words: it has
        characters on the page, and the page was read by OCR (or has no text for QtPdf, as in
        a conversation saved before pages were marked), and there is a store to ask."""
        if self._ocr_source is None or not self._passage.strip():
            return False
        if not any(span.page == page and span.end > span.start for span in self._spans):
            return False
        if page in self._ocr_pages:
            return True
        selection = self.document.getAllText(page - 1)
        return not (selection.isValid() and any(c.isalnum() for c in selection.text()))

    def _on_page_ocr(self, ticket: int, ocr) -> None:
        if self._ocr_wait is None or self._ocr_wait[0] != ticket:
            return  # superseded
        _, page = self._ocr_wait
        self._ocr_wait = None
        if self._mode != "pdf":
            return
        boxes = []
        if isinstance(ocr, PageOcr):
            size = self.document.pagePointSize(page - 1)
            boxes = ocr_boxes(ocr, self._spans, page, size)
            self.pdf_view.scan_text = (page - 1, _words_extent(ocr, size))
            self._apply_pdf_zoom()  # "fit width" fits the printed text of the scan, as on other pages
        self.pdf_view.highlight_page = page - 1
        self.pdf_view.highlight_boxes = boxes
        self._found, self._ocr_shown = bool(boxes), isinstance(ocr, PageOcr)
        self._highlighted = self._passage if boxes else ""
        if self.pdf_view.follow:
            self.pdf_view.scroll_to_highlight()
        self.pdf_view.viewport().update()
        self._set_note()
        self._shown()

    def _pdf_highlight(self, page0: int, passage: str) -> tuple[list[QRectF], str]:
        if not passage.strip():
            return [], ""
        selection = self.document.getAllText(page0)
        page_text = selection.text() if selection.isValid() else ""
        where = self._stored_span(page_text, page0 + 1, passage) or locate_passage(page_text, passage)
        if where is None:
            return [], ""
        start, end = where
        match = self.document.getSelectionAtIndex(page0, start, end - start)
        if not match.isValid():
            return [], ""
        boxes = merge_line_boxes([polygon.boundingRect() for polygon in match.bounds()])
        return boxes, match.text()

    def _stored_span(self, page_text: str, page: int, passage: str) -> tuple[int, int] | None:
        """PDFium's characters of the passage's span on `page`, when they hold its letters."""
        spans = [span for span in self._spans if span.page == page and span.end > span.start]
        if not spans:
            return None
        return span_on_page(page_text, min(s.start for s in spans), max(s.end for s in spans), passage)

    def _on_pdf_page_changed(self, page0: int) -> None:
        if self._mode == "pdf" and page0 + 1 != self._page:
            self._page = page0 + 1
            self._set_title()
            self._update_controls()

    # -- text ----------------------------------------------------------------------------------
    def _open_text(self, file: Path, page: int) -> bool:
        """Show the text at once if it is the one already read; else ask the reader for its
        pages and say "Opening…" meanwhile. True while the pages are on their way."""
        try:
            key = _file_key(file)
        except OSError as error:
            self._show_message("error", page, f"“{file.name}” could not be read: {error}")
            return False
        if key == self._text_key and self._text_doc is not None:
            self._show_text_page(self._text_doc, page)
            return False
        self._reading = (self.reader.read(file), page, key)
        self._show_message("opening", page, f"Opening “{file.name}”…")
        self._update_controls()
        return True

    def _stop_reading(self) -> None:
        self._ocr_wait = None  # boxes still on their way are for the page shown before
        if self._opening_pdf is not None:
            self._opening_pdf = None
            self.pdf_opener.cancel()
        if self._reading is not None:
            self._reading = None
            self.reader.cancel()

    def _on_pages_read(self, ticket: int, parsed) -> None:
        if self._reading is None or self._reading[0] != ticket:
            return  # superseded
        _, page, key = self._reading
        self._reading = None
        document = _text_document(parsed.pages)
        self.text_view.setPlainText(document.text)
        self._set_cell_stops()
        self._text_doc, self._text_key = document, key
        self._show_text_page(document, page)
        self._shown()

    def _on_read_failed(self, ticket: int, message: str) -> None:
        if self._reading is None or self._reading[0] != ticket:
            return
        _, page, _ = self._reading
        self._reading = None
        self._show_message("error", page, message)
        self._shown()

    def _show_text_page(self, document: _TextDocument, page: int) -> None:
        self._mode = "text"
        self._show_widget(self.text_view)
        count = len(document.starts)
        index = self._page_index(document, page)
        self._page = document.numbers[index] if count else 1
        where = None
        if self._passage.strip() and count:
            where = self._span_range(document) or self._located(document, index)
        self._highlight_text(document, where, index)
        self._set_note()
        self._set_title()

    def _span_range(self, document: _TextDocument) -> tuple[int, int] | None:
        """The passage's characters in the document, from its stored spans, when they still
        fit the file (None for empty spans, as saved before spans were kept)."""
        starts, ends = [], []
        for span in self._spans:
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
        return where if same_letters(document.text[where[0]:where[1]], self._passage) else None

    def _located(self, document: _TextDocument, index: int) -> tuple[int, int] | None:
        """The passage found by its text: on its page and the next (it may run on across the
        break), else anywhere."""
        start = document.starts[index]
        count = len(document.starts)
        end = document.starts[index + 2] if index + 2 < count else len(document.text)
        where = locate_passage(document.text, self._passage, start, end)
        return where if where is not None else locate_passage(document.text, self._passage)

    @staticmethod
    def _page_index(document: _TextDocument, page: int) -> int:
        if not document.numbers:
            return 0
        if page in document.numbers:
            return document.numbers.index(page)
        return min(max(0, page - 1), len(document.numbers) - 1)

    def _highlight_text(self, document: _TextDocument, where: tuple[int, int] | None,
                        index: int) -> None:
        text = document.text
        cursor = QTextCursor(self.text_view.document())
        selections = []
        if where is not None:
            start, end = where
            cursor.setPosition(_utf16_offset(text, start))
            cursor.setPosition(_utf16_offset(text, end), QTextCursor.MoveMode.KeepAnchor)
            marker = QTextEdit.ExtraSelection()
            marker.cursor = QTextCursor(cursor)
            char_format = QTextCharFormat()
            char_format.setBackground(HIGHLIGHT_TEXT_BACKGROUND)
            char_format.setForeground(HIGHLIGHT_TEXT_FOREGROUND)
            marker.format = char_format
            selections.append(marker)
            self._found = True
            self._highlighted = text[start:end]
            self._page = document.numbers[self._index_at(document.starts, start)]
        else:
            cursor.setPosition(document.starts16[index] if document.starts16 else 0)
        self.text_view.setExtraSelections(selections)
        with self._quiet_scrolling():
            self.text_view.setTextCursor(cursor)  # scrolls it into view, anywhere
        # the start of the passage (or page) a little below the top, rather than at the bottom
        self._scroll_text_to(cursor.selectionStart(), self.text_view.viewport().height() // 5)

    def _scroll_text_to(self, position: int, below_top: int) -> None:
        """Scroll so that `position` is `below_top` pixels under the top of the view."""
        cursor = QTextCursor(self.text_view.document())
        cursor.setPosition(position)
        bar = self.text_view.verticalScrollBar()
        with self._quiet_scrolling():
            bar.setValue(bar.value() + self.text_view.cursorRect(cursor).top() - below_top)

    @contextmanager
    def _quiet_scrolling(self):
        """Our own scrolling: the page shown is the one we chose, not the one at the top."""
        self._programmatic_scroll = True
        try:
            yield
        finally:
            self._programmatic_scroll = False

    @staticmethod
    def _index_at(starts: tuple[int, ...], position: int) -> int:
        """The index of the page that `position` lies on, given the pages' starts."""
        return max(0, bisect_right(starts, position) - 1)

    def _on_text_scrolled(self) -> None:
        if self._mode != "text" or self._text_doc is None or self._programmatic_scroll:
            return
        if not self._text_doc.numbers:
            return
        viewport = self.text_view.viewport()
        probe = viewport.rect().topLeft() + QPoint(0, viewport.height() // 4)
        position = self.text_view.cursorForPosition(probe).position()
        index = self._index_at(self._text_doc.starts16, position)
        number = self._text_doc.numbers[index]
        if number != self._page:
            self._page = number
            self._set_title()
            self._update_controls()

    # -- shared ------------------------------------------------------------------------------
    def _go_to(self, page: int) -> None:
        if self._mode == "pdf":
            if 1 <= page <= self.document.pageCount():
                self._page = page
                self.pdf_view.pageNavigator().jump(page - 1, QPointF(), self.pdf_view.zoomFactor())
                if page - 1 == self.pdf_view.highlight_page:
                    self.pdf_view.scroll_to_highlight()
                self._set_title()
        elif self._mode == "text" and self._text_doc is not None:
            numbers = self._text_doc.numbers
            if page in numbers:
                self._page = page
                start = self._text_doc.starts[numbers.index(page)]
                cursor = QTextCursor(self.text_view.document())
                cursor.setPosition(_utf16_offset(self._text_doc.text, start))
                with self._quiet_scrolling():
                    self.text_view.setTextCursor(cursor)
                self._scroll_text_to(cursor.position(), 0)
                self._set_title()
        self._update_controls()

    def _zoom(self, factor: float) -> None:
        if self._mode == "pdf":
            self._pdf_zoom = min(ZOOM_MAX, max(ZOOM_MIN, self.pdf_view.zoomFactor() * factor))
            self._apply_pdf_zoom()
            self.pdf_view.scroll_to_highlight()
            self.zoomChosen.emit(self._pdf_zoom)
        elif self._mode == "text":
            base = self.font().pointSizeF()
            step = 2.0 if factor > 1 else -2.0
            size = min(base * ZOOM_MAX, max(6.0, base + self._text_zoom + step))
            self._text_zoom = size - base
            self._apply_text_zoom()
        self._update_controls()

    def _apply_text_zoom(self) -> None:
        """The text view's font: the application's plus the zoom, so that it follows a change
        of font size in the settings (QTextEdit.zoomIn would pin it)."""
        font = QFont(self.font())
        font.setPointSizeF(self.font().pointSizeF() + self._text_zoom)
        self.text_view.setFont(font)
        self._set_cell_stops()

    def _set_cell_stops(self) -> None:
        """Tab stops past the widest table cell shown (a tab sets cells apart, as ingestion reads
        tables), so that "Base plate<tab>M16" never runs together; capped for a long cell."""
        metrics = self.text_view.fontMetrics()
        cells = [cell for line in self.text_view.toPlainText().splitlines() if "\t" in line
                 for cell in line.split("\t")[:-1]]
        widest = max((metrics.horizontalAdvance(cell[:MAX_CELL_CHARS]) for cell in cells), default=0)
        self.text_view.setTabStopDistance(max(widest, metrics.horizontalAdvance("x" * 8)) +
                                          metrics.horizontalAdvance("   "))

    def changeEvent(self, event) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.FontChange:
            self._apply_text_zoom()

    def _show_widget(self, widget: QWidget) -> None:
        """Show the page, the text or the message; focusing the view focuses it (Ctrl+4)."""
        self.stack.setCurrentWidget(widget)
        self.setFocusProxy(widget)

    def _shown(self) -> None:
        self._update_controls()
        self.sourceShown.emit(self._path, self._page, self._found)

    def _show_message(self, mode: str, page: int, message: str) -> None:
        self._mode = mode
        self._page = max(1, page)
        self.message.setText(message)
        self._show_widget(self.message)
        self.note.clear()
        self._set_title()

    def _set_title(self) -> None:
        label = ""
        if self._mode == "text" and self._text_doc is not None and self._text_doc.numbers:
            index = self._page_index(self._text_doc, self._page)
            label = self._text_doc.labels[index]
        printed = self._printed_label() if self._mode == "pdf" else ""
        where = pages_text((self._page,), (printed or str(self._page),))
        if label and label != self._title_name:
            where += f" ({label})"
        self.title.set_full_text(f"{self._title_name} — {where}")
        self.title.setToolTip(self._path)

    def _printed_label(self) -> str:
        """The shown PDF page's printed label (as the citations name it), "" when it is just
        its number. QtPdf reads the same /PageLabels tree as the indexer, for any page."""
        label = " ".join(self.document.pageLabel(self._page - 1).split())
        return label if label and label != str(self._page) else ""

    def _set_note(self) -> None:
        scan = f" {OCR_NOTE}" if self._ocr_shown else ""
        if not self._passage.strip():
            self.note.setText("")
        elif self._found:
            self.note.setText(f"The cited passage is highlighted.{scan}")
        else:
            self.note.setText("The cited passage could not be located in this page's text; "
                              f"it should be on this page.{scan}")

    def _update_controls(self) -> None:
        paged = self._mode in ("pdf", "text")
        count = self.page_count()
        if self._mode == "text" and self._text_doc is not None and self._text_doc.numbers:
            numbers = self._text_doc.numbers
            first, last = numbers[0], numbers[-1]
        else:
            first, last = 1, count
        self.previous_button.setEnabled(paged and self._page > first)
        self.next_button.setEnabled(paged and self._page < last)
        self.zoom_in_button.setEnabled(paged)
        self.zoom_out_button.setEnabled(paged)
        self.fit_button.setEnabled(paged)

    def _tool_button(self, name: str, arrow: Qt.ArrowType | None, shortcut, slot,
                     text: str | None = None) -> QToolButton:
        button = QToolButton(self)
        sequence = QKeySequence(shortcut)
        if arrow is not None:
            button.setArrowType(arrow)  # drawn in the palette's colours: visible on both themes
        button.setText(text or name)
        button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon if arrow is not None
                                  else Qt.ToolButtonStyle.ToolButtonTextOnly)
        button.setAccessibleName(name)
        shown = sequence.toString(QKeySequence.SequenceFormat.NativeText)
        button.setToolTip(f"{name} ({shown})" if shown else name)
        button.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        button.clicked.connect(slot)
        action = QShortcut(sequence, self)
        action.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        action.activated.connect(slot)
        return button

