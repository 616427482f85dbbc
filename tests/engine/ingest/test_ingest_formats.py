"""Each format's pages, labels, headings and text, on small generated files."""

from __future__ import annotations

import codecs
import os
import random

import pytest

from engine.errors import DocumentError
from engine.ingest import ParsePool, discover, outcome_for, parse_file
from engine.ingest.discover import find_documents, normal_path
from engine.types import DocumentOutcome, Page
from tests.helpers.hostile_files import (
    MANUAL_TITLE,
    docx_numbering,
    docx_paragraph,
    docx_table,
    scanned_pdf,
    text_pdf,
    write_docx,
    write_manual_pdf,
)


def page_of(document, passage: str) -> int:
    [number] = [page.number for page in document.pages if passage in page.text]
    return number


# -- PDF ----------------------------------------------------------------------------------
def test_pdf_known_passages_are_on_their_physical_pages(tmp_path):
    document = parse_file(write_manual_pdf(tmp_path))
    assert [page.number for page in document.pages] == [1, 2, 3, 4]
    assert page_of(document, "Disconnect the mains supply") == 1
    assert page_of(document, "level concrete base") == 2
    assert page_of(document, "every 4000 operating hours") == 3
    assert page_of(document, "Error E42") == 4
    assert document.title == MANUAL_TITLE
    assert document.warnings == ()
    assert outcome_for(document) == DocumentOutcome(document.path, "ready", "", pages=4)


def test_pdf_title_falls_back_to_the_file_name(tmp_path):
    path = tmp_path / "Quick Start.pdf"
    path.write_bytes(text_pdf(["Press the green button."]))
    assert parse_file(path).title == "Quick Start"


def test_pdf_image_only_pages_among_text_pages_are_a_warning(tmp_path):
    path = scanned_pdf(tmp_path, ("Contents", "Wiring", None, None, "Index"), "mixed.pdf")
    document = parse_file(path)
    assert page_of(document, "Wiring") == 2
    assert page_of(document, "Index") == 5
    [warning] = document.warnings
    assert warning.startswith("pages 3-4 have only images")
    assert outcome_for(document).status == "ready_with_warnings"


def test_the_pool_returns_what_the_parser_returns(tmp_path):
    path = write_manual_pdf(tmp_path)
    with ParsePool() as pool:
        assert pool.parse(path) == parse_file(path)


# -- plain text ---------------------------------------------------------------------------
def test_text_pages_are_blocks_of_a_hundred_lines(tmp_path):
    path = tmp_path / "log.txt"
    path.write_text("".join(f"line {number}\n" for number in range(1, 251)), encoding="utf-8")
    document = parse_file(path)
    assert [(page.number, page.label) for page in document.pages] == [
        (1, "lines 1-100"), (2, "lines 101-200"), (3, "lines 201-250")]
    assert document.pages[1].text.splitlines()[0] == "line 101"
    assert document.pages[2].text.splitlines()[-1] == "line 250"
    assert document.title == "log"


def test_text_lines_are_counted_as_an_editor_counts_them(tmp_path):
    path = tmp_path / "dos.txt"
    path.write_bytes(b"".join(b"row %d\r\n" % number for number in range(1, 100))
                     + b"\x0cpage two starts\r\nrow 101\r\n")
    first, second = parse_file(path).pages
    assert first.label == "lines 1-100" and first.text.endswith("\x0cpage two starts")
    assert second.label == "lines 101-101" and second.text == "row 101"


@pytest.mark.parametrize("encoding, bom", [
    ("utf-8", codecs.BOM_UTF8),
    ("utf-16-le", codecs.BOM_UTF16_LE),
    ("utf-16-be", codecs.BOM_UTF16_BE),
    ("utf-32-le", codecs.BOM_UTF32_LE),
])
def test_text_with_a_byte_order_mark_is_decoded(tmp_path, encoding, bom):
    path = tmp_path / "notes.txt"
    path.write_bytes(bom + "Überdruckventil prüfen: 5 bar\n".encode(encoding))
    document = parse_file(path)
    assert document.pages[0].text == "Überdruckventil prüfen: 5 bar"
    assert document.warnings == ()


def test_text_that_is_not_utf8_is_read_in_a_guessed_encoding_with_a_warning(tmp_path):
    path = tmp_path / "legacy.txt"
    path.write_bytes("Druck: 5 bar\nVentil prüfen\n".encode("latin-1"))
    document = parse_file(path)
    assert document.pages[0].text == "Druck: 5 bar\nVentil prüfen"
    [warning] = document.warnings
    assert "legacy.txt" in warning and "UTF-8" in warning
    assert "Windows-1252 (a guess)" in warning  # Latin-1 and Windows-1252 read these bytes alike
    assert outcome_for(document).status == "ready_with_warnings"


