"""The window's first size fits the screen it opens on (issue 29: at 1366x768 a 1440x900 window
hid the question box below the edge and cut off the side panel's buttons). On the real window
with the screen's free area given, as a laptop, a desktop with a panel and a second screen
report it; tests/gui/test_window_on_x11.py opens the app itself under a window manager."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QRect
from PySide6.QtWidgets import QAbstractButton

from desktop_app.main_window import FIRST_SIZE, MainWindow
from engine.config import Settings
from tests.helpers.pump_chat import ANSWER, LOAD_MS

pytestmark = pytest.mark.usefixtures("same_look_after")  # tests/conftest.py

SCREENS = {
    "1280x720": QRect(0, 0, 1280, 720),
    "1366x768": QRect(0, 0, 1366, 768),
    "1920x1080": QRect(0, 0, 1920, 1080),
    "1366x768-top-panel": QRect(0, 32, 1366, 736),
    "second-screen-1280x720": QRect(1920, 0, 1280, 720),
}


def global_rect(widget) -> QRect:
    return QRect(widget.mapToGlobal(widget.rect().topLeft()), widget.size())


@pytest.mark.parametrize("available", SCREENS.values(), ids=SCREENS.keys())
def test_the_first_size_fits_the_screen_with_the_question_box_and_every_button(qtbot, indexed_copy,
                                                                               tiny_llm_dir, available):
    window = MainWindow(indexed_copy, "cpu", Settings(), llm_folder=tiny_llm_dir, assistant_settings=ANSWER)
    qtbot.addWidget(window, before_close_func=lambda w: w.close())
    window.fit_to(available)  # what the window does with its screen's free area as it opens
    with qtbot.waitSignal(window.assistant.modelReady, timeout=LOAD_MS):
        window.show()
    qtbot.waitExposed(window)
    assert available.contains(window.frameGeometry()), (window.frameGeometry(), available)
    shown = [b for b in window.findChildren(QAbstractButton) if b.isVisible()]
    assert window.chat.send_button in shown and window.documents.add_button in shown
    for widget in [window.chat.input, *shown]:
        where = global_rect(widget)
        assert available.contains(where), (widget.objectName() or widget.text(), where)
    if available.width() >= 1920:
        assert window.size() == FIRST_SIZE  # where there is room, the size it was designed at
    else:
        assert window.width() >= available.width() - 40 and window.height() >= available.height() - 60
