"""The Models page as a person uses it: the models listed with their shape and measured speed,
a tiny GGUF imported through the page (with progress) or dropped on the window, an import
cancelled midway, the model for answers chosen, removal, and a kiosk's page that only shows.
Every model is a real tiny one, imported for real."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QApplication, QDialog, QFileDialog, QMessageBox

from desktop_app.controllers.models import ModelsController
from desktop_app.main_window import KIOSK_MODELS, MainWindow
from desktop_app.panels.models import NOT_MEASURED
from desktop_app.panels.settings import BUILTIN, SettingsDialog
from engine.config import Settings, load_settings
from engine.models.catalog import record_speed
from engine.models.registry import BUILTIN_LLM
from engine.paths import AppPaths
from tests.helpers.gguf_factory import write_tiny_gguf
from tests.helpers.pump_chat import ANSWER, ANSWER_MS, LOAD_MS

pytestmark = pytest.mark.usefixtures("same_look_after")  # tests/conftest.py

IMPORT_MS = 60_000


@pytest.fixture
def paths(tmp_path) -> AppPaths:
    return AppPaths(tmp_path / "data").ensure()


@pytest.fixture
def controller(qtbot, paths):
    models = ModelsController(paths)
    yield models
    models.shutdown()


def installed(paths: AppPaths, tiny_llm_dir: Path, name: str) -> Path:
    """A ready imported model: a copy of the session's tiny import (faster than importing)."""
    return Path(shutil.copytree(tiny_llm_dir, paths.models / name))


def open_page(qtbot, controller, settings=Settings(), names=()):
    dialog = SettingsDialog(settings, list(names), True, models=controller)
    qtbot.addWidget(dialog)
    dialog.show_models()
    dialog.show()
    qtbot.waitExposed(dialog)
    page = dialog.models_page
    qtbot.waitUntil(lambda: page.table.topLevelItemCount() >= 1)
    return dialog, page


def rows(page) -> dict[str, list[str]]:
    """Each row's cells, by the model's name."""
    table = page.table
    found = {}
    for i in range(table.topLevelItemCount()):
        item = table.topLevelItem(i)
        found[item.data(1, Qt.ItemDataRole.UserRole).name] = [item.text(c) for c in range(table.columnCount())]
    return found


def select(page, name: str) -> None:
    for i in range(page.table.topLevelItemCount()):
        item = page.table.topLevelItem(i)
        if item.data(1, Qt.ItemDataRole.UserRole).name == name:
            page.table.setCurrentItem(item)
            return
    raise AssertionError(f"no row for {name}")


def test_the_builtin_and_an_imported_model_are_listed_with_their_fields(qtbot, paths, controller, tiny_llm_dir):
    folder = installed(paths, tiny_llm_dir, "tiny-chat.Q4_1")
    record_speed(paths, folder, 123.45, 40, "cpu")
    dialog, page = open_page(qtbot, controller)
    qtbot.waitUntil(lambda: len(rows(page)) == 2)
    listed = rows(page)
    assert list(listed) == [BUILTIN_LLM.name, "tiny-chat.Q4_1"]  # the built-in model first
    name, arch, size, quant, context, speed = listed[BUILTIN_LLM.name]
    assert name.startswith(f"{BUILTIN_LLM.name} (built-in)")
    assert (arch, quant, context, speed) == ("llama", "Q4_1", "8,192 tokens", NOT_MEASURED)
    assert size.endswith(" MB")
    assert listed["tiny-chat.Q4_1"][1:] == ["llama", listed["tiny-chat.Q4_1"][2], "Q4_1", "2,048 tokens",
                                            "123.5 tokens/s"]
    assert listed["tiny-chat.Q4_1"][2].endswith(("kB", "MB"))
    assert [page.model.itemText(i) for i in range(page.model.count())] == [BUILTIN, "tiny-chat.Q4_1"]


