"""Runs the real app (python -m tests.helpers.app_with_a_modal_error APP-ARGS...) with one
slot that fails as soon as the event loop runs, so that the "unexpected error" dialog is open,
modal, when the test sends SIGTERM. Prints MODAL when the dialog is about to show."""

from __future__ import annotations

import sys

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

import desktop_app.app as app_module


def main() -> int:
    QApplication.instance() or QApplication(sys.argv[:1])
    show = app_module.CrashReporter._show

    def announced_show(self, summary: str) -> None:
        print("MODAL", flush=True)
        show(self, summary)

    app_module.CrashReporter._show = announced_show

    def failing_slot() -> None:
        raise RuntimeError("a slot failed on purpose")

    QTimer.singleShot(0, failing_slot)  # runs once the app's event loop does
    return app_module.main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
