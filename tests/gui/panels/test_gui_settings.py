"""The settings dialog edits Settings; apply_theme sets style, palette and font size."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QApplication, QDialog, QDialogButtonBox, QLabel

from desktop_app.panels.settings import BUILTIN, RERANKER_MISSING, SettingsDialog
from desktop_app.theme import apply_theme, current_theme
from engine.config import Settings

START = Settings(model="phi-mini", temperature=0.2, max_new_tokens=256, passages=5,
                 use_reranker=True, font_size=12, theme="light")


def open_dialog(qtbot, settings=START, names=("phi-mini", "qwen-tiny"), reranker=True):
    dialog = SettingsDialog(settings, list(names), reranker)
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitExposed(dialog)
    return dialog


def test_the_dialog_shows_the_current_settings(qtbot):
    dialog = open_dialog(qtbot)
    assert [dialog.model.itemText(i) for i in range(dialog.model.count())] == [
        BUILTIN, "phi-mini", "qwen-tiny"]
    assert dialog.model.currentText() == "phi-mini"
    assert dialog.temperature.value() == pytest.approx(0.2)
    assert dialog.max_new_tokens.value() == 256
    assert dialog.passages.value() == 5
    assert dialog.use_reranker.isChecked() and dialog.use_reranker.isEnabled()
    assert dialog.font_size.value() == 12
    assert dialog.theme.currentData() == "light"
    assert dialog.settings() == START  # nothing edited, nothing changed


def test_edited_values_come_back_after_ok(qtbot):
    dialog = open_dialog(qtbot)
    dialog.model.setCurrentIndex(0)  # built-in
    dialog.temperature.setValue(0.9)
    dialog.max_new_tokens.setValue(512)
    dialog.passages.setValue(3)
    dialog.use_reranker.setChecked(False)
    dialog.font_size.setValue(20)
    dialog.theme.setCurrentIndex(dialog.theme.findData("dark"))
    with qtbot.waitSignal(dialog.accepted):
        qtbot.mouseClick(dialog.buttons.button(QDialogButtonBox.StandardButton.Ok),
                         Qt.MouseButton.LeftButton)
    assert dialog.result() == QDialog.DialogCode.Accepted
    assert dialog.settings() == Settings(model=None, temperature=0.9, max_new_tokens=512,
                                         passages=3, use_reranker=False, font_size=20,
                                         theme="dark")


def test_cancel_rejects(qtbot):
    dialog = open_dialog(qtbot)
    with qtbot.waitSignal(dialog.rejected):
        qtbot.mouseClick(dialog.buttons.button(QDialogButtonBox.StandardButton.Cancel),
                         Qt.MouseButton.LeftButton)
    assert dialog.result() == QDialog.DialogCode.Rejected


def test_the_keyboard_alone_edits_and_accepts(qtbot):
    dialog = open_dialog(qtbot, settings=Settings())
    dialog.activateWindow()
    dialog.passages.setFocus()
    dialog.passages.selectAll()
    qtbot.keyClicks(dialog.passages, "7")
    qtbot.keyClick(dialog.passages, Qt.Key.Key_Tab)
    assert dialog.focusWidget() is dialog.use_reranker
    qtbot.keyClick(dialog.use_reranker, Qt.Key.Key_Space)
    with qtbot.waitSignal(dialog.accepted):
        qtbot.keyClick(dialog.use_reranker, Qt.Key.Key_Return)  # OK is the default button
    assert dialog.settings() == Settings(passages=7, use_reranker=False)


def test_tab_order_follows_the_form(qtbot):
    dialog = open_dialog(qtbot)
    order = [dialog.temperature, dialog.max_new_tokens, dialog.passages,
             dialog.use_reranker, dialog.ocr, dialog.font_size, dialog.theme,
             dialog.buttons.button(QDialogButtonBox.StandardButton.Ok)]
    for first, second in zip(order, order[1:]):
        assert first.nextInFocusChain() is second or _focus_proxy_chain(first) is second


def _focus_proxy_chain(widget):
    """The next widget that takes Tab focus (spin boxes hold an inner line edit)."""
    nxt = widget.nextInFocusChain()
    tab = Qt.FocusPolicy.TabFocus
    while nxt.focusPolicy() & tab != tab or nxt.parent() is widget:
        nxt = nxt.nextInFocusChain()
    return nxt


def test_every_control_has_an_accessible_name_and_a_label(qtbot):
    dialog = open_dialog(qtbot)
    controls = [dialog.model, dialog.temperature, dialog.max_new_tokens, dialog.passages,
                dialog.use_reranker, dialog.ocr, dialog.font_size, dialog.theme]
    for control in controls:
        assert control.accessibleName(), control
        assert control.toolTip(), control
    buddies = {label.buddy() for label in dialog.findChildren(QLabel)}
    checkboxes = {dialog.use_reranker, dialog.ocr}  # a checkbox holds its own Alt+letter
    assert set(controls) - checkboxes <= buddies  # Alt+letter reaches each field
    assert all("&" in box.text() for box in checkboxes)


def test_without_a_reranker_the_switch_is_off_and_says_why(qtbot):
    dialog = open_dialog(qtbot, reranker=False)
    assert not dialog.use_reranker.isEnabled()
    assert not dialog.use_reranker.isChecked()
    assert dialog.use_reranker.toolTip() == RERANKER_MISSING
    # the stored choice is kept for when a reranker is installed
    assert dialog.settings().use_reranker is True
    off = open_dialog(qtbot, settings=Settings(use_reranker=False), reranker=False)
    assert off.settings().use_reranker is False


def test_a_model_that_is_gone_stays_selected_and_is_marked(qtbot):
    dialog = open_dialog(qtbot, settings=Settings(model="deleted-model"), names=["other"])
    assert dialog.model.currentText() == "deleted-model (not found)"
    assert dialog.settings().model == "deleted-model"


def test_ranges_match_the_config_limits(qtbot):
    dialog = open_dialog(qtbot)
    assert (dialog.temperature.minimum(), dialog.temperature.maximum()) == (0.0, 2.0)
    assert (dialog.max_new_tokens.minimum(), dialog.max_new_tokens.maximum()) == (16, 1024)
    assert (dialog.passages.minimum(), dialog.passages.maximum()) == (1, 8)
    assert (dialog.font_size.minimum(), dialog.font_size.maximum()) == (8, 32)


# -- theme -----------------------------------------------------------------------------------
@pytest.fixture
def app_state(qapp):
    """Put the application's style, palette and font back after the test."""
    style, palette, font = qapp.style().name(), qapp.palette(), qapp.font()
    theme = qapp.property("theme")
    yield qapp
    qapp.setStyle(style)
    qapp.setPalette(palette)
    qapp.setFont(font)
    qapp.setProperty("theme", theme)


