"""The documents panel: what is indexed, what is being indexed, and the buttons to change it.

It only shows what IndexController reports and forwards what the user asks; it never touches
the store. Texts use the application font (the font-size setting scales them), widths come
from font metrics, never from pixel constants.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QEvent, QItemSelectionModel, QObject, QRect, QSize, Qt, QTimer
from PySide6.QtGui import QFont, QFontMetrics, QKeySequence, QPainter, QPalette
from PySide6.QtWidgets import (
    QAbstractItemView,
    QApplication,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QProgressBar,
    QPushButton,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from desktop_app.controllers.indexing import IndexController
from desktop_app.panels.models import model_files
from engine.types import IndexProgress, StoredDocument

FILE_FILTERS = ";;".join([
    "Documents (*.pdf *.txt *.md *.markdown *.html *.htm *.docx)",
    "PDF (*.pdf)",
    "Text (*.txt)",
    "Markdown (*.md *.markdown)",
    "HTML (*.html *.htm)",
    "Word documents (*.docx)",
    "All files (*)",
])
PATH_ROLE = Qt.ItemDataRole.UserRole
ID_ROLE = Qt.ItemDataRole.UserRole + 1
OCR_ROLE = Qt.ItemDataRole.UserRole + 2  # pages read by OCR (0: none): the state shows an "OCR" badge
OCR_BADGE = "OCR"
_PROGRESS_STEPS = 1000
SLOW_DOCUMENT_S = 5  # a document read or embedded this long is named, with its time so far
_SLOW_TICK_MS = 1000  # how often that time is redrawn
_EMPTY_HINT = "No documents yet. Drop manuals or folders on the window, or choose “Add documents…”."


def plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def state_text(document: StoredDocument) -> str:
    """The state column: "queued", "indexing 12/85 pages", "ready · 85 pages", "failed: why"."""
    status, pages = document.status, document.page_count or 0
    if status == "queued":
        return "queued"
    if status == "indexing":
        done = document.pages_done
        return f"indexing {done}/{pages} pages" if done is not None and pages else "indexing…"
    if status == "ready":
        return f"ready · {plural(pages, 'page')}"
    if status == "ready_with_warnings":
        return f"ready with warnings · {plural(pages, 'page')}"
    if status == "failed":
        return f"failed: {document.error or 'unknown reason'}"
    return status


def ocr_text(document: StoredDocument) -> str:
    """'12 pages recognised from images (OCR), confidence 97%' for a document with scanned
    pages, else ''."""
    count = document.ocr_pages or 0
    if count <= 0:
        return ""
    verb = "page was" if count == 1 else "pages were"
    text = f"{count} {verb} scanned images: their text was recognised (OCR)"
    if document.ocr_confidence is not None:
        text += f", confidence {round(100 * document.ocr_confidence)}%"
    return text + ". Check figures against the page itself."


def tooltip_text(document: StoredDocument) -> str:
    lines = [document.path, state_text(document) if document.status != "failed" else "failed"]
    if document.error and document.status in ("failed", "ready_with_warnings"):
        lines.append(document.error)
    if document.status in ("ready", "ready_with_warnings"):
        lines.append(plural(document.chunk_count or 0, "passage") + " indexed")
    if ocr := ocr_text(document):
        lines.append(ocr)
    return "\n".join(lines)


def duration_text(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


def slow_document_text(path: str, seconds: float) -> str:
    """'Indexing big.pdf — 40 s' once one document has taken SLOW_DOCUMENT_S, else ''."""
    if seconds < SLOW_DOCUMENT_S:
        return ""
    return f"Indexing {Path(path).name} — {duration_text(seconds)}"


def progress_text(event: IndexProgress, fraction: float | None = None) -> str:
    """'3/10 documents · 5.2 pages/s · ETA 40 s' (rate and ETA once they are known). With the
    run's `fraction` done (pages of the current document counted), the ETA follows it."""
    parts = [f"{event.documents_done}/{event.documents_total} documents"]
    if event.stage == "recognising" and event.document_pages > 0:
        page = min(event.document_pages_done + 1, event.document_pages)  # the page being read
        parts.append(f"recognising text, page {page} of {event.document_pages}")
    if event.pages_done > 0:
        parts.append(f"{event.pages_per_s:.1f} pages/s")
    eta = event.eta_s
    if fraction is not None and 0 < fraction < 1 and event.elapsed_s > 0:
        eta = event.elapsed_s * (1 - fraction) / fraction
    if eta is not None and event.documents_done < event.documents_total:
        parts.append(f"ETA {duration_text(eta)}")
    return " · ".join(parts)


