"""The kiosk's on-screen keyboard (desktop_app/kiosk/keyboard.py) on a real kiosk window, the real
store and embedder and the tiny random LLM: hidden at the start although the question box has the
focus, shown when the box is touched, typing into it by touch ("E-12", Enter asks it and hides it
for the answer), hidden for good by a physical key, keys and text of the kiosk's touch sizes.
With OFFLINE_ASSISTANT_SCREENSHOTS set to a folder, the kiosk with the keyboard shown is saved
there as kiosk-keyboard.png."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QWidget

from desktop_app.kiosk.keyboard import BACKSPACE, ENTER, SHIFT, SPACE
from desktop_app.kiosk.lockdown import MIN_FONT_PT, TOUCH_PX, touch_px
from tests.gui.kiosk import test_gui_kiosk
from tests.helpers.pump_chat import ANSWER_MS

pytestmark = pytest.mark.usefixtures("same_look_after")  # tests/conftest.py
data, clock, open_kiosk = test_gui_kiosk.data, test_gui_kiosk.clock, test_gui_kiosk.open_kiosk  # its fixtures


def touch(qtbot, kiosk, *keys: str) -> None:
    for key in keys:
        qtbot.mouseClick(kiosk.keyboard.keys[key], Qt.MouseButton.LeftButton)


def activate(qtbot, window) -> None:
    """Offscreen, the kiosk's frameless window (recreated by the flag) stays the focus window
    yet inactive until the focus window changes: another one is activated for a moment (a
    window system does that itself)."""
    if not window.isActiveWindow():
        other = QWidget()
        other.show()
        other.activateWindow()
        qtbot.waitUntil(other.isActiveWindow)
        other.close()
        window.activateWindow()
        qtbot.waitUntil(window.isActiveWindow)


def focus_box(qtbot, window) -> None:
    """The question box takes the focus, in an active window, as at the start or after "New
    question": nobody has touched it."""
    activate(qtbot, window)
    window.chat.focus_input()
    qtbot.waitUntil(window.chat.input.hasFocus)


def touch_box(qtbot, window) -> None:
    """A finger on the question box (Qt turns an unhandled touch into this press)."""
    activate(qtbot, window)
    qtbot.mouseClick(window.chat.input.viewport(), Qt.MouseButton.LeftButton)
    qtbot.waitUntil(window.chat.input.hasFocus)


def test_hidden_at_the_start_shown_when_the_box_is_touched_and_hidden_when_it_loses_the_focus(qtbot, open_kiosk):
    kiosk = open_kiosk()
    window, keyboard = kiosk.window, kiosk.keyboard
    focus_box(qtbot, window)  # the kiosk gave the box the focus: nobody is there yet
    assert window.chat.input.hasFocus() and not keyboard.isVisible()
    touch_box(qtbot, window)
    qtbot.waitUntil(keyboard.isVisible)
    box = window.chat.input
    assert keyboard.mapTo(window, keyboard.rect().topLeft()).y() > box.mapTo(window, box.rect().bottomLeft()).y()
    kiosk.new_button.setFocus()  # a touch elsewhere that takes the focus
    qtbot.waitUntil(lambda: not keyboard.isVisible())
    kiosk.new_question()  # "New question" and the idle reset give the box the focus, not the keys
    assert window.chat.input.hasFocus() and not keyboard.isVisible()
    touch_box(qtbot, window)
    qtbot.waitUntil(keyboard.isVisible)
    kiosk.ask_pin()  # the PIN keypad takes the keys: no letters under it
    qtbot.waitUntil(lambda: not keyboard.isVisible())


def test_typing_e_12_by_touch_then_enter_asks_it(qtbot, open_kiosk):
    kiosk = open_kiosk()
    window = kiosk.window
    touch_box(qtbot, window)
    qtbot.waitUntil(kiosk.keyboard.isVisible)
    touch(qtbot, kiosk, SHIFT, "e", "-", "1", "2", "3", BACKSPACE)
    assert window.chat.input.toPlainText() == "E-12"
    assert window.chat.input.hasFocus()  # the keys never take it
    with qtbot.waitSignal(window.chat.answerFinished, timeout=ANSWER_MS):
        touch(qtbot, kiosk, ENTER)
    asked = [m["content"] for m in window.chat.messages() if m["role"] == "user"]
    assert asked == ["E-12"]
    assert window.chat.input.toPlainText() == ""
    assert not kiosk.keyboard.isVisible()  # asked: the answer gets its room
    touch_box(qtbot, window)
    qtbot.waitUntil(kiosk.keyboard.isVisible)
    touch(qtbot, kiosk, "a", SPACE, SHIFT, "b")
    assert window.chat.input.toPlainText() == "a B"  # Shift is for one letter


def test_a_physical_key_hides_it_for_good(qtbot, open_kiosk):
    kiosk = open_kiosk()
    window, keyboard = kiosk.window, kiosk.keyboard
    touch_box(qtbot, window)
    qtbot.waitUntil(keyboard.isVisible)
    qtbot.keyClick(window.chat.input, "x")  # QTest's key events are the window system's (spontaneous)
    assert not keyboard.isVisible()
    assert window.chat.input.toPlainText() == "x"
    kiosk.new_button.setFocus()
    touch_box(qtbot, window)
    assert window.chat.input.hasFocus() and not keyboard.isVisible()


def test_keys_are_touch_targets_with_the_kiosk_text_size_and_fit_1024_px(qtbot, open_kiosk):
    kiosk = open_kiosk()
    window, keyboard = kiosk.window, kiosk.keyboard
    touch_box(qtbot, window)
    window.resize(1024, 768)
    qtbot.waitUntil(keyboard.isVisible)
    qtbot.waitUntil(lambda: keyboard.width() <= 1024)
    touch_target = touch_px(window)
    assert touch_target >= TOUCH_PX
    names = set(keyboard.keys)
    assert {SHIFT, BACKSPACE, SPACE, ENTER} <= names
    assert set("abcdefghijklmnopqrstuvwxyz0123456789") <= names
    for name, key in keyboard.keys.items():
        assert key.width() >= touch_target and key.height() >= touch_target, (name, key.size())
        assert key.font().pointSizeF() >= MIN_FONT_PT, name
        assert key.focusPolicy() == Qt.FocusPolicy.NoFocus, name
        right = key.mapTo(window, key.rect().bottomRight())
        assert right.x() < window.width() and right.y() < window.height(), (name, right)
    # the question box and the conversation keep their room above it
    assert window.chat.input.isVisible() and window.chat.scroll.height() >= touch_target


def test_screenshot_of_the_kiosk_with_the_keyboard(qtbot, open_kiosk, tmp_path):
    kiosk = open_kiosk()
    window = kiosk.window
    touch_box(qtbot, window)
    window.resize(1366, 768)
    qtbot.waitUntil(kiosk.keyboard.isVisible)
    touch(qtbot, kiosk, SHIFT, "e", "-", "1", "2", SPACE, "m", "e", "a", "n", "s")
    qtbot.waitUntil(lambda: window.width() == 1366 and window.height() == 768)
    folder = Path(os.environ.get("OFFLINE_ASSISTANT_SCREENSHOTS") or tmp_path)
    target = folder / "kiosk-keyboard.png"
    assert window.grab().save(str(target))
    assert target.stat().st_size > 10_000
