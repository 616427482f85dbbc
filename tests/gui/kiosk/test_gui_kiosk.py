"""Kiosk mode as an operator and an administrator meet it: nothing closes, minimises, opens a
file, a URL or a process without the admin PIN; wrong PINs lock out; the idle reset clears the
conversation; each question leaves one line in the audit log. On real widgets, the real store
and embedder and the tiny random LLM."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from PySide6.QtCore import QMimeData, QPoint, QProcess, Qt, QThread, QUrl
from PySide6.QtGui import QDesktopServices, QDragEnterEvent, QKeySequence, QTextCursor
from PySide6.QtTest import QTest
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractItemView,
    QApplication,
    QFileDialog,
    QLabel,
    QLineEdit,
    QMessageBox,
    QPlainTextEdit,
    QTextEdit,
    QWidget,
)

from desktop_app.kiosk import lockdown
from desktop_app.kiosk.lockdown import (
    KEEP_CONVERSATIONS,
    MIN_FONT_PT,
    TOUCH_PX,
    AuditRecorder,
    Kiosk,
    install,
    touch_px,
)
from desktop_app.main_window import MainWindow
from engine.answer.assistant import PassagesEvent
from engine.config import Settings
from engine.conversations import ConversationStore
from engine.kiosk.admin_pin import set_pin
from engine.kiosk.audit import collection_version, model_version, read_tail
from engine.paths import AppPaths
from engine.store.index_store import IndexStore
from tests.helpers.fake_clock import Clock
from tests.helpers.pump_chat import ANSWER, ANSWER_MS, LOAD_MS, REFUSE, Hold

pytestmark = pytest.mark.usefixtures("same_look_after")  # tests/conftest.py

QUESTION = "How do I prime the pump with clean water before the first start?"
PIN = "4711"


@pytest.fixture
def data(indexed_copy) -> AppPaths:
    """A fresh data dir whose collection holds the pump manual, with an admin PIN set."""
    set_pin(indexed_copy.pin_file, PIN)
    return indexed_copy


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def open_kiosk(qtbot, data, tiny_llm_dir, clock):
    """open_kiosk(**settings) -> a started Kiosk on a new window; closed for good afterwards."""
    opened = []

    def shut(window) -> None:
        for kiosk in opened:
            if kiosk.window is window:
                kiosk.close_app()
        window.close()

    def open_(answer=ANSWER, **settings) -> Kiosk:
        window = MainWindow(data, "cpu", Settings(**settings), llm_folder=tiny_llm_dir,
                            assistant_settings=answer)
        qtbot.addWidget(window, before_close_func=shut)
        with qtbot.waitSignal(window.assistant.modelReady, timeout=LOAD_MS):
            window.show()
        qtbot.waitExposed(window)
        kiosk = Kiosk(window, clock=clock)
        opened.append(kiosk)
        kiosk.start()
        return kiosk

    return open_


def start_held(qtbot, window, monkeypatch, question: str) -> Hold:
    """Starts an answer and holds it after its first piece (the tiny model is fast)."""
    hold = Hold(window.assistant.worker, monkeypatch)
    assert window.chat.ask(question)
    qtbot.waitUntil(hold.reached.is_set, timeout=ANSWER_MS)
    return hold


def ask(qtbot, window, question: str = QUESTION):
    with qtbot.waitSignal(window.chat.answerFinished, timeout=ANSWER_MS) as finished:
        window.chat.input.setPlainText(question)
        assert window.chat.send()
    return finished.args[0]


def enter_pin(qtbot, kiosk: Kiosk, pin: str) -> None:
    keypad = kiosk.pin_panel
    for key in [*pin, "OK"]:
        qtbot.mouseClick(keypad.keys[key], Qt.MouseButton.LeftButton)


def audit_lines(paths: AppPaths) -> list[dict]:
    return [json.loads(line) for line in read_tail(paths.audit_folder, 100)]


# -- locked down ---------------------------------------------------------------------------------
def test_the_kiosk_is_full_screen_frameless_and_locked_down(qtbot, open_kiosk):
    kiosk = open_kiosk()
    w = kiosk.window
    assert w.isFullScreen() and w.windowFlags() & Qt.WindowType.FramelessWindowHint
    assert not w.menuBar().isVisible() and not w.conversations.isVisible()
    assert not w.documents.isVisible() and not w.acceptDrops()
    for action in (w.add_action, w.add_folder_action, w.settings_action, w.quit_action, w.log_action):
        assert not action.isEnabled(), action.text()
    assert kiosk.new_button.isVisible() and kiosk.admin_button.isVisible()
    assert not kiosk.exit_button.isVisible() and not kiosk.settings_button.isVisible()
    assert QApplication.font().pointSize() >= 16
    assert w.chat.messages() == [] and w.chat.empty.isVisible()


def test_kiosk_mode_alone_makes_the_welcome_text_the_kiosks_and_leaving_it_brings_the_desktops_back(
        qtbot, open_kiosk):
    from desktop_app.chat.view import welcome_text

    kiosk = open_kiosk()  # --kiosk: the settings themselves do not say kiosk
    w = kiosk.window
    assert not w.settings.kiosk
    documents = w.chat._documents
    assert w.chat.empty.text() == welcome_text(documents, kiosk=True)
    assert not any(word in w.chat.empty.text() for word in ("Drop", "Ctrl+O", "Add documents"))
    kiosk.exit()
    assert w.chat.empty.text() == welcome_text(documents, kiosk=False)


def test_close_minimise_and_shortcuts_are_ignored(qtbot, open_kiosk, monkeypatch):
    kiosk = open_kiosk()
    w = kiosk.window
    w.chat.input.setFocus()
    assert not w.close()  # as Alt+F4 through the window manager, or the frame's close button
    assert w.isVisible() and w.assistant._thread.isRunning()
    triggered = []
    for action in w.actions():
        action.triggered.connect(lambda _=False, a=action: triggered.append(a.text()))
    keys = ["Alt+F4", "Ctrl+Q", "Ctrl+W", "Ctrl+F4", "Esc", "Ctrl+O", "Ctrl+Shift+O", "Ctrl+,"]
    for text in keys:
        combo = QKeySequence(text)[0]
        qtbot.keyClick(w.chat.input, combo.key(), combo.keyboardModifiers())
    assert triggered == [] and w.isVisible() and w.isFullScreen()
    w.showMinimized()
    qtbot.waitUntil(lambda: w.isFullScreen() and not w.isMinimized(), timeout=5000)
    QApplication.closeAllWindows()
    assert w.isVisible()
    # Escape does not stop an answer either: the on-screen Stop button does
    hold = start_held(qtbot, w, monkeypatch, QUESTION)
    qtbot.keyClick(w.chat.input, Qt.Key.Key_Escape)
    assert w.chat.is_busy() and w.chat.stop_button.isVisible()
    qtbot.mouseClick(w.chat.stop_button, Qt.MouseButton.LeftButton)
    hold.release.set()
    assert w.chat.last_answer().state.stopped


LINKS = ["cite:1", "https://example.com/x", "http://example.com", "file:///etc/passwd", "mailto:a@b.c",
         "javascript:alert(1)", "manual.pdf", "../../etc/shadow", "ftp://example.com/f", "data:text/html,hi"]


def test_no_file_dialog_url_or_process_is_reachable_without_the_pin(qtbot, open_kiosk, monkeypatch, pump_pdf):
    kiosk = open_kiosk()
    w = kiosk.window
    ask(qtbot, w)
    calls = []

    def forbid(name):
        return lambda *a, **k: calls.append(name)

    for name in ("getOpenFileName", "getOpenFileNames", "getExistingDirectory", "getSaveFileName",
                 "getOpenFileUrl", "getOpenFileUrls", "getExistingDirectoryUrl", "getSaveFileUrl"):
        monkeypatch.setattr(QFileDialog, name, forbid(name))
    monkeypatch.setattr(QFileDialog, "exec", forbid("QFileDialog.exec"))
    monkeypatch.setattr(QDesktopServices, "openUrl", forbid("openUrl"))
    monkeypatch.setattr(QProcess, "startDetached", forbid("startDetached"))
    monkeypatch.setattr(QProcess, "start", forbid("QProcess.start"))
    monkeypatch.setattr(subprocess, "Popen", forbid("Popen"))

    # every link type, clicked with the mouse in an answer's browser
    browser = w.chat.last_answer().browser
    browser.setHtml("".join(f'<p><a href="{href}">link{i}</a></p>' for i, href in enumerate(LINKS)))
    cited = []
    w.source.sourceShown.connect(lambda *args: cited.append(args))
    for i, href in enumerate(LINKS):
        cursor = browser.document().find(f"link{i}")
        cursor.setPosition(cursor.selectionStart() + 1, QTextCursor.MoveMode.MoveAnchor)
        where = browser.cursorRect(cursor).center()
        with qtbot.waitSignal(browser.anchorClicked, timeout=2000) as clicked:
            qtbot.mouseClick(browser.viewport(), Qt.MouseButton.LeftButton, pos=where)
        assert clicked.args[0].toString() == href
    qtbot.waitUntil(lambda: len(cited) == 1, timeout=10_000)  # only our own citation opens
    assert cited[0][:2] == (str(pump_pdf), w.chat.last_answer().state.citations[0].passage.page)

    about = []
    monkeypatch.setattr(QMessageBox, "about", lambda *a: about.append(a))  # it names the data folder
    # every action and every blocked shortcut; a drop of a file; every button but Admin's
    for action in w.actions():
        action.trigger()
    for text in ("Ctrl+O", "Ctrl+Shift+O", "Ctrl+,", "Ctrl+Q"):
        combo = QKeySequence(text)[0]
        qtbot.keyClick(w.chat.input, combo.key(), combo.keyboardModifiers())
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(pump_pdf))])
    enter = QDragEnterEvent(QPoint(50, 50), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                            Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(w, enter)
    assert not enter.isAccepted()
    for button in w.findChildren(QAbstractButton):
        if button.isVisible() and button.isEnabled() and button is not kiosk.admin_button:
            qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    assert calls == [] and about == []
    assert w.isVisible() and kiosk.state == "locked"
    assert not [d for d in QApplication.topLevelWidgets() if d.isVisible() and d is not w]


@pytest.mark.parametrize("shown", ["chat", "source", "admin"])
def test_the_layout_fits_from_1024x768_to_4k(qtbot, open_kiosk, shown):
    kiosk = open_kiosk()
    w = kiosk.window
    ask(qtbot, w)
    if shown == "admin":
        kiosk.ask_pin()
        enter_pin(qtbot, kiosk, PIN)
    source_open = shown != "chat"
    if source_open:
        with qtbot.waitSignal(w.source.sourceShown, timeout=10_000):
            w.chat.last_answer().browser.anchorClicked.emit(QUrl("cite:1"))
    assert w.source.isVisible() == source_open
    for width, height in ((1024, 768), (3840, 2160)):
        w.resize(width, height)
        qtbot.waitUntil(lambda: w.size().width() == width, timeout=5000)
        QApplication.processEvents()
        hint = w.minimumSizeHint()
        assert hint.width() <= 1024 and hint.height() <= 768, hint
        for widget in w.findChildren(QWidget):
            if widget.isVisible() and not widget.isWindow():
                assert widget.width() <= width, widget
        buttons = [kiosk.new_button, w.chat.send_button]
        buttons += [kiosk.settings_button, kiosk.exit_button, kiosk.close_button, kiosk.lock_button] \
            if shown == "admin" else [kiosk.admin_button]
        for button in buttons:
            corner = button.mapTo(w, QPoint(button.width(), button.height()))
            assert corner.x() <= width and corner.y() <= height, button.text()
            assert button.height() >= 48, button.text()
        assert kiosk.new_button.height() >= 64
        assert w.chat.width() >= (width * 2 // 5 if source_open else width * 9 // 10)


def test_at_1366x768_the_welcome_is_whole_and_an_answer_offers_no_copy(qtbot, open_kiosk):
    """Issue 29: the welcome text was a narrow column cut mid-line under the on-screen keyboard,
    the answer offered "Copy", which means nothing at a kiosk, and the box asked about "your"
    manuals."""
    kiosk = open_kiosk()
    w = kiosk.window
    w.resize(1366, 768)
    qtbot.waitUntil(lambda: (w.width(), w.height()) == (1366, 768), timeout=5000)
    welcome = w.chat.empty
    kiosk.keyboard.show()  # as when the question box is touched: the view gets short
    qtbot.waitUntil(lambda: w.chat.scroll.viewport().height() < welcome.heightForWidth(welcome.width()) + 100)
    assert welcome.height() >= welcome.heightForWidth(welcome.width())  # every line: it scrolls, not cut
    assert welcome.width() >= welcome.fontMetrics().averageCharWidth() * 50  # lines, not a column of words
    assert w.chat.input.placeholderText() == "Ask a question about the manuals…"  # not "your": a station's
    ask(qtbot, w)
    answer = w.chat.last_answer()
    assert answer.regenerate_button.isVisible() and not answer.copy_button.isVisible()
    assert not w.copy_action.isEnabled()
    kiosk.exit()  # the normal window copies again
    assert w.chat.last_answer().copy_button.isVisible() and w.copy_action.isEnabled()
    assert w.chat.input.placeholderText() == "Ask a question about your manuals…"


# -- large text and touch targets -----------------------------------------------------------------
TEXT_WIDGETS = (QLabel, QAbstractButton, QLineEdit, QPlainTextEdit, QTextEdit, QAbstractItemView)


def shown_text_widgets(window) -> list[QWidget]:
    return [widget for widget in window.findChildren(QWidget)
            if widget.isVisible() and isinstance(widget, TEXT_WIDGETS)]


def points(widget: QWidget) -> float:
    """The widget's font size in points, as the style sheet left it (a pixel size converted)."""
    font = widget.font()
    if font.pointSizeF() > 0:
        return font.pointSizeF()
    return font.pixelSize() * 72.0 / widget.logicalDpiY()


