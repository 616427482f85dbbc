"""The guard's repetition rules: no sentence and no long run of words may come twice, and
has_loop, which tells by the same rules (the evaluation's loop_rate)."""

from __future__ import annotations

import pytest

from engine.answer.answer_guard import ADDRESS_REMOVED, REPEAT_WORDS, AnswerGuard, has_loop
from engine.answer.grounding import EXAMPLE_ANSWER, EXAMPLE_QUESTION, EXAMPLE_SOURCES
from tests.helpers.streamed_pieces import PIECES, feed

ACROBAT = "1. Open the PDF in Adobe Acrobat.\n"
NUMBERED = "".join(f"{n}. Open the PDF in Adobe Acrobat [1].\n" for n in range(1, 15))
RUN = "set pageCompression to 1 when you create the Canvas so that every page is compressed"
REPEATS = {  # what the model writes -> the answer: the text before the second copy
    "the issue's fourteen copies": (ACROBAT * 14, ACROBAT.strip()),
    "numbered copies": (NUMBERED, "1. Open the PDF in Adobe Acrobat [1]."),
    "a sentence again later": ("Prime the pump with water. Open the valve. Prime the pump with water. "
                               "Then start it.", "Prime the pump with water. Open the valve."),
    "in other case and punctuation": ("Press the red button twice. Wait. press the RED button, twice!",
                                      "Press the red button twice. Wait."),
    "a long run in a new sentence": (f"To compress pages, {RUN}. You can also {RUN} and smaller.",
                                     f"To compress pages, {RUN}."),
    "a run-on loop": ("you can " + "open the file and read the page and close the file and " * 4,
                      "you can open the file and read the page and close the file and"),
    "one word changed each time": ("For backlash, raise `MAX_ACCELERATION`. You must also change the `MAX_VELOCITY` to 2. "
                                   "You must also change the `BACKLASH` to 2. You must also change the `B` to 2.",
                                   "For backlash, raise `MAX_ACCELERATION`. You must also change the `MAX_VELOCITY` "
                                   "to 2. You must also change the `BACKLASH` to 2."),
    # ngspice, "How do I turn on PSpice and LTspice compatibility?": it counted its citations
    "a line again, its citation counting up": ("Add this line:\n```\n# Enable it\n#\n# [1]\n"
                                               + "".join(f"#\n# [{n}]\n" for n in range(2, 16)),
                                               "Add this line:\n```\n# Enable it\n#\n# [1]"),
}


@pytest.mark.parametrize("pieces", PIECES)
@pytest.mark.parametrize("repeat", REPEATS)
def test_a_repeated_sentence_or_long_run_is_cut_before_its_second_copy(repeat, pieces):
    written, kept = REPEATS[repeat]
    guard = AnswerGuard(None)
    shown = "".join(feed(guard, written, pieces))
    assert guard.reason == "repetition"
    assert guard.answer() == kept
    assert has_loop(written) and not has_loop(kept)
    if repeat != "a run-on loop":  # a loop that begins after the first sentence is never shown
        assert shown.strip() == kept


@pytest.mark.parametrize("pieces", PIECES)
def test_a_sentence_that_only_begins_as_an_earlier_one_is_shown_once_it_differs(pieces):
    text = "Open the drain valve of the tank. Open the drain valve of the pump. Then wait."
    guard = AnswerGuard(None)
    shown = feed(guard, text, pieces)
    assert "".join(shown) == text == guard.answer() and not guard.is_set()


def test_the_issues_looping_answer_stops_soon_after_the_first_copy():
    guard = AnswerGuard(None)
    shown = "".join(feed(guard, ACROBAT * 14))
    assert guard.is_set() and shown.strip() == ACROBAT.strip()
    assert guard.answer() == "1. Open the PDF in Adobe Acrobat."


