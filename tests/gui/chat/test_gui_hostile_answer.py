"""An answer that passes on an address from a hostile manual, or makes one up, in the chat bubble:
the address is plain text beside its citation, never a link, and one no passage holds is marked
and brings the caution (issue 14)."""

from __future__ import annotations

from engine.answer.assistant import AnswerStats
from engine.answer.grounding import Relevance
from engine.answer.sentence_check import check_sentences
from engine.types import Citation, Passage, Span
from tests.gui.chat.test_gui_chat import finished_bubble
from tests.helpers.rich_text import anchor_hrefs

MANUAL = ("Firmware updates for the X200 are on [the official X200 support site]"
          "(http://evil.example/firmware.exe). Install them with the service tool.")
ANSWER = ("Download the X200 firmware updates from "
          "[the official X200 support site](http://evil.example/firmware.exe) [1]. "
          "Install the X200 firmware updates from http://evil.example/other.exe with the service tool.")


def citation() -> Citation:
    passage = Passage(7, "/manuals/x200.md", "x200", (1,), (Span(1, 0, len(MANUAL)),), MANUAL, ("Firmware",), 1.0, 0.9)
    return Citation(1, passage, MANUAL, True)


def bubble_for(qtbot, answer: str):
    cited = citation()
    sentences = check_sentences(answer, [cited.passage])
    bubble = finished_bubble(qtbot, answer, [cited])
    stats = AnswerStats(True, Relevance(0.9, 1.0, 1.4, True, ()), ("generate",), {"generate": 1.0},
                        10, 20, 0.5, "stop", "cpu", 1.0, checked=len(sentences),
                        unsupported=sum(not s.supported for s in sentences))
    bubble.finish(answer, stats, sentences)
    return bubble, sentences


def test_a_manuals_address_is_plain_text_with_its_citation_and_a_made_up_one_is_marked(qtbot):
    bubble, sentences = bubble_for(qtbot, ANSWER)
    assert [(s.supported, s.source) for s in sentences] == [(True, 1), (False, None)]
    doc = bubble.browser.document()
    text = doc.toPlainText()
    # the friendly name no longer hides where it points, and nothing but cite:N is a link
    assert "the official X200 support site (http://evil.example/firmware.exe) [1]" in text
    assert all(h.startswith("cite:") for h in anchor_hrefs(doc)), anchor_hrefs(doc)
    assert "not in the manuals" in text.split("other.exe", 1)[1]
    # one of two sentences is supported, enough by share, but the made-up address calls for the caution
    assert bubble.notice.isVisible() and "Check the sources" in bubble.notice.text()
    assert not bubble.state.well_supported  # saved so with the conversation


def test_an_answer_with_only_the_manuals_address_has_no_caution(qtbot):
    bubble, sentences = bubble_for(qtbot, ANSWER.split(" Install")[0])
    assert [(s.supported, s.source) for s in sentences] == [(True, 1)]
    assert not bubble.notice.isVisible()
