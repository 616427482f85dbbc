"""Scanned manuals in the window: two pages of R-intro made into an image-only PDF
(tests/helpers/scanned.py), indexed once for the module through the window's IndexController
with the real embedder and real OCR. The documents panel shows an "OCR" badge and says how the
pages were read, the progress line says which page is being recognised, a citation of a scanned
page carries an "OCR" tag (also once saved and reopened), and the source view marks the cited
words on the scanned page where the original page has them. Set OCR_SCREENSHOTS to a folder to
keep the panel's and the source view's pictures."""

from __future__ import annotations

import os
import re
from dataclasses import replace
from pathlib import Path

import pytest
from PySide6.QtCore import QEventLoop, QRectF, QTimer
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QDialogButtonBox

from desktop_app.chat.render import OCR_TAG, OCR_TIP
from desktop_app.chat.view import ChatView
from desktop_app.controllers.indexing import IndexController
from desktop_app.panels.documents import OCR_ROLE, DocumentsPanel, progress_text
from desktop_app.panels.settings import SettingsDialog
from desktop_app.sources.view import OCR_NOTE, SourceView
from engine.config import Settings, load_settings, save_settings
from engine.ingest.locate import locate_passage
from engine.paths import AppPaths
from engine.store.indexer import IndexSettings, open_collection
from engine.types import Citation, IndexProgress
from tests.helpers.pump_chat import ANSWER_MS, saved_and_reopened, start_controller
from tests.helpers.scanned import scanned_pdf

SOURCE_PAGES = [20, 21]  # R-intro: "Objects, their modes and attributes", prose
QUESTION = "What are the intrinsic attributes of an object, mode and length?"
RUN_MS = 240_000  # OCR of two dense pages (5-10 s each on 2 loaded cores) and their embedding
SETTINGS = IndexSettings(parse_time_limit_s=120, parse_memory_limit_mb=2048)


def wait_for(signal, condition, timeout_ms: int, what: str) -> None:
    """Runs the event loop until `condition()` holds, checked whenever `signal` fires (a module
    fixture has no qtbot)."""
    loop = QEventLoop()
    timer = QTimer(singleShot=True, interval=timeout_ms)
    timer.timeout.connect(loop.quit)

    def check(*_args) -> None:
        if condition():
            loop.quit()

    signal.connect(check)
    try:
        if not condition():
            timer.start()
            loop.exec()
    finally:
        signal.disconnect(check)
        timer.stop()
    assert condition(), f"timed out waiting for {what}"


@pytest.fixture(scope="module")
def scanned(qapp, manuals_dir, tmp_path_factory):
    """(data dir, the scanned PDF, the progress lines the panel showed, the controller, the
    panel): the PDF indexed through the window's IndexController with OCR on (Settings.ocr)."""
    folder = tmp_path_factory.mktemp("scanned")
    pdf = scanned_pdf(manuals_dir / "R-intro.pdf", SOURCE_PAGES, folder / "R-intro scanned.pdf")
    paths = AppPaths(folder / "data").ensure()
    controller = IndexController(paths, index_settings=SETTINGS, ocr=True)
    panel = DocumentsPanel(controller)
    lines: list[str] = []
    events: list[IndexProgress] = []
    controller.progressed.connect(lambda event: (events.append(event), lines.append(panel.progress_label.text())))
    try:
        controller.add_paths([str(pdf)])
        wait_for(controller.documentsChanged,
                 lambda: any(d.status == "ready" for d in controller.documents()) and not controller.busy,
                 RUN_MS, "the scanned PDF to be indexed")
        yield paths, pdf, lines, events, controller, panel
    finally:
        controller.shutdown()
        panel.deleteLater()


