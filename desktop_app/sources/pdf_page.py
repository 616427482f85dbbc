"""The PDF page of the source view: one page at a time, rendered by QtPdf, with the cited
passage marked over it.

    page = PdfPageView(parent)                  # a QPdfView: setDocument(document) as usual
    boxes, text = page.find_passage(page0, passage, spans)   # the passage's boxes on the page
    page.show_page(page0, boxes, zoom)          # that page, marked, zoomed, the marker in view
    boxes = page.mark_scan(page0, ocr, spans, zoom)          # a scanned page: its words' boxes

The index holds the page's text as PDFium reads it, cleaned (engine.ingest.pdf_text); QtPdf
holds PDFium's raw text of the same page. `span_on_page` cleans it the same way and maps the
passage's stored span back to PDFium's characters, checked letter for letter, and those
characters' boxes (QPdfDocument.getSelectionAtIndex) are painted over the page as a marker
would: exactly the quoted words. Where the span does not fit (a collection indexed before, with
pypdf's text; a saved conversation), the passage is found by its letters and digits
(`locate_passage`).

A scanned page (read by OCR when it was indexed) has no text for QtPdf to find: there the
passage's spans (characters of the recognised text the index holds) pick the recognised words
they overlap, whose boxes the index keeps (PageOcr.words), and those are painted, one box per
line (`ocr_boxes`). Nothing is recognised again to show a page.
"""

from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, QSizeF, Qt, Signal
from PySide6.QtGui import QColor, QGuiApplication, QPainter
from PySide6.QtPdf import QPdfDocument
from PySide6.QtPdfWidgets import QPdfView
from PySide6.QtWidgets import QAbstractSlider, QWidget

from engine.ingest.locate import locate_passage, span_on_page
from engine.types import PageOcr, Span

ZOOM_MIN, ZOOM_MAX = 0.25, 6.0
FIT_WIDTH_MAX = 2.5  # a very wide window should not blow a page up to poster size
FIT_MARGIN_PT = 12.0  # paper kept either side of the printed text when fitting its width
FIT_TEXT_MIN = 0.6  # fit at least this share of the paper's width (a page with one short line)
HIGHLIGHT = QColor(255, 226, 64, 150)  # marker yellow; multiplied onto the page, text stays black


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


def words_extent(ocr: PageOcr, page_size: QSizeF) -> QRectF:
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



class PdfPageView(QPdfView):
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


    # -- the passage on the page (moved here from SourceView) -------------------------------
    def apply_zoom(self, zoom: float) -> None:
        """The zoom to use: a factor, or 0.0 for "fit width" (which then follows the width)."""
        self.fit_width = zoom <= 0
        if self.fit_width:
            self.fit_to_width()
        elif abs(self.zoomFactor() - zoom) > 1e-3:
            self.setZoomFactor(zoom)

    def show_page(self, page0: int, boxes: list[QRectF], zoom: float) -> None:
        """Go to `page0` (0-based) with `boxes` marked on it, at `zoom`, the marker in view."""
        self.highlight_page = page0
        self.highlight_boxes = boxes
        self.scan_text = (-1, QRectF())  # known again once this page's words arrive
        self.follow = True
        self.pageNavigator().jump(page0, QPointF(), self.zoomFactor())
        self.apply_zoom(zoom)
        self.scroll_to_highlight()
        self.viewport().update()

    def mark_scan(self, page0: int, ocr, spans: tuple[Span, ...], zoom: float) -> list[QRectF]:
        """Mark the passage on a scanned page from its recognised words (`ocr`: a PageOcr, or
        None when the store has none): the boxes marked."""
        boxes = []
        if isinstance(ocr, PageOcr):
            size = self.document().pagePointSize(page0)
            boxes = ocr_boxes(ocr, spans, page0 + 1, size)
            self.scan_text = (page0, words_extent(ocr, size))
            self.apply_zoom(zoom)  # "fit width" fits the printed text of the scan, as on other pages
        self.highlight_page = page0
        self.highlight_boxes = boxes
        if self.follow:
            self.scroll_to_highlight()
        self.viewport().update()
        return boxes

    def has_text(self, page0: int) -> bool:
        """Whether QtPdf finds letters or digits on the page (a scan has none)."""
        selection = self.document().getAllText(page0)
        return selection.isValid() and any(c.isalnum() for c in selection.text())

    def find_passage(self, page0: int, passage: str, spans: tuple[Span, ...]) -> tuple[list[QRectF], str]:
        """The passage's boxes on the page (one per line) and PDFium's text under them."""
        if not passage.strip():
            return [], ""
        document = self.document()
        selection = document.getAllText(page0)
        page_text = selection.text() if selection.isValid() else ""
        where = stored_span(page_text, page0 + 1, passage, spans) or locate_passage(page_text, passage)
        if where is None:
            return [], ""
        start, end = where
        match = document.getSelectionAtIndex(page0, start, end - start)
        if not match.isValid():
            return [], ""
        boxes = merge_line_boxes([polygon.boundingRect() for polygon in match.bounds()])
        return boxes, match.text()

    def printed_label(self, page: int) -> str:
        """The PDF page's printed label (as the citations name it), "" when it is just its
        number. QtPdf reads the same /PageLabels tree as the indexer, for any page."""
        label = " ".join(self.document().pageLabel(page - 1).split())
        return label if label and label != str(page) else ""


def stored_span(page_text: str, page: int, passage: str, spans: tuple[Span, ...]) -> tuple[int, int] | None:
    """PDFium's characters of the passage's span on `page`, when they hold its letters."""
    spans = [span for span in spans if span.page == page and span.end > span.start]
    if not spans:
        return None
    return span_on_page(page_text, min(s.start for s in spans), max(s.end for s in spans), passage)
