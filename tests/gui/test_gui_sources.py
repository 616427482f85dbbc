"""The source view opens a citation at its page with the passage highlighted."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QMarginsF, QPointF, QRectF, Qt
from PySide6.QtGui import QFont, QPageLayout, QPageSize, QPainter, QPdfWriter

from desktop_app.sources.view import SourceView
from engine.ingest import parse_file

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


@pytest.fixture
def view(qtbot):
    widget = SourceView()
    qtbot.addWidget(widget)
    widget.resize(800, 700)
    widget.show()
    qtbot.waitExposed(widget)
    return widget


def show(qtbot, view, path, page, passage):
    with qtbot.waitSignal(view.sourceShown) as shown:
        view.show_source(str(path), page, passage)
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
    assert view.title_text() == f"R-FAQ.pdf — page {page}"


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
