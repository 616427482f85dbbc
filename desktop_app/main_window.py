"""The main window. Chat and documents come in later issues; for now it shows the model status."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QMainWindow

from engine.models.registry import ModelInfo


class MainWindow(QMainWindow):
    def __init__(self, models: list[ModelInfo]):
        super().__init__()
        self.setWindowTitle("Offline Assistant")
        self.resize(1000, 700)
        placeholder = QLabel("Chat and drag-and-drop indexing are not in this build yet.\n"
                             "Meanwhile: offline-assistant-cli index FOLDER, then generate \"QUESTION\".")
        placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.setCentralWidget(placeholder)
        self.statusBar().showMessage(model_summary(models))


def model_summary(models: list[ModelInfo]) -> str:
    return " · ".join(f"{m.kind}: {m.name} ({m.status}, {m.provider})" for m in models)