def test_apply_theme_sets_fusion_palette_and_font(app_state):
    app: QApplication = app_state
    apply_theme(app, "dark", 18)
    assert app.style().name().lower() == "fusion"
    assert app.font().pointSize() == 18
    window = app.palette().color(QPalette.ColorRole.Window)
    text = app.palette().color(QPalette.ColorRole.WindowText)
    assert window.lightness() < 80 < text.lightness()
    assert current_theme(app) == "dark"

    apply_theme(app, "light", 11)
    window = app.palette().color(QPalette.ColorRole.Window)
    text = app.palette().color(QPalette.ColorRole.WindowText)
    assert text.lightness() < 80 < window.lightness()
    assert app.font().pointSize() == 11
    assert current_theme(app) == "light"


def test_apply_theme_is_idempotent(app_state, qtbot):
    app: QApplication = app_state
    apply_theme(app, "dark", 14)
    style, palette, font = app.style(), app.palette(), app.font()
    apply_theme(app, "dark", 14)
    assert app.style() is style  # not replaced by a new Fusion instance
    assert app.palette() == palette
    assert app.font() == font


def test_widgets_follow_the_theme_and_font(app_state, qtbot):
    app: QApplication = app_state
    dialog = open_dialog(qtbot)
    apply_theme(app, "dark", 20)
    qtbot.waitUntil(lambda: dialog.font().pointSize() == 20)  # Qt posts the font change
    assert dialog.temperature.font().pointSize() == 20
    assert dialog.palette().color(QPalette.ColorRole.Window).lightness() < 80
