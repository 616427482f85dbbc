"""The Models page of the settings: the language models installed, the one answers use, import
(a button, or a .gguf dropped on the page or the window) with progress and cancel, and removal.

    page = ModelsPage(models_controller, chosen="qwen2.5-0.5b", names=["qwen2.5-0.5b"],
                      in_use="qwen2.5-0.5b", locked=settings.kiosk)
    page.chosen()        # None: the built-in model; else an imported model's name

    box = ImportBox(models_controller, window)   # an import's progress where the page is not open
    preparation = Preparation(paths, window)     # the built-in model's first start, with its box

Shows what the engine's catalog says, never computes it. On a kiosk (`locked`) the page only
shows: the model is the administrator's choice, made in the settings file.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QDir, QObject, Qt, QTimer, Signal
from PySide6.QtGui import QFont
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QMessageBox,
    QProgressBar,
    QProgressDialog,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from desktop_app.controllers.models import ModelsController
from desktop_app.controllers.prepare import PrepareJob
from engine.models.catalog import MEASURE_TOKENS, MIN_TOKENS, LLMEntry, size_text
from engine.models.registry import BUILTIN_LLM
from engine.paths import AppPaths

BUILTIN = f"{BUILTIN_LLM.name} (built-in)"
NAME_CHARS = 48  # a longer name is elided (its tooltip holds it whole)
COLUMNS = ("Name", "Architecture", "Size", "Quantization", "Context", "Speed here")
NOT_MEASURED = "not measured yet"
KIOSK_NOTE = ("On a kiosk the administrator chooses the model: set model = \"NAME\" in the "
              "settings file, after 'offline-assistant-cli models import FILE.gguf'.")
STATUS_TEXT = {"needs preparation": "prepared when first used"}
IN_USE_TIP = "Answers use this model now; choose another one and press OK before removing it"


def model_files(paths: list[str]) -> list[str]:
    """The .gguf files among dropped paths: they are models to import, not documents."""
    return [p for p in paths if p.lower().endswith(".gguf") and Path(p).is_file()]


class ModelsPage(QWidget):
    def __init__(self, controller: ModelsController | None, chosen: str | None, names: list[str],
                 in_use: str | None = None, locked: bool = False, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("modelsPage")
        self._controller = controller
        self._initial = chosen
        self._in_use = in_use
        self._locked = locked

        self.model = QComboBox()
        self.model.setAccessibleName("Model for answers")
        self.model.setToolTip("The language model that writes the answers")
        self.model.setEnabled(not locked)
        self._fill_choices(names)
        self.model.currentIndexChanged.connect(self._mark_chosen)

        self.table = self._build_table()
        self.import_button = QPushButton("&Import a model…")
        self.import_button.setToolTip("Add a .gguf model file (you can also drop one on this window)")
        self.import_button.clicked.connect(self.choose_files)
        self.remove_button = QPushButton("&Remove…")
        self.remove_button.setToolTip("Delete the selected imported model from this computer")
        self.remove_button.clicked.connect(self.remove_selected)
        self.measure_button = QPushButton("Measure &speed")
        self.measure_button.setToolTip("Have the selected model write a short text here and time it "
                                       f"(about {MEASURE_TOKENS} tokens)")
        self.measure_button.clicked.connect(self.measure_selected)
        self._measuring = False
        self.progress = QProgressBar()
        self.progress.setRange(0, 100)
        self.progress.setAccessibleName("Import progress")
        self.cancel_button = QPushButton("&Cancel import")
        self.cancel_button.clicked.connect(self.cancel_import)
        self.message = QLabel("")
        self.message.setObjectName("modelsMessage")
        self.message.setWordWrap(True)
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.kiosk_note = QLabel(KIOSK_NOTE)
        self.kiosk_note.setWordWrap(True)
        self._lay_out()
        self._connect(controller)
        self._show_busy(controller is not None and controller.is_importing())
        self.setAcceptDrops(not locked and controller is not None)

    # -- building -----------------------------------------------------------------------------
    def _build_table(self) -> QTreeWidget:
        table = QTreeWidget()
        table.setObjectName("modelsTable")
        table.setAccessibleName("Installed models")
        table.setHeaderLabels(COLUMNS)
        table.setRootIsDecorated(False)
        table.setUniformRowHeights(True)
        table.setAlternatingRowColors(True)
        table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        header = table.header()
        header.setStretchLastSection(False)
        header.setMinimumSectionSize(60)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for column in range(1, len(COLUMNS)):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        table.itemSelectionChanged.connect(self._update_buttons)
        table.itemDoubleClicked.connect(lambda item, _column: self._choose_row(item))
        return table

    def _lay_out(self) -> None:
        choice = QFormLayout()
        choice.addRow("Answers &use:", self.model)
        buttons = QHBoxLayout()
        buttons.addWidget(self.import_button)
        buttons.addWidget(self.remove_button)
        buttons.addStretch(1)
        buttons.addWidget(self.measure_button)
        busy = QHBoxLayout()
        busy.addWidget(self.progress, 1)
        busy.addWidget(self.cancel_button)
        layout = QVBoxLayout(self)
        layout.addLayout(choice)
        layout.addWidget(self.table, 1)
        layout.addLayout(buttons)
        layout.addLayout(busy)
        layout.addWidget(self.message)
        layout.addWidget(self.kiosk_note)
        for first, second in zip(self._focus_order(), self._focus_order()[1:]):
            QWidget.setTabOrder(first, second)
        self.kiosk_note.setVisible(self._locked)
        self.import_button.setVisible(not self._locked)
        self.remove_button.setVisible(not self._locked)
        self.measure_button.setVisible(not self._locked)  # a kiosk's page only shows

    def _focus_order(self) -> list[QWidget]:
        return [self.model, self.table, self.import_button, self.remove_button, self.measure_button,
                self.cancel_button]

    def _connect(self, controller: ModelsController | None) -> None:
        if controller is None:
            self.import_button.setEnabled(False)
            self.remove_button.setEnabled(False)
            self.measure_button.setEnabled(False)
            return
        controller.listed.connect(self.show_entries)
        controller.busyChanged.connect(self._show_busy)
        controller.importProgress.connect(self._show_progress)
        controller.importEnded.connect(self._import_ended)
        controller.removed.connect(self._removed)
        controller.measured.connect(self._measured)
        if controller.entries:
            self.show_entries(controller.entries)
        controller.refresh()

    # -- what the page shows --------------------------------------------------------------------
    def chosen(self) -> str | None:
        return self.model.currentData()

    def show_entries(self, entries: list[LLMEntry]) -> None:
        selected = self._selected_item()
        selected = selected.data(1, Qt.ItemDataRole.UserRole).name if selected else None
        self.table.clear()
        for entry in entries:
            self.table.addTopLevelItem(self._row(entry))
        self._fill_choices([e.name for e in entries if not e.built_in and e.status == "ready"])
        self._mark_chosen()
        for item in self._items():
            item.setSelected(item.data(1, Qt.ItemDataRole.UserRole).name == selected)
        self._update_buttons()
        self._fit_width()

    def _fit_width(self) -> None:
        """Room for every column and the names at the current font size (a kiosk's is large),
        within the screen: the dialog grows to it."""
        table = self.table
        metrics = table.fontMetrics()
        names = max((metrics.horizontalAdvance(item.text(0)) for item in self._items()), default=0)
        wanted = min(names, metrics.averageCharWidth() * NAME_CHARS) + metrics.height() * 2
        for column in range(1, len(COLUMNS)):
            wanted += max(table.header().sectionSizeHint(column), table.sizeHintForColumn(column))
        screen = self.screen()
        if screen is not None:
            wanted = min(wanted, screen.availableGeometry().width() - 120)
        table.setMinimumWidth(wanted)

    def _row(self, entry: LLMEntry) -> QTreeWidgetItem:
        name = f"{entry.name} (built-in)" if entry.built_in else entry.name
        if entry.status != "ready":
            name += f" ({STATUS_TEXT.get(entry.status, entry.status)})"
        speed = f"{entry.tokens_per_s:.1f} tokens/s" if entry.tokens_per_s else NOT_MEASURED
        context = f"{entry.context:,} tokens" if entry.context else "unknown"
        item = QTreeWidgetItem([name, entry.architecture, size_text(entry.size_bytes),
                                entry.quantization, context, speed])
        item.setData(0, Qt.ItemDataRole.UserRole, None if entry.built_in else entry.name)
        item.setData(1, Qt.ItemDataRole.UserRole, entry)
        item.setToolTip(3, entry.quantization_detail or entry.quantization)
        item.setToolTip(5, f"Measured on this computer ({entry.speed_provider.upper()}): how fast it "
                           f"writes after its first token, by its last answer of {MIN_TOKENS} tokens or "
                           "more, or by Measure speed" if entry.tokens_per_s else
                        "Measured by its first answer on this computer, or by Measure speed")
        for column in (2, 4, 5):
            item.setTextAlignment(column, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return item

    def _fill_choices(self, names: list[str]) -> None:
        """The combo lists the built-in model and the ready imported ones; the current choice is
        kept, and the initial one stays (marked) even when it is gone, so nothing changes silently."""
        current = self.model.currentData() if self.model.count() else self._initial
        self.model.blockSignals(True)
        self.model.clear()
        self.model.addItem(BUILTIN, None)
        for name in names:
            if name and name != BUILTIN_LLM.name:
                self.model.addItem(name, name)
        if self._initial is not None and self.model.findData(self._initial) < 0:
            self.model.addItem(f"{self._initial} (not found)", self._initial)
        self.model.setCurrentIndex(max(0, self.model.findData(current)))
        self.model.blockSignals(False)

    def _mark_chosen(self) -> None:
        chosen = self.chosen()
        for item in self._items():
            font = QFont(item.font(0))
            font.setBold(item.data(0, Qt.ItemDataRole.UserRole) == chosen)
            item.setFont(0, font)
            tip = item.text(0)
            item.setToolTip(0, f"{tip}: answers use this model" if font.bold() else tip)

    def _items(self) -> list[QTreeWidgetItem]:
        return [self.table.topLevelItem(i) for i in range(self.table.topLevelItemCount())]

    def _selected_item(self) -> QTreeWidgetItem | None:
        items = self.table.selectedItems()
        return items[0] if items else None

    def _selected_name(self) -> str | None:
        item = self._selected_item()
        return item.data(0, Qt.ItemDataRole.UserRole) if item else None

    def _update_buttons(self) -> None:
        item = self._selected_item()
        name = self._selected_name()
        removable = item is not None and name is not None and name != self._in_use
        ready = item is not None and item.data(1, Qt.ItemDataRole.UserRole).status == "ready"
        self.measure_button.setEnabled(ready and not self._measuring and self._controller is not None)
        self.remove_button.setEnabled(removable and self._controller is not None)
        if item is not None and name is None:
            self.remove_button.setToolTip("The built-in model cannot be removed")
        elif name is not None and name == self._in_use:
            self.remove_button.setToolTip(IN_USE_TIP)
        else:
            self.remove_button.setToolTip("Delete the selected imported model from this computer")

    def _choose_row(self, item: QTreeWidgetItem) -> None:
        index = self.model.findData(item.data(0, Qt.ItemDataRole.UserRole))
        if index >= 0 and not self._locked:
            self.model.setCurrentIndex(index)

    # -- import ----------------------------------------------------------------------------------
    def choose_files(self) -> None:
        files, _ = QFileDialog.getOpenFileNames(self, "Import a model", QDir.homePath(),
                                                "GGUF models (*.gguf)")
        if files:
            self.import_files(files)

    def import_files(self, files: list[str]) -> bool:
        if self._locked or self._controller is None:
            return False
        if not self._controller.import_files(files):
            self.message.setText("An import is running; wait for it, or cancel it first.")
            return False
        self.message.setText(f"Importing {', '.join(Path(f).name for f in files)}…")
        return True

    def cancel_import(self) -> None:
        if self._controller is not None:
            self._controller.cancel_import()
            self.message.setText("Cancelling the import…")

    def _show_busy(self, busy: bool) -> None:
        self.progress.setVisible(busy)
        self.cancel_button.setVisible(busy)
        self.import_button.setEnabled(not busy and self._controller is not None)
        if busy:
            self.progress.setValue(0)

    def _show_progress(self, file: str, fraction: float, message: str) -> None:
        self.progress.setValue(int(round(fraction * 100)))
        self.message.setText(f"Importing {file}: {message}")

    def _import_ended(self, _name: str, message: str, _failed: bool) -> None:
        self.message.setText(message)

    # -- removal ---------------------------------------------------------------------------------
    def remove_selected(self) -> None:
        item = self._selected_item()
        name = self._selected_name()
        if item is None or name is None or name == self._in_use or self._controller is None:
            return
        entry: LLMEntry = item.data(1, Qt.ItemDataRole.UserRole)
        answer = QMessageBox.question(
            self, "Remove model",
            f"Remove '{name}' ({size_text(entry.size_bytes)})? Its files are deleted from this "
            "computer; import its .gguf file again to have it back.",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
            QMessageBox.StandardButton.No)
        if answer == QMessageBox.StandardButton.Yes:
            self._controller.remove(name)

    def _removed(self, name: str, problem: str) -> None:
        self.message.setText(problem or f"'{name}' is removed.")

    # -- speed -----------------------------------------------------------------------------------
    def measure_selected(self) -> None:
        item = self._selected_item()
        if item is None or self._controller is None or self._measuring:
            return
        entry: LLMEntry = item.data(1, Qt.ItemDataRole.UserRole)
        self._measuring = True
        self._update_buttons()
        self.message.setText(f"Measuring how fast {entry.name} writes on this computer…")
        self._controller.measure(None if entry.built_in else entry.name)

    def _measured(self, name: str, problem: str) -> None:
        self._measuring = False
        self._update_buttons()
        self.message.setText(problem or f"{name} is measured; its speed is in the list.")

    # -- drops -------------------------------------------------------------------------------------
    def dragEnterEvent(self, event) -> None:  # noqa: N802
        if model_files(_local_paths(event.mimeData())):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dropEvent(self, event) -> None:  # noqa: N802
        files = model_files(_local_paths(event.mimeData()))
        if not files:
            event.ignore()
            return
        event.acceptProposedAction()
        self.import_files(files)


# -- the window's boxes for models -----------------------------------------------------------------
def progress_box(parent: QWidget, text: str, title: str, name: str, cancel: str | None = None) -> QProgressDialog:
    """A progress box that leaves the window usable (documents added, questions asked
    meanwhile), shown at once and kept open at 100 % until it is closed."""
    dialog = QProgressDialog(text, cancel or "", 0, 100, parent)
    dialog.setWindowTitle(title)
    if cancel is None:
        dialog.setCancelButton(None)
    dialog.setWindowModality(Qt.WindowModality.NonModal)
    dialog.setMinimumDuration(0)
    dialog.setAutoClose(False)
    dialog.setAutoReset(False)
    dialog.setAccessibleName(name)
    dialog.setValue(0)
    return dialog


class ImportBox(QObject):
    """The progress of an import that the Models page does not show (a .gguf dropped on the
    window, or the page closed while it imports), in a box of the window's with Cancel."""

    def __init__(self, controller: ModelsController, window: QWidget):
        super().__init__(window)  # the window is reached as parent(): no reference cycle
        self._controller = controller
        self.dialog: QProgressDialog | None = None
        controller.importProgress.connect(self._on_progress)

    def show(self, text: str) -> None:
        dialog = progress_box(self.parent(), text, "Importing a model", "Importing a model", "&Cancel")
        dialog.setObjectName("importDialog")
        dialog.canceled.connect(self._controller.cancel_import)
        self.close()
        self.dialog = dialog
        dialog.show()

    def keep_in_view(self) -> None:
        """Once the Models page is closed, an import it started stays in view here."""
        if self._controller.is_importing() and self.dialog is None:
            self.show("Importing a model…")

    def end(self) -> bool:
        """An import ended: the box closes unless another import runs. Whether it was shown."""
        shown = self.dialog is not None
        if not self._controller.is_importing():
            self.close()
        return shown

    def close(self) -> None:
        if self.dialog is not None:
            self.dialog.canceled.disconnect(self._controller.cancel_import)  # close() emits it
            self.dialog.close()
            self.dialog.deleteLater()
            self.dialog = None

    def _on_progress(self, file: str, fraction: float, message: str) -> None:
        if self.dialog is not None:
            self.dialog.setValue(int(round(fraction * 100)))
            self.dialog.setLabelText(f"Importing {file}: {message}")


class Preparation(QObject):
    """The built-in model prepared on a first start (controllers/prepare.py), its progress in a
    box of the window's that leaves the window usable."""

    prepared = Signal(str)  # the prepared folder; the box is closed
    failed = Signal(str)  # a sentence for the person; the box is closed

    def __init__(self, paths: AppPaths, window: QWidget):
        super().__init__(window)
        self._paths = paths
        self.job: PrepareJob | None = None
        self.dialog: QProgressDialog | None = None

    def start(self) -> None:
        window = self.parent()
        self.dialog = progress_box(window, "Preparing the built-in model…", "First start",
                                   "Preparing the built-in model")
        self.job = PrepareJob(self._paths, self)
        self.job.progress.connect(self._on_progress)
        self.job.finished.connect(self._on_prepared)
        self.job.failed.connect(self._on_failed)
        self.job.start()
        if window.isVisible():  # else once it is: shown first, a window manager put it behind the window
            self.dialog.show()

    def running(self) -> bool:
        return self.job is not None and self.job.is_running()

    def window_shown(self) -> None:
        if self.dialog is not None and not self.dialog.isVisible():
            QTimer.singleShot(0, self.dialog, self.dialog.show)  # once the window is mapped

    def close(self) -> None:
        """The window closes: the preparation is waited for and its box closed."""
        if self.running():
            self.job.wait()
        self._close_dialog()

    def _on_progress(self, fraction: float, message: str) -> None:
        if self.dialog is not None:
            self.dialog.setValue(int(round(fraction * 100)))
            self.dialog.setLabelText(f"Preparing the built-in model: {message}")

    def _on_prepared(self, folder: str) -> None:
        self._close_dialog()
        self.prepared.emit(folder)

    def _on_failed(self, message: str) -> None:
        self._close_dialog()
        self.failed.emit(message)

    def _close_dialog(self) -> None:
        if self.dialog is not None:
            self.dialog.close()
            self.dialog.deleteLater()
            self.dialog = None


def _local_paths(mime) -> list[str]:
    if mime is None or not mime.hasUrls():
        return []
    return [url.toLocalFile() for url in mime.urls() if url.isLocalFile() and url.toLocalFile()]