def open_answer_and_source(qtbot, window) -> None:
    ask(qtbot, window)
    with qtbot.waitSignal(window.source.sourceShown, timeout=10_000):
        window.chat.last_answer().browser.anchorClicked.emit(QUrl("cite:1"))


@pytest.mark.parametrize("font_size", [11, 20])
def test_every_text_is_at_least_the_kiosk_text_size(qtbot, open_kiosk, font_size):
    kiosk = open_kiosk(font_size=font_size)
    w = kiosk.window
    smallest = max(font_size, MIN_FONT_PT)
    seen = {}

    def look(where: str) -> None:
        QApplication.processEvents()
        for widget in shown_text_widgets(w):
            seen.setdefault(where, []).append(widget)
            name = f"{where}: {type(widget).__name__} {widget.objectName()!r}"
            assert points(widget) >= smallest, (name, points(widget))

    look("welcome")
    open_answer_and_source(qtbot, w)
    look("answer")
    kiosk.ask_pin()
    look("keypad")
    enter_pin(qtbot, kiosk, PIN)
    look("admin")
    welcome = {widget for widget in seen["welcome"]}
    for widget in (w.chat.input, w.chat.empty, w.chat.send_button, kiosk.new_button, kiosk.title,
                   kiosk.admin_button, w.index_label):
        assert widget in welcome, widget.objectName()  # what the measuring looked at
    assert w.source.title in seen["answer"] and w.source.next_button in seen["answer"]
    assert w.documents.list in seen["admin"]


