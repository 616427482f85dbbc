"""The main window as a person uses it: drop a PDF on it, ask, click a citation, close and
reopen, change the settings; on real parts (the engine's indexer and store, the built-in
embedder, the tiny random LLM) and, marked slow, the real built-in models and R's manuals."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import pytest
from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent, QKeySequence
from PySide6.QtWidgets import QApplication, QDialog, QInputDialog, QMessageBox

from desktop_app.main_window import MainWindow
from desktop_app.panels.conversations import title_from
from desktop_app.panels.settings import SettingsDialog
from desktop_app.self_check import SelfCheck
from desktop_app.theme import current_theme
from engine.answer.assistant import PassagesEvent
from engine.config import Settings, load_settings
from engine.paths import AppPaths
from tests.helpers.events import wait_event
from tests.helpers.pdf_factory import write_pdf
from tests.helpers.pump_chat import ANSWER, ANSWER_MS, LOAD_MS
from tests.helpers.rich_text import anchor_hrefs
from tests.helpers.stall import Heartbeat

pytestmark = pytest.mark.usefixtures("same_look_after")  # tests/conftest.py


QUESTION = "How do I prime the pump with clean water before the first start?"
INDEX_MS = 120_000


@pytest.fixture
def data(indexed_copy) -> AppPaths:
    """A fresh data dir whose collection already holds the pump manual."""
    return indexed_copy


def open_window(qtbot, paths: AppPaths, llm_dir, **kwargs) -> MainWindow:
    kwargs.setdefault("assistant_settings", ANSWER)
    kwargs.setdefault("settings", Settings())
    window = MainWindow(paths, "cpu", llm_folder=llm_dir, **kwargs)
    qtbot.addWidget(window, before_close_func=lambda w: w.close())
    with qtbot.waitSignal(window.assistant.modelReady, timeout=LOAD_MS):
        window.show()
    qtbot.waitExposed(window)
    return window


def ask(qtbot, window: MainWindow, question: str = QUESTION):
    with qtbot.waitSignal(window.chat.answerFinished, timeout=ANSWER_MS) as finished:
        window.chat.input.setPlainText(question)
        assert window.chat.send()
    return finished.args[0]


def drop(window: MainWindow, files: list[Path]) -> None:
    """A real drag and drop of files onto the window, as the platform delivers it."""
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(f)) for f in files])
    where = QPoint(window.width() // 2, window.height() // 2)
    enter = QDragEnterEvent(where, Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                            Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(window, enter)
    assert enter.isAccepted()
    dropped = QDropEvent(QPointF(where), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                         Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(window, dropped)
    assert dropped.isAccepted()


def status_of(window: MainWindow, path: Path) -> str | None:
    for document in window.index.documents():
        if Path(document.path) == path.resolve():
            return document.status
    return None


# -- the window --------------------------------------------------------------------------------
def test_window_is_usable_at_once_and_shows_its_status(qtbot, data, tiny_llm_dir):
    clock = time.perf_counter()
    window = MainWindow(data, "cpu", Settings(), llm_folder=tiny_llm_dir, assistant_settings=ANSWER)
    qtbot.addWidget(window, before_close_func=lambda w: w.close())
    ready = []
    window.assistant.modelReady.connect(ready.append)
    window.show()
    qtbot.waitExposed(window)
    usable_s = time.perf_counter() - clock
    assert usable_s < 5.0, usable_s  # the model loads on its own thread meanwhile
    assert window.chat.input.isEnabled() and window.focusWidget() is window.chat.input
    qtbot.waitUntil(lambda: bool(ready), timeout=LOAD_MS)
    qtbot.waitUntil(lambda: "passages indexed" in window.index_label.text(), timeout=INDEX_MS)
    assert window.model_label.text() == f"Model: {Path(tiny_llm_dir).name}"
    assert window.provider_label.text() == "Provider: CPU"
    assert window.index_label.text().startswith("1 document · ")
    ask(qtbot, window)
    assert window.speed_label.text().endswith("tokens/s")


def test_a_pdf_dropped_on_the_window_is_indexed_and_shows_as_ready(qtbot, tmp_path, tiny_llm_dir):
    paths = AppPaths(tmp_path / "data").ensure()
    window = open_window(qtbot, paths, tiny_llm_dir)
    pdf = write_pdf(tmp_path / "press.pdf", ["The hydraulic press must be switched off before cleaning",
                                             "Replace the filter cartridge every 500 hours. Part F-778"])
    # the text boxes let a drop through to the window instead of pasting the file's name
    assert not window.chat.input.acceptDrops()
    drop(window, [pdf])
    qtbot.waitUntil(lambda: status_of(window, pdf) == "ready", timeout=INDEX_MS)
    qtbot.waitUntil(lambda: window.index_label.text().startswith("1 document · "), timeout=INDEX_MS)
    shown = [window.documents.list.topLevelItem(i).text(0) for i in range(window.documents.list.topLevelItemCount())]
    assert "press.pdf" in shown
    # and it can be asked about at once
    event = ask(qtbot, window, "How often do I replace the filter cartridge?")
    assert any(c.passage.document == "press.pdf" for c in window.chat.last_answer().state.citations)
    assert event.stats.answerable


def test_dragging_something_that_is_not_a_file_is_refused(qtbot, tmp_path, tiny_llm_dir):
    window = open_window(qtbot, AppPaths(tmp_path / "data").ensure(), tiny_llm_dir)
    mime = QMimeData()
    mime.setText("just some text")
    enter = QDragEnterEvent(QPoint(10, 10), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                            Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(window, enter)
    assert not enter.isAccepted()


def test_clicking_a_citation_opens_the_source_at_the_cited_page(qtbot, data, tiny_llm_dir, pump_pdf):
    window = open_window(qtbot, data, tiny_llm_dir)
    ask(qtbot, window)
    bubble = window.chat.last_answer()
    first = bubble.state.citations[0]
    assert first.number == 1 and first.passage.document == "pump.pdf"
    with qtbot.waitSignal(window.source.sourceShown, timeout=10_000) as shown:
        bubble.browser.anchorClicked.emit(QUrl("cite:1"))
    assert shown.args[:2] == [str(pump_pdf), first.passage.page]
    assert first.passage.page == 2  # the priming instructions are on page 2
    assert window.source.current_page() == 2
    assert "pump.pdf" in window.source.title_text() and "2" in window.source.title_text()
    assert window.source.isVisible() and window.side.sizes()[1] >= 200


def test_a_conversation_survives_closing_and_reopening_the_window(qtbot, data, tiny_llm_dir):
    window = open_window(qtbot, data, tiny_llm_dir)
    event = ask(qtbot, window)
    before = window.chat.messages()
    window.close()
    assert not window.assistant._thread.isRunning()  # the worker's thread ended, the model closed

    again = open_window(qtbot, data, tiny_llm_dir)
    assert again.conversations.conversations()[0][1] == title_from(QUESTION)
    assert again.chat.messages() == before
    restored = again.chat.last_answer()
    assert restored.state.text == event.answer and restored.state.citations
    with qtbot.waitSignal(again.source.sourceShown, timeout=10_000):
        restored.browser.anchorClicked.emit(QUrl("cite:1"))
    assert again.source.current_page() == restored.state.citations[0].passage.page
    # a follow-up question goes on in the same conversation, with its history
    ask(qtbot, again, "And how do I open the bleed valve?")
    assert [m["role"] for m in again.chat.messages()] == ["user", "assistant"] * 2


def test_conversations_new_rename_switch_and_delete(qtbot, data, tiny_llm_dir, monkeypatch):
    window = open_window(qtbot, data, tiny_llm_dir)
    ask(qtbot, window)
    first_id = window.conversations.current().id
    window.new_action.trigger()
    assert window.chat.messages() == [] and window.conversations.current().id != first_id
    ask(qtbot, window, "What does error E-12 mean?")
    second_id = window.conversations.current().id
    monkeypatch.setattr(QInputDialog, "getText", lambda *a, **k: ("Error codes", True))
    window.rename_action.trigger()
    assert window.conversations.conversations()[0] == (second_id, "Error codes")
    window.conversations.list.setCurrentRow(1)  # switch back to the first one
    assert window.conversations.current().id == first_id
    assert window.chat.messages()[0]["content"] == QUESTION
    asked = []
    monkeypatch.setattr(QMessageBox, "question",
                        lambda *a, **k: asked.append(a[2]) or QMessageBox.StandardButton.Yes)
    window.delete_action.trigger()
    assert asked and "cannot be undone" in asked[0]
    assert [cid for cid, _ in window.conversations.conversations()] == [second_id]
    assert window.conversations.current().id == second_id and window.chat.messages()
    assert not (data.conversations / f"{first_id}.json").exists()


def test_switching_conversations_while_answering_stops_and_saves_the_answer(qtbot, data, tiny_llm_dir):
    window = open_window(qtbot, data, tiny_llm_dir)
    with wait_event(qtbot, window.assistant.answerEvent, PassagesEvent, timeout=ANSWER_MS):
        window.chat.ask(QUESTION)
    first = window.conversations.current()
    window.new_action.trigger()
    assert not window.chat.is_busy() and window.chat.messages() == []
    saved = window.conversations.store.get(first.id).messages
    assert saved[0]["content"] == QUESTION and saved[-1]["role"] == "assistant"


def test_settings_are_applied_and_saved(qtbot, data, tiny_llm_dir, monkeypatch):
    window = open_window(qtbot, data, tiny_llm_dir)
    chosen = replace(Settings(), font_size=16, theme="dark", max_new_tokens=64, passages=3)
    offered = []

    def accept(dialog):
        offered.append(dialog.settings())
        return QDialog.DialogCode.Accepted

    monkeypatch.setattr(SettingsDialog, "exec", accept)
    monkeypatch.setattr(SettingsDialog, "settings", lambda dialog: chosen)
    with qtbot.waitSignal(window.assistant.modelReady, timeout=LOAD_MS):  # reopened with them
        window.settings_action.trigger()
    assert offered and load_settings(data.settings_file) == chosen
    assert window.settings == chosen and window.assistant.settings == chosen
    assert QApplication.font().pointSize() == 16 and current_theme(QApplication.instance()) == "dark"
    assert window.model_label.text() == f"Model: {Path(tiny_llm_dir).name}"
    ask(qtbot, window)  # still answers
    window.apply_settings(Settings())  # the next tests get the default look back


def test_every_action_has_a_shortcut_and_a_name(qtbot, data, tiny_llm_dir):
    window = open_window(qtbot, data, tiny_llm_dir)
    expected = {"new_action": "Ctrl+N", "add_action": "Ctrl+O", "settings_action": "Ctrl+,",
                "stop_action": "Esc", "focus_input_action": "Ctrl+L", "regenerate_action": "Ctrl+R",
                "copy_action": "Ctrl+Shift+C", "rename_action": "F2", "quit_action": "Ctrl+Q"}
    for name, keys in expected.items():
        assert getattr(window, name).shortcut() == QKeySequence(keys), name
    shortcuts = [a.shortcut().toString() for a in window.actions() if not a.shortcut().isEmpty()]
    assert len(shortcuts) == len(set(shortcuts)) >= 14
    for widget in (window.chat.input, window.chat.send_button, window.chat.stop_button,
                   window.conversations.list, window.documents.list):
        assert widget.accessibleName(), widget
    window.conversations.list.setFocus()
    window.focus_input_action.trigger()
    assert window.chat.input.hasFocus()
    order = []
    for _ in range(3):  # Tab goes on from the question box: Send, then the documents panel
        qtbot.keyClick(QApplication.focusWidget(), Qt.Key.Key_Tab)
        order.append(QApplication.focusWidget())
    assert order[:2] == [window.chat.send_button, window.documents.add_button], order


def test_esc_stops_and_ctrl_r_regenerates(qtbot, data, tiny_llm_dir):
    window = open_window(qtbot, data, tiny_llm_dir)
    with qtbot.waitSignal(window.assistant.requestEnded, timeout=ANSWER_MS):
        window.chat.ask(QUESTION)
        window.stop_action.trigger()
    assert window.chat.last_answer().state.stopped and not window.stop_action.isEnabled()
    with qtbot.waitSignal(window.chat.answerFinished, timeout=ANSWER_MS):
        window.regenerate_action.trigger()
    assert len(window.chat.answers()) == 1 and not window.chat.last_answer().state.stopped


def test_indexing_pauses_while_a_question_is_answered(qtbot, data, tiny_llm_dir):
    """The window hands the assistant's `answering` flag to indexing: set for the whole answer
    (seen by each of its events as the worker sends it), clear once it has ended."""
    window = open_window(qtbot, data, tiny_llm_dir)
    assert window.index._worker.pause is window.assistant.answering
    seen = []
    window.assistant.worker.answerEvent.connect(lambda _id, _event: seen.append(window.assistant.answering.is_set()),
                                                Qt.ConnectionType.DirectConnection)  # on the worker's thread
    with qtbot.waitSignal(window.assistant.requestEnded, timeout=ANSWER_MS):
        ask(qtbot, window)
    assert seen and all(seen)
    assert not window.assistant.answering.is_set()


# -- real models -------------------------------------------------------------------------------
@pytest.mark.slow
def test_first_start_prepares_the_model_while_documents_are_added(qtbot, tmp_path, pump_pdf, monkeypatch):
    paths = AppPaths(tmp_path / "fresh").ensure()
    window = MainWindow(paths, "cpu", Settings())
    qtbot.addWidget(window, before_close_func=lambda w: w.close())
    progress = []
    window.preparation.job.progress.connect(lambda fraction, _message: progress.append(fraction))
    assert window.preparation.dialog is not None and not window.preparation.dialog.isVisible()
    window.show()
    qtbot.waitUntil(window.preparation.dialog.isVisible)  # after the window: before it, it went behind it
    assert not window.chat.send_button.isEnabled() and window.chat.hint.isVisible()
    drop(window, [pump_pdf])  # documents can be added meanwhile
    with qtbot.waitSignal(window.assistant.modelReady, timeout=300_000):
        pass
    assert window.preparation.dialog is None and window.chat.send_button.isEnabled()
    assert progress and progress[-1] == 1.0 and progress == sorted(progress)
    qtbot.waitUntil(lambda: status_of(window, pump_pdf) == "ready", timeout=INDEX_MS)
    event = ask(qtbot, window)
    assert event.stats.answerable and event.stats.new_tokens > 0
    assert window.chat.last_answer().state.citations[0].passage.document == "pump.pdf"


def rss_mb(pid: int | str = "self") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


ANSWERS_WHILE_INDEXING = 6


@pytest.mark.slow
def test_the_window_never_stalls_while_indexing_and_answering(qtbot, data, builtin_llm_dir, manuals_dir,
                                                              capsys):
    window = open_window(qtbot, data, builtin_llm_dir, assistant_settings=None)
    # measured once the window is up: its store and embedders are open, the model is loaded
    qtbot.waitUntil(lambda: window.index.stats != (0, 0), timeout=INDEX_MS)
    heartbeat = Heartbeat()
    heartbeat.start()
    manuals = [manuals_dir / "R-data.pdf"]  # 41 pages: several answers while it is indexed
    drop(window, manuals)
    qtbot.waitUntil(lambda: status_of(window, manuals[0]) == "indexing", timeout=INDEX_MS)
    answered = []
    # questions while the manual is indexed; each answer slows the indexing down (the model takes
    # the cores), so a few, then the rest of the indexing watched alone
    while window.index.busy and len(answered) < ANSWERS_WHILE_INDEXING:
        answered.append(ask(qtbot, window))
    qtbot.waitUntil(lambda: not window.index.busy, timeout=INDEX_MS)
    heartbeat.stop()
    assert all(status_of(window, m) == "ready" for m in manuals)
    assert answered and answered[0].stats.answerable and answered[0].stats.new_tokens > 0
    gui_mb, child_mb = rss_mb(), rss_mb(window.assistant.worker.llm.pid)
    with capsys.disabled():
        print(f"\n[stall] longest event-loop stall {heartbeat.longest_ms} ms over {heartbeat.ticks} ticks, "
              f"(longest GC pause {heartbeat.longest_gc_ms:.0f} ms), {len(answered)} answers while indexing; "
              f"RSS: GUI {gui_mb:.0f} MB, LLM child {child_mb:.0f} MB")
    # Typically 40-70 ms here. The bound catches work on the GUI thread (an LLM in this process
    # stalled it 3.3 s) while leaving room for a shared 2-core machine's scheduling (101 ms seen
    # with five other jobs running).
    assert heartbeat.longest_ms < 250, heartbeat.longest_ms


def start_self_check(qtbot, paths: AppPaths, llm_dir, question: str = QUESTION) -> SelfCheck:
    window = MainWindow(paths, "cpu", llm_folder=llm_dir, assistant_settings=ANSWER, settings=Settings())
    qtbot.addWidget(window, before_close_func=lambda w: w.close())
    check = SelfCheck(window, question, time.perf_counter())
    window.show()
    qtbot.waitUntil(lambda: "passed" in check.report, timeout=LOAD_MS + ANSWER_MS)
    qtbot.waitUntil(lambda: not window.isVisible())  # it closes the window: the app then exits
    return check


def test_the_self_check_asks_through_the_chat_and_reports_each_step(qtbot, data, tiny_llm_dir, capsys):
    check = start_self_check(qtbot, data, tiny_llm_dir)
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert check.passed and report["passed"] and report["error"] is None
    assert report["window_shown"] and report["engine"]["alive"] and report["engine"]["pid"] > 0
    assert report["answer"]["streamed_chunks"] > 0 and report["answer"]["text"].strip()
    assert report["answer"]["answerable"] and report["answer"]["citations"] > 0
    assert [m["role"] for m in check.window.chat.messages()] == ["user", "assistant"]


def test_the_self_check_fails_and_says_why_when_a_step_fails(qtbot, tmp_path, tiny_llm_dir, capsys):
    check = start_self_check(qtbot, AppPaths(tmp_path / "empty").ensure(), tiny_llm_dir)
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert not check.passed and not report["passed"]
    assert "No manuals are indexed" in report["error"]


# -- the answer bubble on the real models --------------------------------------------------------
@pytest.mark.slow
def test_a_real_refusal_keeps_the_notice_over_folded_passages(qtbot, data, builtin_llm_dir, pump_pdf):
    window = open_window(qtbot, data, builtin_llm_dir, assistant_settings=None)  # the real gate
    event = ask(qtbot, window, "How do I start a Jupyter notebook server?")
    assert not event.stats.answerable and "Jupyter" in event.stats.relevance.unknown_names
    bubble = window.chat.last_answer()
    assert bubble.notice.isVisible() and "The manuals do not mention Jupyter." in bubble.notice.text()
    lines = bubble.nearest.toPlainText().splitlines()
    citations = bubble.state.citations
    assert len(lines) == 1 + len(citations) >= 2 and all("pump.pdf, page" in line for line in lines[1:])
    assert not bubble.browser.isVisible() and not bubble.evidence.isVisible()
    with qtbot.waitSignal(window.source.sourceShown, timeout=10_000) as shown:
        bubble.nearest.anchorClicked.emit(QUrl("cite:1"))
    assert shown.args[:2] == [str(pump_pdf), citations[0].passage.page]
    unfolded = bubble.nearest.toPlainText()
    assert " ".join(citations[0].passage.text.split())[:60] in unfolded
    assert len(unfolded.splitlines()) == len(lines) + 1  # that passage's text, the others still one line
    window.close()
    again = open_window(qtbot, data, builtin_llm_dir, assistant_settings=None)
    restored = again.chat.last_answer()
    qtbot.waitUntil(restored.notice.isVisible)
    assert restored.nearest.toPlainText().splitlines() == lines


@pytest.fixture(scope="module")
def r_intro(tmp_path_factory, manuals_dir) -> AppPaths:
    """A data dir whose collection holds R's "An Introduction to R" (about 30 s to index)."""
    from tests.helpers.pump_chat import index_into

    paths = AppPaths(tmp_path_factory.mktemp("r_intro")).ensure()
    index_into(paths, [manuals_dir / "R-intro.pdf"])
    return paths


