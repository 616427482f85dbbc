"""The window on a remote engine (settings.engine_url): answers come from it; when it goes away
the window says so, the local model answers (the question that failed included), and without
a local model the question stays in the conversation to be asked again once the engine is back.
Real parts: the pump manual indexed by the engine, llama.cpp's server on the tiny GGUF (where
it is installed) or a standard-library engine on a real socket, and the tiny local LLM."""

from __future__ import annotations

import os
from urllib.parse import urlsplit

import pytest

from desktop_app.main_window import MainWindow
from engine.answer.assistant import DoneEvent, ErrorEvent
from engine.config import Settings
from engine.paths import AppPaths
from tests.helpers.events import wait_event
from tests.helpers.http_engines import llama_server, refused_url, scripted_engine
from tests.helpers.pump_chat import (
    ANSWER,
    ANSWER_MS,
    LOAD_MS,
    QUESTION,
    pump_data_dir,
)


@pytest.fixture(scope="module")
def indexed(tmp_path_factory, qapp) -> AppPaths:
    return pump_data_dir(tmp_path_factory)


def open_window(qtbot, paths, llm_dir, engine_url: str) -> tuple[MainWindow, list, list]:
    """The window on `engine_url`, once a model is ready; (window, engine notices, statuses)."""
    window = MainWindow(paths, "cpu", Settings(engine_url=engine_url), llm_folder=llm_dir,
                        assistant_settings=ANSWER)
    qtbot.addWidget(window, before_close_func=lambda w: w.close())
    told, statuses = [], []
    window.assistant.engineUnreachable.connect(told.append)
    window.assistant.modelReady.connect(statuses.append)
    with qtbot.waitSignal(window.assistant.modelReady, timeout=LOAD_MS):
        window.show()
    qtbot.waitExposed(window)
    return window, told, statuses


def ask(qtbot, window: MainWindow, question: str = QUESTION, kind: type = DoneEvent):
    """Types `question` and sends it; the answer's last event."""
    window.chat.input.setPlainText(question)
    with wait_event(qtbot, window.assistant.answerEvent, kind, timeout=ANSWER_MS) as ended:
        assert window.chat.send()
    return ended.args[0]


def remote(url: str) -> str:
    return f"remote:{urlsplit(url).netloc}"


def turns(window: MainWindow) -> list[str]:
    return [m["role"] for m in window.chat.messages()]


def test_an_engine_that_goes_away_hands_the_question_to_the_local_model(qtbot, indexed, tiny_llm_dir):
    with llama_server(tiny_llm_dir.parent / "tiny.gguf") as engine:
        window, told, statuses = open_window(qtbot, indexed, tiny_llm_dir, engine.url)
        before = turns(window)  # the conversation restored from the data dir
        assert statuses[-1].provider == remote(engine.url) and statuses[-1].pid is None
        assert window.provider_label.text() == f"Provider: {remote(engine.url).upper()}"
        first = ask(qtbot, window)
        assert first.stats.provider == remote(engine.url) and first.stats.new_tokens > 0
        engine.stop()
        second = ask(qtbot, window, "What does error E-12 mean?")
    assert second.stats.provider == "cpu" and second.stats.new_tokens > 0  # the local model answered it
    assert len(told) == 1 and engine.url in told[0] and "local model (model)" in told[0]
    assert engine.url in window.statusBar().currentMessage()  # the window says so
    assert statuses[-1].provider == "cpu" and statuses[-1].pid is not None
    assert turns(window) == before + ["user", "assistant", "user", "assistant"]  # no question lost
    assert not window.chat.last_answer().state.error


def test_an_engine_unreachable_at_start_leaves_the_local_model_answering(qtbot, indexed, tiny_llm_dir):
    url = refused_url()
    window, told, statuses = open_window(qtbot, indexed, tiny_llm_dir, url)
    assert statuses[-1].provider == "cpu"
    assert len(told) == 1 and f"The engine at {url}: it cannot be reached" in told[0]
    assert url in window.statusBar().currentMessage()
    done = ask(qtbot, window)
    assert done.stats.provider == "cpu" and done.answer
    assert len(told) == 1  # said once, not again for each question


def test_without_a_local_model_the_question_waits_for_the_engine(qtbot, indexed, tmp_path):
    with scripted_engine("ok") as gone:
        port = int(urlsplit(gone.url).port)
    window = MainWindow(indexed, "cpu", Settings(engine_url=gone.url), llm_folder=tmp_path / "no-model",
                        assistant_settings=ANSWER)
    qtbot.addWidget(window, before_close_func=lambda w: w.close())
    with qtbot.waitSignal(window.assistant.modelFailed, timeout=LOAD_MS) as failed:
        window.show()
    assert gone.url in failed.args[0]
    assert window.model_label.text() == "Model: not available"
    before = turns(window)
    error = ask(qtbot, window, kind=ErrorEvent)
    assert error.error == "RemoteEngineError" and gone.url in error.message
    assert turns(window) == before + ["user", "error"]  # the question stays, with what went wrong
    assert window.chat.can_regenerate()
    with scripted_engine("ok", port=port) as back:
        with wait_event(qtbot, window.assistant.answerEvent, DoneEvent, timeout=ANSWER_MS) as ended:
            assert window.chat.regenerate()  # asked again, once the engine is back
    assert ended.args[0].stats.provider == remote(back.url) and back.requests
    assert turns(window) == before + ["user", "assistant"]


def test_an_engine_that_dies_mid_answer_is_answered_again_locally(qtbot, indexed, tiny_llm_dir):
    with scripted_engine("dies") as engine:
        window, told, statuses = open_window(qtbot, indexed, tiny_llm_dir, engine.url)
        assert statuses[-1].provider == remote(engine.url)
        done = ask(qtbot, window)
    assert engine.requests  # the engine began the answer, then its connection broke
    assert done.stats.provider == "cpu" and done.answer
    assert len(told) == 1 and "mid-answer" in told[0] and engine.url in told[0]
    bubble = window.chat.last_answer()
    assert bubble.state.text == done.answer and "word0" not in bubble.state.text  # the local answer only


def test_engine_url_and_key_of_the_command_line_are_for_that_run_only(tmp_path, qapp, root_logging_restored,
                                                                      monkeypatch):
    """`offline-assistant --engine-url URL --engine-key KEY`: they win over settings.toml's engine
    (one where nothing listens here), the key reaches the engine but not the log, and neither
    is written to the settings nor left in the environment."""
    from desktop_app import app
    from engine.config import save_settings
    from engine.llm.remote import ENV_KEY, ENV_URL

    for name in (ENV_URL, ENV_KEY):
        monkeypatch.delenv(name, raising=False)
    paths = AppPaths(tmp_path).ensure()
    # an imported model's name: the built-in one is not prepared for a window that uses an engine
    save_settings(paths.settings_file, Settings(model="an-import", engine_url=refused_url()))
    before = paths.settings_file.read_bytes()
    with scripted_engine("ok") as engine:
        code = app.main(["--data-dir", str(paths.root), "--engine-url", engine.url + "/v1",
                         "--engine-key", "k-secret", "--smoke-test"])
    assert code == 0
    log = paths.log_file.read_text(encoding="utf-8")
    assert f"ready on {remote(engine.url)} after" in log  # the smoke test's line: the engine answered
    assert engine.headers and all(h.get("Authorization") == "Bearer k-secret" for h in engine.headers)
    assert "k-secret" not in log
    assert paths.settings_file.read_bytes() == before
    assert ENV_URL not in os.environ and ENV_KEY not in os.environ