class _Screen:
    def __init__(self, dpi: float):
        self.dpi = dpi

    def logicalDotsPerInch(self) -> float:  # noqa: N802
        return self.dpi


class _OnScreen:
    def __init__(self, dpi: float):
        self._screen = _Screen(dpi)

    def screen(self) -> _Screen:
        return self._screen


def test_a_touch_target_is_64_px_at_96_dpi_and_grows_with_the_screens_dpi(qtbot):
    assert touch_px(_OnScreen(96)) == TOUCH_PX == 64
    assert touch_px(_OnScreen(144)) == 96 and touch_px(_OnScreen(192)) == 128
    assert touch_px(_OnScreen(72)) == 64  # never smaller than at 96 dpi


def assert_touch_sized(widgets, touch: int) -> None:
    for widget in widgets:
        name = widget.text() if isinstance(widget, QAbstractButton) else widget.objectName()
        assert widget.isVisible(), name
        assert widget.height() >= touch and widget.width() >= touch, (name, widget.size(), touch)
        if isinstance(widget, QAbstractButton):
            assert widget.sizeHint().height() >= touch, (name, widget.sizeHint(), touch)


@pytest.mark.parametrize("dpi", [96, 144])
def test_the_question_box_and_the_buttons_are_touch_sized(qtbot, open_kiosk, monkeypatch, dpi):
    """At the offscreen platform's 96 dpi, and on a denser screen (its logical DPI stood in for)."""
    if dpi != 96:
        monkeypatch.setattr(lockdown, "touch_px", lambda widget, base=TOUCH_PX: round(base * dpi / 96))
    kiosk = open_kiosk()
    w = kiosk.window
    touch = round(TOUCH_PX * dpi / 96)
    assert_touch_sized([w.chat.input, w.chat.send_button, kiosk.new_button, kiosk.admin_button], touch)
    open_answer_and_source(qtbot, w)
    source = w.source
    answer = w.chat.last_answer()
    assert_touch_sized([w.chat.input, source.previous_button, source.next_button, source.zoom_in_button,
                        source.zoom_out_button, source.fit_button,
                        answer.regenerate_button, answer.evidence_button], touch)
    hold = start_held(qtbot, w, monkeypatch, "And how do I open the bleed valve?")
    assert_touch_sized([w.chat.stop_button], touch)
    qtbot.mouseClick(w.chat.stop_button, Qt.MouseButton.LeftButton)
    hold.release.set()
    keypad = kiosk.ask_pin()
    assert_touch_sized([*keypad.keys.values(), keypad.cancel_button, keypad.entry], touch)
    enter_pin(qtbot, kiosk, PIN)
    assert_touch_sized([kiosk.settings_button, kiosk.exit_button, kiosk.close_button, kiosk.lock_button,
                        w.documents.add_button, w.documents.add_folder_button], touch)