RUSSIAN = ("Проверьте давление в системе перед запуском. Отключите прибор от сети перед "
           "вскрытием корпуса. Замените уплотнение, если оно изношено. Ошибка E42: датчик "
           "температуры отключён.\n")
POLISH = ("Sprawdź ciśnienie w układzie przed uruchomieniem. Odłącz urządzenie od zasilania "
          "przed otwarciem obudowy. Wymień uszczelkę, jeśli jest zużyta. Błąd E42: czujnik "
          "temperatury jest odłączony. Dokręć śruby kluczem dynamometrycznym.\n")


@pytest.mark.parametrize("text, encoding, name", [
    (RUSSIAN, "cp1251", "Windows-1251"),
    (POLISH, "cp1250", "Windows-1250"),
    ("Überdruckventil prüfen: max. 5 bar.\n", "latin-1", "Windows-1252"),  # one line
])
def test_legacy_encodings_are_read_exactly(tmp_path, text, encoding, name):
    path = tmp_path / "manual.txt"
    path.write_bytes(text.encode(encoding))
    document = parse_file(path)
    assert document.pages[0].text == text.rstrip("\n")
    [warning] = document.warnings
    assert f"'manual.txt' is not UTF-8; it was read as {name} (a guess)" in warning


def test_valid_utf8_is_never_guessed(tmp_path):
    path = tmp_path / "notes.md"
    text = "Überdruckventil prüfen\nПроверьте давление\n運転前に確認してください\n"
    path.write_text(text, encoding="utf-8")
    document = parse_file(path)
    assert document.pages[0].text == text.rstrip("\n")
    assert document.warnings == ()


def test_random_bytes_are_replaced_with_a_warning(tmp_path):
    path = tmp_path / "noise.txt"
    path.write_bytes(b"E42\n" + random.Random(12).randbytes(4000).replace(b"\x00", b"."))
    document = parse_file(path)
    [warning] = document.warnings
    assert "noise.txt" in warning and "UTF-8" in warning
    assert document.pages[0].text.startswith("E42\n")
    assert outcome_for(document).status == "ready_with_warnings"


def test_binary_data_in_a_text_file_is_refused(tmp_path):
    path = tmp_path / "no-bom.txt"
    path.write_bytes("UTF-16 without a byte-order mark".encode("utf-16-le"))
    with pytest.raises(DocumentError) as error:
        parse_file(path)
    assert error.value.kind == "invalid"
    assert "no-bom.txt" in str(error.value) and "UTF-8" in str(error.value)


def test_nul_characters_never_reach_the_index(tmp_path):
    path = tmp_path / "nul.txt"
    path.write_bytes(b"x" * 9000 + b"\nbefore\x00after\n")
    assert "beforeafter" in parse_file(path).pages[0].text


def test_whitespace_only_text_is_empty(tmp_path):
    path = tmp_path / "blank.txt"
    path.write_text("\n   \n\t\n")
    with pytest.raises(DocumentError) as error:
        parse_file(path)
    assert error.value.kind == "empty"


# -- Markdown -----------------------------------------------------------------------------
MARKDOWN = """\
---
title: front matter is metadata
---
Read this first.

# Pump Guide

Intro text.

## Install

Bolt it down.

```sh
# not a heading: a comment in code
make install
```

### Wiring
Connect L and N.

Maintenance
-----------

Oil yearly.

# Appendix
Tables.
"""


def test_markdown_sections_are_labelled_with_their_heading_path(tmp_path):
    path = tmp_path / "guide.md"
    path.write_text(MARKDOWN, encoding="utf-8")
    document = parse_file(path)
    assert document.title == "Pump Guide"
    assert [(page.number, page.label) for page in document.pages] == [
        (1, "Pump Guide"),  # the text before the first heading goes under the title
        (2, "Pump Guide"),
        (3, "Pump Guide > Install"),
        (4, "Pump Guide > Install > Wiring"),
        (5, "Pump Guide > Maintenance"),
        (6, "Appendix"),
    ]
    assert document.pages[0].text == "Read this first."
    install = document.pages[2].text
    assert install.startswith("## Install") and "# not a heading" in install
    assert "Oil yearly." in document.pages[4].text
    assert "front matter" not in "".join(page.text for page in document.pages)