NOT_LOOPS = [
    "Use sink() to send the output to a file, and sink() again to end it. "
    "Use sink() to send the output to a file.",  # a phrase said twice
    "Type the name. Press Enter. Type the password. Press Enter.",  # a short sentence twice
    "Open the lid [1]. Open the valve [2]. Open the drain [3].",
    "Set the option in the file: " + " ".join(f"word{n}" for n in range(REPEAT_WORDS - 1)) + ". Then "
    + " ".join(f"word{n}" for n in range(REPEAT_WORDS - 1)) + " again.",  # a run one word too short
    "1. Open the lid.\n2. Take out the filter.\n3. Rinse the filter under water.\n4. Put it back.",
    "Set MAX_VELOCITY to 1.2 in the JOINT_0 section. Set MAX_VELOCITY to 1.2 in the JOINT_1 section.",
    "Set HOME_SEARCH_VEL to 0. Set HOME_LATCH_VEL to 0. Set HOME_FINAL_VEL to 0.",  # short: a list
]


@pytest.mark.parametrize("text", NOT_LOOPS)
def test_a_normal_answer_with_a_repeated_short_phrase_is_not_cut(text):
    guard = AnswerGuard(None)
    feed(guard, text)
    assert not guard.is_set() and guard.reason == "" and guard.answer() == text
    assert not has_loop(text)


def test_the_last_sentence_is_compared_when_the_stream_ends():
    guard = AnswerGuard(None)
    for piece in ["Open the valve fully.", " Wait a minute.", " Open the valve fully."]:
        guard.feed(piece)
    assert not guard.is_set()  # the last sentence might go on
    guard.flush()
    assert guard.reason == "repetition" and guard.answer() == "Open the valve fully. Wait a minute."


def test_has_loop_also_knows_the_periodic_loop():
    assert has_loop("Prime the pump. " + "Then open the valve and wait, " * 6)
    assert not has_loop("")


# -- addresses no passage holds ----------------------------------------------------------------
MANUAL = "Updates are on http://support.example/x200 and the help desk is help@support.example."
MADE_UP = ("Get the update from http://evil.example/fw.exe, or mail root@evil.example. "
           "The manual's own page is http://support.example/x200.")


@pytest.mark.parametrize("pieces", PIECES)
def test_an_address_no_passage_holds_never_reaches_the_screen(pieces):
    guard = AnswerGuard(None, known=[MANUAL])
    shown = feed(guard, MADE_UP, pieces)
    screen = "".join(shown)
    assert "evil" not in screen and not any("evil" in s for s in shown)
    assert screen == guard.answer() == (f"Get the update from {ADDRESS_REMOVED}, or mail {ADDRESS_REMOVED}. "
                                        "The manual's own page is http://support.example/x200.")
    assert guard.removed == ["http://evil.example/fw.exe", "root@evil.example"]


@pytest.mark.parametrize("pieces", PIECES)
def test_without_the_passages_the_guard_checks_no_address(pieces):
    guard = AnswerGuard(None)
    shown = feed(guard, MADE_UP, pieces)
    assert "".join(shown) == MADE_UP and guard.removed == []


@pytest.mark.parametrize("pieces", PIECES)
def test_the_first_sentence_streams_and_each_later_one_shows_when_finished(pieces):
    text = "Open the cover. Take out the filter [1].\n2. Rinse it under water. Put it back"
    guard = AnswerGuard(None)
    shown = feed(guard, text, pieces)
    assert "".join(shown) == text and not guard.is_set()
    first = next(i for i in range(len(shown)) if "".join(shown[:i + 1]).strip() == "Open the cover.")
    assert first > 0  # the first sentence streams as it comes
    later = [piece.strip() for piece in shown[first + 1:] if piece.strip()]  # spaces go as they come
    assert later == ["Take out the filter [1].", "2. Rinse it under water.", "Put it back"]
    assert shown[-1].strip() == "Put it back"  # unfinished until the stream ends


def test_with_the_passages_only_the_word_being_written_is_held_back():
    guard = AnswerGuard(None, known=[MANUAL])
    assert guard.feed("Open the") == "Open "
    assert guard.feed(" cover now.") == "the cover "
    assert guard.flush() == "now."


