"""The source view: the cited page of a manual, with the cited passage highlighted.

    view = SourceView()
    view.show_citation(citation)   # or show_passage(passage): its path, page, spans and text
    view.sourceShown               # (path, page, found) once the page is shown, or why not
    view.current_page()        # 1-based, as the citation and a PDF viewer count
    view.highlight_found()     # True when the passage was found on the page and is highlighted

SourceView is the coordinator: the title, the page and zoom buttons, the stack that shows one
of a PDF page (pdf_page.PdfPageView), a text page (text_page.TextPage) or a message, and which
of them shows a citation. PDFs are rendered by QtPdf (QPdfDocument + QPdfView, one page at a
time), the passage marked from PDFium's characters (see pdf_page). A PDF is opened by a
PdfOpener (a damaged file repaired off the GUI thread first: QtPdf would read it whole),
"Opening…" meanwhile.
Other formats (and PDFs that QtPdf cannot open) are shown as text (see text_page): their pages
are read by a SourceReader (a parse pool child, within its time and memory limits, off the GUI
thread; "Opening…" meanwhile). The view itself never parses a document.

On a scanned page (read by OCR when it was indexed) the passage is marked from the recognised
words' boxes the index keeps. They are read from the store off the GUI thread by `ocr_source`
(the window's IndexController: read_page_ocr(path, page) -> ticket, then pageOcrRead(ticket,
PageOcr|None)); sourceShown follows once they have arrived.
"""

from __future__ import annotations

import html
import logging
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import QEvent, QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QFont, QFontMetrics, QKeySequence, QShortcut
from PySide6.QtPdf import QPdfDocument
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QStackedWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from desktop_app.controllers.sources import DocumentFetcher, PdfOpener, SourceReader
from desktop_app.sources.pdf_page import ZOOM_MAX, ZOOM_MIN, PdfPageView
from desktop_app.sources.text_page import TextPage, page_index, text_document
from engine.types import PageOcr, Span, pages_text

log = logging.getLogger(__name__)

ZOOM_STEP = 1.25
OCR_NOTE = "This page is a scan: its text was recognised (OCR), so check the page itself."


