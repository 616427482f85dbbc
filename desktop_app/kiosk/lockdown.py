"""Kiosk mode: a MainWindow locked down for a factory floor, and the audit log of questions.

    kiosk = Kiosk(window)        # an open MainWindow; timings from window.settings
    kiosk.start()                # full screen, frameless, locked down, audit log on

In kiosk mode the window fills the screen with no frame; closing, minimising and the usual
shortcuts (Alt+F4, Ctrl+Q, Ctrl+W, Esc, Ctrl+O, Ctrl+,) do nothing; there is no menu, no file
dialog, no drop, no settings and no way to the file system. A big "New question" button clears
the conversation, and so does `idle_reset_min` minutes without input. "Admin" asks for the
admin PIN (engine.kiosk.admin_pin) on an on-screen keypad; the right one shows the documents panel
and the admin buttons (settings, exit kiosk mode, close the app) until "Lock" or
`admin_relock_min` minutes without input.

    recorder = AuditRecorder(window)   # on its own (settings.audit_log), or as kiosk.audit

records one line per question (answered, refused, stopped or failed) in DATA_DIR/audit: it
gives the assistant's worker an engine.kiosk.audit.AuditSink, fed from the answer's events and
written on the worker's thread.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from PySide6.QtCore import QEvent, QObject, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QFont, QFontMetrics, QKeySequence, QPainter
from PySide6.QtWidgets import (
    QApplication,
    QDialog,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QProgressDialog,
    QPushButton,
    QScroller,
    QSizePolicy,
    QToolBar,
    QVBoxLayout,
    QWidget,
)

from desktop_app.controllers.inbox import start_inbox
from desktop_app.kiosk.keyboard import KeyboardHook, OnScreenKeyboard
from desktop_app.kiosk.x11_guard import (
    WINDOW_LOST_EXIT_CODE,
    WindowGuard,
    in_kiosk_session,
    keyboard_follows_pointer,
)
from desktop_app.theme import apply_theme
from engine.kiosk.admin_pin import PinGate
from engine.kiosk.audit import AuditLog, AuditSink

log = logging.getLogger(__name__)

TOUCH_PX = 64  # the height of a touch target at 96 dpi
MIN_FONT_PT = 16  # the kiosk text size: the settings' font_size, but never smaller
PIN_TICK_MS = 1000
PIN_BACKDROP = QColor(0, 0, 0, 110)
DOCUMENTS_SHARE = 0.55  # of the side's height, for the admin's documents panel
KEEP_CONVERSATIONS = 20  # the audit log is the record; these are for the admin to look at
# keys that close, quit, open files or settings: swallowed in kiosk mode
BLOCKED_KEYS = frozenset({"Alt+F4", "Ctrl+Q", "Ctrl+W", "Ctrl+F4", "Esc", "Ctrl+O", "Ctrl+Shift+O",
                          "Ctrl+,", "F11"})
BLOCKED_STANDARD = (QKeySequence.StandardKey.Quit, QKeySequence.StandardKey.Close,
                    QKeySequence.StandardKey.Open, QKeySequence.StandardKey.Preferences,
                    QKeySequence.StandardKey.Cancel, QKeySequence.StandardKey.FullScreen)
T = QEvent.Type
INPUT_EVENTS = frozenset({T.MouseButtonPress, T.MouseButtonDblClick, T.KeyPress, T.TouchBegin,
                          T.TouchUpdate, T.Wheel, T.TabletPress})
KEY_EVENTS = frozenset({T.KeyPress, T.ShortcutOverride})
DROP_EVENTS = frozenset({T.DragEnter, T.DragMove, T.Drop})
# actions that reach files, settings, other conversations or quit: off unless the admin unlocked
LOCKED_ACTIONS = ("new_action", "add_action", "add_folder_action", "settings_action", "quit_action",
                  "log_action", "cancel_index_action", "rename_action", "delete_action",
                  "focus_conversations_action", "focus_documents_action", "focus_source_action",
                  "about_action", "copy_action")
# every button of the window is a touch target; the question box grows by its padding (its
# height follows its text: chat/bubbles.py MessageInput)
KIOSK_STYLE = """
#kioskBar {{ spacing: {gap}px; padding: {gap}px; }}
#mainWindow QPushButton, #mainWindow QToolButton {{
    min-height: {touch}px; min-width: {touch}px; padding: 0 {gap}px; }}
