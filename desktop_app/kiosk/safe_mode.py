"""The safe-mode screen, shown instead of the main window after a crash loop (engine.kiosk.crash_loop).

    window = SafeModeWindow(crashes=5, last_error="Traceback …")
    window.tryAgain.connect(lambda: app.exit(RESTART_EXIT_CODE))

It loads no model, opens no collection and touches no file: whatever keeps crashing is not
started again until someone presses "Try again". The app then exits (cleanly: the next start
is normal) and its supervisor (systemd's Restart=always, Windows Shell Launcher) starts it again.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QLabel, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget

RESTART_EXIT_CODE = 75  # EX_TEMPFAIL: "try again"; any exit restarts under Restart=always
NO_ERROR = ("No error message was recorded: the app was stopped from outside (killed, "
            "frozen and restarted by the watchdog, or the power went off).")


def headline(crashes: int, window_min: int = 10) -> str:
    return f"Offline Assistant stopped unexpectedly {crashes} times in the last {window_min} minutes."


class SafeModeWindow(QWidget):
    tryAgain = Signal()

    def __init__(self, crashes: int, last_error: str | None, log_folder: str = "", parent=None):
        super().__init__(parent)
        self.setObjectName("safeModeWindow")
        self.setWindowTitle("Offline Assistant — safe mode")
        self.message = QLabel(headline(crashes))
        self.message.setObjectName("safeModeMessage")
        self.message.setWordWrap(True)
        font = QFont(self.message.font())
        font.setPointSizeF(font.pointSizeF() * 1.6)
        font.setBold(True)
        self.message.setFont(font)
        advice = "It is in safe mode: nothing is loaded. Press Try again to start it normally."
        if log_folder:
            advice += f" If it keeps stopping, send the files in {log_folder} to your administrator."
        self.advice = QLabel(advice)
        self.advice.setWordWrap(True)
        self.error = QPlainTextEdit(last_error or NO_ERROR)
        self.error.setObjectName("lastError")
        self.error.setReadOnly(True)
        self.error.setAccessibleName("The last error")
        self.error.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.try_again = QPushButton("Try again")
        self.try_again.setObjectName("tryAgain")
        self.try_again.setMinimumHeight(56)  # a touch screen's finger
        self.try_again.clicked.connect(self.tryAgain)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(32, 32, 32, 32)
        layout.setSpacing(16)
        layout.addWidget(self.message)
        layout.addWidget(self.advice)
        layout.addWidget(QLabel("The last error:"))
        layout.addWidget(self.error, 1)
        layout.addWidget(self.try_again, 0, Qt.AlignmentFlag.AlignRight)
        self.setFocusProxy(self.try_again)
        self.resize(900, 600)
