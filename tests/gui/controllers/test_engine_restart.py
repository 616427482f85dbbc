"""The model's process is restarted when it dies, even while nobody is asking: the window is told
("restarting…"), the model comes back with a new process, and the next question is answered.
Real parts: the pump manual indexed by the engine and the tiny random LLM."""

from __future__ import annotations

import os
import signal

import pytest

from desktop_app.main_window import MainWindow
from engine.answer.assistant import ErrorEvent
from engine.config import Settings
from engine.llm.supervisor import RESTARTING, restart_delay
from engine.paths import AppPaths
from tests.helpers.events import wait_event
from tests.helpers.pump_chat import (
    ANSWER,
    ANSWER_MS,
    LOAD_MS,
    QUESTION,
    answer_of,
    pump_data_dir,
    start_controller,
)

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")


@pytest.fixture(scope="module")
def indexed(tmp_path_factory, qapp) -> AppPaths:
    return pump_data_dir(tmp_path_factory)


@pytest.fixture
def controller(qtbot, indexed, tiny_llm_dir):
    controller = start_controller(qtbot, indexed, tiny_llm_dir)
    yield controller
    controller.shutdown()


def kill_model(qtbot, controller) -> int:
    """Kills the idle model's process; returns the new process id once the model is back."""
    pid = controller.worker.llm.pid
    seen = record(controller, "engineRestarting", "modelReady")
    with qtbot.waitSignal(controller.modelReady, timeout=LOAD_MS):
        os.kill(pid, signal.SIGKILL)
    assert [name for name, _ in seen] == ["engineRestarting", "modelReady"]
    status = seen[1][1]
    assert status.pid not in (None, pid)
    return status.pid


def record(controller, *names) -> list:
    """(signal name, argument) of each of `names` as it comes, in order."""
    seen = []
    for name in names:
        getattr(controller, name).connect(lambda value, name=name: seen.append((name, value)))
    return seen


def test_a_killed_idle_model_process_is_restarted_and_answers_again(qtbot, controller):
    restarting = []
    controller.engineRestarting.connect(restarting.append)
    new_pid = kill_model(qtbot, controller)
    assert restarting and "restarting" in restarting[0]
    assert controller.worker.llm.pid == new_pid
    events = answer_of(qtbot, controller)
    assert events[-1].kind == "done" and events[-1].answer
    # and again: a second death is noticed just the same
    kill_model(qtbot, controller)
    assert answer_of(qtbot, controller)[-1].kind == "done"


def test_a_question_while_the_model_cannot_be_restarted_says_so(qtbot, controller, monkeypatch):
    import engine.llm.process

    def broken_load(self):
        raise engine.llm.process.EngineProcessError("no process can be started")

    monkeypatch.setattr(engine.llm.process.LLMClient, "load", broken_load)
    pid = controller.worker.llm.pid
    seen = record(controller, "engineRestarting")
    os.kill(pid, signal.SIGKILL)
    qtbot.waitUntil(lambda: len(seen) >= 2, timeout=LOAD_MS)
    assert "restarting" in seen[0][1] and "trying again in 1 s" in seen[1][1]
    with wait_event(qtbot, controller.answerEvent, ErrorEvent, timeout=ANSWER_MS) as failed:
        controller.ask(QUESTION)
    assert [e.message for e in failed.args] == [RESTARTING]
    monkeypatch.undo()  # the next try works
    with qtbot.waitSignal(controller.modelReady, timeout=LOAD_MS) as ready:
        pass
    assert ready.args[0].pid not in (None, pid)
    assert answer_of(qtbot, controller)[-1].kind == "done"


def test_the_window_shows_restarting_until_the_model_is_back(qtbot, indexed, tiny_llm_dir):
    window = MainWindow(indexed, "cpu", Settings(), llm_folder=tiny_llm_dir, assistant_settings=ANSWER)
    qtbot.addWidget(window)
    shown = []
    window.assistant.engineRestarting.connect(lambda _message: shown.append(window.model_label.text()))
    with qtbot.waitSignal(window.assistant.modelReady, timeout=LOAD_MS):
        window.show()
    kill_model(qtbot, window.assistant)
    assert shown and "restarting" in shown[0]
    assert "restarting" not in window.model_label.text()
    window.close()


def test_the_restart_backoff_doubles_up_to_30_s():
    assert [restart_delay(n) for n in range(1, 8)] == [1, 2, 4, 8, 16, 30, 30]
