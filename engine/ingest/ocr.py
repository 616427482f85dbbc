"""OCR: the text of a page that has none, recognised from its rendered image.

    recogniser = PageRecogniser()                      # models load on first use
    text, ocr = recogniser.recognise_pdf_page(path, 3)  # 1-based physical page
    ocr.confidence, ocr.words[0].box                    # word boxes in PDF points

PP-OCR's detection and recognition models come inside the `rapidocr` wheel (Apache-2.0) and
run on onnxruntime; pages are rendered with pypdfium2. Run it in a worker process (the parse
pool does): it is slow, and the page images come from files nobody has vetted.

The page text is the recognised lines in reading order, one line per row of text, words
separated by one space; each word keeps its characters in that text and its box, so the
source view can highlight a cited passage on a scanned page.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from engine.types import OcrWord, PageOcr

RENDER_DPI = 200  # what the recognition was measured at (docs/benchmarks.md)
DETECTION_SIDE = 960  # the detector sees the page at most this many pixels on its long side
ROW_OVERLAP = 0.5  # two lines whose heights overlap this much sit on one row


@dataclass(frozen=True)
class OcrSettings:
    dpi: int = RENDER_DPI
    detection_side: int = DETECTION_SIDE
    threads: int = 0  # 0: onnxruntime's default (all cores)

    @property
    def engine_id(self) -> str:
        """Names the models and settings: a page recognised otherwise is recognised again."""
        return f"rapidocr-{_rapidocr_version()}:ppocr:{self.dpi}dpi:{self.detection_side}"


class PageRecogniser:
    def __init__(self, settings: OcrSettings | None = None):
        self.settings = settings or OcrSettings()
        self._engine = None

    @property
    def engine_id(self) -> str:
        return self.settings.engine_id

    def recognise_pdf_page(self, path: str | Path, number: int) -> tuple[str, PageOcr]:
        """The text and OCR record of physical page `number` (1-based) of a PDF."""
        import numpy as np
        import pypdfium2

        document = pypdfium2.PdfDocument(str(path))
        try:
            page = document[number - 1]
            width, height = page.get_size()
            bitmap = page.render(scale=self.settings.dpi / 72, grayscale=True)
            image = np.asarray(bitmap.to_pil().convert("RGB"))
            page.close()
        finally:
            document.close()
        return self.recognise_image(image, width, height)

    def recognise_image(self, image, width_pt: float, height_pt: float) -> tuple[str, PageOcr]:
        """`image` (H x W x 3, uint8) is a page of `width_pt` x `height_pt` PDF points."""
        result = self._load()(image)
        scale = width_pt / image.shape[1] if image.shape[1] else 1.0
        lines = _lines(result, scale)
        text, words = _layout(lines)
        return text, PageOcr(_confidence(words), width_pt, height_pt, tuple(words), self.engine_id)

    def _load(self):
        if self._engine is None:
            from rapidocr import RapidOCR

            params = {"Global.log_level": "error", "Global.use_cls": False,
                      "Global.return_word_box": True,
                      "Det.limit_side_len": self.settings.detection_side, "Det.limit_type": "max"}
            if self.settings.threads:
                params["EngineConfig.onnxruntime.intra_op_num_threads"] = self.settings.threads
            self._engine = RapidOCR(params=params)
        return self._engine


@dataclass(frozen=True)
class _Word:
    text: str
    confidence: float
    box: tuple[float, float, float, float]  # x0, y0, x1, y1 in points, from the top left


def _lines(result, scale: float) -> list[list[_Word]]:
    """The recognised lines, each a list of words with boxes in points."""
    lines = []
    for words in result.word_results or ():
        line = [_Word(text, float(confidence), _bounds(corners, scale))
                for text, confidence, corners in words if text and text.strip() and corners is not None]
        if line:
            lines.append(line)
    return lines


def _bounds(corners, scale: float) -> tuple[float, float, float, float]:
    xs = [float(x) * scale for x, _ in corners]
    ys = [float(y) * scale for _, y in corners]
    return min(xs), min(ys), max(xs), max(ys)


def _layout(lines: list[list[_Word]]) -> tuple[str, list[OcrWord]]:
    """Reading order: rows top to bottom, lines in a row left to right."""
    text, words = "", []
    for row in _rows(lines):
        if text:
            text += "\n"
        for word in (w for line in row for w in line):
            if text and not text.endswith("\n"):
                text += " "
            start = len(text)
            text += word.text
            words.append(OcrWord(start, len(text), word.box, word.confidence))
    return text, words


def _rows(lines: list[list[_Word]]) -> list[list[list[_Word]]]:
    rows: list[list[list[_Word]]] = []
    for line in sorted(lines, key=lambda ln: (_top(ln), _left(ln))):
        if rows and _same_row(rows[-1][-1], line):
            rows[-1].append(line)
        else:
            rows.append([line])
    return [sorted(row, key=_left) for row in rows]


def _same_row(a: list[_Word], b: list[_Word]) -> bool:
    a0, a1 = _top(a), max(w.box[3] for w in a)
    b0, b1 = _top(b), max(w.box[3] for w in b)
    overlap = min(a1, b1) - max(a0, b0)
    return overlap > ROW_OVERLAP * min(a1 - a0, b1 - b0)


def _top(line: list[_Word]) -> float:
    return min(w.box[1] for w in line)


def _left(line: list[_Word]) -> float:
    return min(w.box[0] for w in line)


def _confidence(words: list[OcrWord]) -> float:
    """The recognition's confidence over the page, each word weighted by its characters; a
    page with no words has 0."""
    total = sum(w.end - w.start for w in words)
    return sum(w.confidence * (w.end - w.start) for w in words) / total if total else 0.0


def _rapidocr_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("rapidocr")
    except PackageNotFoundError:
        return "missing"