class DocumentsPanel(QWidget):
    """Documents with their state, overall progress, and Add / Add folder / Re-index / Remove /
    Cancel. Files and folders dropped on it are added too."""

    def __init__(self, controller: IndexController, parent: QWidget | None = None):
        super().__init__(parent)
        self._controller = controller
        self._documents: list[StoredDocument] = []
        self._shown: list[StoredDocument] = []  # what the rows show, in their order
        self._stats = controller.stats
        self._last_folder = str(Path.home())
        self._progress = ""  # the run's last progress line, without the slow document's
        # Nothing arrives from the engine while one document is parsed: a timer redraws its time.
        self.slow_timer = QTimer(self, interval=_SLOW_TICK_MS)
        self.slow_timer.timeout.connect(self._show_run_state)
        self.setAcceptDrops(True)
        self.setAccessibleName("Documents panel")
        self._build()
        self._connect()
        self._show_documents(controller.documents())
        self._show_busy(controller.busy)

    # -- building ----------------------------------------------------------------------------

    def _build(self) -> None:
        self.list = QTreeWidget(self)
        self.list.setColumnCount(2)
        self.list.setHeaderLabels(["Document", "State"])
        self.list.setRootIsDecorated(False)
        self.list.setUniformRowHeights(True)
        self.list.setAllColumnsShowFocus(True)
        self.list.setAlternatingRowColors(True)
        self.list.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.list.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.list.header().setSectionResizeMode(0, QHeaderView.ResizeMode.Interactive)
        self.list.header().setStretchLastSection(True)
        self.list.setAccessibleName("Documents")
        self.list.setAccessibleDescription("Indexed documents and their state. "
                                           "Delete removes the selected ones from the index.")
        self.list.installEventFilter(self)
        self.list.setItemDelegateForColumn(1, BadgeDelegate(self.list))

        self.progress_bar = QProgressBar(self)
        self.progress_bar.setRange(0, _PROGRESS_STEPS)
        self.progress_bar.setAccessibleName("Indexing progress")
        self.progress_label = QLabel(self)
        self.progress_label.setWordWrap(True)
        self.progress_label.setAccessibleName("Indexing status")
        self.progress_label.setTextFormat(Qt.TextFormat.PlainText)

        self.add_button = self._button("Add documents…", "Add documents",
                                       "Choose PDF, text, Markdown, HTML or Word files to index")
        self.add_folder_button = self._button("Add folder…", "Add folder",
                                              "Choose a folder: every supported document in it is indexed")
        self.reindex_button = self._button("Re-index", "Re-index selected documents",
                                           "Read the selected documents again from their files")
        self.remove_button = self._button("Remove", "Remove selected documents",
                                          "Remove the selected documents from the index (the files stay)")
        self.cancel_button = self._button("Cancel", "Cancel indexing",
                                          "Stop indexing; what is done so far stays indexed")
        style = self.style()
        self.add_button.setIcon(style.standardIcon(QStyle.StandardPixmap.SP_FileIcon))
        self.add_folder_button.setIcon(style.standardIcon(QStyle.StandardPixmap.SP_DirIcon))

        adding = QHBoxLayout()
        adding.addWidget(self.add_button)
        adding.addWidget(self.add_folder_button)
        adding.addStretch(1)
        changing = QHBoxLayout()
        changing.addWidget(self.reindex_button)
        changing.addWidget(self.remove_button)
        changing.addStretch(1)
        changing.addWidget(self.cancel_button)
        layout = QVBoxLayout(self)
        layout.addLayout(adding)
        layout.addWidget(self.list, 1)
        layout.addWidget(self.progress_bar)
        layout.addWidget(self.progress_label)
        layout.addLayout(changing)

        order = [self.add_button, self.add_folder_button, self.list, self.reindex_button, self.remove_button,
                 self.cancel_button]
        for first, second in zip(order, order[1:]):
            QWidget.setTabOrder(first, second)
        self._size_columns()

    def _button(self, text: str, accessible_name: str, tip: str) -> QPushButton:
        button = QPushButton(text, self)
        button.setAccessibleName(accessible_name)
        button.setToolTip(tip)
        button.setAutoDefault(False)
        return button

    def _connect(self) -> None:
        c = self._controller
        c.documentsChanged.connect(self._show_documents)
        c.progressed.connect(self._show_progress)
        c.busyChanged.connect(self._show_busy)
        c.statsChanged.connect(self._show_stats)
        self.list.itemSelectionChanged.connect(self._update_buttons)
        self.add_button.clicked.connect(self.choose_files)
        self.add_folder_button.clicked.connect(self.choose_folder)
        self.reindex_button.clicked.connect(self.reindex_selected)
        self.remove_button.clicked.connect(self.remove_selected)
        self.cancel_button.clicked.connect(c.cancel)

    # -- actions -----------------------------------------------------------------------------

    def choose_files(self) -> None:
        files, _ = QFileDialog.getOpenFileNames(self, "Add documents", self._last_folder, FILE_FILTERS)
        if files:
            self._last_folder = str(Path(files[0]).parent)
            self._controller.add_paths(files)

    def choose_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Add a folder of documents", self._last_folder)
        if folder:
            self._last_folder = folder
            self._controller.add_paths([folder])

    def selected_documents(self) -> list[StoredDocument]:
        by_path = {d.path: d for d in self._documents}
        paths = [item.data(0, PATH_ROLE) for item in self.list.selectedItems()]
        return [by_path[p] for p in paths if p in by_path]

    def remove_selected(self) -> None:
        for document in self.selected_documents():
            self._controller.remove_path(document.path)

    def reindex_selected(self) -> None:
        for document in self.selected_documents():
            if document.id is not None and document.status not in ("queued", "indexing"):
                self._controller.reindex(document.id)

    # -- what the controller reports -------------------------------------------------------

    def _show_documents(self, documents: list) -> None:
        self._documents = documents
        paths = [d.path for d in documents]
        items = [self.list.topLevelItem(i) for i in range(self.list.topLevelItemCount())]
        if [item.data(0, PATH_ROLE) for item in items] == paths:
            for item, document, before in zip(items, documents, self._shown):
                if document != before:  # a long list stays cheap: only changed rows are redrawn
                    _fill(item, document)
        else:
            self._rebuild(documents)
        self._shown = list(documents)
        self._update_buttons()
        if not self._controller.busy:
            self.progress_label.setText(self._summary())

    def _rebuild(self, documents: list[StoredDocument]) -> None:
        current = self.list.currentItem()
        current_path = current.data(0, PATH_ROLE) if current else None
        current_row = self.list.indexOfTopLevelItem(current) if current else -1
        selected = {item.data(0, PATH_ROLE) for item in self.list.selectedItems()}
        self.list.blockSignals(True)
        try:
            self.list.clear()
            items = []
            for document in documents:
                item = QTreeWidgetItem()
                _fill(item, document)
                items.append(item)
            self.list.addTopLevelItems(items)
            for item in items:
                item.setSelected(item.data(0, PATH_ROLE) in selected)
            restored = next((i for i in items if i.data(0, PATH_ROLE) == current_path), None)
            if restored is None and current_row >= 0 and items:  # it went: the one in its place
                restored = items[min(current_row, len(items) - 1)]
            if restored is not None:
                kept = any(item.isSelected() for item in items)
                flag = QItemSelectionModel.SelectionFlag  # removed with the keyboard: select the next
                self.list.setCurrentItem(restored, 0, flag.NoUpdate if kept or not selected else flag.ClearAndSelect)
        finally:
            self.list.blockSignals(False)

    def _show_progress(self, event: IndexProgress) -> None:
        fraction = self._controller.fraction_done(event)
        if fraction is not None:  # by bytes, moving with the pages of the document being embedded
            self.progress_bar.setRange(0, _PROGRESS_STEPS)
            self.progress_bar.setValue(round(fraction * _PROGRESS_STEPS))
        self._progress = progress_text(event, fraction)
        self._show_run_state()

    def _show_run_state(self) -> None:
        """The progress line, and below it the document that is taking long, if one is."""
        now = self._controller.indexing_now() if self._controller.busy else None
        slow = slow_document_text(*now) if now is not None else ""
        self.progress_label.setText(f"{self._progress}\n{slow}" if slow else self._progress)

    def _show_busy(self, busy: bool) -> None:
        self.cancel_button.setEnabled(busy)
        self.progress_bar.setVisible(busy)
        if busy:
            self.progress_bar.setRange(0, 0)  # moving until the first event gives a fraction
            self._progress = "Starting…"
            self.progress_label.setText(self._progress)
            self.slow_timer.start()
        else:
            self.slow_timer.stop()
            self.progress_bar.setRange(0, _PROGRESS_STEPS)
            self.progress_bar.setValue(0)
            self.progress_label.setText(self._summary())

    def _show_stats(self, ready: int, chunks: int) -> None:
        self._stats = (ready, chunks)
        if not self._controller.busy:
            self.progress_label.setText(self._summary())

    def _summary(self) -> str:
        if not self._documents:
            return _EMPTY_HINT
        ready, chunks = self._stats
        failed = sum(1 for d in self._documents if d.status == "failed")
        parts = [f"{plural(ready, 'document')} ready", f"{plural(chunks, 'passage')} indexed"]
        if failed:
            parts.append(f"{failed} failed")
        return " · ".join(parts)

    def _update_buttons(self) -> None:
        selected = self.selected_documents()
        self.remove_button.setEnabled(bool(selected))
        self.reindex_button.setEnabled(any(d.id is not None and d.status not in ("queued", "indexing")
                                           for d in selected))

    # -- keyboard, fonts, drops ------------------------------------------------------------

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.list and event.type() == QEvent.Type.KeyPress \
                and event.matches(QKeySequence.StandardKey.Delete) and self.list.selectedItems():
            self.remove_selected()
            return True
        return super().eventFilter(watched, event)

    def changeEvent(self, event: QEvent) -> None:
        if event.type() == QEvent.Type.FontChange:
            self._size_columns()
        super().changeEvent(event)

    def _size_columns(self) -> None:
        self.list.setColumnWidth(0, self.list.fontMetrics().horizontalAdvance("M") * 14)

    def dragEnterEvent(self, event) -> None:
        paths = local_paths(event.mimeData())
        if paths and not model_files(paths):
            event.acceptProposedAction()
        else:
            event.ignore()  # a .gguf is a model to import: the window takes the drop

    def dropEvent(self, event) -> None:
        paths = local_paths(event.mimeData())
        if paths:
            event.acceptProposedAction()
            self._controller.add_paths(paths)


