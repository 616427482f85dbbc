"""A PDF's text as its viewer shows it: PDFium's text layer, cleaned with a map back to PDFium's
characters, checked for signs of a wrong text layer (issue 26)."""

from __future__ import annotations

import pytest

from engine.ingest.locate import span_on_page
from engine.ingest.pdf import parse_pdf
from engine.ingest.pdf_text import HyphenWords, PageText, clean_text
from engine.ingest.text_quality import TextQuality
from tests.helpers.hostile_files import positioned_words_pdf

LINES = ["Moving this slider changes the programmed feed rate of the spindle",
         "Torque the clamping bolts to 35 Nm before the first run"]


def test_words_set_apart_by_position_alone_are_read_with_spaces(tmp_path):
    path = positioned_words_pdf(tmp_path / "xetex-like.pdf", ["\n".join(LINES)])
    [page] = parse_pdf(path).pages
    assert page.text.split("\n") == LINES
    assert TextQuality.of(page.text).problems == ()


def test_pypdf_runs_those_words_together_and_the_check_says_so(tmp_path):
    path = positioned_words_pdf(tmp_path / "xetex-like.pdf", ["\n".join(LINES)])
    [page] = parse_pdf(path, "pypdf").pages
    assert "Movingthissliderchanges" in page.text  # why PDFium reads the text now
    assert TextQuality.of(page.text).problems == ("words run together",)
    assert parse_pdf(path, "pypdf").warnings == ("page 1: its text has words run together (searched as it is)",)


@pytest.mark.parametrize("raw, words, expected", [
    ("infor\ufffemation", None, "information"),  # a word hyphenated at a line end
    ("64\ufffebit", None, "64-bit"),  # a number before the break: a hyphen
    ("X\ufffeRay", None, "X-Ray"),  # a capital after it
    ("full\ufffeupgrade", ["run apt full-upgrade"], "full-upgrade"),  # the document writes it so
    ("of\ufffeten", ["it is often so"], "often"),  # parts that are words, joined where the whole is one
    ("contrib\ufffesection", ["the contrib area, a section"], "contrib-section"),  # both parts words
    ("ﬁle ﬂow oﬀ", None, "file flow off"),  # ligatures
    ("soft\u00adhyphen non\u00a0breaking", None, "softhyphen non breaking"),
    ("x \u2212 y \u2217 z", None, "x - y * z"),  # a math minus and an asterisk operator
    ("a\x05b\ue000c\ufffdd", None, "abcd"),  # glyphs no font can be trusted to draw
    ("☛ ✟\r\nInput file form\r\n ✠ ✡ \r\nend", None, "\nInput file form\n\nend"),  # a box's corners
    ("\u00a0\u0300frozen’", None, " frozen’"),  # a lone combining mark
    ("line one\r\nline two", None, "line one\nline two"),
])
def test_the_text_is_cleaned_as_a_reader_expects(raw, words, expected):
    vocabulary = HyphenWords(words) if words is not None else None
    assert PageText.clean(raw, vocabulary).text == expected
    assert clean_text(raw, vocabulary) == expected


def test_every_cleaned_character_maps_back_to_the_raw_character_it_came_from():
    import unicodedata

    raw = "Pen\ufffetium ﬁle\r\n☛ ✟\r\nx\u2212y\x05 z\u00a0w"
    page = PageText.clean(raw)
    assert page.text == "Pentium file\n\nx-y z w"
    assert list(page.index) == sorted(page.index) and page.index[-1] == len(raw)
    for char, at in zip(page.text, page.index):
        if char.isalnum():
            assert char in unicodedata.normalize("NFKC", raw[at])
    assert raw[slice(*page.raw_range(0, 7))] == "Pen\ufffetium"
    assert raw[slice(*page.raw_range(8, 12))] == "ﬁle"
    assert raw[slice(*page.raw_range(14, 17))] == "x\u2212y"


def test_a_stored_span_finds_pdfium_s_very_characters():
    raw = "Intro line\r\nWe use full\ufffeupgrade here; infor\ufffemation is key.\r\nNext line"
    text = PageText.clean(raw, HyphenWords([raw, "run full-upgrade"])).text
    quote = "information is key."
    start = text.index(quote)
    first, last = span_on_page(raw, start, start + len(quote), quote)
    # the page alone would join "fullupgrade": the span moved a character, and is still found
    assert raw[first:last] == "infor\ufffemation is key."
    assert span_on_page(raw, start, start + len(quote), "another sentence entirely") is None


@pytest.mark.parametrize("text, problem", [
    ("DebianGNU/Linuxincludescompletesource-codeforalloftheincludedprograms,soitshouldwork " * 5,
     "words run together"),
    ("The \ufffd\ufffd\ufffd of the \ufffd\ufffd pump. " * 10, "characters that could not be read"),
    ("\n".join("Vertical") * 3, "one letter per line"),
    ("Close the valve.Then open the drain.Wait a minute.Check the level.Start the pump. " * 2,
     "no spaces between sentences"),
])
def test_signs_of_a_wrong_text_layer(text, problem):
    assert problem in TextQuality.of(text).problems


def test_ordinary_manual_text_has_no_problems():
    text = ("4.1 Replacing the seal\nClose the valve. Then open the drain (see Table 3).\n"
            "MAX_FEED_OVERRIDE = 1.2\nTorque | 35 Nm\n-t, --timeout=SEC  Stop after SEC seconds\n"
            "Internationalization is handled by the operating system.\n") * 3
    assert TextQuality.of(text).problems == ()
