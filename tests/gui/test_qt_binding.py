"""The Qt binding must not leak references to None: PySide6 6.12.0 dropped one per call of a
method returning nothing, and Python 3.11 (None is not immortal before 3.12) then aborts with
'none_dealloc' after a few thousand calls, which a kiosk running for weeks makes in minutes.
pyproject.toml keeps PySide6 below 6.12 until a release passes this test."""

from __future__ import annotations

import sys

from PySide6.QtWidgets import QLabel


def test_calls_returning_nothing_keep_nones_reference_count(qtbot):
    label = QLabel()
    qtbot.addWidget(label)
    before = sys.getrefcount(None)
    for n in range(2000):
        label.setText(str(n % 2))
    assert sys.getrefcount(None) - before > -100