def _fill(item: QTreeWidgetItem, document: StoredDocument) -> None:
    item.setData(0, PATH_ROLE, document.path)
    item.setData(0, ID_ROLE, document.id)
    item.setText(0, document.name)
    item.setText(1, state_text(document))
    tip = tooltip_text(document)
    item.setToolTip(0, tip)
    item.setToolTip(1, tip)
    item.setIcon(0, _icon(document.status))
    ocr_pages = document.ocr_pages or 0
    item.setData(0, OCR_ROLE, ocr_pages)
    item.setData(1, OCR_ROLE, ocr_pages)  # the state column draws the badge
    # a screen reader hears the badge too
    item.setData(0, Qt.ItemDataRole.AccessibleTextRole,
                 f"{document.name}, {ocr_pages} pages read by OCR" if ocr_pages else document.name)


class BadgeDelegate(QStyledItemDelegate):
    """Draws a document's state with a small "OCR" badge after it when pages of it were
    recognised from images; a long state is elided before the badge, never under it."""

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index) -> None:
        if not index.data(OCR_ROLE):
            super().paint(painter, option, index)
            return
        font = badge_font(option.font)
        badge = badge_size(font)
        rest = QStyleOptionViewItem(option)
        rest.rect = option.rect.adjusted(0, 0, -(badge.width() + 2 * _BADGE_GAP), 0)
        super().paint(painter, rest, index)
        full = QStyleOptionViewItem(option)
        self.initStyleOption(full, index)
        style = option.widget.style() if option.widget is not None else QApplication.style()
        text = style.subElementRect(QStyle.SubElement.SE_ItemViewItemText, full, option.widget)
        end = min(text.left() + full.fontMetrics.horizontalAdvance(full.text) + 4, rest.rect.right())
        box = QRect(end + _BADGE_GAP, option.rect.top() + (option.rect.height() - badge.height()) // 2,
                    badge.width(), badge.height())
        paint_badge(painter, box, font, option.palette)

    def sizeHint(self, option: QStyleOptionViewItem, index) -> QSize:  # noqa: N802 (Qt's name)
        size = super().sizeHint(option, index)
        if index.data(OCR_ROLE):
            size.setWidth(size.width() + badge_size(badge_font(option.font)).width() + 2 * _BADGE_GAP)
        return size