@pytest.mark.parametrize("pieces", PIECES)
def test_a_loop_inside_a_word_held_back_to_the_end_is_still_cut(pieces):
    # seen on the built-in model: "-sheet=1000...0" until the token limit, one word with no space
    written = "Use the command `gnuplot -plot -sheet=1" + "0" * 150
    guard = AnswerGuard(None, known=[MANUAL])
    feed(guard, written, pieces)
    assert guard.reason == "repetition" and not has_loop(guard.answer())


@pytest.mark.parametrize("pieces", PIECES)
def test_a_loop_inside_a_word_held_back_stops_the_stream_at_its_first_repeat(pieces):
    # GPSBabel on the built-in model: a file name looping with no space, its period changing
    # ("file.gpx.gpx." then ".gpx"); the stream ran on to the token limit and the answer kept it
    written = "Save it as `" + "file.gpx.gpx." * 6 + "gpx." * 40
    guard = AnswerGuard(None, known=[MANUAL])
    shown = feed(guard, written, pieces)
    assert guard.reason == "repetition" and not has_loop(guard.answer())
    assert guard.answer() == "".join(shown).strip() == "Save it as `file.gpx.gpx."
    assert len(shown) < len(written) // 2  # stopped soon after the first copy, not at the end


ECHOES = (EXAMPLE_SOURCES, EXAMPLE_QUESTION, EXAMPLE_ANSWER)
COPIES = {  # what the model writes -> the answer: up to the sentence that copies the example
    "the example's answer first": (EXAMPLE_ANSWER + " Then raise -B to 10.", ""),
    "its source after a real answer": ("Use the -B option to slow the clock [1]. To print a test label, hold "
                                       "the FEED key for five seconds.", "Use the -B option to slow the clock [1]."),
    "a copy begun inside a later sentence": ("Use -B [1]. Or set a higher print darkness with the option.",
                                             "Use -B [1]."),
}


@pytest.mark.parametrize("pieces", PIECES)
@pytest.mark.parametrize("copy", COPIES)
def test_a_copy_of_the_prompts_example_never_reaches_the_screen(copy, pieces):
    written, kept = COPIES[copy]
    guard = AnswerGuard(None, known=[MANUAL], echoes=ECHOES)
    shown = feed(guard, written, pieces)
    assert guard.reason == "example copied" and guard.answer() == kept
    assert "".join(shown).strip() == kept
    assert not any(word in "".join(shown) for word in ("FEED", "print", "darkness"))


@pytest.mark.parametrize("pieces", PIECES)
def test_a_copy_begun_inside_the_first_sentence_leaves_no_answer_and_never_shows(pieces):
    # the first sentence streams word by word: its words before the copy were shown, and the
    # views replace the stream with the answer at the end, as after a loop
    guard = AnswerGuard(None, known=[MANUAL], echoes=ECHOES)
    shown = "".join(feed(guard, "Use -B [1], and set a higher print darkness with the option.", pieces))
    assert guard.reason == "example copied" and guard.answer() == ""
    assert shown.strip() == "Use -B [1], and"


@pytest.mark.parametrize("pieces", PIECES)
def test_the_examples_words_in_the_passages_are_the_manuals_and_stay(pieces):
    written = "To print a test label, hold the FEED key for five seconds [1]."
    guard = AnswerGuard(None, known=[written], echoes=ECHOES)
    assert "".join(feed(guard, written, pieces)) == written == guard.answer() and not guard.reason
    without = AnswerGuard(None, known=[MANUAL])  # no example in the prompt: nothing to compare with
    assert "".join(feed(without, written, pieces)) == written and not without.reason


def test_words_that_may_begin_a_copy_wait_for_the_next_word():
    guard = AnswerGuard(None, echoes=ECHOES)
    assert guard.feed("Use the") == "Use "  # "the FEED key for five" may follow
    assert guard.feed(" -B flag") == "the -B flag"
    assert guard.flush() == ""