PIPE_TABLE = """# Torques
Tightening torques are listed below.

| Part | Thread | Torque |
|:-----|:------:|-------:|
| Cover screws | M6 | 9 Nm |
| Pin a \\| b | M3 | 1 Nm |

```
| in code | stays |
|---|---|
```
"""


def test_a_markdown_pipe_table_is_read_as_rows_of_cells(tmp_path):
    path = tmp_path / "torques.md"
    path.write_text(PIPE_TABLE, encoding="utf-8")
    text = parse_file(path).pages[-1].text
    assert "Part\tThread\tTorque\nCover screws\tM6\t9 Nm\nPin a | b\tM3\t1 Nm\n" in text  # no delimiter row
    assert "| in code | stays |\n|---|---|" in text


# -- HTML ---------------------------------------------------------------------------------
HTML = """<!DOCTYPE html>
<html><head><meta charset="windows-1252"><title>Pump &amp; Valve Help</title>
<style>body { color: red }</style><script>var hidden = "script text";</script></head>
<body><nav><a href="/">Home</a> | <a href="/x">Menu link</a></nav>
<p>Before   any
heading.</p>
<h1>Setup</h1><p>Unpack the <b>pump</b>.</p>
<h2>Power</h2><p>Use 230\xa0V only.</p>
<h4>Fuses</h4><p>Type T2A.</p>
<table><tr><th>Code</th><th>Meaning</th></tr>
<tr><td>E42</td><td>Sensor \u2013 unplugged</td></tr></table>
<h3>Earth</h3><pre>  keep
    indent</pre>
<h2>Cleaning</h2><ul><li>Rinse</li><li>Dry</li></ul>
</body></html>"""


def test_html_sections_by_heading_without_scripts_styles_or_navigation(tmp_path):
    path = tmp_path / "help.html"
    path.write_bytes(HTML.encode("cp1252"))
    document = parse_file(path)
    assert document.title == "Pump & Valve Help"
    assert [(page.number, page.label) for page in document.pages] == [
        (1, "Pump & Valve Help"),
        (2, "Setup"),
        (3, "Setup > Power"),
        (4, "Setup > Power > Earth"),
        (5, "Setup > Cleaning"),
    ]
    text = "\n".join(page.text for page in document.pages)
    for hidden in ("color: red", "script text", "Menu link", "Home"):
        assert hidden not in text
    assert document.pages[0].text == "Before any heading."
    power = document.pages[2].text
    assert "Use 230 V only." in power and "Fuses" in power  # h4 stays in its section
    assert "Code\tMeaning\nE42\tSensor \u2013 unplugged" in power  # cells apart, as in a PDF
    assert "  keep\n    indent" in document.pages[3].text
    assert "• Rinse\n• Dry" in document.pages[4].text


LISTS_HTML = """<ul><li><a href="#s">Steps</a></li><li><a href="#d">Done</a></li></ul>
<p>Before you start:</p><ol><li><p>Unplug the <b>unit</b>.</p></li>
<li>Open the lid.<ul><li>Left latch</li><li>Right latch<ul><li>then lift</li></ul></li></ul></li>
<li value="7"><p>Close it.</p><p>It clicks.</p></li></ol><ol type="a" start="2"><li>bee</li></ol>
<ol type="I"><li>one</li><li>two</li></ol>
<p>Done.</p>"""
LISTS_TEXT = ("Steps\nDone\n\nBefore you start:\n\n1. Unplug the unit.\n2. Open the lid.\n• Left latch\n"
              "• Right latch\n"
              "◦ then lift\n7. Close it.\n\nIt clicks.\n\nb. bee\n\nI. one\nII. two\n\nDone.")


def test_html_list_items_keep_the_numbers_and_bullets_a_browser_draws(tmp_path):
    """A procedure's steps as the reader sees them, one block (the lead shows steps a line each);
    an item's second paragraph is one of its own. A list of links is contents: no markers."""
    path = tmp_path / "steps.html"
    path.write_text(f"<html><body>{LISTS_HTML}</body></html>", encoding="utf-8")
    assert parse_file(path).pages[0].text == LISTS_TEXT