@pytest.mark.slow
def test_a_real_answer_marks_its_checked_sentences(qtbot, r_intro, builtin_llm_dir, manuals_dir):
    from desktop_app.chat.bubbles import AnswerBubble
    from desktop_app.chat.render import UNSUPPORTED_TAG, unsupported_ranges

    window = open_window(qtbot, r_intro, builtin_llm_dir, assistant_settings=None)
    event = ask(qtbot, window, "How do I get help on a function?")
    assert event.stats.answerable and event.sentences  # the engine checked the model's sentences
    bubble = window.chat.last_answer()
    doc = bubble.browser.document()
    unsupported = [s for s in event.sentences if not s.supported and event.answer[s.start:s.end].strip()]
    assert len(unsupported_ranges(doc)) == len(unsupported) == doc.toPlainText().count(UNSUPPORTED_TAG)
    sources = {s.source for s in event.sentences if s.supported and s.source is not None}
    assert sources and {f"cite:{n}" for n in sources} <= set(anchor_hrefs(doc, until=("Sources", "Passages the answer was written from")))
    pages = {c.number: c.passage.page for c in bubble.state.citations}
    for number in sorted(sources):  # each sentence's citation opens its passage's page
        with qtbot.waitSignal(window.source.sourceShown, timeout=10_000) as shown:
            bubble.browser.anchorClicked.emit(QUrl(f"cite:{number}"))
        assert shown.args[:2] == [str(manuals_dir / "R-intro.pdf"), pages[number]]
    restored = AnswerBubble.showing(bubble.saved())
    qtbot.addWidget(restored)
    assert restored.browser.toPlainText() == bubble.browser.toPlainText()
    assert unsupported_ranges(restored.browser.document()) == unsupported_ranges(doc)


