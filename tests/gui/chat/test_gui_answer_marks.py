"""The answer bubble's two marks, on hand-built engine events (no model): a refusal keeps its
"not found" notice in view with the nearest passages folded one line each beneath it, and a
finished answer marks its unsupported sentences and cites each supported one. The real-model
tests are in test_gui_main.py."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QObject, QPoint, QRect, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QPalette, QTextCursor

from desktop_app.chat.bubbles import NOT_FOUND_TITLE, AnswerBubble
from desktop_app.chat.render import NEAREST_TITLE, UNSUPPORTED_TAG, tint, unsupported_ranges
from desktop_app.chat.view import ChatView
from desktop_app.theme import palette_for
from engine.answer.assistant import (
    NOT_FOUND,
    AnswerStats,
    CitationsEvent,
    DoneEvent,
    PassagesEvent,
    TextEvent,
)
from engine.answer.grounding import Relevance
from engine.conversations import SavedAnswer
from engine.types import CheckedSentence, Citation, Passage, Span
from tests.helpers.rich_text import anchor_hrefs

LONG = " ".join(f"Sentence {i} of a long passage about the pump housing and its seals." for i in range(40))


def passage(page: int, text: str, heading=("Pump", "Priming")) -> Passage:
    return Passage(7, "/manuals/pump.pdf", "pump", (page,), (Span(page, 10, 10 + len(text)),), text,
                   heading, 1.0, 0.4)


def citation(number: int, page: int, text: str = LONG, cited: bool = True, heading=("Pump", "Priming")) -> Citation:
    return Citation(number, passage(page, text, heading), text.split(". ")[0], cited)


def stats(answerable: bool, unknown=()) -> AnswerStats:
    relevance = Relevance(0.3, 0.2, 0.5 if not answerable else 1.4, answerable, (), tuple(unknown))
    return AnswerStats(answerable, relevance, ("retrieve", "gate"), {"retrieve": 0.1}, support=1.0)


def refusal(unknown=("Jupyter",), count: int = 4) -> list:
    """A refusal's events as engine/answer/assistant.py yields them."""
    nearest = tuple(citation(n, n + 1, f"Passage {n} text. " + LONG, cited=False,
                             heading=("Pump", f"Section {n}")) for n in range(1, count + 1))
    gate = stats(False, unknown)
    return [PassagesEvent(tuple(c.passage for c in nearest), False, gate.relevance), TextEvent(NOT_FOUND),
            CitationsEvent(nearest), DoneEvent(NOT_FOUND, gate)]


class Scripted(QObject):
    """Plays a list of engine events as the controller's answerEvent, after the view asked."""

    answerEvent = Signal(object)

    def __init__(self, events):
        super().__init__()
        self.events = events

    def ask(self, _question, _history=None) -> None:
        QTimer.singleShot(0, self._play)

    def _play(self) -> None:
        for event in self.events:
            self.answerEvent.emit(event)

    def stop(self) -> None:
        pass


def chat_showing(qtbot, events, question="How do I start a Jupyter notebook?") -> ChatView:
    view = ChatView()
    qtbot.addWidget(view)
    view.attach(Scripted(events))
    view.resize(700, 520)
    view.show()
    qtbot.waitExposed(view)
    with qtbot.waitSignal(view.answerFinished, timeout=5_000):
        assert view.ask(question)
    settle(qtbot, view)
    return view


def settle(qtbot, view: ChatView) -> None:
    """Waits for the transcript's layout to take the bubble's new size (it runs a moment later)."""
    def laid_out() -> bool:
        transcript = view.transcript
        wanted = max(view.scroll.viewport().height(), transcript.heightForWidth(transcript.width()))
        return transcript.height() == wanted
    qtbot.waitUntil(laid_out)


