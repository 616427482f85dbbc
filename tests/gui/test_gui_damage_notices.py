"""What was set aside is told once, in the window (issue 14): a damaged settings file, a
damaged conversation file, a damaged collection database (its files moved aside, never
replaced silently by a new collection)."""

from __future__ import annotations

import pytest

from desktop_app.main_window import MainWindow
from engine.paths import DB_NAME, AppPaths
from engine.store import health
from tests.helpers.pump_chat import ANSWER, LOAD_MS

pytestmark = pytest.mark.usefixtures("same_look_after")  # tests/conftest.py
INDEX_MS = 30_000


@pytest.fixture
def data(indexed_copy) -> AppPaths:
    """A fresh data dir whose collection already holds the pump manual."""
    return indexed_copy


def open_window(qtbot, paths: AppPaths, llm_dir) -> MainWindow:
    window = MainWindow(paths, "cpu", llm_folder=llm_dir, assistant_settings=ANSWER)
    qtbot.addWidget(window, before_close_func=lambda w: w.close())
    with qtbot.waitSignal(window.assistant.modelReady, timeout=LOAD_MS):
        window.show()
    return window


def test_a_damaged_settings_file_and_conversation_are_told_once(qtbot, data, tiny_llm_dir):
    data.settings_file.write_bytes(b"theme = 'dark\n\xff\xfe not toml")
    (data.conversations / "0123abcd.json").write_text("{ half a conversation", encoding="utf-8")
    window = open_window(qtbot, data, tiny_llm_dir)
    qtbot.waitUntil(lambda: window.notice_box is not None and window.notice_box.isVisible(), timeout=5000)
    text = window.notice_box.text()
    assert str(data.settings_file) in text and "settings.toml.damaged" in text
    assert "0123abcd.damaged" in text and str(data.conversations) in text
    assert (data.root / "settings.toml.damaged").is_file() and (data.conversations / "0123abcd.damaged").is_file()
    window.close()

    again = open_window(qtbot, data, tiny_llm_dir)  # set aside once: nothing more to tell
    assert again._notices == [] and again.notice_box is None  # the loop ran while the model loaded


def test_an_empty_collection_database_is_set_aside_and_said_once(qtbot, data, tiny_llm_dir):
    folder = data.collection("default")
    faiss_files = {p.name: p.read_bytes() for p in folder.glob("vectors-*")}
    (folder / DB_NAME).write_bytes(b"")
    window = open_window(qtbot, data, tiny_llm_dir)
    qtbot.waitUntil(lambda: window.notice_box is not None and window.notice_box.isVisible(), timeout=INDEX_MS)
    text = window.notice_box.text()
    [aside] = folder.parent.glob("default" + health.ASIDE_MARK + "*")
    assert "is damaged" in text and str(aside) in text and "Index the manuals again" in text
    assert {p.name: p.read_bytes() for p in aside.glob("vectors-*")} == faiss_files
    assert (aside / DB_NAME).read_bytes() == b""
    assert text.count("is damaged") == 1