def test_measuring_a_model_shows_its_speed_here(qtbot, paths, controller, tiny_llm_dir):
    installed(paths, tiny_llm_dir, "tiny-chat")
    dialog, page = open_page(qtbot, controller)
    qtbot.waitUntil(lambda: len(rows(page)) == 2)
    select(page, BUILTIN_LLM.name)
    assert not page.measure_button.isEnabled()  # not prepared in this data dir
    select(page, "tiny-chat")
    assert rows(page)["tiny-chat"][5] == NOT_MEASURED
    with qtbot.waitSignal(controller.measured, timeout=LOAD_MS) as measured:
        qtbot.mouseClick(page.measure_button, Qt.MouseButton.LeftButton)
        assert not page.measure_button.isEnabled() and "Measuring" in page.message.text()
    assert measured.args == ["tiny-chat", ""]
    qtbot.waitUntil(lambda: rows(page)["tiny-chat"][5].endswith(" tokens/s"))
    assert page.measure_button.isEnabled() and "measured" in page.message.text()


def test_importing_through_the_page_shows_progress_then_the_model(qtbot, paths, controller, tmp_path,
                                                                  monkeypatch):
    gguf = write_tiny_gguf(tmp_path / "tiny-llama.Q4_0.gguf", context_length=512)
    monkeypatch.setattr(QFileDialog, "getOpenFileNames",
                        lambda *args, **kwargs: ([str(gguf)], "GGUF models (*.gguf)"))
    dialog, page = open_page(qtbot, controller)
    seen = []
    controller.importProgress.connect(lambda file, fraction, message: seen.append(
        (fraction, page.progress.isVisible(), page.cancel_button.isVisible())))
    with qtbot.waitSignal(controller.importEnded, timeout=IMPORT_MS) as ended:
        qtbot.mouseClick(page.import_button, Qt.MouseButton.LeftButton)
        assert not page.import_button.isEnabled()  # one import at a time
    name, message, failed = ended.args
    assert (name, failed) == ("tiny-llama.Q4_0", False)
    assert len(seen) > 3 and all(visible for _f, visible, _c in seen) and all(c for _f, _v, c in seen)
    assert [f for f, _v, _c in seen] == sorted(f for f, _v, _c in seen)
    qtbot.waitUntil(lambda: "tiny-llama.Q4_0" in rows(page))
    assert rows(page)["tiny-llama.Q4_0"][1:5] == ["llama", rows(page)["tiny-llama.Q4_0"][2], "Q4_0", "512 tokens"]
    assert page.model.findData("tiny-llama.Q4_0") > 0  # it can be chosen now
    assert not page.progress.isVisible() and page.import_button.isEnabled()
    assert "imported" in page.message.text()


def test_an_import_cancelled_midway_leaves_nothing_behind(qtbot, paths, controller, tmp_path):
    gguf = write_tiny_gguf(tmp_path / "tiny-big.gguf", layers=8)
    dialog, page = open_page(qtbot, controller)
    fractions = []

    def cancel_once_started(_file, fraction, _message):
        fractions.append(fraction)
        if len(fractions) == 1:  # the child is reading the file: the layers are to come
            qtbot.mouseClick(page.cancel_button, Qt.MouseButton.LeftButton)

    controller.importProgress.connect(cancel_once_started)
    with qtbot.waitSignal(controller.importEnded, timeout=IMPORT_MS) as ended:
        assert page.import_files([str(gguf)])
    name, message, failed = ended.args
    assert (name, failed) == ("", False) and "cancelled" in message
    assert max(fractions) < 1.0  # stopped before the model was in place
    assert list(paths.models.iterdir()) == []  # no folder, no temporary
    qtbot.waitUntil(lambda: not page.progress.isVisible())
    assert "cancelled" in page.message.text() and list(rows(page)) == [BUILTIN_LLM.name]


def test_closing_the_app_mid_import_stops_it_and_leaves_nothing(qtbot, paths, tmp_path):
    models = ModelsController(paths)
    started = []
    models.importProgress.connect(lambda *args: started.append(args))
    assert models.import_files([str(write_tiny_gguf(tmp_path / "tiny-big.gguf", layers=8))])
    qtbot.waitUntil(lambda: bool(started), timeout=IMPORT_MS)
    models.shutdown()  # as the window's closeEvent does
    assert list(paths.models.iterdir()) == []