def in_view(view: ChatView, widget) -> bool:
    """Whether all of `widget` is inside the transcript's visible area."""
    viewport = view.scroll.viewport()
    top_left = widget.mapTo(viewport, QPoint(0, 0))
    return widget.isVisible() and viewport.rect().contains(QRect(top_left, widget.size()))


def anchor_point(browser, href: str) -> QPoint:
    """The middle of the first character of the link `href`, in the browser's viewport."""
    doc = browser.document()
    block = doc.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            fragment = it.fragment()
            if fragment.charFormat().anchorHref() == href:
                cursor = QTextCursor(doc)
                cursor.setPosition(fragment.position() + 1)
                return browser.cursorRect(cursor).center()
            it += 1
        block = block.next()
    raise AssertionError(f"no link {href}")


def click(qtbot, browser, href: str) -> None:
    qtbot.mouseClick(browser.viewport(), Qt.MouseButton.LeftButton, pos=anchor_point(browser, href))


# -- the refusal -------------------------------------------------------------------------------
def test_a_refusal_keeps_its_notice_in_view_over_the_folded_passages(qtbot):
    view = chat_showing(qtbot, refusal())
    bubble = view.last_answer()
    assert in_view(view, bubble.notice) and NOT_FOUND_TITLE in bubble.notice.text()
    assert "The manuals do not mention Jupyter." in bubble.notice.text()
    lines = bubble.nearest.toPlainText().splitlines()
    assert lines[0] == NEAREST_TITLE and len(lines) == 5
    assert lines[1].endswith("[1] pump.pdf, page 2 \u00b7 Section 1")
    assert "long passage" not in bubble.nearest.toPlainText()  # folded: no wall of text
    assert in_view(view, bubble.nearest)
    assert not bubble.browser.isVisible() and not bubble.evidence.isVisible()
    assert not bubble.evidence_button.isVisible() and NOT_FOUND not in bubble.browser.toPlainText()


def test_a_click_on_a_nearest_passage_unfolds_it_and_opens_its_page(qtbot):
    view = chat_showing(qtbot, refusal())
    bubble = view.last_answer()
    opened = []
    view.citationClicked.connect(opened.append)
    click(qtbot, bubble.nearest, "cite:2")
    (shown,) = opened
    assert shown == bubble.state.citations[1] and shown.passage.page == 3
    assert not bubble.nearest.textCursor().hasSelection()  # a mouse click leaves no selection behind
    text = bubble.nearest.toPlainText()
    assert "Passage 2 text." in text and "Passage 1 text." not in text and "Passage 3 text." not in text
    qtbot.waitUntil(lambda: bubble.height() > bubble.nearest.height() > 300)  # the bubble took its new size
    settle(qtbot, view)
    assert in_view(view, bubble.notice)  # what it unfolds does not scroll the notice away
    click(qtbot, bubble.nearest, "cite:2")  # a second click folds it again, and opens nothing
    assert "Passage 2 text." not in bubble.nearest.toPlainText() and len(opened) == 1


def test_the_notice_says_plainly_when_nothing_is_unknown_or_near(qtbot):
    view = chat_showing(qtbot, refusal(unknown=(), count=0))
    bubble = view.last_answer()
    assert bubble.notice.text() == f"<b>{NOT_FOUND_TITLE}.</b> Nothing in the indexed manuals answers this."
    assert not bubble.nearest.isVisible()
    view = chat_showing(qtbot, refusal(unknown=("Jupyter", "Conda", "PyPI")))
    assert "do not mention Jupyter, Conda or PyPI." in view.last_answer().notice.text()


