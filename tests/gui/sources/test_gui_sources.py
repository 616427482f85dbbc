"""The source view opens a citation at its page with the passage highlighted."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from PySide6.QtCore import QMarginsF, QPointF, QRectF, Qt
from PySide6.QtGui import QFont, QPageLayout, QPageSize, QPainter, QPdfWriter

from desktop_app.controllers.sources import SourceReader
from desktop_app.sources.view import SourceView
from engine.ingest import parse_file
from engine.types import Citation
from tests.helpers.stall import Heartbeat

READ_MS = 20_000  # a text format's pages come from a parse pool child (its start included)

PAGE_LINES = {
    1: ["Coolant pump maintenance: clean the intake filter every two hundred hours.",
        "Check the coolant concentration with a refractometer before each shift.",
        "A clogged filter shows as alarm A17 on the operator panel."],
    2: ["Replacing the drive belt of the main spindle motor takes about forty minutes.",
        "Lock out the machine, remove the rear guard and loosen the tensioner bolts.",
        "Fit the new belt, tension it to 35 newtons and run the spindle at low speed."],
    3: ["Error E42 means the hydraulic pressure sensor reports no signal at all.",
        "Inspect connector X12 behind the hydraulic unit for corrosion or loose pins.",
        "If the wiring is sound, replace the sensor and calibrate it from the service menu."],
}


def write_manual(path):
    """A real three-page PDF, written by Qt, with distinct text on every page."""
    writer = QPdfWriter(str(path))
    writer.setPageLayout(QPageLayout(QPageSize(QPageSize.PageSizeId.A4),
                                     QPageLayout.Orientation.Portrait, QMarginsF(0, 0, 0, 0)))
    writer.setResolution(72)
    writer.setTitle("Machine service manual")
    painter = QPainter(writer)
    font = QFont("DejaVu Sans")
    font.setPointSize(10)
    painter.setFont(font)
    for number, lines in PAGE_LINES.items():
        if number > 1:
            writer.newPage()
        y = 80 + 90 * number  # the passage sits lower on later pages
        for line in lines:
            painter.drawText(QPointF(50, y), line)
            y += 16
    painter.end()
    return path


@pytest.fixture
def manual(qapp, tmp_path):
    return write_manual(tmp_path / "service manual.pdf")


def shown_view(qtbot, reader=None) -> SourceView:
    widget = SourceView(reader=reader)
    qtbot.addWidget(widget)
    widget.resize(800, 700)
    widget.show()
    qtbot.waitExposed(widget)
    return widget


@pytest.fixture
def view(qtbot):
    return shown_view(qtbot)


def show(qtbot, view, path, page, passage):
    """Open a citation saved with its page and text only (its spans are empty: found by text)."""
    citation = Citation.from_dict({"path": str(path), "page": page, "text": passage})
    with qtbot.waitSignal(view.sourceShown, timeout=READ_MS) as shown:
        view.show_citation(citation)
    return shown.args


def letters(text: str) -> str:
    return "".join(c for c in text.casefold() if c.isalnum())


@pytest.mark.parametrize("page", [1, 2, 3])
def test_a_pdf_opens_at_the_cited_page_with_the_passage_highlighted(qtbot, view, manual, page):
    parsed = parse_file(manual).pages[page - 1].text  # what the index holds for this page
    passage = "\n".join(parsed.splitlines()[1:])  # the last two lines, as pypdf read them
    assert letters(passage) == letters(" ".join(PAGE_LINES[page][1:]))
    assert show(qtbot, view, manual, page, passage) == [str(manual), page, True]
    assert view.mode() == "pdf"
    assert view.current_page() == page
    assert view.pdf_view.pageNavigator().currentPage() == page - 1  # QtPdf counts from 0
    assert view.highlight_found()
    assert letters(view.highlighted_text()) == letters(passage)
    assert view.title_text() == f"service manual.pdf — page {page}"
    assert view.note.text() == "The cited passage is highlighted."


def test_the_highlight_is_painted_over_the_passage(qtbot, view, manual):
    passage = " ".join(PAGE_LINES[3][:2])
    show(qtbot, view, manual, 3, passage)
    pdf = view.pdf_view
    assert len(pdf.highlight_boxes) == 2  # one marker stroke per line
    page = pdf.page_rect()
    scale = pdf.screen_scale()
    box = pdf.highlight_boxes[0]
    scroll = QPointF(pdf.horizontalScrollBar().value(), pdf.verticalScrollBar().value())
    on_screen = QRectF(page.topLeft() + box.topLeft() * scale - scroll, box.size() * scale)
    assert pdf.viewport().rect().contains(on_screen.toRect())  # scrolled into view
    qtbot.waitUntil(lambda: _yellow_share(pdf.viewport().grab().toImage(), on_screen) > 0.5)
    below = on_screen.translated(0, on_screen.height() * 3)  # the page under the passage
    assert _yellow_share(pdf.viewport().grab().toImage(), below) == 0


def _yellow_share(image, rect) -> float:
    """The share of the pixels in `rect` that are marker yellow (glyphs are left out)."""
    yellow = total = 0
    r = rect.toRect().adjusted(2, 2, -2, -2)
    for y in range(r.top(), r.bottom(), 2):
        for x in range(r.left(), r.right(), 2):
            colour = image.pixelColor(x, y)
            if colour.lightness() < 100:
                continue  # a glyph
            total += 1
            yellow += colour.red() > 180 and colour.green() > 150 and colour.blue() < 150
    return yellow / max(1, total)


def test_a_passage_laid_out_differently_is_still_found(qtbot, view, manual):
    # our parser and PDFium disagree on spaces and line breaks; a quote may be re-flowed
    passage = "Lock out the machine,\nremove the   rear guard and loosen the tensioner\u00ad bolts."
    show(qtbot, view, manual, 2, passage)
    assert view.highlight_found()
    assert letters(view.highlighted_text()) == letters(passage)


def test_a_passage_that_is_not_on_the_page_still_opens_the_page(qtbot, view, manual):
    args = show(qtbot, view, manual, 1, "Nothing like this sentence appears in the manual at all.")
    assert args == [str(manual), 1, False]
    assert view.current_page() == 1 and not view.highlight_found()
    assert "could not be located" in view.note.text()


def test_page_buttons_and_shortcuts_move_through_the_pdf(qtbot, view, manual):
    show(qtbot, view, manual, 2, PAGE_LINES[2][0])
    qtbot.mouseClick(view.next_button, Qt.MouseButton.LeftButton)
    assert view.current_page() == 3
    assert view.title_text() == "service manual.pdf — page 3"
    assert not view.next_button.isEnabled()
    view.pdf_view.setFocus()
    qtbot.keyClick(view.pdf_view, Qt.Key.Key_PageUp, Qt.KeyboardModifier.ControlModifier)
    assert view.current_page() == 2
    qtbot.mouseClick(view.previous_button, Qt.MouseButton.LeftButton)
    assert view.current_page() == 1 and not view.previous_button.isEnabled()


def test_zoom_keeps_the_page_and_fit_width_restores(qtbot, view, manual):
    show(qtbot, view, manual, 2, PAGE_LINES[2][1])
    fitted = view.pdf_view.zoomFactor()
    qtbot.mouseClick(view.zoom_in_button, Qt.MouseButton.LeftButton)
    assert view.pdf_view.zoomFactor() == pytest.approx(fitted * 1.25)
    qtbot.mouseClick(view.zoom_out_button, Qt.MouseButton.LeftButton)
    qtbot.mouseClick(view.zoom_out_button, Qt.MouseButton.LeftButton)
    assert view.pdf_view.zoomFactor() < fitted
    assert view.current_page() == 2
    qtbot.mouseClick(view.fit_button, Qt.MouseButton.LeftButton)
    assert view.pdf_view.zoomFactor() == pytest.approx(fitted)


def test_a_page_beyond_the_end_shows_the_last_page(qtbot, view, manual):
    show(qtbot, view, manual, 40, "")
    assert view.current_page() == 3


def test_a_missing_file_says_so_by_name(qtbot, view, tmp_path):
    gone = tmp_path / "pump manual.pdf"
    assert show(qtbot, view, gone, 4, "anything") == [str(gone), 4, False]
    assert view.mode() == "missing"
    assert "pump manual.pdf" in view.message_text()
    assert "moved or deleted; add it again" in view.message_text()
    assert view.title_text() == "pump manual.pdf — page 4"
    assert not view.next_button.isEnabled() and not view.zoom_in_button.isEnabled()


def test_a_damaged_pdf_shows_why(qtbot, view, tmp_path):
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"%PDF-1.4\nthis is not really a PDF\n")
    show(qtbot, view, broken, 1, "anything")
    assert view.mode() == "error"
    assert "broken.pdf" in view.message_text()


def test_the_view_moves_from_a_pdf_to_text_and_back(qtbot, view, manual, tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("Torque the wheel nuts to 120 Nm.\n", encoding="utf-8")
    show(qtbot, view, manual, 3, PAGE_LINES[3][0])
    show(qtbot, view, notes, 1, "Torque the wheel nuts")
    assert view.mode() == "text" and view.stack.currentWidget() is view.text_view
    show(qtbot, view, manual, 1, PAGE_LINES[1][2])
    assert view.mode() == "pdf" and view.current_page() == 1 and view.highlight_found()


# -- text formats ----------------------------------------------------------------------------
def selected(view) -> str:
    return view.text_view.textCursor().selectedText().replace("\u2029", "\n")


def test_a_text_file_shows_the_passage_selected_and_in_view(qtbot, view, tmp_path):
    lines = [f"Line {n}: routine check number {n} of the daily list." for n in range(1, 251)]
    lines[170] = "Line 171: bleed the brake circuit until no bubbles appear. 🙂 Then refill."
    path = tmp_path / "checks.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    pages = parse_file(path).pages
    assert pages[1].label == "lines 101-200"
    passage = "\n".join(lines[169:172])
    assert show(qtbot, view, path, 2, passage) == [str(path), 2, True]
    assert view.mode() == "text"
    assert view.current_page() == 2
    assert selected(view) == passage
    assert view.highlighted_text() == passage
    assert view.title_text() == "checks.txt — page 2 (lines 101-200)"
    cursor_rect = view.text_view.cursorRect()
    assert view.text_view.viewport().rect().contains(cursor_rect.center())
    assert view.text_view.extraSelections()  # the marker, also when the view loses focus


def test_a_markdown_section_highlights_its_passage(qtbot, view, tmp_path):
    path = tmp_path / "guide.md"
    path.write_text("# Guide\n\nIntro text.\n\n## Filters\n\nSwap the *air filter* every "
                    "month.\nUse only original parts.\n\n## Belts\n\nCheck belt tension weekly.\n",
                    encoding="utf-8")
    pages = parse_file(path).pages
    number = next(p.number for p in pages if "air filter" in p.text)
    passage = next(p.text for p in pages if "air filter" in p.text)
    show(qtbot, view, path, number, passage)
    assert view.current_page() == number
    assert selected(view) == passage
    assert "Guide > Filters" in view.title_text()


def test_a_markdown_table_shows_its_cells_in_columns(qtbot, view, tmp_path):
    path = tmp_path / "torques.md"
    path.write_text("# Torques\n\n| Part | Torque |\n|---|---|\n| Base plate of the unit | 80 Nm |\n| Pin | 1 Nm |\n",
                    encoding="utf-8")
    show(qtbot, view, path, 1, "Pin\t1 Nm")
    assert selected(view) == "Pin\t1 Nm"
    metrics = view.text_view.fontMetrics()  # a tab past the widest cell: "Base plate of the unit<tab>80 Nm"
    assert view.text_view.tabStopDistance() > metrics.horizontalAdvance("Base plate of the unit")


def test_text_page_buttons_move_between_sections(qtbot, view, tmp_path):
    path = tmp_path / "long.txt"
    path.write_text("\n".join(f"row {n}" for n in range(1, 351)) + "\n", encoding="utf-8")
    show(qtbot, view, path, 1, "row 5\nrow 6")
    assert view.current_page() == 1
    qtbot.mouseClick(view.next_button, Qt.MouseButton.LeftButton)
    assert view.current_page() == 2
    assert view.title_text() == "long.txt — page 2 (lines 101-200)"
    qtbot.mouseClick(view.next_button, Qt.MouseButton.LeftButton)
    qtbot.mouseClick(view.next_button, Qt.MouseButton.LeftButton)
    assert view.current_page() == 4 and not view.next_button.isEnabled()


def test_links_in_a_text_source_are_never_followed(view):
    assert not view.text_view.openLinks()
    assert not view.text_view.openExternalLinks()


def test_an_html_source_is_shown_as_its_text(qtbot, view, tmp_path):
    path = tmp_path / "page.html"
    path.write_text("<html><body><h1>Setup</h1><p>Connect the <a href='file:///etc/passwd'>"
                    "sensor cable</a> to port 3.</p></body></html>", encoding="utf-8")
    show(qtbot, view, path, 1, "Connect the sensor cable to port 3.")
    assert view.highlight_found()
    assert "passwd" not in view.text_view.toPlainText()


# -- citations keep their spans; text formats are read off the GUI thread --------------------
def cite(path, page, text, spans=None) -> Citation:
    saved = {"path": str(path), "page": page, "text": text}
    if spans is not None:
        saved["spans"] = spans
    return Citation.from_dict(saved)


def open_cited(qtbot, view, citation):
    with qtbot.waitSignal(view.sourceShown, timeout=READ_MS) as shown:
        view.show_citation(citation)
    return shown.args


def test_stored_spans_mark_the_cited_one_of_two_equal_sentences(qtbot, view, tmp_path):
    path = tmp_path / "torque.txt"
    sentence = "Torque the wheel nuts to 120 Nm."
    path.write_text(f"Front axle. {sentence}\nRear axle. {sentence}\n", encoding="utf-8")
    text = parse_file(path).pages[0].text
    second = text.rindex(sentence)
    citation = cite(path, 1, sentence, [[1, second, second + len(sentence)]])
    assert open_cited(qtbot, view, citation) == [str(path), 1, True]
    cursor = view.text_view.textCursor()
    assert selected(view) == sentence
    assert cursor.selectionStart() == second  # the cited one; a search by text finds the first


def test_spans_that_no_longer_fit_the_file_fall_back_to_the_text(qtbot, view, tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("Added later. Bleed the brake circuit until no bubbles appear.\n",
                    encoding="utf-8")
    passage = "Bleed the brake circuit until no bubbles appear."
    assert open_cited(qtbot, view, cite(path, 1, passage, [[1, 0, len(passage)]]))[2]
    assert selected(view) == passage


def test_a_pdf_citation_with_spans_opens_at_its_page(qtbot, view, manual):
    text = parse_file(manual).pages[1].text  # as the index holds it (PDFium's, cleaned)
    line = text.splitlines()[1]
    start, end = text.index(line), text.index(line) + len(line)
    citation = cite(manual, 2, text[start:end], [[2, start, end]])
    assert open_cited(qtbot, view, citation) == [str(manual), 2, True]
    assert view.highlighted_text() == PAGE_LINES[2][1]  # PDFium's very characters of the quote


def test_a_quote_s_span_highlights_exactly_its_words_on_the_page(qtbot, view, manual):
    """The span round trip: a quote's span in the index -> PDFium's characters -> their boxes."""
    import pypdfium2

    text = parse_file(manual).pages[2].text
    quote = "replace the sensor and calibrate it"
    start = text.index(quote)
    assert open_cited(qtbot, view, cite(manual, 3, quote, [[3, start, start + len(quote)]]))[2]
    assert view.highlighted_text() == quote  # not the whole line, not a word more
    textpage = pypdfium2.PdfDocument(str(manual))[2].get_textpage()
    first = textpage.get_text_range().index(quote)
    left = textpage.get_charbox(first)[0]  # (left, bottom, right, top): x as the view counts it
    right = textpage.get_charbox(first + len(quote) - 1)[2]
    [box] = view.highlight_boxes()  # one line, padded by 1.5 points
    assert abs(box.left() + 1.5 - left) < 1.0 and abs(box.right() - 1.5 - right) < 1.0


def test_a_span_that_does_not_hold_the_quote_falls_back_to_its_letters(qtbot, view, manual):
    quote = "replace the sensor and calibrate it"
    assert open_cited(qtbot, view, cite(manual, 3, quote, [[3, 0, len(quote)]]))[2]  # a stale span
    assert letters(view.highlighted_text()) == letters(quote)


def slow_html(folder, tags: int = 150_000):
    """A line of text in empty markup: html.parser takes about a second per 150,000 tags (3 MB)
    here, and its text is tiny, so showing it costs the window nothing."""
    path = folder / "setup.html"
    path.write_text("<html><body><h1>Setup</h1><p>Connect the sensor cable to port 3.</p>"
                    + "<span class='x'></span>" * tags + "</body></html>", encoding="utf-8")
    return path


def open_without_stalling(qtbot, view, citation):
    """Open the citation; (sourceShown's args, the longest stall, show_citation's own time)."""
    ticks = Heartbeat()
    ticks.start()
    started = time.perf_counter()
    with qtbot.waitSignal(view.sourceShown, timeout=READ_MS) as shown:
        view.show_citation(citation)
        returned_ms = (time.perf_counter() - started) * 1000
        assert view.mode() == "opening"
        assert view.message_text() == f"Opening “{Path(citation.passage.path).name}”…"
    ticks.stop()
    return shown.args, ticks.longest_ms, returned_ms


def test_a_slowly_parsed_file_opens_without_stalling_the_window(qtbot, view, tmp_path):
    path = slow_html(tmp_path)
    citation = cite(path, 1, "Connect the sensor cable to port 3.")
    args, stall_ms, returned_ms = open_without_stalling(qtbot, view, citation)
    assert returned_ms < 100
    assert stall_ms < 100, stall_ms  # the parse runs in a pool child, waited on by a thread
    assert args == [str(path), 1, True]
    assert view.mode() == "text"
    assert selected(view) == "Connect the sensor cable to port 3."


def test_a_file_past_the_time_limit_shows_why_without_stalling_the_window(qtbot, tmp_path):
    view = shown_view(qtbot, SourceReader(time_limit_s=0.5))
    path = slow_html(tmp_path, tags=1_500_000)  # seconds of parsing even on a fast machine
    args, stall_ms, returned_ms = open_without_stalling(qtbot, view, cite(path, 1, "Connect"))
    assert returned_ms < 100 and stall_ms < 100, (returned_ms, stall_ms)
    assert args == [str(path), 1, False]
    assert view.mode() == "error"
    assert view.message_text().startswith("Reading 'setup.html' took too long and was stopped")
    assert view.title_text() == "setup.html — page 1"


def damaged_large_pdf(manual: Path, out: Path, objects: int = 600_000) -> Path:
    """`manual` with many small objects appended and its cross-reference offset spoilt: QtPdf
    (PDFium) opens it, but only after reading the whole file to rebuild the table."""
    data = manual.read_bytes()
    body = data[:data.rfind(b"startxref")]
    junk = b"".join(b"%d 0 obj\n(x)\nendobj\n" % n for n in range(100_000, 100_000 + objects))
    out.write_bytes(body + junk + b"startxref\n123\n%%EOF\n")
    return out


def test_a_damaged_large_pdf_opens_without_stalling_the_window(qtbot, view, manual, tmp_path):
    from PySide6.QtPdf import QPdfDocument

    path = damaged_large_pdf(manual, tmp_path / "repaired on open.pdf")
    started = time.perf_counter()
    assert QPdfDocument().load(str(path)) == QPdfDocument.Error.None_
    load_ms = (time.perf_counter() - started) * 1000
    assert load_ms > 200, load_ms  # what the GUI thread would have stalled for
    citation = cite(path, 2, " ".join(PAGE_LINES[2][1:]))
    args, stall_ms, returned_ms = open_without_stalling(qtbot, view, citation)
    assert returned_ms < 100 and stall_ms < 100, (load_ms, returned_ms, stall_ms)
    assert args == [str(path), 2, True]
    assert view.mode() == "pdf" and view.current_page() == 2 and view.highlight_found()


def test_the_pdf_document_is_made_on_the_gui_thread(qtbot, view, manual, monkeypatch):
    """One made on the "pdf" thread had to be moved to the GUI thread, and that move, holding
    the GIL, deadlocked with a widget deleted on the GUI thread meanwhile (a test hung)."""
    import threading

    from PySide6.QtPdf import QPdfDocument

    made_on = []

    class Recorded(QPdfDocument):
        def __init__(self, *args):
            super().__init__(*args)
            made_on.append(threading.current_thread() is threading.main_thread())

    monkeypatch.setattr("desktop_app.controllers.sources.QPdfDocument", Recorded)
    assert show(qtbot, view, manual, 2, PAGE_LINES[2][0])[1:] == [2, True]
    assert made_on == [True]


def test_a_pdf_superseded_while_it_opens_is_never_shown(qtbot, view, manual, tmp_path):
    slow = damaged_large_pdf(manual, tmp_path / "slow.pdf")
    view.show_citation(cite(slow, 1, " ".join(PAGE_LINES[1][1:])))
    assert view.mode() == "opening"
    assert show(qtbot, view, manual, 3, " ".join(PAGE_LINES[3][1:])) == [str(manual), 3, True]
    qtbot.waitUntil(lambda: not view.pdf_opener.busy(), timeout=READ_MS)
    qtbot.wait(50)  # anything the first open sent has been delivered by now
    assert view.title_text() == "service manual.pdf — page 3" and view.current_page() == 3


def test_a_newer_citation_supersedes_one_still_opening(qtbot, view, tmp_path):
    slow = slow_html(tmp_path)
    notes = tmp_path / "notes.txt"
    notes.write_text("Grease the rails weekly.\n", encoding="utf-8")
    view.show_citation(cite(slow, 1, "Connect the sensor cable to port 3."))
    assert view.mode() == "opening"
    assert open_cited(qtbot, view, cite(notes, 1, "Grease the rails")) == [str(notes), 1, True]
    qtbot.waitUntil(lambda: not view.reader.busy(), timeout=READ_MS)  # the slow read was dropped
    assert view.source_path() == str(notes) and view.mode() == "text"
    assert view.highlighted_text() == "Grease the rails"


def test_a_pdf_citation_supersedes_a_text_one_still_opening(qtbot, view, manual, tmp_path):
    slow = slow_html(tmp_path)
    with qtbot.assertNotEmitted(view.reader.pagesRead):
        view.show_citation(cite(slow, 1, "Connect"))
        assert open_cited(qtbot, view, cite(manual, 3, PAGE_LINES[3][0]))[1:] == [3, True]
        qtbot.waitUntil(lambda: not view.reader.busy(), timeout=READ_MS)
    assert view.mode() == "pdf" and view.current_page() == 3


# -- real manuals ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def r_faq(manuals_dir):
    """R-FAQ.pdf and its pages as our parser reads them (as the index holds them)."""
    pdf = manuals_dir / "R-FAQ.pdf"
    return pdf, parse_file(pdf).pages


@pytest.mark.slow
@pytest.mark.parametrize("page, at", [(3, 0), (12, 300), (25, 800), (50, 1200)])
def test_real_manual_pages_open_with_their_passage_highlighted(qtbot, view, r_faq, page, at):
    pdf, pages = r_faq
    text = pages[page - 1].text
    passage = text[at:at + 400] if len(text) > at + 100 else text[:400]
    assert show(qtbot, view, pdf, page, passage) == [str(pdf), page, True]
    assert view.current_page() == page
    assert view.highlight_found()
    assert letters(passage)[5:-5] in letters(view.highlighted_text())
    label = pages[page - 1].label  # ingest's printed label (pypdf) against the view's (QtPdf)
    assert label and view.title_text() == f"R-FAQ.pdf — page {label} (PDF page {page})"


@pytest.mark.slow
@pytest.mark.parametrize("name, page", [("R-FAQ.pdf", 12), ("debian-faq.pdf", 21), ("nut-user-manual.pdf", 40)])
def test_real_manual_spans_highlight_pdfiums_own_characters(qtbot, view, manuals_dir, name, page):
    from engine.ingest.pdf_text import clean_text

    pdf = manuals_dir / name
    text = parse_file(pdf).pages[page - 1].text
    lines = [line for line in text.splitlines() if len(line) > 40]
    start = text.index(lines[len(lines) // 2])
    passage = text[start:start + 300]
    assert open_cited(qtbot, view, cite(pdf, page, passage, [[page, start, start + 300]]))[2]
    # A wide cell gap is a tab in the indexed text and PDFium's generated space on the page.
    same = lambda text: re.sub(r"[ \t]+", " ", text.replace("-", ""))  # noqa: E731
    assert same(clean_text(view.highlighted_text())) == same(passage)


@pytest.mark.slow
def test_a_large_manual_opens_at_a_late_page_quickly(qtbot, view, manuals_dir):
    import time

    import pypdf

    pdf = manuals_dir / "refman.pdf"
    page = 1500
    passage = pypdf.PdfReader(pdf).pages[page - 1].extract_text()[200:500]
    started = time.perf_counter()
    show(qtbot, view, pdf, page, passage)
    elapsed = time.perf_counter() - started
    assert view.current_page() == page and view.highlight_found()
    assert elapsed < 1.0


def test_the_title_follows_the_font_size_and_elides_a_long_name(qtbot, view, tmp_path, qapp):
    from desktop_app.theme import apply_theme

    path = tmp_path / ("a very long manual name " * 6 + ".txt")
    path.write_text("Some text.\n", encoding="utf-8")
    show(qtbot, view, path, 1, "Some text.")
    title = f"{path.name} — page 1 (lines 1-1)"
    assert view.title_text() == title
    assert "…" in view.title.text()  # elided on screen; whole for screen readers and tests
    assert view.title.accessibleName() == f"Source: {title}"
    font, palette = qapp.font(), qapp.palette()
    try:
        apply_theme(qapp, "light", 21)
        qtbot.waitUntil(lambda: view.title.font().pointSize() == 21)
        assert view.text_view.font().pointSize() == 21
    finally:
        qapp.setFont(font)
        qapp.setPalette(palette)


def test_text_zoom_adds_to_the_font_size_and_follows_it(qtbot, view, tmp_path, qapp):
    from desktop_app.theme import apply_theme

    path = tmp_path / "notes.md"
    path.write_text("# Notes\n\nGrease the rails weekly.\n", encoding="utf-8")
    show(qtbot, view, path, 1, "Grease the rails weekly.")
    base = view.font().pointSizeF()
    qtbot.mouseClick(view.zoom_in_button, Qt.MouseButton.LeftButton)
    assert view.text_view.font().pointSizeF() == pytest.approx(base + 2)
    font, palette = qapp.font(), qapp.palette()
    try:
        apply_theme(qapp, "light", 20)
        qtbot.waitUntil(lambda: view.font().pointSize() == 20)
        assert view.text_view.font().pointSizeF() == pytest.approx(22)
        view.text_view.setFocus()
        qtbot.keyClick(view.text_view, Qt.Key.Key_0, Qt.KeyboardModifier.ControlModifier)
        assert view.text_view.font().pointSizeF() == pytest.approx(20)
    finally:
        qapp.setFont(font)
        qapp.setPalette(palette)


def test_focusing_the_view_focuses_what_it_shows(qtbot, view, manual, tmp_path):
    show(qtbot, view, manual, 1, "")
    view.setFocus()
    assert view.focusWidget() is view.pdf_view
    show(qtbot, view, tmp_path / "gone.txt", 1, "")
    view.setFocus()
    assert view.focusWidget() is view.message


def test_the_title_names_the_printed_page_beside_the_pdf_page_as_it_moves(qtbot, view, tmp_path):
    from tests.helpers.pdf_factory import write_pdf

    pages = ["Cover of the pump manual.", "Preface about safety.", "Prime the pump with water."]
    path = write_pdf(tmp_path / "pump.pdf", pages, [(0, 1, "/r", None, 1), (2, 2, "/D", None, 3)])
    assert show(qtbot, view, path, 2, pages[1])[1] == 2  # opened at the physical page
    assert view.current_page() == 2 and view.pdf_view.pageNavigator().currentPage() == 1
    assert view.title_text() == "pump.pdf — page ii (PDF page 2)"
    qtbot.mouseClick(view.next_button, Qt.MouseButton.LeftButton)
    assert view.title_text() == "pump.pdf — page 3"  # printed as its number: said once
    qtbot.mouseClick(view.previous_button, Qt.MouseButton.LeftButton)
    qtbot.mouseClick(view.previous_button, Qt.MouseButton.LeftButton)
    assert view.title_text() == "pump.pdf — page i (PDF page 1)"


def test_the_title_has_a_row_of_its_own_and_is_not_cut_in_a_narrow_pane(qtbot):
    view = SourceView()
    qtbot.addWidget(view)
    view.resize(420, 600)  # about what the pane gets on a 1366×768 screen
    view.show()
    qtbot.waitExposed(view)
    assert view.title.text() == "<b>No source open</b>"  # was "No so…open" beside the buttons


def text_box_on_screen(view) -> tuple[float, float]:
    """Where the shown page's printed text lies across the viewport, in pixels."""
    pdf = view.pdf_view
    box = view.document.getAllText(view.current_page() - 1).boundingRectangle()
    scale, page = pdf.screen_scale(), pdf.page_rect()
    shift = page.left() - pdf.horizontalScrollBar().value()
    return shift + box.left() * scale, shift + box.right() * scale