def test_removing_asks_first_and_the_builtin_and_the_model_in_use_have_no_remove(
        qtbot, paths, controller, tiny_llm_dir, monkeypatch):
    installed(paths, tiny_llm_dir, "tiny-a")
    installed(paths, tiny_llm_dir, "tiny-b")
    dialog, page = open_page(qtbot, controller, settings=Settings(model="tiny-a"))
    qtbot.waitUntil(lambda: len(rows(page)) == 3)
    select(page, BUILTIN_LLM.name)
    assert not page.remove_button.isEnabled() and "cannot be removed" in page.remove_button.toolTip()
    select(page, "tiny-a")  # answers use it
    assert not page.remove_button.isEnabled()

    asked = []
    answers = iter([QMessageBox.StandardButton.No, QMessageBox.StandardButton.Yes])
    monkeypatch.setattr(QMessageBox, "question", lambda *args, **kw: asked.append(args[2]) or next(answers))
    select(page, "tiny-b")
    assert page.remove_button.isEnabled()
    qtbot.mouseClick(page.remove_button, Qt.MouseButton.LeftButton)  # No: nothing happens
    assert (paths.models / "tiny-b").is_dir() and "tiny-b" in asked[0]
    with qtbot.waitSignal(controller.removed, timeout=10_000):
        qtbot.mouseClick(page.remove_button, Qt.MouseButton.LeftButton)  # Yes
    assert not (paths.models / "tiny-b").exists()
    qtbot.waitUntil(lambda: list(rows(page)) == [BUILTIN_LLM.name, "tiny-a"])
    assert page.model.findData("tiny-b") < 0


def test_a_kiosk_shows_its_model_but_cannot_change_it(qtbot, paths, controller, tiny_llm_dir):
    installed(paths, tiny_llm_dir, "tiny-a")
    dialog, page = open_page(qtbot, controller, settings=Settings(model="tiny-a", kiosk=True))
    qtbot.waitUntil(lambda: len(rows(page)) == 2)
    assert page.model.currentData() == "tiny-a" and not page.model.isEnabled()
    assert not any(b.isVisible() for b in (page.import_button, page.remove_button, page.measure_button))
    assert page.kiosk_note.isVisible() and not page.acceptDrops()
    page.table.itemDoubleClicked.emit(page.table.topLevelItem(0), 0)  # no other way to choose
    assert not page.import_files(["model.gguf"])
    assert dialog.settings().model == "tiny-a"


# -- in the window ------------------------------------------------------------------------------
def open_window(qtbot, paths: AppPaths, settings: Settings) -> MainWindow:
    window = MainWindow(paths, "cpu", settings, assistant_settings=ANSWER)
    qtbot.addWidget(window, before_close_func=lambda w: w.close())
    with qtbot.waitSignal(window.assistant.modelReady, timeout=LOAD_MS):
        window.show()
    qtbot.waitExposed(window)
    return window


def mime_of(files: list[Path]) -> QMimeData:
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(f)) for f in files])
    return mime


