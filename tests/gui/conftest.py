"""The GUI tests collect garbage the way the app does: on the GUI thread only
(desktop_app/gui_gc.py). Left to Python, a cycle holding a QObject from one test was freed on
the next test's indexing thread and the run deadlocked."""

from __future__ import annotations

import pytest

from desktop_app.gui_gc import GuiThreadGc


@pytest.fixture(scope="package", autouse=True)
def garbage_collected_on_the_gui_thread(qapp):
    collector = GuiThreadGc()
    collector.start()
    yield collector
    collector.stop()
