"""The desktop app's entry point: arguments, the log file, the crash hook and a real start."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QMessageBox

from desktop_app.app import install_crash_hook, parse_args, setup_logging
from engine.config import Settings
from engine.models.prepare import needs_preparation
from engine.paths import AppPaths

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def log_file(tmp_path, root_logging_restored):
    """The app's rotating log file in a temporary data dir; the handler is removed afterwards."""
    return setup_logging(AppPaths(tmp_path).ensure())


@pytest.fixture
def dialogs(monkeypatch):
    shown = []
    monkeypatch.setattr(QMessageBox, "critical", lambda parent, title, text, *a: shown.append(text))
    return shown


def test_arguments():
    args = parse_args(["--data-dir", "/tmp/x", "--provider", "cpu"])
    assert (args.data_dir, args.provider) == ("/tmp/x", "cpu")
    assert parse_args([]).provider == "auto"
    with pytest.raises(SystemExit):
        parse_args(["--provider", "tpu"])


def test_logging_goes_to_the_data_dir(log_file):
    assert log_file == AppPaths(log_file.parents[1]).log_file and log_file.parent.name == "logs"
    logging.getLogger("desktop_app.test").warning("hello from the test")
    assert "hello from the test" in log_file.read_text(encoding="utf-8")


def test_an_uncaught_exception_is_logged_and_shown_on_any_thread(qtbot, log_file, dialogs):
    reporter = install_crash_hook(log_file)
    try:
        try:
            1 / 0
        except ZeroDivisionError:
            sys.excepthook(*sys.exc_info())  # what Python does with an uncaught exception
        assert len(dialogs) == 1 and "ZeroDivisionError" in dialogs[0] and str(log_file) in dialogs[0]

        def fail_in_a_thread():
            raise RuntimeError("worker exploded")

        thread = threading.Thread(target=fail_in_a_thread, name="some-worker")
        thread.start()
        thread.join()
        # shown on the GUI thread, once its event loop runs
        qtbot.waitUntil(lambda: len(dialogs) == 2)
        assert "worker exploded" in dialogs[1]

        def failing_slot():
            raise KeyError("from a Qt slot")

        QTimer.singleShot(0, failing_slot)  # an exception inside Qt's event loop
        qtbot.waitUntil(lambda: len(dialogs) == 3)
        assert "from a Qt slot" in dialogs[2]
    finally:
        reporter.uninstall()
    text = log_file.read_text(encoding="utf-8")
    assert text.count("Traceback") == 3 and "in thread some-worker" in text
    assert "ZeroDivisionError" in text and "RuntimeError: worker exploded" in text


def test_the_model_needs_preparing_only_when_the_built_in_one_is_used(tmp_path):
    paths = AppPaths(tmp_path).ensure()
    assert needs_preparation(paths, Settings())
    assert not needs_preparation(paths, Settings(model="my-import"))
    assert not needs_preparation(paths, Settings(), llm_folder=tmp_path)


@pytest.mark.slow
def test_the_app_starts_with_the_built_in_models(builtin_data_dir, capsys):
    """`offline-assistant --data-dir DIR` in its own process: a usable window at once, the model
    ready soon after, both logged; --smoke-test then closes it."""
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    clock = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "desktop_app.app", "--data-dir", str(builtin_data_dir),
                           "--provider", "cpu", "--smoke-test"], env=env, cwd=REPO, timeout=300,
                          capture_output=True, text=True)
    elapsed = time.perf_counter() - clock
    assert done.returncode == 0, done.stderr[-3000:]
    text = AppPaths(builtin_data_dir).log_file.read_text(encoding="utf-8")
    usable = float(re.findall(r"window usable after ([\d.]+) s", text)[-1])
    ready = float(re.findall(r"ready on \w+ after ([\d.]+) s", text)[-1])
    assert usable < 10 and usable <= ready
    assert "Traceback" not in text
    with capsys.disabled():
        print(f"\n[startup] window usable after {usable:.2f} s, model ready after {ready:.2f} s "
              f"(process {elapsed:.2f} s in all)")