def test_docx_list_paragraphs_keep_the_numbers_and_bullets_word_draws(tmp_path):
    numbering = docx_numbering({1: [("decimal", "%1."), ("lowerLetter", "%1.%2)")],
                                2: [("bullet", "\uf0b7"), ("bullet", "o")]}, restarts={3: (1, 5)})
    body = "".join([docx_paragraph("Before you start:"), docx_paragraph("Unplug the unit.", number=(1, 0)),
                    docx_paragraph("Open the lid.", number=(1, 0)), docx_paragraph("Left latch", number=(1, 1)),
                    docx_paragraph("Right latch", number=(1, 1)), docx_paragraph("Close it.", number=(1, 0)),
                    docx_paragraph("Lock it.", number=(1, 1)), docx_paragraph("Spare fuse", number=(2, 0)),
                    docx_paragraph("Tools", number=(2, 1)), docx_paragraph("Done."),
                    docx_paragraph("Later step", number=(3, 0))])
    path = write_docx(tmp_path / "steps.docx", body, numbering=numbering)
    assert parse_file(path).pages[0].text == (
        "Before you start:\n\n1. Unplug the unit.\n2. Open the lid.\n2.a) Left latch\n2.b) Right latch\n"
        "3. Close it.\n3.a) Lock it.\n• Spare fuse\n◦ Tools\n\nDone.\n\n5. Later step")


# -- DOCX ---------------------------------------------------------------------------------
def test_docx_headings_paragraphs_and_tables(tmp_path):
    body = "".join([
        docx_paragraph("Read me first."),
        docx_paragraph("Installation", "H1"),
        docx_paragraph("Mount the unit."),
        docx_paragraph("Electrical", "H2"),
        docx_table([["Terminal", "Wire"], ["L", "brown"], ["N", "blue"]]),
        docx_paragraph("Service", "Heading1"),  # an English id with no style entry
        docx_paragraph("Call us."),
    ])
    path = write_docx(tmp_path / "install.docx", body, title="Unit Installation")
    document = parse_file(path)
    assert document.title == "Unit Installation"
    assert [(page.number, page.label) for page in document.pages] == [
        (1, "Unit Installation"),
        (2, "Installation"),
        (3, "Installation > Electrical"),
        (4, "Service"),
    ]
    assert document.pages[1].text == "Installation\n\nMount the unit."
    assert "Terminal\tWire\nL\tbrown\nN\tblue" in document.pages[2].text


def test_docx_a_numbering_style_numbers_its_paragraphs(tmp_path):
    """LibreOffice's and Word's "List Number" style: the list is the style's, and a paragraph may
    give its own level only."""
    style = ('<w:style w:type="paragraph" w:styleId="ListNumber"><w:name w:val="List Number"/><w:pPr>'
             '<w:numPr><w:numId w:val="1"/></w:numPr></w:pPr></w:style>')
    own_level = ('<w:p><w:pPr><w:pStyle w:val="ListNumber"/><w:numPr><w:ilvl w:val="1"/></w:numPr></w:pPr>'
                 '<w:r><w:t>Check the seal.</w:t></w:r></w:p>')
    body = docx_paragraph("Drain the tank.", "ListNumber") + own_level + docx_paragraph("Refill it.", "ListNumber")
    numbering = docx_numbering({1: [("decimal", "%1."), ("lowerRoman", "(%2)")]})
    text = parse_file(write_docx(tmp_path / "s.docx", body, numbering=numbering, styles=style)).pages[0].text
    assert text == "1. Drain the tank.\n(i) Check the seal.\n2. Refill it."


def test_docx_title_from_the_title_style(tmp_path):
    body = docx_paragraph("Owner's Handbook", "Title") + docx_paragraph("Welcome.")
    assert parse_file(write_docx(tmp_path / "h.docx", body)).title == "Owner's Handbook"


def test_a_zip_that_is_not_a_word_document_is_invalid(tmp_path):
    import zipfile

    path = tmp_path / "archive.docx"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("readme.txt", "hello")
    with pytest.raises(DocumentError) as error:
        parse_file(path)
    assert error.value.kind == "invalid" and "word/document.xml" in str(error.value)


def test_docx_with_a_doctype_is_refused(tmp_path):
    import zipfile

    path = tmp_path / "entities.docx"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("word/document.xml", '<!DOCTYPE x [<!ENTITY a "aaaa">]><x>&a;</x>')
    with pytest.raises(DocumentError) as error:
        parse_file(path)
    assert error.value.kind == "invalid"


# -- outcomes and messages ----------------------------------------------------------------
def test_unsupported_format(tmp_path):
    path = tmp_path / "drawing.dwg"
    path.write_bytes(b"AC1032")
    with pytest.raises(DocumentError) as error:
        parse_file(path)
    assert error.value.kind == "unsupported"
    assert error.value.outcome == DocumentOutcome(str(path), "failed", str(error.value))
    assert "drawing.dwg" in str(error.value) and "'.dwg'" in str(error.value)