def drag_with_a_finger(area, dy: int) -> None:
    """Touches the middle of `area`, moves `dy` pixels down and lets go."""
    device = QTest.createTouchDevice()
    viewport = area.viewport()
    at = viewport.rect().center()
    QTest.touchEvent(viewport, device).press(0, at, viewport).commit()
    for step in range(1, 21):
        QTest.touchEvent(viewport, device).move(0, at + QPoint(0, dy * step // 20), viewport).commit()
    QTest.touchEvent(viewport, device).release(0, at + QPoint(0, dy), viewport).commit()


def test_a_finger_drag_scrolls_the_conversation(qtbot, open_kiosk):
    kiosk = open_kiosk()
    w = kiosk.window
    w.chat.set_messages([{"role": "user", "content": f"question {n} " * 20} for n in range(30)])
    bar = w.chat.scroll.verticalScrollBar()
    qtbot.waitUntil(lambda: bar.maximum() > 1000, timeout=5000)  # all 30 laid out, not the first few
    bar.setValue(bar.maximum())
    bottom = bar.value()
    drag_with_a_finger(w.chat.scroll, 200)  # down: back towards the first question
    qtbot.waitUntil(lambda: bar.value() < bottom - 100, timeout=3000)  # its animation runs on a timer


def test_the_admin_sees_several_documents_at_once(qtbot, open_kiosk):
    kiosk = open_kiosk()
    w = kiosk.window
    open_answer_and_source(qtbot, w)
    kiosk.ask_pin()
    enter_pin(qtbot, kiosk, PIN)
    QApplication.processEvents()
    rows = w.documents.list.viewport().height() / max(1, w.documents.list.sizeHintForRow(0))
    assert rows >= 3, rows


# -- the admin PIN ---------------------------------------------------------------------------------
def test_the_pin_keypad_is_a_frameless_panel_over_the_window(qtbot, open_kiosk):
    kiosk = open_kiosk()
    w = kiosk.window
    windows = set(QApplication.topLevelWidgets())
    qtbot.mouseClick(kiosk.admin_button, Qt.MouseButton.LeftButton)
    keypad = kiosk.pin_panel
    assert keypad.isVisible() and not keypad.isWindow() and keypad.window() is w
    assert set(QApplication.topLevelWidgets()) == windows  # no window of its own to close or minimise
    assert keypad.geometry() == w.rect()
    for behind in (kiosk.new_button, w.chat.input, w.chat.send_button):  # a touch there hits the keypad
        hit = w.childAt(behind.mapTo(w, behind.rect().center()))
        assert hit is keypad or keypad.isAncestorOf(hit), behind.objectName()
    w.resize(1024, 768)
    qtbot.waitUntil(lambda: w.width() == 1024, timeout=5000)
    assert keypad.geometry() == w.rect()
    # the keyboard: digits typed anywhere are the keypad's; Backspace, Escape, Tab, Enter
    qtbot.keyClicks(w.chat.input, "47")
    assert keypad.entry.text() == "47" and w.chat.input.toPlainText() == ""
    qtbot.keyClick(keypad, Qt.Key.Key_Backspace)
    assert keypad.entry.text() == "4"
    for key in (Qt.Key.Key_Escape, Qt.Key.Key_Tab):
        qtbot.keyClick(keypad, key)
    assert keypad.isVisible() and kiosk.state == "locked"
    qtbot.keyClicks(keypad, "711")
    qtbot.keyClick(keypad, Qt.Key.Key_Return)
    assert kiosk.state == "admin" and not keypad.isVisible()


def test_the_keypad_cancels_and_the_idle_reset_closes_it(qtbot, open_kiosk):
    kiosk = open_kiosk()
    keypad = kiosk.ask_pin()
    qtbot.keyClicks(keypad, "12")
    qtbot.mouseClick(keypad.cancel_button, Qt.MouseButton.LeftButton)
    assert not keypad.isVisible() and kiosk.pin_panel is None and kiosk.state == "locked"
    keypad = kiosk.ask_pin()
    assert keypad.entry.text() == ""  # a new keypad: nothing typed before is kept
    kiosk.reset_idle()
    assert not keypad.isVisible() and kiosk.pin_panel is None and kiosk.state == "locked"


def test_wrong_pins_lock_out_and_the_right_one_opens_the_admin_panel(qtbot, open_kiosk, clock):
    kiosk = open_kiosk()
    w = kiosk.window
    qtbot.mouseClick(kiosk.admin_button, Qt.MouseButton.LeftButton)
    keypad = kiosk.pin_panel
    assert keypad is not None and keypad.isVisible()
    assert all(b.height() >= 48 for b in keypad.keys.values())
    for tries_left in (4, 3, 2, 1):
        enter_pin(qtbot, kiosk, "0000")
        assert keypad.message.text().startswith(f"Wrong PIN, {tries_left} tr")
    enter_pin(qtbot, kiosk, "0000")
    assert keypad.message.text() == "Locked, try again in 60 s"
    assert not keypad.keys["OK"].isEnabled() and not keypad.keys["1"].isEnabled()
    keypad.press("4")  # the keyboard's digits are refused as well while locked
    assert kiosk.gate.check(PIN).status == "locked"  # even the right PIN
    assert kiosk.state == "locked"
    clock.now += 61
    qtbot.waitUntil(lambda: keypad.keys["OK"].isEnabled(), timeout=3000)
    enter_pin(qtbot, kiosk, PIN)
    assert kiosk.state == "admin" and kiosk.pin_panel is None
    assert w.documents.isVisible() and w.documents.add_button.isEnabled() and w.add_action.isEnabled()
    assert kiosk.exit_button.isVisible() and kiosk.close_button.isVisible()
    assert not kiosk.admin_button.isVisible()
    assert not w.close()  # the window still closes only through "Close the app"


def test_the_admin_panel_relocks_after_inactivity(qtbot, open_kiosk):
    kiosk = open_kiosk()
    kiosk.ask_pin()
    enter_pin(qtbot, kiosk, PIN)
    assert kiosk.state == "admin"
    kiosk.relock_timer.setInterval(200)
    kiosk.relock_timer.start()
    with qtbot.waitSignal(kiosk.stateChanged, timeout=5000) as changed:
        pass
    assert changed.args == ["locked"]
    w = kiosk.window
    assert not w.documents.isVisible() and not w.add_action.isEnabled() and kiosk.admin_button.isVisible()


def test_exit_kiosk_gives_the_normal_window_back(qtbot, open_kiosk):
    kiosk = open_kiosk()
    w = kiosk.window
    kiosk.ask_pin()
    enter_pin(qtbot, kiosk, PIN)
    qtbot.mouseClick(kiosk.exit_button, Qt.MouseButton.LeftButton)
    assert kiosk.state == "off"
    assert not w.isFullScreen() and not w.windowFlags() & Qt.WindowType.FramelessWindowHint
    qtbot.waitExposed(w)
    assert w.menuBar().isVisible() and w.conversations.isVisible() and w.documents.isVisible()
    assert w.acceptDrops() and w.quit_action.isEnabled() and w.settings_action.isEnabled()
    assert not kiosk.bar.isVisible()
    for widget in (w.chat.input, w.chat.send_button, w.index_label):  # the settings' text size again
        assert points(widget) == w.settings.font_size < MIN_FONT_PT, widget.objectName()


def test_close_the_app_closes_it(qtbot, open_kiosk):
    kiosk = open_kiosk()
    w = kiosk.window
    kiosk.ask_pin()
    enter_pin(qtbot, kiosk, PIN)
    qtbot.mouseClick(kiosk.close_button, Qt.MouseButton.LeftButton)
    assert not w.isVisible() and not w.assistant._thread.isRunning()


def test_without_a_pin_the_keypad_says_how_to_set_one(qtbot, open_kiosk, data):
    data.pin_file.unlink()
    kiosk = open_kiosk()
    keypad = kiosk.ask_pin()
    assert "No admin PIN is set" in keypad.message.text() and not keypad.keys["OK"].isEnabled()
    qtbot.mouseClick(keypad.cancel_button, Qt.MouseButton.LeftButton)
    assert kiosk.state == "locked"


# -- the idle reset --------------------------------------------------------------------------------
def test_the_idle_reset_clears_the_conversation(qtbot, open_kiosk):
    kiosk = open_kiosk(idle_reset_min=0.5)
    w = kiosk.window
    assert kiosk.idle_timer.interval() == 30_000
    ask(qtbot, w)
    first = w.conversations.current().id
    w.chat.input.setPlainText("half a question")
    kiosk.idle_timer.setInterval(200)
    kiosk.idle_timer.start()
    qtbot.waitUntil(lambda: w.chat.messages() == [], timeout=5000)
    assert w.chat.empty.isVisible() and w.chat.input.toPlainText() == ""
    assert w.conversations.current().id != first


def test_the_idle_reset_waits_for_the_answer_being_written(qtbot, open_kiosk, monkeypatch):
    kiosk = open_kiosk()
    w = kiosk.window
    hold = start_held(qtbot, w, monkeypatch, QUESTION)
    kiosk.idle_timer.setInterval(50)
    kiosk.idle_timer.start()
    qtbot.waitUntil(lambda: kiosk._reset_pending, timeout=2000)
    assert w.chat.is_busy() and w.chat.messages()[0]["content"] == QUESTION
    kiosk.idle_timer.setInterval(60_000)
    with qtbot.waitSignal(w.chat.answerFinished, timeout=ANSWER_MS):
        hold.release.set()
    qtbot.waitUntil(lambda: w.chat.messages() == [], timeout=5000)
    assert not w.chat.last_answer()


def test_input_restarts_the_idle_timer(qtbot, open_kiosk):
    kiosk = open_kiosk()
    kiosk.idle_timer.stop()
    qtbot.keyClick(kiosk.window.chat.input, Qt.Key.Key_A)
    assert kiosk.idle_timer.isActive()


def test_a_kiosk_keeps_only_its_latest_conversations(qtbot, open_kiosk, data):
    store = ConversationStore(data.conversations)
    made = [store.create(f"operator {n}") for n in range(KEEP_CONVERSATIONS + 10)]
    kiosk = open_kiosk()  # starts with "New question"
    kept = {c.id for c in store.list()}
    assert len(kept) == KEEP_CONVERSATIONS and kiosk.window.conversations.current().id in kept
    assert {c.id for c in made[-KEEP_CONVERSATIONS + 1:]} <= kept  # the newest stay
    assert len(kiosk.window.conversations.conversations()) == KEEP_CONVERSATIONS


def test_new_question_clears_the_conversation_and_stops_the_answer(qtbot, open_kiosk, monkeypatch):
    kiosk = open_kiosk()
    w = kiosk.window
    ask(qtbot, w)
    hold = start_held(qtbot, w, monkeypatch, "And how do I open the bleed valve?")
    qtbot.mouseClick(kiosk.new_button, Qt.MouseButton.LeftButton)
    hold.release.set()
    assert not w.chat.is_busy() and w.chat.messages() == [] and w.chat.empty.isVisible()
    assert kiosk.new_button.height() >= 64
    stored = w.conversations.store.list()[1].messages  # the stopped answer was kept, then left
    assert stored[-1]["role"] == "assistant" and stored[-1]["stopped"]


# -- the audit log -----------------------------------------------------------------------------------
def test_the_audit_log_has_one_line_per_question_with_its_pages(qtbot, open_kiosk, data, tiny_llm_dir,
                                                                 monkeypatch):
    kiosk = open_kiosk()
    w = kiosk.window
    given = []
    w.assistant.answerEvent.connect(lambda event: given.append(event.passages)
                              if isinstance(event, PassagesEvent) else None)
    with qtbot.waitSignal(kiosk.audit.recorded, timeout=ANSWER_MS):
        event = ask(qtbot, w)
    cites = [{"number": c.number, "document": c.passage.document, "page": c.passage.page}
             for c in w.chat.last_answer().state.citations if c.cited]
    with qtbot.waitSignal(kiosk.audit.recorded, timeout=ANSWER_MS):
        hold = start_held(qtbot, w, monkeypatch, "What does error E-12 mean?")
        qtbot.mouseClick(w.chat.stop_button, Qt.MouseButton.LeftButton)
        hold.release.set()
    kiosk.audit.wait()
    lines = audit_lines(data)
    assert len(lines) == 2
    first, second = lines
    assert first["question"] == QUESTION and first["refused"] is False and first["answerable"] is True
    assert first["passages"] == [{"document": p.document, "page": p.page} for p in given[0]]
    assert {"document": "pump.pdf", "page": 2} in first["passages"]
    assert first["citations"] == cites
    assert first["finish_reason"] == event.stats.finish_reason and first["error"] is None
    assert first["model"] == Path(tiny_llm_dir).name
    assert first["model_version"] == model_version(tiny_llm_dir)
    with IndexStore.open(data.collection("default"), embedder_id=None, dimension=None,
                         create=False, read_only=True) as store:
        assert first["collection_version"] == collection_version(store.list_documents(), store.embedder_id)
    assert first["collection"] == "default" and first["session"]
    assert first["time"].endswith("Z")
    assert second["question"] == "What does error E-12 mean?" and second["finish_reason"] == "cancelled"
    assert second["passages"] == [{"document": p.document, "page": p.page} for p in given[1]]


def test_a_refused_question_is_audited_as_refused(qtbot, open_kiosk, data):
    kiosk = open_kiosk(answer=REFUSE)
    with qtbot.waitSignal(kiosk.audit.recorded, timeout=ANSWER_MS) as recorded:
        ask(qtbot, kiosk.window, "What is the capital of France?")
    entry = recorded.args[0]
    assert entry.refused and entry.answerable is False
    line = audit_lines(data)[-1]
    assert line["refused"] is True and line["passages"]  # the nearest passages it was shown


def test_the_audit_log_is_an_option_outside_kiosk_mode(qtbot, data, tiny_llm_dir):
    window = MainWindow(data, "cpu", Settings(audit_log=True), llm_folder=tiny_llm_dir,
                        assistant_settings=ANSWER)
    qtbot.addWidget(window, before_close_func=lambda w: w.close())
    with qtbot.waitSignal(window.assistant.modelReady, timeout=LOAD_MS):
        window.show()
    recorder = install(window)
    assert isinstance(recorder, AuditRecorder) and not window.isFullScreen()
    with qtbot.waitSignal(recorder.recorded, timeout=ANSWER_MS):
        ask(qtbot, window)
    recorder.close()
    assert len(audit_lines(data)) == 1
    window.settings = Settings()
    assert install(window) is None


def test_the_audit_line_is_written_on_the_assistant_thread(qtbot, open_kiosk):
    kiosk = open_kiosk()
    threads = []
    kiosk.audit.recorded.connect(lambda _entry: threads.append(QThread.currentThread().objectName()),
                                 Qt.ConnectionType.DirectConnection)  # runs where it is emitted
    with qtbot.waitSignal(kiosk.audit.recorded, timeout=ANSWER_MS):
        ask(qtbot, kiosk.window)
    assert threads == ["assistant"]


def test_closing_the_kiosk_right_after_an_answer_still_writes_its_line(qtbot, open_kiosk, data):
    kiosk = open_kiosk()
    w = kiosk.window
    w.chat.answerFinished.connect(lambda _event: kiosk.close_app())  # as the self-check does
    ask(qtbot, w)
    assert not w.isVisible()
    lines = audit_lines(data)
    assert [line["question"] for line in lines] == [QUESTION]
    assert lines[0]["finish_reason"] != "cancelled" and lines[0]["passages"]