def test_a_saved_refusal_shows_the_same_way(qtbot):
    view = chat_showing(qtbot, refusal(unknown=("Jupyter",)))
    live = view.last_answer()
    again = ChatView()
    qtbot.addWidget(again)
    again.resize(700, 520)
    again.show()
    again.set_messages(view.messages())
    restored = again.last_answer()
    qtbot.waitUntil(restored.notice.isVisible)  # rows added to a shown view appear a moment later
    assert restored.state.answerable is False
    assert restored.notice.text() == live.notice.text() and "do not mention Jupyter." in live.notice.text()
    assert restored.nearest.toPlainText() == live.nearest.toPlainText()
    opened = []
    again.citationClicked.connect(opened.append)
    restored.nearest.anchorClicked.emit(QUrl("cite:3"))
    assert [c.passage.page for c in opened] == [4] and "Passage 3 text." in restored.nearest.toPlainText()
    assert opened[0].passage.spans == live.state.citations[2].passage.spans  # the passage is highlighted


def test_the_nearest_passages_open_from_the_keyboard(qtbot):
    view = chat_showing(qtbot, refusal(unknown=()))
    bubble = view.last_answer()
    opened = []
    bubble.citationClicked.connect(opened.append)
    view.activateWindow()
    bubble.nearest.setFocus()
    qtbot.waitUntil(bubble.nearest.hasFocus)
    qtbot.keyClick(bubble.nearest, Qt.Key.Key_Tab)
    qtbot.keyClick(bubble.nearest, Qt.Key.Key_Return)
    assert bubble.nearest.textCursor().selectedText().endswith("[1] pump.pdf, page 2 \u00b7 Section 1")
    qtbot.keyClick(bubble.nearest, Qt.Key.Key_Tab)  # on from the line just unfolded
    qtbot.keyClick(bubble.nearest, Qt.Key.Key_Return)
    assert [c.number for c in opened] == [1, 2]


# -- the checked sentences ---------------------------------------------------------------------
ANSWER = "Fill the casing with clean water. The pump runs on diesel fuel. Then open the bleed valve [2]."
UNSUPPORTED = "The pump runs on diesel fuel."


def sentences_of(answer: str, marks) -> tuple[CheckedSentence, ...]:
    """(sentence, supported, source) -> CheckedSentences with the offsets into `answer`."""
    out = []
    for text, supported, source in marks:
        start = answer.index(text)
        out.append(CheckedSentence(start, start + len(text), supported, source, 0.9 if supported else 0.1))
    return tuple(out)


CHECKED = sentences_of(ANSWER, [("Fill the casing with clean water.", True, 1), (UNSUPPORTED, False, None),
                                ("Then open the bleed valve [2].", True, 2)])
CITATIONS = (citation(1, 2, "Fill the pump casing with clean water before the first start."),
             citation(2, 2, "Then open the bleed valve until water flows."))


def answered_bubble(qtbot, answer=ANSWER, checked=CHECKED, citations=CITATIONS) -> AnswerBubble:
    bubble = AnswerBubble()
    qtbot.addWidget(bubble)
    bubble.resize(600, 400)
    bubble.show()
    bubble.set_passages(True)
    bubble.append(answer)
    assert unsupported_ranges(bubble.browser.document()) == []  # streaming: plain text
    assert UNSUPPORTED_TAG not in bubble.browser.toPlainText()
    bubble.set_citations(citations)
    bubble.finish(answer, stats(True), checked)
    qtbot.waitExposed(bubble)
    return bubble


def test_an_unsupported_sentence_is_marked_and_the_others_cite_their_passage(qtbot):
    bubble = answered_bubble(qtbot)
    doc = bubble.browser.document()
    assert unsupported_ranges(doc) == [UNSUPPORTED]
    text = doc.toPlainText()
    assert f"{UNSUPPORTED} {UNSUPPORTED_TAG} Then" in text
    assert text.count(UNSUPPORTED_TAG) == 1
    assert "Fill the casing with clean water [1]." in text  # the checker's source, as a citation
    assert "bleed valve [2]." in text and "[2] [2]" not in text  # the model cited it already
    assert anchor_hrefs(doc)[:2] == ["cite:1", "cite:2"]


def test_a_click_on_a_sentence_citation_opens_its_page(qtbot):
    bubble = answered_bubble(qtbot)
    opened = []
    bubble.citationClicked.connect(opened.append)
    click(qtbot, bubble.browser, "cite:1")
    assert opened == [CITATIONS[0]]


