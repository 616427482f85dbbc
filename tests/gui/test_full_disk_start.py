"""The window starts on a full disk, and says why there is no crash log (issue 14: the app did
not start at all, with a traceback in enable_crash_log). The full disk is simulated: writes to
crash.log raise OSError(ENOSPC)."""

from __future__ import annotations

import faulthandler
import logging

import pytest

from desktop_app import app
from engine.paths import AppPaths
from tests.helpers.full_disk import opener_full_for


@pytest.fixture
def full_crash_log(monkeypatch):
    monkeypatch.setattr(app, "open", opener_full_for("crash.log"), raising=False)
    yield
    app.disable_crash_log(None)  # faulthandler back to stderr, as main's end does


def test_a_crash_log_on_a_full_disk_is_left_off_with_a_warning(tmp_path, full_crash_log, caplog):
    paths = AppPaths(tmp_path).ensure()
    with caplog.at_level(logging.WARNING, logger="desktop_app"):
        assert app.enable_crash_log(paths) is None
    assert faulthandler.is_enabled()  # hard crashes still leave a traceback, on stderr
    assert [r.getMessage() for r in caplog.records] == [
        f"{app.CRASH_LOG_OFF} The disk holding {paths.logs} is full: free at least 1 MB and try again."]


@pytest.mark.slow
def test_the_window_starts_when_the_crash_log_cannot_be_written(builtin_data_dir, qapp, full_crash_log,
                                                                 root_logging_restored):
    """The real app, in this process: its window opens, the model gets ready, the smoke test
    closes it with exit code 0, and the log says why there is no crash log."""
    paths = AppPaths(builtin_data_dir)
    assert app.main(["--data-dir", str(paths.root), "--provider", "cpu", "--smoke-test"]) == 0
    text = paths.log_file.read_text(encoding="utf-8")
    start = text.rindex(app.CRASH_LOG_OFF)
    assert f"The disk holding {paths.logs} is full" in text[start:]
    assert "window usable after" in text[start:] and "Traceback" not in text[start:]
    assert f"told the user: The disk holding {paths.logs} is full" in text[start:]  # in the window's notice
