"""The window on a full disk (issue 14): it starts and says so in one box that does not block,
with the full-disk message as it is (a modal "could not be saved (...)" box held the start back,
and SIGTERM with it). The app's log drops what it cannot write instead of printing a
"--- Logging error ---" traceback for every record. The full disk is simulated: writes into
the data folder raise OSError(ENOSPC), as a full disk's do."""

from __future__ import annotations

import logging

import pytest
from PySide6.QtCore import Qt

from desktop_app import app
from desktop_app.main_window import MainWindow
from engine import atomic_file
from engine.paths import AppPaths
from engine.safe_text import SafeFormatter
from tests.helpers.full_disk import FullFile, opener_full_for
from tests.helpers.pump_chat import ANSWER, LOAD_MS

pytestmark = pytest.mark.usefixtures("same_look_after")  # tests/conftest.py


@pytest.fixture
def data(indexed_copy) -> AppPaths:
    """A fresh data dir whose collection already holds the pump manual."""
    return indexed_copy


@pytest.fixture
def full_disk(monkeypatch):
    """Small files written whole (conversations, settings) and crash.log hit a full disk."""
    real_fdopen = atomic_file.os.fdopen
    monkeypatch.setattr(atomic_file.os, "fdopen", lambda fd, mode: FullFile(real_fdopen(fd, mode)))
    monkeypatch.setattr(app, "open", opener_full_for("crash.log"), raising=False)
    yield
    app.disable_crash_log(None)  # faulthandler back to stderr, as main's end does


def full(folder) -> str:
    return f"The disk holding {folder} is full: free 1 MB and try again."


def test_the_window_starts_on_a_full_disk_with_one_notice_that_does_not_block(qtbot, data, tiny_llm_dir,
                                                                              full_disk):
    notices: list[str] = []
    assert app.enable_crash_log(data, notices) is None
    window = MainWindow(data, "cpu", llm_folder=tiny_llm_dir, assistant_settings=ANSWER, notices=notices)
    qtbot.addWidget(window, before_close_func=lambda w: w.close())
    with qtbot.waitSignal(window.assistant.modelReady, timeout=LOAD_MS):
        window.show()
    qtbot.waitUntil(lambda: window.notice_box is not None and window.notice_box.isVisible(), timeout=5000)
    box = window.notice_box
    assert box.windowModality() == Qt.WindowModality.NonModal and not box.isModal()
    text = box.text()
    assert text.count(full(data.conversations)) == 1 and "could not be saved" not in text
    assert f"The disk holding {data.logs} is full: free at least 1 MB" in text and str(data.crash_log) in text
    assert window.isVisible() and list(data.conversations.iterdir()) == []

    window.conversations.new_conversation()  # the same failure again: the status bar, no second box
    assert window.statusBar().currentMessage() == full(data.conversations)
    assert window.notice_box is box and box.text().count(full(data.conversations)) == 1


def test_the_log_file_on_a_full_disk_drops_records_quietly_and_shows_no_controls(tmp_path, monkeypatch, capsys,
                                                                                 root_logging_restored):
    monkeypatch.setattr(logging, "raiseExceptions", logging.raiseExceptions)  # put back after
    paths = AppPaths(tmp_path).ensure()
    log_file = app.setup_logging(paths)
    [handler] = [h for h in root_logging_restored.handlers if getattr(h, "baseFilename", None) == str(log_file)]
    assert isinstance(handler.formatter, SafeFormatter)
    logging.getLogger("desktop_app").warning("file %s", "evil\x1b]8;;http://evil.example\x1b\\.pdf")
    handler.flush()
    assert "evil\\x1b]8;;http://evil.example\\x1b\\.pdf" in log_file.read_text(encoding="utf-8")

    stream, handler.stream = handler.stream, FullFile(handler.stream)  # now the disk is full
    for number in range(3):
        logging.getLogger("desktop_app").warning("record %d", number)
    handler.stream = stream  # room made, for the handler's close
    assert "Logging error" not in capsys.readouterr().err
