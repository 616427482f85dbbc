"""The kiosk's on-screen keyboard, for kiosks with a touch screen and no keyboard.

    keyboard = OnScreenKeyboard(chat.input)      # types into the question box; Enter asks
    hook = KeyboardHook(chat.input, keyboard)    # shows it when the box is touched
    hook.start(); ... hook.stop()

The keyboard sits under the question box, inside the window (nothing to move or close). It is
shown when the box is touched, not when the app gives the box the focus (at the start, after
"New question"): there it covered half of a 1366x768 screen before anyone came. It hides once
the question is asked, so the answer has the room, and for good once a physical key is pressed:
from then on the person has a keyboard. Its keys are touch targets (lockdown.TOUCH_PX, scaled
with the screen) with text of the kiosk's size or larger.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtGui import QFont
from PySide6.QtWidgets import (
    QApplication,
    QGridLayout,
    QPushButton,
    QSizePolicy,
    QWidget,
)

ROWS = ("1234567890-", "qwertyuiop/", "asdfghjkl.?", "zxcvbnm,'")
SHIFT, BACKSPACE, SPACE, ENTER = "Shift", "⌫", "Space", "Enter"
COLUMNS = 11
MIN_KEY_PX = 64  # lockdown.TOUCH_PX: a touch target at 96 dpi
MIN_FONT_PT = 16  # lockdown.MIN_FONT_PT
T = QEvent.Type


class OnScreenKeyboard(QWidget):
    """Letters, digits, a few signs a part number or a question needs, Space, Backspace,
    Shift (the next letter upper case) and Enter (asks: the box's `submitted`)."""

    typed = Signal(str)  # each key, as a name: a character, SHIFT, BACKSPACE, ENTER

    def __init__(self, box, parent: QWidget | None = None, key_px: int = MIN_KEY_PX):
        super().__init__(parent)
        self.box = box
        self.shift = False
        self.setObjectName("onScreenKeyboard")
        self.setAccessibleName("On-screen keyboard")
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        self.keys: dict[str, QPushButton] = {}
        grid = QGridLayout(self)
        spacing = max(4, key_px // 10)
        grid.setSpacing(spacing)
        grid.setContentsMargins(spacing, spacing, spacing, spacing)
        for row, letters in enumerate(ROWS):
            for column, letter in enumerate(letters):
                grid.addWidget(self._key(letter, key_px), row, column)
        last = len(ROWS[-1])
        grid.addWidget(self._key(BACKSPACE, key_px, "Delete the last character"), len(ROWS) - 1, last,
                       1, COLUMNS - last)
        bottom = len(ROWS)
        grid.addWidget(self._key(SHIFT, key_px, "Shift: the next letter in capitals"), bottom, 0, 1, 2)
        grid.addWidget(self._key(SPACE, key_px, "Space"), bottom, 2, 1, 6)
        grid.addWidget(self._key(ENTER, key_px, "Ask the question"), bottom, 8, 1, COLUMNS - 8)
        self.keys[SHIFT].setCheckable(True)
        self.set_key_size(key_px)
        self.hide()

    def _key(self, name: str, key_px: int, description: str = "") -> QPushButton:
        button = QPushButton(name)
        button.setObjectName(f"key_{name}")
        button.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # the box keeps the focus (and its cursor)
        button.setAccessibleName(description or name)
        button.setAutoRepeat(name == BACKSPACE)
        button.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        button.clicked.connect(lambda _=False, key=name: self.press(key))
        self.keys[name] = button
        return button

    def set_key_size(self, key_px: int) -> None:
        """Keys of at least `key_px` each way, with text of at least the kiosk's size."""
        font = QFont(QApplication.font())
        font.setPointSizeF(max(font.pointSizeF(), MIN_FONT_PT))
        for button in self.keys.values():
            button.setMinimumSize(key_px, key_px)
            button.setFont(font)

    def press(self, key: str) -> None:
        """What a touch on `key` does to the question box."""
        if key == ENTER:
            self.box.submitted.emit()
            if not self.box.toPlainText():  # asked: the answer gets the room
                self.hide()
        elif key == BACKSPACE:
            self.box.textCursor().deletePreviousChar()
        elif key == SHIFT:
            self._set_shift(not self.shift)
        else:
            text = " " if key == SPACE else key
            if self.shift:
                text = text.upper()
                self._set_shift(False)
            self.box.textCursor().insertText(text)
            self.box.ensureCursorVisible()
        self.typed.emit(key)

    def _set_shift(self, on: bool) -> None:
        self.shift = on
        self.keys[SHIFT].setChecked(on)
        for name, button in self.keys.items():
            if len(name) == 1 and name.isalpha():
                button.setText(name.upper() if on else name)


class KeyboardHook(QObject):
    """Shows `keyboard` when `box` is touched (or clicked), hides it when the box loses the
    focus, and for good once a physical key is pressed anywhere in the app (a key event from the
    window system: spontaneous; the on-screen keys type without key events)."""

    def __init__(self, box, keyboard: OnScreenKeyboard):
        super().__init__(keyboard)
        self.box = box
        self.touched = box.viewport()  # what a finger on the box presses
        self.keyboard = keyboard
        self.physical_keyboard = False

    def start(self) -> None:
        QApplication.instance().installEventFilter(self)

    def stop(self) -> None:
        QApplication.instance().removeEventFilter(self)
        self.keyboard.hide()

    def _show(self) -> None:
        if not self.physical_keyboard:
            self.keyboard.show()

    def eventFilter(self, watched, event) -> bool:  # noqa: N802
        kind = event.type()
        if kind == T.KeyPress and event.spontaneous():
            self.physical_keyboard = True
            self.keyboard.hide()
        elif watched is self.touched and kind in (T.MouseButtonPress, T.TouchBegin):
            self._show()
        elif (watched is self.box and kind == T.FocusOut
              and event.reason() != Qt.FocusReason.ActiveWindowFocusReason):
            self.keyboard.hide()  # another part of the window took it (the PIN keypad...)
        return False