def test_marks_follow_the_markdown_the_model_wrote(qtbot):
    answer = "1. **Fill** the casing with `water`.\n2. Run it on diesel.\n\nSee [the manual](http://x.org) too."
    checked = sentences_of(answer, [("**Fill** the casing with `water`.", True, 1),
                                    ("Run it on diesel.", False, None), ("See [the manual](http://x.org) too.", False, 2)])
    bubble = answered_bubble(qtbot, answer, checked)
    doc = bubble.browser.document()
    # a link's address is shown beside its text (issue 14), and marked with it
    assert unsupported_ranges(doc) == ["Run it on diesel.", "See the manual (http://x.org) too."]
    assert "Fill the casing with water [1]." in doc.toPlainText()
    assert doc.toPlainText().count(UNSUPPORTED_TAG) == 2


def test_no_sentences_leave_the_answer_as_it_was_written(qtbot):
    bubble = answered_bubble(qtbot, checked=())
    assert bubble.browser.toPlainText().startswith(ANSWER + "\n")
    assert unsupported_ranges(bubble.browser.document()) == []


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_mark_reads_in_both_themes(qtbot, theme):
    palette = palette_for(theme)
    bubble = AnswerBubble()
    qtbot.addWidget(bubble)
    bubble.setPalette(palette)
    bubble.set_passages(True)
    bubble.set_citations(CITATIONS)
    bubble.finish(ANSWER, stats(True), CHECKED)
    doc = bubble.browser.document()
    at = doc.toPlainText().index(UNSUPPORTED) + 1
    cursor = QTextCursor(doc)
    cursor.setPosition(at)
    fmt = cursor.charFormat()
    background = fmt.background().color()
    text = palette.color(QPalette.ColorRole.Text)
    assert background == tint(palette, QPalette.ColorRole.BrightText, 0.14)
    assert background != palette.color(QPalette.ColorRole.Base)
    assert contrast(background, text) >= 7.0  # WCAG AAA: the sentence stays easy to read
    assert fmt.underlineStyle() == fmt.UnderlineStyle.WaveUnderline  # seen without colour too


def contrast(a, b) -> float:
    def luminance(c) -> float:
        def channel(v: float) -> float:
            return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4
        return 0.2126 * channel(c.redF()) + 0.7152 * channel(c.greenF()) + 0.0722 * channel(c.blueF())
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_a_saved_answer_shows_the_same_marks(qtbot):
    live = answered_bubble(qtbot)
    saved = live.saved()
    assert saved.sentences == CHECKED
    restored = AnswerBubble.showing(SavedAnswer.from_message(saved.to_message()))
    qtbot.addWidget(restored)
    assert restored.browser.toPlainText() == live.browser.toPlainText()
    assert unsupported_ranges(restored.browser.document()) == [UNSUPPORTED]
    assert anchor_hrefs(restored.browser.document()) == anchor_hrefs(live.browser.document())
    opened = []
    restored.citationClicked.connect(opened.append)
    restored.browser.anchorClicked.emit(QUrl("cite:1"))
    assert [c.passage.page for c in opened] == [2]


def test_the_view_marks_the_sentences_when_the_answer_is_done(qtbot):
    events = [PassagesEvent(tuple(c.passage for c in CITATIONS), True, stats(True).relevance),
              TextEvent(ANSWER[:40]), TextEvent(ANSWER[40:]), CitationsEvent(CITATIONS),
              DoneEvent(ANSWER, stats(True), sentences=CHECKED)]
    view = chat_showing(qtbot, events, "How do I prime the pump?")
    bubble = view.last_answer()
    assert unsupported_ranges(bubble.browser.document()) == [UNSUPPORTED]
    assert view.messages()[-1]["sentences"] == [s.to_dict() for s in CHECKED]
