"""The app's own part in staying up: the safe-mode screen after a crash loop and its "Try again",
the last error kept by the crash hook, the watchdog heartbeat from the GUI thread, and
faulthandler's crash log. (The app under a supervisor, killed and frozen: tests/gui/kiosk/test_watchdog.py.)"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QApplication, QMessageBox

from desktop_app.app import Heartbeat, install_crash_hook, main
from desktop_app.kiosk.safe_mode import NO_ERROR, RESTART_EXIT_CODE, SafeModeWindow, headline
from engine.kiosk import crash_loop
from engine.paths import AppPaths

REPO = Path(__file__).resolve().parents[3]
ERROR = "Traceback (most recent call last):\n  File \"x.py\", line 1\nRuntimeError: the pump exploded"


@pytest.fixture
def app_state(monkeypatch, root_logging_restored):
    """main() run in this process: no supervisor, its log handler and app names undone after."""
    for name in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"):
        monkeypatch.delenv(name, raising=False)
    shown = []
    monkeypatch.setattr(QMessageBox, "critical", lambda parent, title, text, *a: shown.append(text))
    app = QApplication.instance()
    names = app.applicationName(), app.organizationName(), app.desktopFileName(), app.windowIcon()
    yield shown
    app.setApplicationName(names[0])
    app.setOrganizationName(names[1])
    app.setDesktopFileName(names[2])
    app.setWindowIcon(names[3])


def crash_loop_in(paths: AppPaths, crashes: int = 5) -> Path:
    starts = paths.starts_file
    for _ in range(crashes):
        crash_loop.begin_start(starts)  # never marked clean: each one crashed
    crash_loop.record_error(starts, ERROR)
    return starts


def test_the_safe_mode_window_says_what_happened(qtbot):
    window = SafeModeWindow(5, ERROR, "/data/logs")
    qtbot.addWidget(window)
    assert window.message.text() == "Offline Assistant stopped unexpectedly 5 times in the last 10 minutes."
    assert window.message.text() == headline(5)
    assert window.error.isReadOnly() and window.error.toPlainText() == ERROR
    assert "/data/logs" in window.advice.text()
    with qtbot.waitSignal(window.tryAgain):
        qtbot.mouseClick(window.try_again, Qt.MouseButton.LeftButton)
    assert SafeModeWindow(6, None).error.toPlainText() == NO_ERROR


def test_after_a_crash_loop_the_app_starts_in_safe_mode_and_try_again_restarts_it(
        qtbot, tmp_path, app_state):
    paths = AppPaths(tmp_path).ensure()
    starts = crash_loop_in(paths)
    seen = {}

    def press_try_again():
        try:
            window = next(w for w in QApplication.topLevelWidgets()
                          if isinstance(w, SafeModeWindow) and w.isVisible())
            seen.update(message=window.message.text(), error=window.error.toPlainText(),
                        full_screen=window.isFullScreen())
            qtbot.mouseClick(window.try_again, Qt.MouseButton.LeftButton)
        except BaseException:
            QApplication.instance().exit(99)  # never hang the test
            raise

    QTimer.singleShot(100, press_try_again)
    assert main(["--data-dir", str(tmp_path), "--provider", "cpu"]) == RESTART_EXIT_CODE
    assert seen == {"message": headline(5), "error": ERROR, "full_screen": True}
    log_text = (paths.logs / "offline-assistant.log").read_text(encoding="utf-8")
    assert "starting in safe mode" in log_text and "RuntimeError: the pump exploded" in log_text
    assert not app_state  # no error dialog
    # "Try again" was a clean exit: the next start is a normal one
    assert not crash_loop.begin_start(starts).safe_mode


def test_an_uncaught_exception_is_kept_as_the_last_error(qtbot, tmp_path, monkeypatch):
    monkeypatch.setattr(QMessageBox, "critical", lambda *a: None)
    starts = AppPaths(tmp_path).ensure().starts_file
    reporter = install_crash_hook(tmp_path / "app.log", starts)
    try:
        try:
            raise KeyError("the valve table")
        except KeyError:
            sys.excepthook(*sys.exc_info())
    finally:
        reporter.uninstall()
    info = crash_loop.begin_start(starts)
    assert "Traceback" in info.last_error and "KeyError: 'the valve table'" in info.last_error


def test_the_heartbeat_pings_the_watchdog_from_the_gui_thread(qtbot, tmp_path, monkeypatch):
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind(str(tmp_path / "notify"))
    listener.setblocking(False)
    monkeypatch.setenv("NOTIFY_SOCKET", str(tmp_path / "notify"))
    monkeypatch.setenv("WATCHDOG_USEC", "200000")  # 0.2 s: a ping every 0.1 s
    pings = []

    def received() -> int:
        try:
            while True:
                pings.append(listener.recv(100))
        except BlockingIOError:
            return pings.count(b"WATCHDOG=1")

    heartbeat = Heartbeat()
    try:
        assert heartbeat.interval_s == pytest.approx(0.2)
        heartbeat.start()
        qtbot.waitUntil(lambda: received() >= 4, timeout=5000)
        heartbeat.stop()
        assert not heartbeat.timer.isActive()
    finally:
        listener.close()
    assert Heartbeat(interval_s=0).interval_s == 0  # no watchdog: no timer
    monkeypatch.delenv("WATCHDOG_USEC")
    idle = Heartbeat()
    idle.start()
    assert not idle.timer.isActive()


def test_a_hard_crash_leaves_every_thread_s_traceback_in_the_crash_log(tmp_path):
    code = ("import faulthandler, sys\n"
            "from desktop_app.app import enable_crash_log\n"
            "from engine.paths import AppPaths\n"
            f"enable_crash_log(AppPaths({str(tmp_path)!r}).ensure())\n"
            "def the_frozen_slot():\n"
            "    faulthandler._sigabrt()  # what systemd's watchdog sends a frozen app\n"
            "the_frozen_slot()\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, timeout=120)
    assert done.returncode != 0
    text = AppPaths(tmp_path).crash_log.read_text(encoding="utf-8")
    assert "--- start of process" in text and "Fatal Python error: Aborted" in text
    assert "the_frozen_slot" in text


def test_the_kiosk_unit_restarts_always_and_watches_the_gui_thread():
    import configparser

    unit = configparser.ConfigParser(interpolation=None, strict=True)
    unit.optionxform = str  # systemd's keys are case-sensitive
    unit.read(REPO / "packaging" / "linux" / "offline-assistant-kiosk.service", encoding="utf-8")
    service = unit["Service"]
    assert (service["Type"], service["NotifyAccess"], service["Restart"]) == ("notify", "main", "always")
    assert service["ExecStart"].split() == ["/opt/offline-assistant/offline-assistant", "--kiosk"]
    # a frozen window is noticed and the app started again well within 10 s
    assert float(service["WatchdogSec"]) + float(service["RestartSec"]) <= 6
    assert unit["Unit"]["StartLimitIntervalSec"] == "0"  # never gives up: safe mode takes over
    assert unit["Install"]["WantedBy"] == "graphical-session.target"
