"""A thin kiosk (settings.server_url): the window takes whole answers from a central `serve`, opens
a cited page from the server's copy of the document, says so within seconds when the server is
gone, and answers from it again once it is back on the same address. Real parts: the pump manual
indexed with the built-in embedder behind the server's routes in uvicorn on loopback, an LLM
process on the tiny model there, the window with no manuals and no collection of its own."""

from __future__ import annotations

import time

from PySide6.QtCore import QUrl

from desktop_app.main_window import MainWindow
from engine.answer.assistant import DoneEvent, ErrorEvent
from engine.config import Settings
from engine.paths import AppPaths
from engine.server.app import create_app
from engine.server.config import ServerConfig
from tests.helpers.events import wait_event
from tests.helpers.live_server import live_server
from tests.helpers.pump_chat import ANSWER, ANSWER_MS, LOAD_MS, QUESTION

SERVER_LOAD_S = 120


def ask(qtbot, window: MainWindow, kind: type = DoneEvent):
    window.chat.input.setPlainText(QUESTION)
    with wait_event(qtbot, window.assistant.answerEvent, kind, timeout=ANSWER_MS) as ended:
        assert window.chat.send()
    return ended.args[0]


def serving(data: AppPaths, llm_dir, port: int = 0):
    app = create_app(ServerConfig(data, api_key="k"), llm_dir)
    return app, live_server(app, port=port)


def test_a_thin_kiosk_answers_and_shows_sources_from_the_server_and_says_when_it_is_gone(
        qtbot, indexed, tmp_path, tiny_llm_dir):
    kiosk = AppPaths(tmp_path / "kiosk").ensure()
    app, server = serving(indexed, tiny_llm_dir)
    with server as url:
        assert app.state.server.wait_loaded(SERVER_LOAD_S)
        window = MainWindow(kiosk, "cpu", Settings(server_url=url, server_key="k"), llm_folder=tiny_llm_dir,
                            assistant_settings=ANSWER)
        qtbot.addWidget(window, before_close_func=lambda w: w.close())
        with qtbot.waitSignal(window.assistant.modelReady, timeout=LOAD_MS) as ready:
            window.show()
        first = ask(qtbot, window)
        bubble = window.chat.last_answer()
        cited = bubble.state.citations[0].passage
        with qtbot.waitSignal(window.source.sourceShown, timeout=20_000) as shown:
            bubble.browser.anchorClicked.emit(QUrl("cite:1"))
    netloc = url.removeprefix("http://")
    assert ready.args[0].provider == f"server:{netloc}" and ready.args[0].pid is None
    assert first.answer and cited.path == f"{url}/v1/documents/{cited.document_id}/pump.pdf"  # the server's
    assert shown.args[0].startswith(str(kiosk.root / "cache" / "central")) and shown.args[0].endswith("pump.pdf")
    assert shown.args[1:] == [cited.page, True]  # at the cited page, the passage highlighted
    assert window.source.mode() == "pdf"

    told = []
    window.assistant.engineUnreachable.connect(told.append)
    started = time.monotonic()
    gone = ask(qtbot, window, ErrorEvent)
    assert time.monotonic() - started < 2.0 + 1.0  # the connect timeout, and the window's turn
    assert gone.error == "CentralServerError" and netloc in gone.message and "cannot be reached" in gone.message
    assert len(told) == 1 and "no manuals of its own" in told[0] and netloc in window.statusBar().currentMessage()
    assert window.chat.can_regenerate()

    app, server = serving(indexed, tiny_llm_dir, port=int(netloc.rsplit(":", 1)[1]))
    with server:
        assert app.state.server.wait_loaded(SERVER_LOAD_S)
        with wait_event(qtbot, window.assistant.answerEvent, DoneEvent, timeout=ANSWER_MS) as again:
            assert window.chat.regenerate()  # asked again, once the server is back
    assert again.args[0].answer and again.args[0].stats.answerable == first.stats.answerable
