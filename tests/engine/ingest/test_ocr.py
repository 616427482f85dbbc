"""OCR of scanned pages: text_needs_ocr, the settings' engine id, and (slow) the real PP-OCR
models on scanned pages of the R manuals: character error rate against the real text layer,
and word boxes where the original page has those words."""

from __future__ import annotations

import logging
import math
import re
import statistics

import pytest

from engine.ingest.ocr import OcrSettings, PageRecogniser, text_needs_ocr
from tests.helpers.scanned import character_error_rate, normalise, scanned_pdf

SCAN_DPI = 150
SKEW = 2.5  # degrees, counter-clockwise, as PIL turns the page
NOISE = 12.0  # grey levels
PAGE = 24  # R-intro: a dense page of prose, lists and code


# -- text_needs_ocr -----------------------------------------------------------------------

PROSE = ("Factors are vector objects used to specify a discrete classification (grouping) of the "
         "components of other vectors of the same length. R provides both ordered and unordered "
         "factors. While the real application of factors is with model formulae, we here look at "
         "a specific example. Suppose, for example, we have a sample of 30 tax accountants. ")
CODE = ("> x <- c(10.4, 5.6, 3.1, 6.4, 21.7)\n> assign(\"x\", c(10.4, 5.6, 3.1, 6.4, 21.7))\n"
        "> y <- c(x, 0, x)\n> v <- 2*x + y + 1\n> sum((x-mean(x))^2)/(length(x)-1)\n"
        "for (i in seq_along(x)) { if (x[i] > 0) z[i] <- x[i] %% 2 else z[i] <- -x[i] }\n") * 3
NUMBERS = "\n".join(" ".join(f"{(r * 7 + c) * 1.37:8.2f}" for c in range(8)) for r in range(30))
CONTENTS = "\n".join(f"{n}.{m} Section title {n} {m} . . . . . . . . . . . . . . . . . {n * 10 + m}"
                     for n in range(1, 6) for m in range(1, 8))


@pytest.mark.parametrize("text", ["", " \n\t ", "\n\n", "(cid:3)(cid:17)(cid:68)(cid:79)" * 40,
                                  "\ufffd\ufffd \ufffd\ufffd\ufffd " * 30, "\ue001\ue002\ue003 " * 50,
                                  "!#$% &*+/ <=>? @[]^ {|}~ " * 40,
                                  " ".join(["Tbf qjhhx wzkrt", "Bcdfg hjklm npqrs", "Xvtzk sdfgh"] * 15),
                                  PROSE[:60] + " (cid:12)(cid:13)(cid:14)(cid:15)" * 30])
def test_empty_or_garbage_text_needs_ocr(text):
    assert text_needs_ocr(text)


@pytest.mark.parametrize("text", [PROSE, CODE, NUMBERS, CONTENTS, "Index 12", "3",
                                  "Руководство пользователя: установка и настройка программы. " * 5,
                                  "本手册介绍如何安装和配置软件，以及常见问题的解决方法。" * 5,
                                  "Überprüfen Sie die Größe der Datei, bevor Sie sie öffnen. " * 5])
def test_ordinary_text_needs_no_ocr(text):
    assert not text_needs_ocr(text)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["R-intro.pdf", "R-data.pdf", "R-lang.pdf", "R-admin.pdf", "R-exts.pdf"])
def test_no_page_of_a_real_manual_needs_ocr(manuals_dir, name):
    import pypdf

    logging.getLogger("pypdf").setLevel(logging.ERROR)
    reader = pypdf.PdfReader(manuals_dir / name)
    flagged = [number for number, page in enumerate(reader.pages, start=1)
               if text_needs_ocr(page.extract_text() or "")]
    assert len(reader.pages) > 30
    assert flagged == []


# -- settings -----------------------------------------------------------------------------


def test_engine_id_changes_with_every_setting_that_changes_the_text():
    base = OcrSettings()
    changed = [OcrSettings(dpi=200), OcrSettings(detection_side=1280), OcrSettings(line_squeeze=1.0),
               OcrSettings(alphabet="all"), OcrSettings(rec_batch=4)]
    ids = {base.engine_id, *(s.engine_id for s in changed)}
    assert len(ids) == 1 + len(changed)
    assert OcrSettings(threads=1).engine_id == base.engine_id  # speed only
    assert PageRecogniser(OcrSettings(dpi=200)).engine_id == OcrSettings(dpi=200).engine_id