def keep_picture(widget, name: str) -> None:
    folder = os.environ.get("OCR_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        assert widget.grab().save(str(Path(folder) / name))


# -- the documents panel -----------------------------------------------------------------------
@pytest.mark.slow  # real OCR of two pages and the real embedder (once for the module)
def test_the_progress_line_says_which_page_is_being_recognised(scanned):
    _paths, _pdf, lines, events, _controller, _panel = scanned
    recognising = [e for e in events if e.stage == "recognising"]
    assert recognising and {e.document_pages for e in recognising} == {2}
    assert any("recognising text, page 1 of 2" in line for line in lines), lines
    assert any("recognising text, page 2 of 2" in line for line in lines), lines
    event = IndexProgress(0, 3, 0, "/x/scan.pdf", 4.0, document_pages=80, document_pages_done=11,
                          stage="recognising")
    assert progress_text(event) == "0/3 documents · recognising text, page 12 of 80"
    assert "recognising" not in progress_text(replace(event, stage=""))


@pytest.mark.slow  # real OCR of two pages and the real embedder (once for the module)
def test_the_documents_panel_shows_an_ocr_badge_and_says_how_the_pages_were_read(qtbot, scanned):
    paths, pdf, _lines, _events, controller, panel = scanned
    panel.resize(520, 260)
    panel.show()
    qtbot.waitExposed(panel)
    item = panel.list.topLevelItem(0)
    assert item.text(0) == pdf.name and item.data(0, OCR_ROLE) == 2
    tip = item.toolTip(0)
    assert "2 pages were scanned images: their text was recognised (OCR)" in tip, tip
    confidence = int(re.search(r"confidence (\d+)%", tip).group(1))
    (stored,) = [d for d in controller.documents() if d.path == str(pdf)]
    assert confidence == round(100 * stored.ocr_confidence) and confidence >= 85
    assert item.toolTip(1) == tip
    # the badge is drawn: the link colour fills a tag just after the state's text
    picture = panel.list.viewport().grab().toImage()
    ratio = picture.devicePixelRatio()
    row = panel.list.visualItemRect(item)
    left = panel.list.columnViewportPosition(1)
    text_end = left + panel.list.fontMetrics().horizontalAdvance(item.text(1))
    link = panel.palette().color(QPalette.ColorRole.Link)
    tagged = [x for x in range(int(left * ratio), int(picture.width()))
              if _near(QColor(picture.pixel(x, int(row.center().y() * ratio))), link)]
    assert tagged, "no OCR badge in the state column"
    assert text_end * ratio < min(tagged) < (text_end + 40) * ratio, (text_end, tagged[:3])
    assert len(list(paths.ocr_cache.rglob("*.json"))) == 2, "the recognised pages are not in AppPaths.ocr_cache"
    keep_picture(panel, "issue18-documents-ocr-badge.png")


def _near(a: QColor, b: QColor, tolerance: int = 40) -> bool:
    return all(abs(x - y) <= tolerance for x, y in zip(a.getRgb()[:3], b.getRgb()[:3]))


# -- citations ---------------------------------------------------------------------------------
@pytest.fixture
def answered(qtbot, scanned, tiny_llm_dir):
    """A chat view that answered QUESTION over the scanned manual (the tiny LLM writes it; the
    retrieval, the citations and their pages are the real ones)."""
    paths = scanned[0]
    assistant = start_controller(qtbot, paths, tiny_llm_dir)
    view = ChatView()
    qtbot.addWidget(view)
    view.attach(assistant)
    view.resize(760, 640)
    view.show()
    qtbot.waitExposed(view)
    with qtbot.waitSignal(view.answerFinished, timeout=ANSWER_MS):
        assert view.ask(QUESTION)
    yield view
    assistant.shutdown()


def ocr_tags(doc) -> list[str]:
    """The tooltips of the "OCR" tags in a rendered document."""
    tips = []
    block = doc.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            fragment = it.fragment()
            if fragment.text().strip("\u00a0 ") == OCR_TAG:
                tips.append(fragment.charFormat().toolTip())
            it += 1
        block = block.next()
    return tips


@pytest.mark.slow  # real OCR of two pages and the real embedder (once for the module)
def test_citations_of_scanned_pages_carry_an_ocr_tag_also_when_reopened(qtbot, answered, tmp_path):
    bubble = answered.last_answer()
    citations = bubble.state.citations
    assert citations and all(c.passage.ocr_pages == c.passage.pages for c in citations)
    tags = ocr_tags(bubble.browser.document())
    assert tags == [OCR_TIP] * len(citations), bubble.browser.toPlainText()
    assert "check the page itself" in OCR_TIP
    if bubble.state.lead:
        assert ocr_tags(bubble.lead_view.document()), bubble.lead_view.toPlainText()

    again = saved_and_reopened(qtbot, tmp_path / "conversations", answered.messages(), "Scanned")  # kept: it owns the bubble
    restored = again.last_answer()
    assert [c.passage.ocr_pages for c in restored.state.citations] == [c.passage.ocr_pages for c in citations]
    assert ocr_tags(restored.browser.document()) == tags
    if bubble.state.lead:
        assert ocr_tags(restored.lead_view.document()) == ocr_tags(bubble.lead_view.document())


# -- the source view ---------------------------------------------------------------------------
def original_line_boxes(source_pdf: Path, page: int, pieces: list[str]) -> list[QRectF]:
    """Where `pieces` of recognised text sit on the original (text) page: PDFium's boxes of
    their characters, in points from the top left, merged per line."""
    import pypdfium2

    document = pypdfium2.PdfDocument(str(source_pdf))
    try:
        sheet = document[page - 1]
        height = sheet.get_height()
        text_page = sheet.get_textpage()
        text = text_page.get_text_range()
        boxes = []
        for piece in pieces:
            where = locate_passage(text, piece)
            assert where is not None, f"the recognised text is not on the original page: {piece[:80]!r}"
            for i in range(*where):
                if text[i].isspace():
                    continue
                left, bottom, right, top = text_page.get_charbox(i)
                boxes.append(QRectF(left, height - top, right - left, top - bottom))
    finally:
        document.close()
    lines: list[QRectF] = []  # a character joins the line its middle lies in (a full stop too)
    for box in sorted((b for b in boxes if b.width() > 0 and b.height() > 0), key=lambda b: -b.height()):
        at = next((i for i, line in enumerate(lines) if line.top() <= box.center().y() <= line.bottom()), None)
        if at is None:
            lines.append(QRectF(box))
        else:
            lines[at] = lines[at].united(box)
    return lines


@pytest.mark.slow  # real OCR of two pages and the real embedder (once for the module)
def test_the_source_view_marks_the_cited_words_on_the_scanned_page(qtbot, scanned, manuals_dir):
    paths, pdf, _lines, _events, controller, _panel = scanned
    from engine.answer.retrieval import Retriever
    from engine.store.indexer import default_embedder

    embedder = default_embedder(paths)
    try:
        with open_collection(paths, "default", embedder, read_only=True) as store:
            passage = Retriever(store, embedder).search("The entities R operates on are technically known as "
                                                         "objects", k=1)[0]
            pieces = [c["text"] for c in store.chunks(passage.chunk_ids) if c["page"] == passage.page]
    finally:
        embedder.close()
    assert passage.ocr_pages and passage.page in passage.ocr_pages
    citation = Citation(1, passage, "", True)

    view = SourceView(ocr_source=controller)
    qtbot.addWidget(view)
    view.resize(760, 900)
    view.show()
    qtbot.waitExposed(view)
    with qtbot.waitSignal(view.sourceShown, timeout=RUN_MS) as shown:
        view.show_citation(Citation.from_dict(citation.to_dict()))  # as a saved conversation has it
    qtbot.waitUntil(lambda: _drawn(view.pdf_view), timeout=10_000)  # QtPdf renders the scan off the GUI thread
    keep_picture(view, "issue18-source-view-scanned-page.png")
    assert shown.args == [str(pdf), passage.page, True]
    assert view.mode() == "pdf" and view.highlight_found() and view.highlight_on_scan()
    assert OCR_NOTE in view.note.text()
    assert view.document.getAllText(passage.page - 1).text().strip() == ""  # QtPdf finds no text there

    marked = view.highlight_boxes()
    original = original_line_boxes(manuals_dir / "R-intro.pdf", SOURCE_PAGES[passage.page - 1], pieces)
    assert marked and original
    assert abs(len(marked) - len(original)) <= 1, (marked, original)  # one box per line
    for line in original:  # every line of the cited text is under the marker...
        covered = max((line.intersected(box).width() * line.intersected(box).height() for box in marked),
                      default=0.0)
        assert covered >= 0.8 * line.width() * line.height(), (line, marked)
    for box in marked:  # ...and the marker covers nothing else (a line's height of slack)
        assert any(box.adjusted(0, 4, 0, -4).intersects(line) for line in original), (box, original)
    for upper, lower in zip(marked, marked[1:]):  # one stroke per line: they do not overlap
        assert not upper.intersected(lower).height() > 0.5, (upper, lower)


def _drawn(pdf_view) -> bool:
    """Whether the page's image is on screen: dark pixels (printed letters) in the view."""
    picture = pdf_view.viewport().grab().toImage().scaledToWidth(200)
    return sum(QColor(picture.pixel(x, y)).lightness() < 80
               for x in range(picture.width()) for y in range(picture.height())) > 50


@pytest.mark.slow  # real OCR of two pages and the real embedder (once for the module)
def test_a_source_view_without_a_store_says_it_could_not_find_the_passage(qtbot, scanned):
    _paths, pdf, _lines, _events, _controller, _panel = scanned
    view = SourceView()
    qtbot.addWidget(view)
    citation = Citation.from_dict({"path": str(pdf), "pages": [1], "page": 1, "ocr_pages": [1],
                                   "text": "The entities R operates on", "spans": [[1, 0, 30]]})
    with qtbot.waitSignal(view.sourceShown, timeout=10_000) as shown:
        view.show_citation(citation)
    assert shown.args == [str(pdf), 1, False] and view.highlight_boxes() == []


# -- the setting -------------------------------------------------------------------------------
def test_the_ocr_setting_round_trips_and_reaches_the_indexer(qtbot, tmp_path):
    dialog = SettingsDialog(Settings(ocr=False), [], False)
    qtbot.addWidget(dialog)
    assert dialog.ocr.text().replace("&", "") == "Recognise text in scanned pages (OCR)"
    assert not dialog.ocr.isChecked() and dialog.settings().ocr is False
    dialog.ocr.click()
    assert dialog.ocr.isChecked() and dialog.settings().ocr is True
    dialog.buttons.button(QDialogButtonBox.StandardButton.Ok).click()
    paths = AppPaths(tmp_path / "data").ensure()
    save_settings(paths.settings_file, dialog.settings())
    assert load_settings(paths.settings_file).ocr is True
    save_settings(paths.settings_file, replace(dialog.settings(), ocr=False))
    assert load_settings(paths.settings_file).ocr is False

    controller = IndexController(paths, ocr=False)
    try:
        assert controller.index_settings.ocr is False
        assert controller.index_settings.ocr_cache == paths.ocr_cache
        controller.set_ocr(True)
        assert controller.index_settings.ocr is True and controller.index_settings.ocr_cache == paths.ocr_cache
    finally:
        controller.shutdown()