def test_fit_width_fits_the_printed_text_so_a_narrow_pane_stays_readable(qtbot, manual):
    """Fit width fills the pane with the printed text, not with the paper's margins (body
    text was about 7 px high in the pane of a 1366×768 window)."""
    view = SourceView()
    qtbot.addWidget(view)
    view.resize(500, 650)
    view.show()
    qtbot.waitExposed(view)
    show(qtbot, view, manual, 2, PAGE_LINES[2][1])
    left, right = text_box_on_screen(view)
    width = view.pdf_view.viewport().width()
    assert 0 <= left and right <= width  # the whole line is in view, no sideways scrolling
    assert right - left > 0.85 * width  # and it fills the pane
    paper = width / view.document.pagePointSize(1).width()  # px per point, fitting the paper
    assert view.pdf_view.screen_scale() > 1.2 * paper


def test_the_zoom_chosen_stays_for_other_pages_and_documents(qtbot, view, manual, tmp_path):
    other = write_manual(tmp_path / "other manual.pdf")
    show(qtbot, view, manual, 1, PAGE_LINES[1][0])
    chosen = []
    view.zoomChosen.connect(chosen.append)
    qtbot.mouseClick(view.zoom_in_button, Qt.MouseButton.LeftButton)
    zoom = view.pdf_view.zoomFactor()
    assert chosen == [pytest.approx(zoom)] and view.zoom() == pytest.approx(zoom)
    show(qtbot, view, manual, 3, PAGE_LINES[3][0])
    assert view.pdf_view.zoomFactor() == pytest.approx(zoom)
    show(qtbot, view, other, 2, PAGE_LINES[2][0])  # another document: the same zoom
    assert view.pdf_view.zoomFactor() == pytest.approx(zoom)
    qtbot.mouseClick(view.fit_button, Qt.MouseButton.LeftButton)
    assert chosen[-1] == 0.0 and view.zoom() == 0.0
    restored = shown_view(qtbot)
    restored.set_zoom(2.0)  # as the window does with the saved setting
    show(qtbot, restored, other, 1, PAGE_LINES[1][0])
    assert restored.pdf_view.zoomFactor() == pytest.approx(2.0)