@pytest.mark.parametrize("bad", [{"alphabet": "klingon"}, {"line_squeeze": 0.1}, {"dpi": 10}, {"rec_batch": 0}])
def test_bad_settings_are_refused_by_name(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        OcrSettings(**bad)


# -- the scanned corpus helper ------------------------------------------------------------


def test_character_error_rate_counts_edits_over_the_reference():
    assert character_error_rate("the  cat\nsat", "the cat sat") == 0.0
    assert character_error_rate("the bat sat", "the cat sat") == pytest.approx(1 / 11)
    assert character_error_rate("", "abcd") == 1.0
    assert character_error_rate("abcdabcd", "abcd") == 1.0
    assert character_error_rate("", " \n") == 0.0


def test_a_scanned_pdf_has_images_only_in_the_order_asked(manuals_dir, tmp_path):
    import pypdf

    out = scanned_pdf(manuals_dir / "R-intro.pdf", [PAGE, 3], tmp_path / "scan.pdf", dpi=72, skew_deg=SKEW,
                      noise=NOISE)
    reader = pypdf.PdfReader(out)
    assert len(reader.pages) == 2
    assert all(not (page.extract_text() or "").strip() for page in reader.pages)
    assert all(len(page.images) == 1 for page in reader.pages)
    assert float(reader.pages[0].mediabox.width) == pytest.approx(612, abs=1)
    with pytest.raises(ValueError, match="no page 999"):
        scanned_pdf(manuals_dir / "R-intro.pdf", [999], tmp_path / "bad.pdf")


# -- the real models (slow) ---------------------------------------------------------------


@pytest.fixture(scope="module")
def recogniser():
    return PageRecogniser()


@pytest.fixture(scope="module")
def skewed_scan(manuals_dir, tmp_path_factory):
    folder = tmp_path_factory.mktemp("scan")
    return scanned_pdf(manuals_dir / "R-intro.pdf", [PAGE], folder / "skewed.pdf", dpi=SCAN_DPI,
                       skew_deg=SKEW, noise=NOISE, seed=7)


@pytest.fixture(scope="module")
def recognised(recogniser, skewed_scan):
    return recogniser.recognise_pdf_page(skewed_scan, 1)


@pytest.mark.slow
def test_a_skewed_noisy_scan_is_read_within_two_percent(recognised, manuals_dir):
    import pypdf

    text, ocr = recognised
    reference = pypdf.PdfReader(manuals_dir / "R-intro.pdf").pages[PAGE - 1].extract_text()
    assert len(normalise(reference)) > 2500
    assert character_error_rate(text, reference) <= 0.02
    assert 0.9 < ocr.confidence <= 1.0
    assert ocr.width == pytest.approx(612, abs=1) and ocr.height == pytest.approx(792, abs=1)
    assert ocr.engine == OcrSettings().engine_id
    assert not text_needs_ocr(text)


@pytest.mark.slow
def test_each_word_keeps_its_characters_of_the_page_text(recognised):
    text, ocr = recognised
    assert len(ocr.words) > 300
    assert " ".join(text[w.start:w.end] for w in ocr.words) == " ".join(text.split())
    assert all(0 <= w.confidence <= 1 for w in ocr.words)


@pytest.mark.slow
def test_word_boxes_lie_where_the_original_page_has_those_words(recognised, manuals_dir):
    """Each word that appears once on the original page (5+ letters): its place in the
    original's text layer (pypdfium2's character boxes), turned as the scan was turned,
    lies inside the recognised word's box."""
    text, ocr = recognised
    original = _original_words(manuals_dir / "R-intro.pdf", PAGE)
    found = {}
    for w in ocr.words:
        found.setdefault(text[w.start:w.end], []).append(w.box)
    checked = inside = 0
    offsets = []
    for word, centre in original.items():
        if len(found.get(word, ())) != 1:
            continue
        x, y = _turned(centre, SKEW, ocr.width, ocr.height)
        x0, y0, x1, y1 = found[word][0]
        checked += 1
        inside += x0 - 1 <= x <= x1 + 1 and y0 - 1 <= y <= y1 + 1
        offsets.append(math.hypot((x0 + x1) / 2 - x, (y0 + y1) / 2 - y))
        assert y1 - y0 < 16  # one line of 10 pt type (and the skew), not two
    assert checked >= 60
    assert inside >= 0.95 * checked
    assert statistics.median(offsets) < 2.0  # points


@pytest.mark.slow
def test_a_blank_page_has_no_words(recogniser):
    import numpy as np

    text, ocr = recogniser.recognise_image(np.full((1100, 850, 3), 255, dtype=np.uint8), 612, 792)
    assert text == "" and ocr.words == () and ocr.confidence == 0.0


def _original_words(path, number) -> dict[str, tuple[float, float]]:
    """Words of 5+ letters that appear once on the page, each with its centre in points from
    the top left."""
    import pypdfium2

    document = pypdfium2.PdfDocument(str(path))
    try:
        page = document[number - 1]
        height = page.get_size()[1]
        textpage = page.get_textpage()
        chars = textpage.get_text_range(0, textpage.count_chars())
        words: dict[str, list[tuple[float, float]]] = {}
        for match in re.finditer(r"[A-Za-z]{5,}", chars):
            boxes = [textpage.get_charbox(i) for i in range(match.start(), match.end())]
            left, right = min(b[0] for b in boxes), max(b[2] for b in boxes)
            bottom, top = min(b[1] for b in boxes), max(b[3] for b in boxes)
            words.setdefault(match.group(), []).append(((left + right) / 2, height - (bottom + top) / 2))
        textpage.close()
        page.close()
    finally:
        document.close()
    return {word: places[0] for word, places in words.items() if len(places) == 1}


def _turned(point, degrees, width, height):
    """Where PIL's rotate(degrees) (counter-clockwise about the centre, y down) puts a point."""
    a = math.radians(degrees)
    dx, dy = point[0] - width / 2, point[1] - height / 2
    return width / 2 + dx * math.cos(a) + dy * math.sin(a), height / 2 - dx * math.sin(a) + dy * math.cos(a)
