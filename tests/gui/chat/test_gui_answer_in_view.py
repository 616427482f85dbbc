"""Where the chat rests when an answer ends (issue 29): the view follows the stream while the
newest answer fits, and once it does not, its start stays in view, with the manual's own words
(the lead) first, instead of scrolling on to the model's sentences and the list of passages. On
hand-built engine events streamed one by one (no model); the kiosk's case is in kiosk/test_gui_kiosk.py."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QObject, QPoint, QRect, QSize, QTimer, Signal

from desktop_app.chat.view import ChatView
from engine.answer.assistant import CitationsEvent, DoneEvent, LeadEvent, PassagesEvent, TextEvent
from engine.types import Quote, Span
from tests.gui.chat.test_gui_answer_marks import citation, passage, settle, stats

pytestmark = pytest.mark.usefixtures("same_look_after")  # tests/conftest.py

SENTENCE = "Open the bleed valve until water flows without air bubbles, then close it again [1]. "


def answer_events(sentences: int) -> list:
    """An answer's events as the engine yields them: passages, the lead (the manual's own
    sentences), the model's text piece by piece, the citations, the end."""
    source = passage(2, "Priming the pump: fill the pump casing with clean water before the first start.")
    lead = tuple(Quote(1, f"Lead sentence {n}: fill the pump casing with clean water before the first start.",
                       source, Span(2, 10, 90)) for n in range(1, 4))
    pieces = [SENTENCE] * sentences
    return [PassagesEvent((source,), True, stats(True).relevance), LeadEvent(lead),
            *(TextEvent(piece) for piece in pieces), CitationsEvent((citation(1, 2),)),
            DoneEvent("".join(pieces), stats(True), lead)]


class Streamed(QObject):
    """Plays each question's events as the controller's answerEvent, one every few
    milliseconds, so the view lays out and scrolls between them as it does for a model."""

    answerEvent = Signal(object)
    STEP_MS = 5

    def __init__(self, *answers: list):
        super().__init__()
        self.answers = list(answers)

    def ask(self, _question, _history=None) -> None:
        for step, event in enumerate(self.answers.pop(0), 1):
            QTimer.singleShot(step * self.STEP_MS, self, lambda event=event: self.answerEvent.emit(event))

    def stop(self) -> None:
        pass


def chat_with(qtbot, *answers: list) -> ChatView:
    view = ChatView()
    qtbot.addWidget(view)
    view.attach(Streamed(*answers))
    view.resize(700, 520)
    view.show()
    qtbot.waitExposed(view)
    return view


def ask(qtbot, view: ChatView, question: str) -> None:
    with qtbot.waitSignal(view.answerFinished, timeout=10_000):
        assert view.ask(question)
    settle(qtbot, view)


def first_line_in_view(view: ChatView, widget) -> bool:
    """Whether the first line of `widget` (the lead, the question) is inside the visible area."""
    viewport = view.scroll.viewport()
    top_left = widget.mapTo(viewport, QPoint(0, 0))
    line = QRect(top_left, QSize(widget.width(), widget.fontMetrics().lineSpacing()))
    return widget.isVisible() and viewport.rect().contains(line)


def test_a_long_answer_ends_with_its_start_in_view(qtbot):
    view = chat_with(qtbot, answer_events(3), answer_events(40))
    ask(qtbot, view, "How do I prime the pump?")
    ask(qtbot, view, "And how do I bleed it, step by step?")
    answer = view.last_answer()
    assert answer.height() > view.scroll.viewport().height()  # it cannot all be in view
    assert first_line_in_view(view, answer.lead_view)  # the manual's words are what is read first
    question = view._rows[-2][1]
    assert first_line_in_view(view, question.label)  # and what was asked, above them
    bar = view.scroll.verticalScrollBar()
    assert bar.value() < bar.maximum()  # not scrolled on to the end


def test_an_answer_that_fits_is_followed_to_its_end(qtbot):
    view = chat_with(qtbot, answer_events(40), answer_events(1))
    ask(qtbot, view, "How do I bleed the pump, step by step?")
    ask(qtbot, view, "Which valve?")
    bar = view.scroll.verticalScrollBar()
    assert bar.maximum() > 0 and bar.value() == bar.maximum()
    assert first_line_in_view(view, view.last_answer().lead_view)


def test_a_person_who_scrolled_away_is_left_where_they_are(qtbot):
    view = chat_with(qtbot, answer_events(40), answer_events(40))
    ask(qtbot, view, "How do I bleed the pump, step by step?")
    bar = view.scroll.verticalScrollBar()
    with qtbot.waitSignal(view.answerFinished, timeout=10_000):
        assert view.ask("And once more, in other words?")
        qtbot.waitUntil(lambda: view.last_answer().lead_view.isVisible() and bar.value() > 0)
        bar.setValue(0)  # the person went back to the first answer while this one streams
    settle(qtbot, view)
    assert bar.value() == 0