def _file_key(file: Path) -> tuple:
    """What tells a file's versions apart: its real path, change time and size."""
    stat = file.stat()
    return str(file.resolve()), stat.st_mtime_ns, stat.st_size



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
        self._fetcher: DocumentFetcher | None = None  # a thin kiosk's (fetch_documents_from)
        self._fetching: tuple[int, object] | None = None  # ticket, the passage being fetched
        self._page = 0  # 1-based; 0 when nothing is shown
        self._mode = "empty"  # empty | opening | pdf | text | missing | error
        self._found = False
        self._highlighted = ""
        self._pdf_key: tuple | None = None
        self._title_name = ""
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
        self.pdf_view = PdfPageView(self)
        self.pdf_view.setDocument(self.document)
        self.pdf_view.setAccessibleName("Page of the manual")
        self.pdf_view.pageNavigator().currentPageChanged.connect(self._on_pdf_page_changed)

        self.text_view = TextPage(self)
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

    def fetch_documents_from(self, server, folder: Path) -> None:
        """On a thin kiosk: a cited document that is not on this machine is fetched from the
        central server (an engine.answer.central.CentralServer) and kept in `folder`; None: it
        is shown as missing."""
        if self._fetcher is not None:
            self._fetching = None
            self._fetcher.shutdown()
            self._fetcher.deleteLater()
            self._fetcher.server.close()
        self._fetcher = DocumentFetcher(server, folder, self) if server is not None else None
        if self._fetcher is not None:
            self._fetcher.done.connect(self._on_fetched)

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
        if self._fetcher is not None and self._fetcher.server.holds(passage):
            self._fetching = (self._fetcher.read(passage), passage)
            self._show_message("opening", page, f"Fetching “{file.name}” from the server…")
            self._update_controls()
            return  # sourceShown follows when it is here
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
        if self._mode == "text" and self.text_view.text_doc is not None:
            return len(self.text_view.text_doc.starts)
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
            self.pdf_view.apply_zoom(self._pdf_zoom)
            self.pdf_view.scroll_to_highlight()
        self._update_controls()

    def zoom(self) -> float:
        """The PDF zoom in use: a factor, or 0.0 for fit width."""
        return self._pdf_zoom

    def fit_width(self) -> None:
        if self._mode == "pdf":
            self._pdf_zoom = 0.0
            self.pdf_view.apply_zoom(self._pdf_zoom)
            self.pdf_view.scroll_to_highlight()
            self.zoomChosen.emit(0.0)
        elif self._mode == "text":
            self.text_view.zoom_points = 0.0
            self.text_view.apply_zoom(self.font())
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

    def _show_pdf_page(self, page: int) -> bool:
        """Show the page with the passage highlighted. True when it is a scanned page whose
        word boxes have been asked for (the highlight follows in _on_page_ocr)."""
        self._mode = "pdf"
        count = self.document.pageCount()
        page = min(max(1, page), count)
        self._show_widget(self.pdf_view)
        boxes, text = self.pdf_view.find_passage(page - 1, self._passage, self._spans)
        waiting = not boxes and self._scanned_page(page)
        self._found, self._highlighted = bool(boxes), text
        self._ocr_shown = False
        self._page = page
        self.pdf_view.show_page(page - 1, boxes, self._pdf_zoom)
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
        return not self.pdf_view.has_text(page - 1)

    def _on_page_ocr(self, ticket: int, ocr) -> None:
        if self._ocr_wait is None or self._ocr_wait[0] != ticket:
            return  # superseded
        _, page = self._ocr_wait
        self._ocr_wait = None
        if self._mode != "pdf":
            return
        boxes = self.pdf_view.mark_scan(page - 1, ocr, self._spans, self._pdf_zoom)
        self._found, self._ocr_shown = bool(boxes), isinstance(ocr, PageOcr)
        self._highlighted = self._passage if boxes else ""
        self._set_note()
        self._shown()

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
        if key == self.text_view.text_key and self.text_view.text_doc is not None:
            self._show_text_page(page)
            return False
        self._reading = (self.reader.read(file), page, key)
        self._show_message("opening", page, f"Opening “{file.name}”…")
        self._update_controls()
        return True

    def _on_fetched(self, ticket: int, result) -> None:
        if self._fetching is None or self._fetching[0] != ticket:
            return  # superseded
        passage, self._fetching = self._fetching[1], None
        if isinstance(result, str):
            self._show_message("error", passage.page, result)
            self._shown()
            return
        self.show_passage(replace(passage, path=str(result)))

    def _stop_reading(self) -> None:
        self._ocr_wait = None  # boxes still on their way are for the page shown before
        if self._fetching is not None:
            self._fetching = None
            self._fetcher.cancel()
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
        self.text_view.set_text(text_document(parsed.pages), key)
        self._show_text_page(page)
        self._shown()

    def _on_read_failed(self, ticket: int, message: str) -> None:
        if self._reading is None or self._reading[0] != ticket:
            return
        _, page, _ = self._reading
        self._reading = None
        self._show_message("error", page, message)
        self._shown()

    def _show_text_page(self, page: int) -> None:
        self._mode = "text"
        self._show_widget(self.text_view)
        document = self.text_view.text_doc
        count = len(document.starts)
        index = page_index(document, page)
        self._page = document.numbers[index] if count else 1
        where = None
        if self._passage.strip() and count:
            where = self.text_view.find(index, self._passage, self._spans)
        marked = self.text_view.mark(where, index)
        if marked is not None:
            self._found = True
            self._highlighted, self._page = marked
        self._set_note()
        self._set_title()

    def _on_text_scrolled(self) -> None:
        text_doc = self.text_view.text_doc
        if self._mode != "text" or text_doc is None or self.text_view.programmatic_scroll:
            return
        if not text_doc.numbers:
            return
        number = self.text_view.page_at_top()
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
        elif self._mode == "text" and self.text_view.go_to(page):
            self._page = page
            self._set_title()
        self._update_controls()

    def _zoom(self, factor: float) -> None:
        if self._mode == "pdf":
            self._pdf_zoom = min(ZOOM_MAX, max(ZOOM_MIN, self.pdf_view.zoomFactor() * factor))
            self.pdf_view.apply_zoom(self._pdf_zoom)
            self.pdf_view.scroll_to_highlight()
            self.zoomChosen.emit(self._pdf_zoom)
        elif self._mode == "text":
            base = self.font().pointSizeF()
            step = 2.0 if factor > 1 else -2.0
            size = min(base * ZOOM_MAX, max(6.0, base + self.text_view.zoom_points + step))
            self.text_view.zoom_points = size - base
            self.text_view.apply_zoom(self.font())
        self._update_controls()

    def changeEvent(self, event) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.FontChange:
            self.text_view.apply_zoom(self.font())

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
        text_doc = self.text_view.text_doc
        if self._mode == "text" and text_doc is not None and text_doc.numbers:
            label = text_doc.labels[page_index(text_doc, self._page)]
        printed = self.pdf_view.printed_label(self._page) if self._mode == "pdf" else ""
        where = pages_text((self._page,), (printed or str(self._page),))
        if label and label != self._title_name:
            where += f" ({label})"
        self.title.set_full_text(f"{self._title_name} — {where}")
        self.title.setToolTip(self._path)

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
        text_doc = self.text_view.text_doc
        if self._mode == "text" and text_doc is not None and text_doc.numbers:
            numbers = text_doc.numbers
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