def drag_enter(widget, mime: QMimeData) -> QDragEnterEvent:
    where = QPoint(widget.width() // 2, widget.height() // 2)
    return QDragEnterEvent(where, Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                           Qt.KeyboardModifier.NoModifier)


def drop(window: MainWindow, files: list[Path]) -> None:
    """A real drag and drop of files onto the window, as the platform delivers it."""
    mime = mime_of(files)  # kept alive: the events hold only a pointer to it
    enter = drag_enter(window, mime)
    QApplication.sendEvent(window, enter)
    assert enter.isAccepted()
    dropped = QDropEvent(QPointF(enter.position()), Qt.DropAction.CopyAction, mime,
                         Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(window, dropped)


def test_a_gguf_dropped_on_the_window_is_imported_not_indexed(qtbot, indexed_copy, tiny_llm_dir, tmp_path):
    installed(indexed_copy, tiny_llm_dir, "tiny-a")
    window = open_window(qtbot, indexed_copy, Settings(model="tiny-a"))
    documents = len(window.index.documents())
    gguf = write_tiny_gguf(tmp_path / "dropped.gguf")
    mime = mime_of([gguf])
    over_documents = drag_enter(window.documents, mime)
    window.documents.dragEnterEvent(over_documents)
    assert not over_documents.isAccepted()  # the documents list leaves it to the window
    with qtbot.waitSignal(window.models.importEnded, timeout=IMPORT_MS) as ended:
        drop(window, [gguf])
        assert window.model_import.dialog is not None and window.model_import.dialog.isVisible()
    assert ended.args[0] == "dropped" and (indexed_copy.models / "dropped").is_dir()
    assert window.model_import.dialog is None
    assert "dropped" in window.statusBar().currentMessage()
    assert len(window.index.documents()) == documents and not window.index.busy

    window.settings = replace(window.settings, kiosk=True)  # a kiosk's models are the administrator's
    assert not window.import_models([str(gguf)])
    assert window.statusBar().currentMessage() == KIOSK_MODELS and not window.models.is_importing()


def test_the_chosen_model_is_saved_and_answers_the_next_question(qtbot, indexed_copy, tiny_llm_dir,
                                                                  monkeypatch):
    installed(indexed_copy, tiny_llm_dir, "tiny-a")
    installed(indexed_copy, tiny_llm_dir, "tiny-b")
    window = open_window(qtbot, indexed_copy, Settings(model="tiny-a"))
    assert window.model_label.text() == "Model: tiny-a"

    def choose_b(dialog):
        page = dialog.models_page
        qtbot.waitUntil(lambda: "tiny-b" in rows(page))
        select(page, "tiny-b")
        page.table.itemDoubleClicked.emit(page.table.currentItem(), 0)  # as a double-click does
        return QDialog.DialogCode.Accepted

    monkeypatch.setattr(SettingsDialog, "exec", choose_b)
    with qtbot.waitSignal(window.assistant.modelReady, timeout=LOAD_MS) as ready:
        assert window.open_settings(models_page=True)
    assert ready.args[0].name == "tiny-b" and window.model_label.text() == "Model: tiny-b"
    assert load_settings(indexed_copy.settings_file).model == "tiny-b"
    with qtbot.waitSignal(window.chat.answerFinished, timeout=ANSWER_MS) as finished:
        window.chat.input.setPlainText("How do I prime the pump?")
        assert window.chat.send()
    assert finished.args[0].stats.provider  # answered by the model's process
    assert window.assistant.worker.session.model.model_folder == indexed_copy.models / "tiny-b"


@pytest.mark.slow
def test_choosing_the_builtin_model_again_prepares_it_first(qtbot, tmp_path, tiny_llm_dir, monkeypatch):
    paths = AppPaths(tmp_path / "fresh").ensure()  # the built-in model never prepared here
    installed(paths, tiny_llm_dir, "tiny-a")
    window = open_window(qtbot, paths, Settings(model="tiny-a"))

    def choose_builtin(dialog):
        page = dialog.models_page
        qtbot.waitUntil(lambda: BUILTIN_LLM.name in rows(page))
        assert rows(page)[BUILTIN_LLM.name][0].endswith("(prepared when first used)")
        page.model.setCurrentIndex(page.model.findData(None))
        return QDialog.DialogCode.Accepted

    monkeypatch.setattr(SettingsDialog, "exec", choose_builtin)
    assert window.open_settings(models_page=True)
    assert window.preparation.dialog is not None and window.model_label.text() == "Model: preparing…"
    with qtbot.waitSignal(window.assistant.modelReady, timeout=300_000) as ready:
        pass
    assert ready.args[0].name == BUILTIN_LLM.name and window.preparation.dialog is None
    assert load_settings(paths.settings_file).model is None
