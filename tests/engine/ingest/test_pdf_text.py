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
    # list bullets as producers draw them: LibreOffice's, Word's Symbol font (private use), hollow
    ("●\tRemove .lpoptions\r\n  \uf0b7 Reprint\r\n○ Or not\r\n■ Box", None,
     "• Remove .lpoptions\n  • Reprint\n◦ Or not\n• Box"),
    ("Supported: ✓ yes; 5 ● 3\r\n✓ ", None, "Supported: ✓ yes; 5 ● 3\n"),  # a bullet only where an item starts
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


def test_glyphs_a_font_cannot_draw_never_reach_a_quote(tmp_path, tiny_embedder):
    """Issue 29's box in a quote ("follows. □ Input file form ..."): a box's ornament corners (here
    ZapfDingbats ❁ ❂ on a line of their own) and a control character a symbol font mapped (\\x05)
    are dropped at ingestion, so the lead and the citations quote text a font can draw."""
    import unicodedata

    from engine.answer.assistant import quote_text
    from engine.answer.lead import best_units, lead_quotes
    from engine.answer.retrieval import Retriever
    from engine.store.indexer import Indexer, IndexSettings
    from tests.helpers.hostile_files import build_pdf, stream
    from tests.helpers.tiny_collection import open_store

    content = (b"BT /F2 12 Tf 72 720 Td (a ) Tj (b) Tj ET\n"
               b"BT /F1 12 Tf 72 700 Td (The first few lines of a file to be read as a data frame look as follows.) Tj ET\n"
               b"BT /F1 12 Tf 72 680 Td (Input file form with names and row labels:) Tj ET\n"
               b"BT /F1 12 Tf 72 660 Td (Price \\005 Floor Area Rooms Age Cent.heat) Tj ET")
    path = tmp_path / "frames.pdf"
    path.write_bytes(build_pdf([
        b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [5 0 R] /Count 1 >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /ZapfDingbats >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R "
        b"/F2 4 0 R >> >> /Contents 6 0 R >>", stream(content)]))
    store = open_store(tmp_path / "collection", tiny_embedder)
    try:
        list(Indexer(store, tiny_embedder, IndexSettings(parse_time_limit_s=30)).run([path]))
        retriever = Retriever(store, tiny_embedder)
        query = retriever.query("How should the input file with names and row labels look?")
        passages = retriever.search(query, 4)
        shown = [q.text for q in lead_quotes(query, passages, tiny_embedder)]
        shown += [quote_text(unit, passages[n - 1]) for n, unit in best_units(query, passages).items()]
        shown += [p.text for p in passages]
    finally:
        store.close()
    assert any("Input file form with names and row labels" in text for text in shown)
    for text in shown:
        odd = [c for c in text if unicodedata.category(c) in ("Cc", "Co", "Cn", "So") and c not in "\n\t"]
        assert not odd, (odd, text)
