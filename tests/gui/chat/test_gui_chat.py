"""The chat in the desktop app: the AssistantController (a worker on its own thread, the model in
its child process) and the ChatView, on real parts: a PDF drawn with Qt's QPdfWriter, indexed by
the engine with the built-in embedder, and the tiny random LLM (its answers are gibberish, so
these tests check the plumbing: order, stop, errors, rendering). The gate is opened or closed
with AssistantSettings so that a question is answered, or refused, for sure."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest
from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import QDesktopServices, QFont, QTextFormat
from PySide6.QtWidgets import QApplication

from desktop_app.chat.bubbles import NOT_FOUND_TITLE, AnswerBubble
from desktop_app.chat.view import ChatView
from engine.answer.assistant import (
    AnswerStats,
    DoneEvent,
    ErrorEvent,
    LeadEvent,
    PassagesEvent,
    TextEvent,
)
from engine.answer.grounding import Relevance
from engine.answer.sentence_check import NO_TEXT_OF_ITS_OWN
from engine.answer.session import NO_MANUALS
from engine.config import Settings
from engine.conversations import SavedAnswer, history
from engine.paths import AppPaths
from engine.types import Citation, Passage, Quote, Span
from tests.helpers.events import is_a, no_event, wait_event
from tests.helpers.pump_chat import (
    ANSWER,
    ANSWER_MS,
    QUESTION,
    REFUSE,
    Hold,
    answer_of,
    saved_and_reopened,
    start_controller,
)
from tests.helpers.rich_text import anchor_hrefs


# -- data dirs and the controller -------------------------------------------------------------
@pytest.fixture(params=["tiny", pytest.param("built-in", marks=pytest.mark.slow)])
def llm_dir(request) -> Path:
    """The tiny random LLM (fast) and, marked slow, the real built-in SmolLM2."""
    return request.getfixturevalue("tiny_llm_dir" if request.param == "tiny" else "builtin_llm_dir")


@pytest.fixture
def controller(qtbot, indexed, llm_dir):
    controller = start_controller(qtbot, indexed, llm_dir)
    yield controller
    controller.shutdown()


@pytest.fixture
def chat(qtbot, controller) -> ChatView:
    view = ChatView()
    qtbot.addWidget(view)
    view.attach(controller)
    view.resize(700, 600)
    view.show()
    qtbot.waitExposed(view)
    return view


# -- the controller ----------------------------------------------------------------------------
def test_tokens_arrive_in_order(qtbot, controller):
    worker = controller.worker
    produced, received = [], []  # as the worker relays the engine's events; as the GUI gets them
    worker.answerEvent.connect(lambda _request, event: produced.append(event),
                         Qt.ConnectionType.DirectConnection)  # on the worker's thread
    controller.answerEvent.connect(received.append)
    first_piece = is_a(TextEvent, lambda e: e == next(p for p in produced if p.kind == "text"))
    with wait_event(qtbot, controller.answerEvent, DoneEvent, timeout=ANSWER_MS):
        with qtbot.waitSignals([controller.answerEvent] * 3, order="strict",
                               check_params_cbs=[is_a(PassagesEvent), is_a(LeadEvent), first_piece],
                               timeout=ANSWER_MS):
            controller.ask(QUESTION)
    names = [event.kind for event in received]
    assert names[:2] == ["passages", "lead"] and names[-2:] == ["citations", "done"]
    assert set(names[2:-2]) == {"text"} and len(names) > 5
    assert received == produced  # every piece, in the engine's order, none lost or repeated
    done = received[-1]
    pieces = "".join(e.text for e in received if e.kind == "text")
    assert done.stats.answerable and 0 < done.stats.new_tokens <= ANSWER.max_new_tokens
    assert done.answer and done.answer.strip() in pieces


def test_stop_emits_nothing_after_it(qtbot, monkeypatch, controller, chat):
    worker = controller.worker
    hold = Hold(worker, monkeypatch)
    with wait_event(qtbot, controller.answerEvent, TextEvent, timeout=ANSWER_MS):
        assert chat.ask(QUESTION)
    assert hold.reached.is_set()
    bubble = chat.last_answer()
    with qtbot.waitSignal(controller.requestEnded, timeout=ANSWER_MS), \
            qtbot.assertNotEmitted(worker.answerEvent), qtbot.assertNotEmitted(controller.answerEvent):
        assert chat.stop()
        shown = bubble.state.text
        hold.release.set()  # the model goes on writing: its next piece is dropped, the stream closed
    qtbot.wait(3 * 30)  # three flushes of the view's timer: still nothing appended
    assert shown and bubble.state.text == shown and bubble.state.stopped
    assert bubble.notice.isVisible() and "Stopped" in bubble.notice.text()
    assert not chat.is_busy() and chat.send_button.isVisible() and not chat.stop_button.isVisible()
    assert chat.messages()[-1]["stopped"] is True
    # and the next question is answered in full
    with wait_event(qtbot, controller.answerEvent, DoneEvent, timeout=ANSWER_MS):
        assert chat.ask(QUESTION)
    assert chat.last_answer().state.finished and not chat.last_answer().state.stopped


def test_stop_before_the_first_piece_drops_the_whole_answer(qtbot, controller):
    with no_event(controller.answerEvent, TextEvent, DoneEvent), \
            qtbot.waitSignal(controller.requestEnded, timeout=ANSWER_MS):
        controller.ask(QUESTION)
        assert controller.stop() and not controller.is_busy()


def test_engine_process_crash_shows_error_and_restarts(qtbot, monkeypatch, chat):
    controller = chat._controller
    llm = controller.worker.llm
    pid = llm.pid
    freeze_the_model_once_passages_are_shown(controller.worker, monkeypatch, pid)
    with wait_event(qtbot, controller.answerEvent, ErrorEvent, timeout=ANSWER_MS) as failed:
        chat.ask(QUESTION)
        # The model's process dies in the middle of an answer: frozen, it can have written
        # nothing yet (the tiny one writes a whole answer in milliseconds), and it is killed
        # once the model's request has begun.
        qtbot.waitUntil(lambda: llm._active is not None, timeout=ANSWER_MS)
        os.kill(pid, signal.SIGKILL)
    assert "stopped unexpectedly" in failed.args[0].message
    bubble = chat.last_answer()
    assert bubble.state.error and bubble.notice.isVisible() and "failed" in bubble.notice.text()
    assert chat.messages()[-1]["role"] == "error"
    # the window survives and the next question starts a fresh model process
    with wait_event(qtbot, controller.answerEvent, DoneEvent, timeout=ANSWER_MS):
        assert chat.ask(QUESTION)
    assert controller.worker.llm.pid not in (None, pid)


def freeze_the_model_once_passages_are_shown(worker, monkeypatch, pid: int) -> None:
    """SIGSTOP the model's process when the worker relays the passages, before the model is
    asked to write (SIGKILL still ends a stopped process)."""
    relay = worker._relay
    frozen = threading.Event()

    def freezing_relay(request_id, event):
        if isinstance(event, PassagesEvent) and not frozen.is_set():
            frozen.set()
            os.kill(pid, signal.SIGSTOP)
        return relay(request_id, event)

    monkeypatch.setattr(worker, "_relay", freezing_relay)


def test_no_collection_yet_says_to_add_documents(qtbot, tmp_path, tiny_llm_dir):
    controller = start_controller(qtbot, AppPaths(tmp_path).ensure(), tiny_llm_dir)
    try:
        with wait_event(qtbot, controller.answerEvent, ErrorEvent, timeout=ANSWER_MS) as failed, \
                no_event(controller.answerEvent, TextEvent):
            controller.ask(QUESTION)
        assert [e.message for e in failed.args] == [NO_MANUALS]
    finally:
        controller.shutdown()


def test_new_settings_reopen_only_what_changed(qtbot, controller):
    pid = controller.worker.llm.pid
    controller.apply_settings(Settings(passages=2, max_new_tokens=16))
    events = answer_of(qtbot, controller)
    done = events[-1]
    assert done.stats.new_tokens <= 40  # ANSWER overrides the settings' generation length
    assert len(events[0].passages) <= 3 and controller.worker.llm.pid == pid


# -- the view ----------------------------------------------------------------------------------
def test_answer_streams_into_the_view_and_is_saved_as_messages(qtbot, chat):
    flushes = []
    chat.flush_timer.timeout.connect(lambda: flushes.append(chat.last_answer().state.text))
    with qtbot.waitSignal(chat.answerFinished, timeout=ANSWER_MS) as finished:
        assert chat.ask(QUESTION)
        assert chat.is_busy() and chat.stop_button.isVisible()
    event = finished.args[0]
    bubble = chat.last_answer()
    assert bubble.state.text == event.answer and bubble.state.finished
    assert bubble.browser.isVisible() and event.answer.split()[0] in bubble.browser.toPlainText()
    assert len({text for text in flushes}) >= 1  # the timer redrew the growing answer
    assert "[1] pump.pdf, page" in bubble.browser.toPlainText()
    assert anchor_hrefs(bubble.browser.document())[-len(bubble.state.citations):] == \
        [f"cite:{c.number}" for c in bubble.state.citations]
    user, answer = chat.messages()
    assert user == {"role": "user", "content": QUESTION}
    assert answer["role"] == "assistant" and answer["content"] == event.answer
    assert answer["citations"] and answer["citations"][0]["document"] == "pump.pdf"
    assert answer["answerable"] is True
    assert bubble.regenerate_button.isVisibleTo(bubble) and bubble.evidence_button.isVisibleTo(bubble)


def test_the_lead_shows_before_the_first_piece_and_survives_save_and_load(qtbot, controller, chat, tmp_path):
    seen = []  # (event, the bubble's lead as shown then, its text then), after the view took it
    controller.answerEvent.connect(lambda event: seen.append(
        (event, chat.last_answer().lead_view.isVisible(), chat.last_answer().state.text)))
    with qtbot.waitSignal(chat.answerFinished, timeout=ANSWER_MS):
        assert chat.ask(QUESTION)
    lead = next(event for event, _shown, _text in seen if isinstance(event, LeadEvent)).quotes
    assert lead and all(q.document == "pump.pdf" for q in lead)
    first_piece = next(i for i, (event, _s, _t) in enumerate(seen) if isinstance(event, TextEvent))
    assert seen[first_piece][1] and seen[first_piece][2] == ""  # the lead is up, no text yet
    bubble = chat.last_answer()
    shown = bubble.lead_view.toPlainText()
    assert "From the manuals" in shown and all(q.text in shown for q in lead)
    assert f"pump.pdf, page {lead[0].page}" in shown

    again = saved_and_reopened(qtbot, tmp_path / "conversations", chat.messages(), "Pump")  # kept: it owns the bubble
    restored = again.last_answer()
    assert restored.state.lead == SavedAnswer.from_message(chat.messages()[-1]).lead
    assert [(q.text, q.span, q.number) for q in restored.state.lead] == [(q.text, q.span, q.number) for q in lead]
    assert restored.lead_view.toPlainText() == shown
    clicked = []
    restored.citationClicked.connect(clicked.append)
    restored.lead_view.anchorClicked.emit(QUrl("cite:1"))
    (citation,) = clicked
    assert citation.passage.spans == (lead[0].span,) and citation.passage.path == lead[0].passage.path
    assert citation.quote == lead[0].text


def test_a_quote_marks_the_question_s_words_and_sets_its_own_unit_in_bold():
    from desktop_app.chat.bubbles import quote_html
    from engine.answer.query import Query

    text = "Part | Torque\nCover <screws> | 9 Nm"
    query = Query.of("What torque for the cover screws?")
    quote = Quote(1, text, None, Span(1, 0, len(text)), focus=(14, len(text)), marks=query.marks(text))
    assert [text[a:b] for a, b in quote.marks] == ["Torque", "Cover", "screws"]
    mark = '<span style="background-color:#fff1a8">'
    assert quote_html(quote, "#fff1a8") == (f"Part | {mark}Torque</span><br><b>{mark}Cover</span></b>"
                                            f"<b> &lt;</b><b>{mark}screws</span></b><b>&gt; | 9 Nm</b>")
    assert quote_html(quote) == "Part | Torque<br><b>Cover &lt;screws&gt; | 9 Nm</b>"  # no marker: no marks


def test_a_refused_answer_shows_no_lead(qtbot):
    bubble = finished_bubble(qtbot, "Not found.", [make_citation()], answerable=False)
    assert not bubble.lead_view.isVisible() and bubble.saved().lead == ()


def test_not_answerable_says_so_and_shows_the_nearest_passages(qtbot, indexed, tiny_llm_dir):
    controller = start_controller(qtbot, indexed, tiny_llm_dir, answer=REFUSE)
    view = ChatView()
    qtbot.addWidget(view)
    view.attach(controller)
    view.show()
    try:
        with qtbot.waitSignal(view.answerFinished, timeout=ANSWER_MS):
            view.ask("What is the boiling point of mercury?")
        bubble = view.last_answer()
        assert bubble.notice.isVisible() and NOT_FOUND_TITLE in bubble.notice.text()
        assert "Nearest passages" in bubble.nearest.toPlainText()
        # one line per passage, folded (test_gui_answer_marks.py unfolds them), not the evidence's wall of text
        assert bubble.nearest.isVisible() and "pump.pdf, page" in bubble.nearest.toPlainText()
        assert not bubble.evidence.isVisible() and not bubble.browser.isVisible()
        assert view.messages()[-1]["answerable"] is False
        assert history(view.messages()) == [{"role": "user", "content": "What is the boiling point of mercury?"}]
    finally:
        controller.shutdown()


def test_regenerate_asks_the_last_question_again(qtbot, chat):
    with qtbot.waitSignal(chat.answerFinished, timeout=ANSWER_MS):
        chat.ask(QUESTION)
    first = chat.last_answer()
    with qtbot.waitSignal(chat.answerFinished, timeout=ANSWER_MS):
        assert chat.regenerate()
    assert len(chat.answers()) == 1 and chat.last_answer() is not first
    assert [m["role"] for m in chat.messages()] == ["user", "assistant"]


def test_enter_sends_and_shift_enter_starts_a_new_line(qtbot, chat):
    qtbot.keyClicks(chat.input, "How do I")
    qtbot.keyClick(chat.input, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    qtbot.keyClicks(chat.input, "prime the pump?")
    assert chat.input.toPlainText() == "How do I\nprime the pump?"
    assert not chat.answers()
    with qtbot.waitSignal(chat.answerFinished, timeout=ANSWER_MS):
        qtbot.keyClick(chat.input, Qt.Key.Key_Return)
    assert chat.input.toPlainText() == ""
    assert chat.messages()[0]["content"] == "How do I\nprime the pump?"


def test_copy_answer_puts_the_text_on_the_clipboard(qtbot, chat):
    with qtbot.waitSignal(chat.answerFinished, timeout=ANSWER_MS):
        chat.ask(QUESTION)
    QApplication.clipboard().clear()
    assert chat.copy_last_answer()
    assert QApplication.clipboard().text() == chat.last_answer().state.text


# -- rendering, without a model ----------------------------------------------------------------
def make_citation(number=1, path="/manuals/pump.pdf", page=2, text="Prime the pump with water.") -> Citation:
    passage = Passage(7, path, "pump", (1,), (Span(page, 0, len(text)),), text, ("Priming",), 1.0, 0.9)
    return Citation(number, passage, text, True)


def finished_bubble(qtbot, answer: str, citations=(), answerable=True, support=1.0) -> AnswerBubble:
    bubble = AnswerBubble()
    qtbot.addWidget(bubble)
    bubble.resize(600, 400)
    bubble.show()
    bubble.set_citations(citations)
    stats = AnswerStats(answerable, Relevance(0.9, 1.0, 1.4, answerable, ()), ("generate",),
                        {"generate": 1.0}, 10, 20, 0.5, "stop", "cpu", support)
    bubble.finish(answer, stats)
    qtbot.waitExposed(bubble)
    return bubble


HOSTILE = ('See [x](file:///etc/passwd) and <img src="file:///etc/passwd"> and '
           '![y](file:///etc/passwd) or <a href="http://example.com">here</a> and '
           'https://example.com/z, as [1] says.\n\n```\ncat /etc/passwd\n```\n')


def test_markdown_links_and_images_are_inert(qtbot, monkeypatch):
    opened = []
    monkeypatch.setattr(QDesktopServices, "openUrl", lambda url: opened.append(url) or True)
    citation = make_citation()
    bubble = finished_bubble(qtbot, HOSTILE, [citation])
    browser = bubble.browser
    qtbot.wait(50)  # painted
    text = browser.toPlainText()
    assert '<img src="file:///etc/passwd">' in text  # raw HTML shown as text, not rendered
    assert "[image: y]" in text and "cat /etc/passwd" in text
    assert browser.refused == [] and "root:" not in text  # nothing was loaded, nothing asked
    hrefs = anchor_hrefs(browser.document())
    assert hrefs and all(h.startswith("cite:") for h in hrefs), hrefs
    clicked = []
    bubble.citationClicked.connect(clicked.append)
    for url in ("file:///etc/passwd", "http://example.com", "https://example.com/z", "cite:99"):
        browser.anchorClicked.emit(QUrl(url))
    assert clicked == [] and opened == [] and browser.source().isEmpty()
    browser.anchorClicked.emit(QUrl("cite:1"))
    assert clicked == [citation] and opened == [] and browser.source().isEmpty()


def test_code_blocks_wrap_in_a_fixed_font(qtbot):
    long_line = "x <- c(" + ", ".join(str(i) for i in range(80)) + ")"
    bubble = finished_bubble(qtbot, f"Use this:\n\n```r\n{long_line}\n```\n")
    doc = bubble.browser.document()
    block = doc.findBlock(doc.toPlainText().index("x <- c("))
    assert not block.blockFormat().nonBreakableLines()
    assert block.layout().lineCount() > 1  # wrapped within the bubble, nothing hidden
    fixed = block.begin().fragment().charFormat().fontFamilies()
    assert fixed and fixed[0] != bubble.browser.font().family()


def test_a_heading_the_model_writes_is_a_bold_line_of_the_answer_s_size(qtbot):
    bubble = finished_bubble(qtbot, "Prime it first.\n\n# Pump maintenance\n\nThen open the valve.")
    doc = bubble.browser.document()
    heading = doc.findBlock(doc.toPlainText().index("Pump maintenance")).begin().fragment().charFormat()
    body = doc.findBlock(doc.toPlainText().index("Then open")).begin().fragment().charFormat()
    assert heading.fontWeight() == QFont.Weight.Bold
    assert not heading.hasProperty(QTextFormat.Property.FontSizeAdjustment)  # Markdown's H1: +3
    assert heading.font().pointSizeF() == pytest.approx(body.font().pointSizeF())


def test_poorly_supported_answer_shows_a_caution(qtbot):
    bubble = finished_bubble(qtbot, "Something the manuals do not say [1].", [make_citation()], support=0.1)
    assert bubble.notice.isVisible() and "Check the sources" in bubble.notice.text()


@pytest.mark.parametrize("answer", ["", "Prime the pump with water [1]."])
def test_an_answer_left_with_no_text_of_the_models_says_why(qtbot, answer):
    """The guard cut the model's text to nothing (a copy of the prompt's example): the notice
    says the manual's words above are the answer, instead of an empty bubble with no reason."""
    bubble = finished_bubble(qtbot, answer, [make_citation()])
    assert bubble.notice.isVisible() == (not answer)
    assert (NO_TEXT_OF_ITS_OWN in bubble.notice.text()) == (not answer)