def test_every_failure_names_the_file_and_says_what_to_do():
    for kind in DocumentError._MESSAGES:
        message = str(DocumentError.of(kind, "/manuals/pump.pdf", "detail"))
        assert "'pump.pdf'" in message and "(detail)" in message
        assert message.endswith(".")


def test_page_labels_default_to_empty():
    assert Page(3, "text").label == ""


# -- discover -----------------------------------------------------------------------------
def test_discover_finds_supported_files_recursively_sorted_and_once(tmp_path):
    (tmp_path / "b" / "deep").mkdir(parents=True)
    (tmp_path / ".hidden").mkdir()
    names = ["a.PDF", "b/notes.txt", "b/deep/c.Md", "b/deep/d.markdown", "e.htm", "f.HTML",
             "g.docx", "skip.doc", ".secret.pdf", ".hidden/h.pdf", "b/image.png"]
    for name in names:
        (tmp_path / name).write_bytes(b"x")
    os.symlink(tmp_path, tmp_path / "b" / "loop")  # a link back up the tree
    found = discover([tmp_path, tmp_path / "a.PDF"])
    assert [path.relative_to(tmp_path).as_posix() for path in found] == [
        "a.PDF", "b/deep/c.Md", "b/deep/d.markdown", "b/notes.txt", "e.htm", "f.HTML",
        "g.docx"]


def test_discover_keeps_a_file_named_directly_whatever_it_is(tmp_path):
    named = tmp_path / "drawing.dwg"
    named.write_bytes(b"x")
    assert discover([named, tmp_path / "missing.pdf"]) == [named]


def test_find_documents_gives_normal_paths_once_and_says_which_inputs_gave_nothing(tmp_path, monkeypatch):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "pump.md").write_bytes(b"x")
    (tmp_path / "empty").mkdir()
    os.symlink(tmp_path / "docs" / "pump.md", tmp_path / "link.md")  # one file, two names
    monkeypatch.chdir(tmp_path)
    found = find_documents(["docs", "link.md", "empty", "gone.pdf"])
    assert found.files == (normal_path(tmp_path / "docs" / "pump.md"),)
    assert found.empty == ("empty",) and found.missing == ("gone.pdf",) and found.unreadable == ()
    assert normal_path("docs/pump.md") == str(tmp_path / "docs" / "pump.md")


@pytest.mark.parametrize("table, rows", [
    ("<tr><th>Code</th><th>Reset</th><th>Meaning</th></tr><tr><td> E1 </td><td></td><td>Fan stalled</td></tr>",
     "Code\tReset\tMeaning\nE1\t\tFan stalled\n"),
    # Asciidoctor and Sphinx put a cell's text in paragraphs: still one line a row (NTPsec's
    # "V" over "GPS sync status" was a heading over a paragraph); a cell's end may be left out
    ('<thead><tr><th>Symbol</th><th>Meaning</th></tr></thead><tbody><tr><td class="tableblock"><p>V</p></td>'
     "<td><p>GPS sync status</p><p>0 = invalid,<br>1 = 20 ms</p></td></tr><tr><td><p>CS<td><p>Checksum</tbody>",
     "Symbol\tMeaning\nV\tGPS sync status 0 = invalid, 1 = 20 ms\nCS\tChecksum\n"),
    ('<tr><td class="icon"><div class="title">Note</div></td><td class="content">No rule may override the '
     "minimum values.</td></tr>", "Note\tNo rule may override the minimum values.\n"),
    # a table that lays out a page: its paragraphs stay paragraphs
    ("<tr><td><h4>Cleaning</h4><p>Unplug the unit.</p><p>Wipe the filter.</p></td></tr>",
     "Cleaning\nUnplug the unit.\n\nWipe the filter.\n"),
    ("<tr><td><p>" + "A long paragraph of a page laid out in a table. " * 21 + "</p><p>The next paragraph.</p></td></tr>",
     ("A long paragraph of a page laid out in a table. " * 21).strip() + "\n\nThe next paragraph.\n"),
], ids=["empty cell", "cells of paragraphs", "an admonition's label beside its text", "a heading in a cell",
        "a cell as long as a page"])
def test_an_html_table_is_read_a_row_to_a_line(tmp_path, table, rows):
    path = tmp_path / "codes.html"
    path.write_text(f"<html><body><table>{table}</table><p>After it.</p><p>Next.</p></body></html>", encoding="utf-8")
    assert parse_file(path).pages[0].text.endswith(f"{rows}\nAfter it.\n\nNext.")