def test_a_citation_of_a_labelled_pdf_names_the_printed_page_and_opens_the_physical_one(qtbot, view, tmp_path):
    """Page index 38 of a manual whose body starts at its 7th sheet is printed "33": the
    citation says "page 33 (PDF page 39)" and clicking it opens the 39th page."""
    from desktop_app.chat.bubbles import AnswerBubble
    from engine.answer.assistant import AnswerStats
    from engine.answer.grounding import Relevance
    from engine.store.indexer import printed_labels
    from engine.types import Passage, Span
    from tests.helpers.pdf_factory import write_pdf

    sheets = [f"Sheet {n}. Bleed the hydraulic circuit at valve H{n} after each filter change" for n in range(40)]
    pdf = write_pdf(tmp_path / "labelled.pdf", sheets, labels=[(0, 5, "/r", None, 1), (6, 39, "/D", None, 1)])
    parsed = parse_file(pdf)
    labels = printed_labels(parsed)
    assert labels[39] == "33"  # as the indexer stores them (physical pages count from 1)
    text = parsed.pages[38].text.strip()
    passage = Passage(1, str(pdf), "labelled", (1,), (Span(39, 0, len(text)),), text, (), 1.0, 0.9,
                      page_labels=tuple(labels.items()))
    bubble = AnswerBubble()
    qtbot.addWidget(bubble)
    bubble.set_citations([Citation(1, passage, text, True)])
    bubble.finish("Bleed it at the valve [1].", AnswerStats(True, Relevance(0.9, 1.0, 1.4, True, ()), ("generate",),
                                                            {"generate": 1.0}, 10, 20, 0.5, "stop", "cpu", 1.0))
    assert "[1] labelled.pdf, page 33 (PDF page 39)" in bubble.browser.toPlainText()
    bubble.citationClicked.connect(view.show_citation)
    with qtbot.waitSignal(view.sourceShown, timeout=READ_MS):
        bubble.browser.citeClicked.emit(1)
    assert view.current_page() == 39 and view.highlight_found()
    assert "H38" in view.highlighted_text()
    assert view.title_text() == "labelled.pdf — page 33 (PDF page 39)"