#kioskBar QPushButton {{ padding: 0 {wide_gap}px; }}
#kioskBar #kioskNewQuestion {{ font-weight: bold; padding: 0 {wide}px; }}
#messageInput {{ padding: {input_pad}px {gap}px; }}
#pinCard {{ background: palette(window); border: 1px solid palette(mid); border-radius: {gap}px;
            padding: {gap}px; }}
#pinTitle {{ font-weight: bold; }}
#pinPanel QPushButton {{ min-height: {key}px; min-width: {key}px; }}
#pinEntry {{ min-height: {touch}px; }}
"""


def touch_px(widget: QWidget, base: int = TOUCH_PX) -> int:
    """`base` pixels at 96 dpi, scaled up on denser screens."""
    screen = widget.screen() or QApplication.primaryScreen()
    dpi = screen.logicalDotsPerInch() if screen is not None else 96.0
    return round(base * max(1.0, dpi / 96.0))


def input_padding(box, font: QFont, touch: int) -> int:
    """The padding above and below the text that makes the one-line question box `touch`
    pixels high: its height is a line of `font`, the document's margins and the padding (and a
    few pixels of frame, which only add to it)."""
    line = QFontMetrics(font).lineSpacing()
    margins = 2 * int(box.document().documentMargin())
    return max(4, -(-(touch - line - margins) // 2))


def is_blocked_key(event) -> bool:
    """Whether a key event closes, quits, opens files or settings (what kiosk mode swallows)."""
    if event.key() in (Qt.Key.Key_unknown, Qt.Key.Key_Control, Qt.Key.Key_Shift, Qt.Key.Key_Alt,
                       Qt.Key.Key_Meta):
        return False
    if any(event.matches(key) for key in BLOCKED_STANDARD):
        return True
    modifiers = event.modifiers() & ~Qt.KeyboardModifier.KeypadModifier
    text = QKeySequence(event.keyCombination().key().value | modifiers.value).toString(
        QKeySequence.SequenceFormat.PortableText)
    return text in BLOCKED_KEYS


# -- the audit log ----------------------------------------------------------------------------
class AuditRecorder(QObject):
    """Switches the audit log on for `window`: the assistant's worker feeds an AuditSink
    (engine.kiosk.audit) the events of every question, and writes its line on the worker's
    thread as the answer ends (answered, refused, stopped or failed). recorded and failed are
    emitted from that thread; connected slots run on the GUI thread."""

    recorded = Signal(object)  # AuditEntry, once it is on disk
    failed = Signal(str)

    def __init__(self, window, folder: Path | None = None):
        super().__init__(window)
        self.window = window
        self.sink = AuditSink(AuditLog(folder or window.paths.audit_folder),
                              on_recorded=lambda entry: self._emit("recorded", entry),
                              on_failed=lambda message: self._emit("failed", message))
        self.failed.connect(self._show_failure)
        window.assistant.set_audit(self.sink)

    def close(self) -> None:
        """Waits for the line being written; nothing is recorded after this."""
        self.sink.close()

    def wait(self) -> None:
        """Returns once the answer being recorded, if any, is on disk (for tests and shutdown)."""
        self.sink.wait()

    def _show_failure(self, message: str) -> None:
        self.window.statusBar().showMessage(message, 15000)

    def _emit(self, name: str, value) -> None:
        try:
            getattr(self, name).emit(value)
        except RuntimeError:  # the window (and this object) is gone: the line is written anyway
            pass


# -- the admin PIN ----------------------------------------------------------------------------
class PinPanel(QWidget):
    """The admin PIN on a large on-screen keypad, drawn inside the window over everything else:
    a child widget with no frame of its own (nothing to minimise, move or close), covering the
    window, so nothing behind it can be touched while it is open. The keyboard's digits,
    Backspace and Enter work too. `accepted` when the PIN is right, `rejected` on Cancel, then
    `finished`; wrong tries and the lockout are PinGate's."""

    accepted = Signal()
    rejected = Signal()
    finished = Signal(int)  # 1 accepted, 0 cancelled, as QDialog's

    def __init__(self, gate: PinGate, window: QWidget):
        super().__init__(window)
        self.gate = gate
        self.setObjectName("pinPanel")
        self.setAccessibleName("Administrator PIN")
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.entry = QLineEdit()
        self.entry.setObjectName("pinEntry")
        self.entry.setEchoMode(QLineEdit.EchoMode.Password)
        self.entry.setReadOnly(True)  # digits come from the keypad or keyPressEvent
        self.entry.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.entry.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.entry.setAccessibleName("Admin PIN")
        self.message = QLabel("Enter the admin PIN")
        self.message.setObjectName("pinMessage")
        self.message.setWordWrap(True)
        self.message.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.keys: dict[str, QPushButton] = {}
        grid = QGridLayout()
        for i, label in enumerate(["1", "2", "3", "4", "5", "6", "7", "8", "9", "⌫", "0", "OK"]):
            button = QPushButton(label)
            button.setFocusPolicy(Qt.FocusPolicy.NoFocus)
            button.setAccessibleName({"⌫": "Delete the last digit", "OK": "Check the PIN"}.get(label, label))
            button.clicked.connect(lambda _=False, key=label: self.press(key))
            grid.addWidget(button, i // 3, i % 3)
            self.keys[label] = button
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.cancel_button.clicked.connect(self.reject)
        self.card = QFrame()
        self.card.setObjectName("pinCard")
        title = QLabel("Administrator")
        title.setObjectName("pinTitle")
        title.setAlignment(Qt.AlignmentFlag.AlignCenter)
        column = QVBoxLayout(self.card)
        for widget in (title, self.message, self.entry):
            column.addWidget(widget)
        column.addLayout(grid)
        column.addWidget(self.cancel_button)
        outer = QVBoxLayout(self)
        outer.addWidget(self.card, 0, Qt.AlignmentFlag.AlignCenter)
        self.tick = QTimer(self)
        self.tick.setInterval(PIN_TICK_MS)
        self.tick.timeout.connect(self.refresh)
        window.installEventFilter(self)  # to keep covering it when it is resized
        # Its own shortcut overrides, by a filter: an event() override would run Qt's deferred
        # delete of the panel under Python's GIL, which deadlocked with a worker thread.
        self.installEventFilter(self)
        self.hide()
        self.refresh()

    def open(self) -> None:
        """Shows the keypad over the whole window and takes the keyboard."""
        self.setGeometry(self.parentWidget().rect())
        self.raise_()
        self.show()
        self.setFocus(Qt.FocusReason.PopupFocusReason)
        self.refresh()

    def accept(self) -> None:
        self._finish(self.accepted, 1)

    def reject(self) -> None:
        self._finish(self.rejected, 0)

    def _finish(self, signal, code: int) -> None:
        if not self.isVisible():
            return
        self.tick.stop()
        self.entry.clear()
        self.hide()
        signal.emit()
        self.finished.emit(code)

    def press(self, key: str) -> None:
        if not self.keys[key].isEnabled():  # locked out, or no PIN to check
            return
        if key == "OK":
            self.submit()
        elif key == "⌫":
            self.entry.backspace()
        elif len(self.entry.text()) < 12:
            self.entry.setText(self.entry.text() + key)

    def submit(self) -> None:
        pin = self.entry.text()
        self.entry.clear()
        result = self.gate.check(pin)
        if result.ok:
            self.accept()
        elif result.status == "wrong":
            tries = result.tries_left
            self.message.setText(f"Wrong PIN, {tries} {'try' if tries == 1 else 'tries'} left")
        else:
            self._show(result)

    def refresh(self) -> None:
        """Shows the lockout's seconds left, and opens the keypad again once it is over."""
        state = self.gate.state()
        if state.status == "ready":
            self.tick.stop()
            if not self.keys["OK"].isEnabled():
                self.message.setText("Enter the admin PIN")
            self._enable(True)
        else:
            self._show(state)

    def _show(self, result) -> None:
        if result.status == "locked":
            self.message.setText(f"Locked, try again in {max(1, round(result.locked_s))} s")
            self.tick.start()
        else:
            self.message.setText(result.reason or "The admin PIN cannot be checked.")
        self._enable(False)

    def _enable(self, enabled: bool) -> None:
        for button in self.keys.values():
            button.setEnabled(enabled)

    def keyPressEvent(self, event) -> None:  # noqa: N802
        text = event.text()
        if len(text) == 1 and text in self.keys:
            self.press(text)
        elif event.key() == Qt.Key.Key_Backspace:
            self.press("⌫")
        elif event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            self.press("OK")
        event.accept()  # everything else (Escape included) stops here: the keypad has its own Cancel

    def focusNextPrevChild(self, _next: bool) -> bool:  # noqa: N802
        return True  # Tab does not move the focus behind the keypad

    def mousePressEvent(self, event) -> None:  # noqa: N802
        event.accept()  # a touch beside the keypad reaches nothing behind it

    def paintEvent(self, _event) -> None:  # noqa: N802
        painter = QPainter(self)
        painter.fillRect(self.rect(), PIN_BACKDROP)  # the window dimmed behind the keypad

    def eventFilter(self, watched, event) -> bool:  # noqa: N802
        if watched is self and event.type() == T.ShortcutOverride:
            event.accept()  # every key is the keypad's while it is open: no window shortcut fires
            return True
        if watched is self.parentWidget() and event.type() == T.Resize:
            self.setGeometry(watched.rect())
        return False


# -- the kiosk --------------------------------------------------------------------------------
class Kiosk(QObject):
    """Kiosk mode on an open MainWindow; `start()` locks it down, `exit()` gives the normal
    window back, `close_app()` closes it for good. An application-wide event filter swallows
    what would close, minimise or reach files, and sees every input (idle and relock timers)."""

    stateChanged = Signal(str)  # "locked", "admin", "off"

    def __init__(self, window, *, clock=time.time):
        super().__init__(window)
        self.window = window
        self.settings = window.settings
        self.gate = PinGate(window.paths.pin_file, clock=clock)
        self.audit = AuditRecorder(window)
        self.state = "off"
        self.pin_panel: PinPanel | None = None
        self.guard: WindowGuard | None = None  # on X11, against other clients (x11_guard.py)
        self._may_close = False
        self._reset_pending = False
        self._style = ""
        self.idle_timer = self._timer(self.settings.idle_reset_min, self.reset_idle)
        self.relock_timer = self._timer(self.settings.admin_relock_min, self.lock)
        window.chat.busyChanged.connect(self._on_busy)
        window.chat.citationClicked.connect(self._show_source)
        self._build_bar()
        # under the question box, for touch screens with no keyboard (keyboard.py)
        self.keyboard = OnScreenKeyboard(window.chat.input, key_px=touch_px(window))
        window.chat.layout().addWidget(self.keyboard)
        self.keyboard_hook = KeyboardHook(window.chat.input, self.keyboard)
        app = QApplication.instance()
        app.aboutToQuit.connect(self.audit.close)

    def _timer(self, minutes: float, slot) -> QTimer:
        timer = QTimer(self)
        timer.setSingleShot(True)
        timer.setInterval(int(minutes * 60_000))
        timer.timeout.connect(slot)
        return timer

    def _build_bar(self) -> None:
        bar = QToolBar("Kiosk")
        bar.setObjectName("kioskBar")
        bar.setMovable(False)
        bar.setFloatable(False)
        bar.toggleViewAction().setEnabled(False)
        self.new_button = QPushButton("New question")
        self.new_button.setObjectName("kioskNewQuestion")
        self.new_button.setAccessibleName("New question: clear the conversation")
        self.new_button.clicked.connect(self.new_question)
        self.title = QLabel("Ask a question about the machine's manuals")
        self.title.setObjectName("kioskTitle")
        self.title.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.title.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.admin_button = QPushButton("Admin")
        self.admin_button.setAccessibleName("Administrator: enter the PIN")
        self.admin_button.clicked.connect(self.ask_pin)
        self.settings_button = QPushButton("Settings…")
        self.settings_button.clicked.connect(self.open_settings)
        self.exit_button = QPushButton("Exit kiosk mode")
        self.exit_button.clicked.connect(self.exit)
        self.close_button = QPushButton("Close the app")
        self.close_button.clicked.connect(self.close_app)
        self.lock_button = QPushButton("Lock")
        self.lock_button.setAccessibleName("Lock the admin panel")
        self.lock_button.clicked.connect(self.lock)
        row = QWidget()
        row.setObjectName("kioskRow")
        line = QHBoxLayout(row)
        line.setContentsMargins(0, 0, 0, 0)
        line.addWidget(self.new_button)
        line.addWidget(self.title, 1)
        self._admin_buttons = [self.settings_button, self.exit_button, self.close_button, self.lock_button]
        for button in (*self._admin_buttons, self.admin_button):
            line.addWidget(button)
        bar.addWidget(row)
        self.bar = bar

    # -- entering and leaving ----------------------------------------------------------------
    def start(self) -> None:
        """Full screen, frameless, locked down; the conversation starts empty."""
        w = self.window
        app = QApplication.instance()
        app.installEventFilter(self)
        w.addToolBar(Qt.ToolBarArea.TopToolBarArea, self.bar)
        self.bar.show()
        w.menuBar().hide()
        main_toolbar = w.findChild(QToolBar, "mainToolbar")
        if main_toolbar is not None:
            main_toolbar.hide()
        w.conversations.hide()
        w.side.hide()  # the chat gets the screen until a citation is opened
        w.setContextMenuPolicy(Qt.ContextMenuPolicy.NoContextMenu)  # no toolbar menu
        self._apply_look()
        self._touch_scrolling(True)
        w.setWindowFlag(Qt.WindowType.FramelessWindowHint, True)
        w.showFullScreen()
        self._fill_screen()
        w.chat.set_kiosk(True)  # the welcome text never says to drop files here
        self._set_state("locked")
        self.keyboard_hook.start()
        self.new_question()
        if in_kiosk_session():
            keyboard_follows_pointer()  # with no window manager nobody else gives it the keys
            w.activateWindow()
        if QApplication.platformName() == "xcb":
            self.guard = WindowGuard(w, is_ours=lambda: self.state != "off" and not self._may_close,
                                     on_lost=self._window_lost)
            app.installNativeEventFilter(self.guard)
        log.info("kiosk mode on")

    def exit(self) -> None:
        """Leaves kiosk mode (the admin's "Exit kiosk mode"): the normal window comes back."""
        if self.state == "off":
            return
        w = self.window
        self._close_dialogs()
        self._set_state("off")
        QApplication.instance().removeEventFilter(self)
        self._remove_guard()
        self.keyboard_hook.stop()
        self.idle_timer.stop()
        self.relock_timer.stop()
        w.removeToolBar(self.bar)
        w.menuBar().show()
        main_toolbar = w.findChild(QToolBar, "mainToolbar")
        if main_toolbar is not None:
            main_toolbar.show()
        w.conversations.show()
        w.side.show()
        w.setContextMenuPolicy(Qt.ContextMenuPolicy.DefaultContextMenu)
        self._touch_scrolling(False)
        apply_theme(QApplication.instance(), w.settings.theme, w.settings.font_size)
        w.setStyleSheet(self._style)  # after the font: a styled widget takes it when re-styled
        w.setWindowFlag(Qt.WindowType.FramelessWindowHint, False)
        w.chat.set_kiosk(False)
        w.showNormal()
        log.info("kiosk mode off")

    def close_app(self) -> None:
        """Closes the window for good (the admin's "Close the app")."""
        self._may_close = True
        self._close_dialogs()
        QApplication.instance().removeEventFilter(self)
        self._remove_guard()
        self.window.close()
        self.audit.close()

    def _window_lost(self) -> None:
        """Another X client destroyed the window: the app ends, to be started again (by the
        kiosk session or systemd) with a new one."""
        self.close_app()
        QApplication.exit(WINDOW_LOST_EXIT_CODE)

    def _remove_guard(self) -> None:
        if self.guard is not None:
            QApplication.instance().removeNativeEventFilter(self.guard)
            self.guard = None

    # -- the admin ---------------------------------------------------------------------------
    def ask_pin(self) -> PinPanel:
        """Opens the PIN keypad over the window; the right PIN unlocks the admin panel."""
        if self.pin_panel is None:
            panel = PinPanel(self.gate, self.window)
            panel.accepted.connect(self.unlock)
            panel.finished.connect(self._forget_pin_panel)
            self.pin_panel = panel
        self.pin_panel.open()
        return self.pin_panel

    def unlock(self) -> None:
        if self.state == "locked":
            self._set_state("admin")
            log.info("kiosk: admin panel unlocked")

    def lock(self) -> None:
        if self.state == "admin":
            self._close_dialogs()
            self._set_state("locked")
            log.info("kiosk: admin panel locked")

    def open_settings(self) -> bool:
        if self.state != "admin":
            return False
        changed = self.window.open_settings()
        if self.state != "off":
            self._apply_look()  # the dialog's font size, but never below the kiosk's
        return changed

    # -- the conversation --------------------------------------------------------------------
    def new_question(self) -> None:
        """Back to the welcome screen: the answer is stopped, a new conversation begins."""
        w = self.window
        w.chat.stop()
        w.conversations.new_conversation()
        w.conversations.keep_latest(KEEP_CONVERSATIONS)
        w.chat.clear()
        w.chat.input.clear()
        w.source.clear()
        w.side.setVisible(self.state == "admin")
        w.chat.focus_input()
        self._reset_pending = False

    def reset_idle(self) -> None:
        """The idle timer ran out: reset, or once the answer being written is done."""
        if self.window.chat.is_busy():
            self._reset_pending = True
            return
        self._close_dialogs(pin_too=True)
        self.new_question()
        log.info("kiosk: idle reset")

    def _on_busy(self, busy: bool) -> None:
        if not busy and self._reset_pending and self.state != "off":
            QTimer.singleShot(0, self, self.reset_idle)  # after the chat has stored the turn

    def _show_source(self, _citation) -> None:
        if self.state != "off":
            self.window.side.show()

    # -- the lock-down -----------------------------------------------------------------------
    def _set_state(self, state: str) -> None:
        self.state = state
        admin = state != "locked"
        w = self.window
        for name in LOCKED_ACTIONS:
            getattr(w, name).setEnabled(admin)
        for button in self._admin_buttons:
            button.setVisible(state == "admin")
        self.admin_button.setVisible(state == "locked")
        w.setAcceptDrops(admin)
        w.documents.setAcceptDrops(admin)
        w.documents.setVisible(admin)
        if admin:
            w.side.show()
        for button in (w.documents.add_button, w.documents.add_folder_button):
            button.setEnabled(admin)
        if state == "locked":
            self.relock_timer.stop()
            self.idle_timer.start()
        elif state == "admin":
            self.relock_timer.start()
            self._make_room_for_documents()
        self.stateChanged.emit(state)

    def _make_room_for_documents(self) -> None:
        """The documents panel gets a share of the side where its touch-sized rows fit (its
        splitter gave it a sliver under the source)."""
        sizes = self.window.side.sizes()
        total = sum(sizes)
        if total and sizes[0] < total * DOCUMENTS_SHARE:
            documents = round(total * DOCUMENTS_SHARE)
            self.window.side.setSizes([documents, total - documents])

    def _scroll_areas(self) -> list:
        w = self.window
        return [w.chat.scroll, w.source.pdf_view, w.source.text_view, w.documents.list]

    def _touch_scrolling(self, on: bool) -> None:
        """A finger dragged over the conversation, the page or the list scrolls it (Qt's
        scroll areas scroll only by their bars and the wheel otherwise)."""
        for area in self._scroll_areas():
            if on:
                QScroller.grabGesture(area.viewport(), QScroller.ScrollerGestureType.TouchGesture)
            else:
                QScroller.ungrabGesture(area.viewport())

    def _apply_look(self) -> None:
        """The kiosk text size and touch-sized targets. The font comes first: a widget under a
        style sheet takes the application's font only when it is styled again."""
        w = self.window
        if not self._style:
            self._style = w.styleSheet()
        app = QApplication.instance()
        apply_theme(app, w.settings.theme, max(w.settings.font_size, MIN_FONT_PT))
        touch = touch_px(w)
        w.setStyleSheet(self._style + KIOSK_STYLE.format(
            touch=touch, gap=touch // 8, wide_gap=touch // 4, wide=touch // 2, key=touch * 5 // 4,
            input_pad=input_padding(w.chat.input, app.font(), touch)))
        self.keyboard.set_key_size(touch)
        # the box sets its height on a font change, which the style sheet applies before the
        # padding: once more, with the padding in place
        QApplication.sendEvent(w.chat.input, QEvent(T.FontChange))

    def _close_dialogs(self, pin_too: bool = False) -> None:
        """Closes the admin's open dialogs (settings, file dialogs) and, with `pin_too`, the keypad."""
        for widget in QApplication.topLevelWidgets():
            if isinstance(widget, QProgressDialog) or not isinstance(widget, QDialog):
                continue  # the first start's progress is no admin's dialog
            if widget.isVisible():
                widget.reject()
        if pin_too and self.pin_panel is not None:
            self.pin_panel.reject()

    def _forget_pin_panel(self, _result: int) -> None:
        panel, self.pin_panel = self.pin_panel, None
        if panel is not None:
            panel.deleteLater()

    def _full_screen(self) -> None:
        w = self.window
        if self.state == "off":
            return
        if w.isMinimized() or not w.isFullScreen():
            w.showFullScreen()
        self._fill_screen()

    def _fill_screen(self) -> None:
        """In the kiosk session the window takes the screen's geometry itself (and back, when
        another X client moves or resizes it): there is no window manager to honour full screen,
        and the window kept its last size (its question box off the bottom of a smaller screen)."""
        w = self.window
        if self.state == "off" or not in_kiosk_session():
            return
        if not w.isActiveWindow():
            w.activateWindow()
        screen = w.screen()
        if screen is not None and w.geometry() != screen.geometry():
            w.setGeometry(screen.geometry())

    def eventFilter(self, watched, event) -> bool:  # noqa: N802
        kind = event.type()
        if kind in INPUT_EVENTS:
            self._reset_pending = False
            self.idle_timer.start()
            if self.state == "admin":
                self.relock_timer.start()
        if kind in KEY_EVENTS and is_blocked_key(event):
            event.accept()  # an accepted ShortcutOverride keeps the shortcut from firing
            return True
        panel = self.pin_panel
        if kind == T.KeyPress and panel is not None and panel.isVisible() and watched is not panel:
            QApplication.sendEvent(panel, event)  # typed anywhere, a key is the open keypad's
            return True
        if watched is self.window:
            if kind == T.Close and not self._may_close:
                event.ignore()
                return True
            if kind == T.WindowStateChange:
                QTimer.singleShot(0, self, self._full_screen)
            elif kind in (T.Move, T.Resize) and self.state != "off":
                QTimer.singleShot(0, self, self._fill_screen)
        if kind in DROP_EVENTS and self.state == "locked":
            event.ignore()
            return True
        return False


def install(window, kiosk: bool = False, clock=time.time) -> Kiosk | AuditRecorder | None:
    """What the app calls once the window is shown: kiosk mode when asked for (the flag or the
    settings), else the audit log alone when the settings turn it on. The administrator's inbox
    folder (settings.inbox_folder) is watched in both modes, and still after "Exit kiosk mode"."""
    start_inbox(window)
    if kiosk or window.settings.kiosk:
        mode = Kiosk(window, clock=clock)
        mode.start()
        return mode
    if window.settings.audit_log:
        recorder = AuditRecorder(window)
        QApplication.instance().aboutToQuit.connect(recorder.close)
        return recorder
    return None