def test_citation_from_a_saved_conversation_opens_like_a_live_one(qtbot):
    citation = make_citation(number=2, page=5)
    restored = Citation.from_dict(citation.to_dict())
    assert (restored.number, restored.passage.path, restored.passage.page, restored.passage.text) == \
        (2, "/manuals/pump.pdf", 5, citation.passage.text)
    bubble = AnswerBubble.showing(SavedAnswer.from_message(
        {"role": "assistant", "content": "Prime it [2].", "citations": [citation.to_dict()],
         "answerable": True}))
    qtbot.addWidget(bubble)
    clicked = []
    bubble.citationClicked.connect(clicked.append)
    bubble.browser.anchorClicked.emit(QUrl("cite:2"))
    assert [c.passage.page for c in clicked] == [5]


def test_citations_open_from_the_keyboard(qtbot):
    citations = [make_citation(1, page=2), make_citation(2, page=3)]
    bubble = finished_bubble(qtbot, "Prime the pump [1], then bleed it [2].", citations)
    clicked = []
    bubble.citationClicked.connect(clicked.append)
    bubble.activateWindow()
    bubble.focus_answer()
    qtbot.waitUntil(bubble.browser.hasFocus)
    qtbot.keyClick(bubble.browser, Qt.Key.Key_Tab)  # to the first link: the [1] in the text
    qtbot.keyClick(bubble.browser, Qt.Key.Key_Return)
    qtbot.keyClick(bubble.browser, Qt.Key.Key_Tab)
    qtbot.keyClick(bubble.browser, Qt.Key.Key_Return)
    assert [c.number for c in clicked] == [1, 2]