_BADGE_GAP = 6  # pixels between the name and its badge


def badge_font(font: QFont) -> QFont:
    small = QFont(font)
    small.setPointSizeF(max(6.0, font.pointSizeF() * 0.8))
    small.setBold(True)
    return small


def badge_size(font: QFont) -> QSize:
    metrics = QFontMetrics(font)
    return QSize(metrics.horizontalAdvance(OCR_BADGE) + metrics.height() // 2 + 4, metrics.height() + 2)


def paint_badge(painter: QPainter, box: QRect, font: QFont, palette: QPalette) -> None:
    """A rounded tag in the palette's link colour with the base colour's text: legible in the
    light and the dark theme alike."""
    painter.save()
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setPen(Qt.PenStyle.NoPen)
    painter.setBrush(palette.color(QPalette.ColorRole.Link))
    painter.drawRoundedRect(box, box.height() / 3, box.height() / 3)
    painter.setPen(palette.color(QPalette.ColorRole.Base))
    painter.setFont(font)
    painter.drawText(box, Qt.AlignmentFlag.AlignCenter, OCR_BADGE)
    painter.restore()


_STATUS_ICONS = {"failed": QStyle.StandardPixmap.SP_MessageBoxCritical,
                 "ready_with_warnings": QStyle.StandardPixmap.SP_MessageBoxWarning,
                 "ready": QStyle.StandardPixmap.SP_DialogApplyButton,
                 "indexing": QStyle.StandardPixmap.SP_BrowserReload,
                 "queued": QStyle.StandardPixmap.SP_FileIcon}


def _icon(status: str):
    return QApplication.style().standardIcon(_STATUS_ICONS.get(status, QStyle.StandardPixmap.SP_FileIcon))


def local_paths(mime) -> list[str]:
    """The local files and folders in a drag's data (links to the web are ignored)."""
    return [url.toLocalFile() for url in mime.urls() if url.isLocalFile()] if mime.hasUrls() else []

