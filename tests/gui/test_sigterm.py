"""The window always exits on SIGTERM (issue 14), also while a modal error dialog is open: the
real app in its own process, offscreen."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.config import Settings, save_settings
from engine.models.registry import import_model
from engine.paths import AppPaths

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGTERM is a POSIX signal")

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 60.0
EXIT_TIMEOUT_S = 20.0


def _wait_for_line(process: subprocess.Popen, wanted: str, timeout_s: float) -> list[str]:
    """The lines of stdout up to and with `wanted`; fails after timeout_s."""
    seen: list[str] = []
    deadline = time.monotonic() + timeout_s
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if not selector.select(deadline - time.monotonic()):
                break
            line = process.stdout.readline()
            if not line:
                break
            seen.append(line.rstrip("\n"))
            if seen[-1] == wanted:
                return seen
    raise AssertionError(f"no {wanted!r} line within {timeout_s} s; output: {seen}")


def test_sigterm_closes_the_window_while_a_modal_error_is_open(tmp_path, tiny_llm_dir):
    paths = AppPaths(tmp_path / "data").ensure()
    save_settings(paths.settings_file, Settings(model=import_model(tiny_llm_dir, paths).name))
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.app_with_a_modal_error", "--data-dir", str(paths.root),
         "--provider", "cpu"],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        _wait_for_line(process, "MODAL", START_TIMEOUT_S)
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=EXIT_TIMEOUT_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stdout.close()
    assert code == 0
    text = paths.log_file.read_text(encoding="utf-8")
    assert "SIGTERM: closing" in text and "a slot failed on purpose" in text