def test_a_new_font_size_redraws_the_answers(qtbot):
    bubble = finished_bubble(qtbot, "Prime the pump [1].", [make_citation()])
    font = bubble.font()
    font.setPointSize(font.pointSize() + 8)
    bubble.setFont(font)
    qtbot.waitUntil(lambda: bubble.browser.document().defaultFont().pointSize() == font.pointSize())


def test_citations_and_the_lead_name_the_printed_page_and_the_pdf_page(qtbot):
    from engine.types import Quote

    text = "Prime the pump with water."
    labels = ((10, "5"), (11, "6"))
    passage = Passage(7, "/manuals/pump.pdf", "pump", (1, 2), (Span(10, 0, 26), Span(11, 0, 4)), text,
                      ("Priming",), 1.0, 0.9, page_labels=labels)
    bubble = finished_bubble(qtbot, "Prime it [1].", [Citation(1, passage, text, True)])
    assert "[1] pump.pdf, pages 5–6 (PDF pages 10–11)" in bubble.browser.toPlainText()
    bubble.set_lead([Quote(1, text, passage, Span(10, 0, 26))])
    assert "[1] pump.pdf, page 5 (PDF page 10)" in bubble.lead_view.toPlainText()
    clicked = []
    bubble.citationClicked.connect(clicked.append)
    bubble.lead_view.anchorClicked.emit(QUrl("cite:1"))
    assert clicked[0].passage.page == 10  # opening it goes to the physical page
    unlabelled = finished_bubble(qtbot, "Prime it [1].", [make_citation(page=2)])
    assert "[1] pump.pdf, page 2" in unlabelled.browser.toPlainText()
    assert "PDF page" not in unlabelled.browser.toPlainText()


