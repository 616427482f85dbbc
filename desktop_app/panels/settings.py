"""The settings dialog: a General page (generation, retrieval, indexing, appearance) and a
Models page (the model answers use, import and removal: panels/models.py).

    dialog = SettingsDialog(settings, llm_names=["my-import"], reranker_available=True, parent=w,
                            models=window.models)      # a ModelsController; None: no import/removal
    if dialog.exec() == QDialog.DialogCode.Accepted:
        settings = dialog.settings()    # a new engine.config.Settings; save_settings(...) it

    chosen = edit_settings(settings, paths, window.models, window)   # the same, modal; None: cancelled

Shows values, never computes: ranges come from engine.config.LIMITS, so the dialog and the
file agree. Every control has a label with a mnemonic, an accessible name and a tooltip.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QGroupBox,
    QSpinBox,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from desktop_app.controllers.models import ModelsController
from desktop_app.panels.models import BUILTIN, ModelsPage
from engine.config import LIMITS, THEMES, Settings
from engine.errors import EngineError
from engine.models.registry import BUILTIN_LLM, list_models, resolve_reranker
from engine.paths import AppPaths

__all__ = ["BUILTIN", "RERANKER_MISSING", "SettingsDialog", "edit_settings"]
RERANKER_MISSING = ("No reranker model is installed; answers use the fused search ranking. "
                    "Prepare or import a reranker to turn this on.")
log = logging.getLogger(__name__)


def edit_settings(settings: Settings, paths: AppPaths, models: ModelsController | None, parent: QWidget,
                  *, models_page: bool = False) -> Settings | None:
    """The settings dialog, modal, with the models installed in `paths`: the settings chosen, or
    None when it was cancelled."""
    dialog = SettingsDialog(settings, imported_llm_names(paths), has_reranker(paths), parent,
                            models=models)
    if models_page:
        dialog.show_models()
    accepted = dialog.exec() == QDialog.DialogCode.Accepted
    chosen = dialog.settings()
    dialog.deleteLater()
    return chosen if accepted else None


def imported_llm_names(paths: AppPaths) -> list[str]:
    try:
        return [m.name for m in list_models(paths, "cpu")
                if m.kind == "llm" and m.name != BUILTIN_LLM.name and m.status == "ready"]
    except EngineError as exc:
        log.warning("listing models: %s", exc)
        return []


def has_reranker(paths: AppPaths) -> bool:
    try:
        return resolve_reranker(paths) is not None
    except EngineError:
        return False


class SettingsDialog(QDialog):
    def __init__(self, settings: Settings, llm_names: list[str], reranker_available: bool,
                 parent: QWidget | None = None, *, models: ModelsController | None = None):
        super().__init__(parent)
        self.setWindowTitle("Settings")
        self.setObjectName("settingsDialog")
        self._initial = settings
        self._reranker_available = reranker_available

        # a kiosk's model is the administrator's choice (its settings file): shown, not changed
        self.models_page = ModelsPage(models, settings.model, llm_names, in_use=settings.model,
                                      locked=settings.kiosk)
        self.model = self.models_page.model
        self._describe(self.model, "Model", "The language model that writes the answers")

        self.temperature = QDoubleSpinBox()
        self.temperature.setRange(*LIMITS["temperature"])
        self.temperature.setSingleStep(0.1)
        self.temperature.setDecimals(2)
        self.temperature.setValue(settings.temperature)
        self._describe(self.temperature, "Temperature",
                       "0 gives the same answer every time; higher values vary the wording")

        self.max_new_tokens = QSpinBox()
        self.max_new_tokens.setRange(*(int(v) for v in LIMITS["max_new_tokens"]))
        self.max_new_tokens.setSingleStep(16)
        self.max_new_tokens.setValue(settings.max_new_tokens)
        self._describe(self.max_new_tokens, "Maximum answer length",
                       "The most tokens (word pieces) an answer may have")

        self.passages = QSpinBox()
        self.passages.setRange(*(int(v) for v in LIMITS["passages"]))
        self.passages.setValue(settings.passages)
        self._describe(self.passages, "Passages per answer",
                       "How many passages of the manuals each answer draws on: the quoted "
                       "sentences come from them, and the model reads the best of them")

        self.use_reranker = QCheckBox("Re&rank passages")
        self.use_reranker.setChecked(settings.use_reranker and reranker_available)
        self.use_reranker.setEnabled(reranker_available)
        self._describe(self.use_reranker, "Rerank passages",
                       "A second model reorders the found passages: better answers, a little slower"
                       if reranker_available else RERANKER_MISSING)

        self.font_size = QSpinBox()
        self.font_size.setRange(*(int(v) for v in LIMITS["font_size"]))
        self.font_size.setSuffix(" pt")
        self.font_size.setValue(settings.font_size)
        self._describe(self.font_size, "Font size", "Text size in points, for the whole window")

        self.theme = QComboBox()
        for theme in THEMES:
            self.theme.addItem(theme.capitalize(), theme)
        self.theme.setCurrentIndex(max(0, self.theme.findData(settings.theme)))
        self._describe(self.theme, "Theme", "Light or dark colours")

        self.ocr = QCheckBox("Re&cognise text in scanned pages (OCR)")
        self.ocr.setChecked(settings.ocr)
        self._describe(self.ocr, "Recognise text in scanned pages (OCR)",
                       "Pages that are only a picture (a scanned manual) are read by text recognition, "
                       "so that they can be searched and cited. Such pages take longer to index. "
                       "Applies to documents indexed from now on")

        answers = QFormLayout()
        answers.addRow("&Temperature:", self.temperature)
        answers.addRow("Maximum answer &length:", self.max_new_tokens)
        answers.addRow("&Passages per answer:", self.passages)
        answers.addRow("", self.use_reranker)
        indexing = QFormLayout()
        indexing.addRow("", self.ocr)
        appearance = QFormLayout()
        appearance.addRow("&Font size:", self.font_size)
        appearance.addRow("T&heme:", self.theme)

        answers_box = QGroupBox("Answers")
        answers_box.setLayout(answers)
        indexing_box = QGroupBox("Indexing")
        indexing_box.setLayout(indexing)
        appearance_box = QGroupBox("Appearance")
        appearance_box.setLayout(appearance)

        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                        | QDialogButtonBox.StandardButton.Cancel)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        self.buttons.button(QDialogButtonBox.StandardButton.Ok).setDefault(True)
        self.buttons.button(QDialogButtonBox.StandardButton.Ok).setAccessibleName("OK")
        self.buttons.button(QDialogButtonBox.StandardButton.Cancel).setAccessibleName("Cancel")

        general = QWidget()
        general_layout = QVBoxLayout(general)
        general_layout.addWidget(answers_box)
        general_layout.addWidget(indexing_box)
        general_layout.addWidget(appearance_box)
        general_layout.addStretch(1)
        self.pages = QTabWidget()
        self.pages.addTab(general, "&General")
        self.pages.addTab(self.models_page, "&Models")

        layout = QVBoxLayout(self)
        layout.addWidget(self.pages)
        layout.addWidget(self.buttons)

        ok = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        cancel = self.buttons.button(QDialogButtonBox.StandardButton.Cancel)
        order = [self.temperature, self.max_new_tokens, self.passages,
                 self.use_reranker, self.ocr, self.font_size, self.theme, ok, cancel]
        for first, second in zip(order, order[1:]):
            QWidget.setTabOrder(first, second)
        self.temperature.setFocus()

    def show_models(self) -> None:
        self.pages.setCurrentWidget(self.models_page)
        self.model.setFocus()

    def settings(self) -> Settings:
        """The settings as the dialog shows them (the initial ones until the user edits them).

        When no reranker is installed, the stored choice is kept, so that installing one later
        brings back what the user had chosen."""
        use_reranker = (self.use_reranker.isChecked() if self._reranker_available
                        else self._initial.use_reranker)
        return replace(
            self._initial,
            model=self.model.currentData(),
            temperature=round(self.temperature.value(), 2),
            max_new_tokens=self.max_new_tokens.value(),
            passages=self.passages.value(),
            use_reranker=use_reranker,
            ocr=self.ocr.isChecked(),
            font_size=self.font_size.value(),
            theme=self.theme.currentData(),
        )

    @staticmethod
    def _describe(widget: QWidget, name: str, tip: str) -> None:
        widget.setAccessibleName(name)
        widget.setAccessibleDescription(tip)
        widget.setToolTip(tip)