def test_an_empty_conversation_offers_no_regenerate_and_its_welcome_counts_the_documents(qtbot, data,
                                                                                        tiny_llm_dir):
    window = open_window(qtbot, data, tiny_llm_dir)
    window.conversations.new_conversation()
    qtbot.waitUntil(lambda: "One document is indexed" in window.chat.empty.text(), timeout=INDEX_MS)
    assert "Ctrl+O" not in window.chat.empty.text()
    assert not window.regenerate_action.isEnabled()
    ask(qtbot, window)
    assert window.regenerate_action.isEnabled()
    window.conversations.new_conversation()
    assert not window.regenerate_action.isEnabled()


def test_the_source_zoom_is_kept_across_a_restart(qtbot, data, tiny_llm_dir, pump_pdf):
    window = open_window(qtbot, data, tiny_llm_dir, settings=load_settings(data.settings_file))
    ask(qtbot, window)
    with qtbot.waitSignal(window.source.sourceShown, timeout=10_000):
        window.chat.last_answer().browser.anchorClicked.emit(QUrl("cite:1"))
    window.source.zoom_in()
    window.source.zoom_in()
    zoom = window.source.pdf_view.zoomFactor()
    window.close()
    assert load_settings(data.settings_file).source_zoom == pytest.approx(zoom)

    again = open_window(qtbot, data, tiny_llm_dir, settings=load_settings(data.settings_file))
    with qtbot.waitSignal(again.source.sourceShown, timeout=10_000):
        again.chat.last_answer().browser.anchorClicked.emit(QUrl("cite:1"))
    assert again.source.pdf_view.zoomFactor() == pytest.approx(zoom)


def test_a_preparation_that_fails_says_why_and_its_thread_ends(qtbot, tmp_path):
    """The built-in model cannot be prepared where a file stands in for the models folder: the
    job's failed signal carries the engine's sentence, and its thread has ended."""
    from desktop_app.controllers.prepare import PrepareJob

    paths = AppPaths(tmp_path / "data")
    paths.root.mkdir()
    paths.models.write_text("not a folder")
    job = PrepareJob(paths)
    with qtbot.waitSignal(job.failed, timeout=120_000) as failed, qtbot.assertNotEmitted(job.finished):
        job.start()
    assert "models" in failed.args[0]
    assert not job.is_running()
