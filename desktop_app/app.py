"""Entry point of the desktop app: `offline-assistant [--data-dir DIR] [--provider P]`.

Logs go to DATA_DIR/logs/offline-assistant.log (rotating). An uncaught exception, on any
thread, is logged there with its traceback and shown in a dialog on the GUI thread: never lost.
"""

from __future__ import annotations

import argparse
import logging
import logging.handlers
import os
import sys
import threading
import time
import traceback
from pathlib import Path

from PySide6.QtCore import QObject, QtMsgType, QTimer, Signal, qInstallMessageHandler
from PySide6.QtGui import QIcon
from PySide6.QtWidgets import QApplication, QMessageBox

from engine.hardware import PROVIDER_CHOICES
from engine.paths import AppPaths

LOG_NAME = "offline-assistant.log"
# resources/ sits beside the packages in a source tree, and inside the frozen app's folder
RESOURCES = Path(getattr(sys, "_MEIPASS", Path(__file__).resolve().parent.parent)) / "resources"
ICON = RESOURCES / "icons" / "offline-assistant.svg"
log = logging.getLogger("desktop_app")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="offline-assistant", description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", help="where models, collections, settings and logs live")
    parser.add_argument("--provider", choices=PROVIDER_CHOICES, default="auto")
    parser.add_argument("--smoke-test", action="store_true",
                        help="start, wait until the model is ready, log the timings and quit "
                             "(for installers and CI)")
    parser.add_argument("--self-check", nargs="?", const="", metavar="QUESTION",
                        help="start, ask QUESTION through the chat, print a JSON report of each "
                             "step and quit: exit code 0 when all passed")
    return parser.parse_args(argv)


def setup_logging(paths: AppPaths, level: int = logging.INFO) -> Path:
    """A rotating log file in the data dir (and warnings on stderr)."""
    log_file = paths.logs / LOG_NAME
    paths.logs.mkdir(parents=True, exist_ok=True)
    handler = logging.handlers.RotatingFileHandler(log_file, maxBytes=2_000_000, backupCount=3,
                                                   encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(threadName)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.setLevel(level)
    if not any(getattr(h, "baseFilename", None) == str(log_file) for h in root.handlers):
        root.addHandler(handler)
    else:
        handler.close()
    return log_file


def _qt_message(mode, context, message: str) -> None:
    level = {QtMsgType.QtDebugMsg: logging.DEBUG, QtMsgType.QtInfoMsg: logging.INFO,
             QtMsgType.QtWarningMsg: logging.WARNING}.get(mode, logging.ERROR)
    logging.getLogger("qt").log(level, "%s", message)


class CrashReporter(QObject):
    """Lives on the GUI thread: logs an exception (from any thread) and shows it there."""

    _show_requested = Signal(str)

    def __init__(self, log_file: Path):
        super().__init__()
        self.log_file = log_file
        self.shown = 0
        self._showing = False
        self._show_requested.connect(self._show)  # queued when it comes from another thread
        self.uninstall = lambda: None

    def handle(self, exc_type, exc, tb, where: str = "") -> None:
        if issubclass(exc_type, KeyboardInterrupt):
            sys.__excepthook__(exc_type, exc, tb)
            return
        log.critical("uncaught exception%s", f" in thread {where}" if where else "",
                     exc_info=(exc_type, exc, tb))
        summary = "".join(traceback.format_exception_only(exc_type, exc)).strip()
        self._show_requested.emit(summary)

    def _show(self, summary: str) -> None:
        self.shown += 1
        if self._showing:  # one dialog at a time; the others are in the log
            return
        self._showing = True
        try:
            QMessageBox.critical(
                QApplication.activeWindow(), "Offline Assistant: unexpected error",
                f"Something went wrong:\n\n{summary}\n\nThe window keeps running. The details "
                f"are in the log file:\n{self.log_file}")
        finally:
            self._showing = False


def install_crash_hook(log_file: Path):
    """Routes sys.excepthook and threading.excepthook to a crash reporter; returns it, with
    `uninstall()` to put the previous hooks back."""
    reporter = CrashReporter(log_file)
    previous = sys.excepthook, threading.excepthook

    def excepthook(exc_type, exc, tb):
        reporter.handle(exc_type, exc, tb)

    def thread_excepthook(args):
        if args.exc_type is SystemExit:
            return
        name = args.thread.name if args.thread is not None else ""
        reporter.handle(args.exc_type, args.exc_value, args.exc_traceback, name)

    def uninstall():
        sys.excepthook, threading.excepthook = previous

    sys.excepthook = excepthook
    threading.excepthook = thread_excepthook
    reporter.uninstall = uninstall
    return reporter


def _process_age() -> str:
    """Seconds since this process started, where the system tells (Linux); else "?"."""
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return f"{uptime - int(fields[19]) / os.sysconf('SC_CLK_TCK'):.2f} s"
    except (OSError, ValueError, IndexError, AttributeError):
        return "?"


def _quit_when_ready(window, started: float) -> None:
    def ready(status) -> None:
        log.info("model %s ready on %s after %.2f s", status.name, status.provider,
                 time.perf_counter() - started)
        window.close()

    def failed(message: str) -> None:
        log.error("smoke test: the model failed to open: %s", message)
        QApplication.exit(1)

    window.assistant.modelReady.connect(ready)
    window.assistant.modelFailed.connect(failed)


def main(argv: list[str] | None = None) -> int:
    started = time.perf_counter()
    args = parse_args(argv)
    paths = AppPaths.from_arg(args.data_dir).ensure()
    log_file = setup_logging(paths)
    log.info("starting; data dir %s, provider %s", paths.root, args.provider)

    from .main_window import MainWindow

    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("Offline Assistant")
    app.setWindowIcon(QIcon(str(ICON)))
    app.setDesktopFileName("offline-assistant")  # Wayland matches the window to its menu entry
    app.setOrganizationName("OfflineAssistant")
    previous_handler = qInstallMessageHandler(_qt_message)
    reporter = install_crash_hook(log_file)
    try:
        window = MainWindow(paths, args.provider)  # prepares the built-in model if it must
        window.show()
        QTimer.singleShot(0, lambda: log.info("window usable after %.2f s (%s since the process started)",
                                              time.perf_counter() - started, _process_age()))
        if args.smoke_test:
            _quit_when_ready(window, started)
        check = None
        if args.self_check is not None:
            from .self_check import SelfCheck

            check = SelfCheck(window, args.self_check, started)
        code = app.exec()
        return code if check is None else code or (0 if check.passed else 1)
    finally:
        reporter.uninstall()
        qInstallMessageHandler(previous_handler)
        log.info("closed")


if __name__ == "__main__":
    sys.exit(main())