def test_the_figures_under_an_answer_are_not_cut_off_by_its_buttons(qtbot):
    """In a narrow bubble the meta line ("85 tokens · 47.7 tokens/s · first token 0.6 s")
    is shown whole above Show evidence / Copy / Regenerate instead of ending in "· first t"
    (beside them, a larger font left it 26 px)."""
    bubble = finished_bubble(qtbot, "Prime the pump [1].", [make_citation()])
    bubble.set_last(True)
    bubble.resize(360, 400)
    qtbot.waitUntil(lambda: bubble.status.width() < 360)
    label, text = bubble.status, bubble.status.text()
    assert "first token" in text
    metrics = label.fontMetrics()
    if label.wordWrap():
        needed = metrics.boundingRect(0, 0, label.width(), 10_000, Qt.TextFlag.TextWordWrap, text).height()
        assert needed <= label.height() and max(metrics.horizontalAdvance(w) for w in text.split()) <= label.width()
    else:
        assert metrics.horizontalAdvance(text) <= label.width()
    assert label.geometry().bottom() < bubble.evidence_button.geometry().top()


def test_the_welcome_text_follows_the_documents_and_never_offers_adding_on_a_kiosk(qtbot):
    view = ChatView()
    qtbot.addWidget(view)
    assert "Drop PDF manuals" in view.empty.text() and "Ctrl+O" in view.empty.text()
    view.set_documents(3)
    assert "3 documents are indexed" in view.empty.text() and "Ctrl+O" not in view.empty.text()
    view.set_documents(1)
    assert "One document is indexed" in view.empty.text()
    view.set_kiosk(True)
    for ready in (1, 0):
        view.set_documents(ready)
        text = view.empty.text()
        assert "Drop" not in text and "drop" not in text and "Ctrl+O" not in text and "Add documents" not in text
    assert "administrator" in view.empty.text()


def test_regenerate_is_offered_only_once_a_question_was_asked(qtbot, chat):
    offered = []
    chat.regenerateAvailable.connect(offered.append)
    assert not chat.can_regenerate() and not chat.regenerate()
    with qtbot.waitSignal(chat.answerFinished, timeout=ANSWER_MS):
        chat.ask(QUESTION)
    assert chat.can_regenerate() and offered[-1] is True
    chat.clear()
    assert not chat.can_regenerate() and offered[-1] is False


def test_the_welcome_text_keeps_readable_lines_on_a_wide_window(qtbot):
    view = ChatView()
    qtbot.addWidget(view)
    view.resize(1700, 900)
    view.show()
    qtbot.waitExposed(view)
    assert view.empty.isVisible()
    assert view.empty.width() <= view.empty.fontMetrics().averageCharWidth() * 80


def test_a_table_row_leads_under_its_header_in_bold_with_its_lines_kept(qtbot):
    from engine.types import Quote

    shown = "Part | Thread | Torque\nClamping bolts | M12 | 35 Nm\nCover screws | M6 | 9 Nm"
    passage = Passage(7, "/manuals/clamp.pdf", "clamp", (1,), (Span(3, 0, 60),), shown, (), 1.0, 0.9)
    row = (shown.index("Cover"), len(shown))
    bubble = finished_bubble(qtbot, "Use 9 Nm [1].", [Citation(1, passage, shown, True)])
    bubble.set_lead([Quote(1, shown, passage, Span(3, 40, 60), row, "row")])
    lines = bubble.lead_view.toPlainText().splitlines()
    assert "\u201cPart | Thread | Torque" in lines[1] and lines[2] == "Clamping bolts | M12 | 35 Nm"
    assert lines[3].startswith("Cover screws | M6 | 9 Nm\u201d [1] clamp.pdf, page 3")
    bold = _bold_text(bubble.lead_view.document())
    assert "Cover screws | M6 | 9 Nm" in bold and "Clamping bolts" not in bold


def _bold_text(document) -> str:
    from PySide6.QtGui import QFont

    found, block = [], document.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            fragment = it.fragment()
            if fragment.charFormat().fontWeight() >= QFont.Weight.Bold:
                found.append(fragment.text())
            it += 1
        block = block.next()
    return " ".join(found)
