"""OCR: the text of a page that has none, recognised from its rendered image.

    recogniser = PageRecogniser()                      # models load on first use
    text, ocr = recogniser.recognise_pdf_page(path, 3)  # 1-based physical page
    ocr.confidence, ocr.words[0].box                    # word boxes in PDF points
    text_needs_ocr(page_text)                           # is a text layer empty or garbage?

PP-OCR's detection and recognition models come inside the `rapidocr` wheel (Apache-2.0) and
run on onnxruntime; pages are rendered with pypdfium2. Run it in a worker process (the parse
pool does): it is slow, and the page images come from files nobody has vetted.

The pipeline is ours, on rapidocr's models and its detection post-processing (DBPostProcess):
- the detector sees the page at most `detection_side` pixels on its long side;
- each detected line is cut out and scaled to the recogniser's height (48) in one perspective
  warp, and squeezed horizontally by `line_squeeze`: the recogniser's cost grows with the
  line's width, and at 48 px a character is ~20 px wide for the model's 8 px time steps;
- the recogniser's last layer keeps only the `alphabet` it needs ("western": Latin, Greek,
  Cyrillic, punctuation, symbols, 1275 of its 18708 characters), which removes most of the
  cost of that layer and its softmax; "all" keeps every character (CJK included);
- lines are recognised in batches of similar width.

The page text is the recognised lines in reading order (rows top to bottom, measured along
the page's skew), one line per row of text, words separated by one space; each word keeps its
characters in that text and its box, so the source view can highlight a cited passage.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from engine.types import OcrWord, PageOcr

RENDER_DPI = 150  # a 10 pt line is ~30 px high, the recogniser scales it to 48
DETECTION_SIDE = 960  # the detector sees the page at most this many pixels on its long side
LINE_SQUEEZE = 0.85  # lines are this much narrower than their shape at height 48
REC_BATCH = 8  # lines recognised in one run, sorted by width
ALPHABETS = ("western", "all")
ROW_OVERLAP = 0.5  # two lines whose heights overlap this much sit on one row

PIPELINE = 1  # this module's own steps: bump it when they change what is recognised
_REC_HEIGHT = 48
_REC_STRIDE = 8  # input pixels per output time step (CTC)
_TEXT_BAND = (0.2, 0.8)  # where the glyphs are, from the top of a detected line to its bottom
_WESTERN_END = 0x2500  # the "western" alphabet: characters below box drawing


@dataclass(frozen=True)
class OcrSettings:
    dpi: int = RENDER_DPI
    detection_side: int = DETECTION_SIDE
    threads: int = 0  # 0: onnxruntime's default (all cores)
    line_squeeze: float = LINE_SQUEEZE
    alphabet: str = "western"
    rec_batch: int = REC_BATCH

    def __post_init__(self):
        if self.alphabet not in ALPHABETS:
            raise ValueError(f"OcrSettings.alphabet: {self.alphabet!r} is not one of {ALPHABETS}")
        if not 0.3 <= self.line_squeeze <= 1.5:
            raise ValueError(f"OcrSettings.line_squeeze: {self.line_squeeze} is outside 0.3-1.5")
        if self.dpi < 50 or self.detection_side < 320 or self.rec_batch < 1:
            raise ValueError("OcrSettings: dpi >= 50, detection_side >= 320 and rec_batch >= 1, please")

    @property
    def engine_id(self) -> str:
        """Names the models and every setting that changes the text: a page recognised
        otherwise is recognised again (threads change only the speed)."""
        return (f"ocr{PIPELINE}:rapidocr-{_rapidocr_version()}:ppocrv6-small:{self.dpi}dpi:det{self.detection_side}"
                f":squeeze{self.line_squeeze:g}:{self.alphabet}:batch{self.rec_batch}")


class PageRecogniser:
    def __init__(self, settings: OcrSettings | None = None):
        self.settings = settings or OcrSettings()
        self._models: _Models | None = None

    @property
    def engine_id(self) -> str:
        return self.settings.engine_id

    def recognise_pdf_page(self, path: str | Path, number: int) -> tuple[str, PageOcr]:
        """The text and OCR record of physical page `number` (1-based) of a PDF."""
        image, width, height = render_page(path, number, self.settings.dpi)
        return self.recognise_image(image, width, height)

    def recognise_pdf_pages(self, path: str | Path, numbers, *, parallel: int = 2):
        """(number, text, PageOcr) of each page of `numbers`, in that order, `parallel` pages
        at a time: onnxruntime lets go of the GIL, and two pages on one thread each keep two
        cores busier than one page on two threads (the models' small layers scale poorly).
        Pair it with OcrSettings(threads=1)."""
        from concurrent.futures import ThreadPoolExecutor

        numbers = list(numbers)
        if parallel <= 1 or len(numbers) <= 1:
            for number in numbers:
                yield (number, *self.recognise_pdf_page(path, number))
            return
        self._load()
        pool = ThreadPoolExecutor(parallel, thread_name_prefix="ocr")
        try:
            pending = [pool.submit(self.recognise_pdf_page, path, n) for n in numbers[:parallel]]
            for i, number in enumerate(numbers):
                text, ocr = pending[i].result()
                if i + parallel < len(numbers):
                    pending.append(pool.submit(self.recognise_pdf_page, path, numbers[i + parallel]))
                pending[i] = None
                yield number, text, ocr
        finally:  # a caller that gives up (a page's time limit) must not wait for a stuck page
            pool.shutdown(wait=False, cancel_futures=True)

    def recognise_image(self, image, width_pt: float, height_pt: float) -> tuple[str, PageOcr]:
        """`image` (H x W x 3 or H x W, uint8) is a page of `width_pt` x `height_pt` PDF points."""
        gray = _gray(image)
        models = self._load()
        quads = models.detect(gray)
        lines = models.recognise(gray, quads)
        scale = width_pt / gray.shape[1] if gray.shape[1] else 1.0
        text, words = _layout(lines, scale)
        return text, PageOcr(_confidence(words), width_pt, height_pt, tuple(words), self.engine_id)

    def load(self) -> "PageRecogniser":
        """Loads the models now (else at the first page)."""
        self._load()
        return self

    def _load(self) -> "_Models":
        if self._models is None:
            self._models = _Models(self.settings)
        return self._models


def render_page(path: str | Path, number: int, dpi: int):
    """Page `number` (1-based) of a PDF as a grayscale image (H x W uint8), and its size in points."""
    import numpy as np
    import pypdfium2

    document = pypdfium2.PdfDocument(str(path))
    try:
        if not 1 <= number <= len(document):
            raise ValueError(f"{path}: there is no page {number} (the document has {len(document)})")
        page = document[number - 1]
        width, height = page.get_size()
        bitmap = page.render(scale=dpi / 72, grayscale=True)
        image = np.array(bitmap.to_pil().convert("L"))
        page.close()
    finally:
        document.close()
    return image, width, height


# -- text layers that need OCR ------------------------------------------------------------

_CID = re.compile(r"\(cid:\d+\)")
_MIN_LETTERS = 0.35  # of the visible characters, letters and digits (code pages have ~60%)
_MIN_WORDLIKE = 0.3
_LEADERS = str.maketrans("", "", ".-_=*·…")


def text_needs_ocr(text: str) -> bool:
    """True when a page's text layer is empty or garbage: no visible text, "(cid:NN)" runs,
    replacement characters, control or private-use characters, or glyph soup (few letters or
    digits, or letter runs without words). Ordinary pages of real manuals, code and tables of
    numbers included, are False."""
    visible = "".join(text.split())
    if not visible:
        return True
    cids = sum(len(m) for m in _CID.findall(visible))
    if cids > 0.1 * len(visible):
        return True
    visible = _CID.sub("", visible)
    if not visible:
        return True
    odd = sum(1 for c in visible if c == "\ufffd" or unicodedata.category(c) in ("Co", "Cc", "Cs"))
    if odd > 0.05 * len(visible):
        return True
    counted = visible.translate(_LEADERS)  # dot leaders and rules of contents and index pages
    alnum = sum(1 for c in counted if c.isalnum())
    if alnum < _MIN_LETTERS * len(counted):
        return True
    return _glyph_soup(text)


def _glyph_soup(text: str) -> bool:
    """Letters in runs that are not words: a font without a usable encoding maps its glyphs to
    arbitrary letters ("Tbf qjhhx"), or to letters with no vowels at all. Only judged where a
    page has enough letter tokens; numbers and code are not tokens here."""
    tokens = re.findall(r"[^\W\d_]{2,}", text)
    if len(tokens) < 20:
        return False
    wordlike = sum(1 for t in tokens if _wordlike(t))
    return wordlike < _MIN_WORDLIKE * len(tokens)


_VOWELS = set("aeiouyAEIOUYàáâäãåèéêëìíîïòóôöõùúûüýÿæøœ")


def _wordlike(token: str) -> bool:
    if not token.isascii():
        return True  # other scripts: not judged by Latin vowels
    return any(c in _VOWELS for c in token)


# -- the models ---------------------------------------------------------------------------


class _Models:
    """The detection and recognition sessions, built once per recogniser."""

    def __init__(self, settings: OcrSettings):
        import onnxruntime
        from rapidocr.ch_ppocr_det.utils import DBPostProcess

        self.settings = settings
        folder = _models_folder()
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        if settings.threads:
            options.intra_op_num_threads = settings.threads
            options.inter_op_num_threads = 1
        providers = ["CPUExecutionProvider"]
        det_bytes = _detector_model(folder / "PP-OCRv6_det_small.onnx")
        self.det = onnxruntime.InferenceSession(det_bytes, options, providers=providers)
        rec_bytes, self.characters = _recogniser_model(folder / "PP-OCRv6_rec_small.onnx", settings.alphabet)
        self.rec = onnxruntime.InferenceSession(rec_bytes, options, providers=providers)
        self.space = len(self.characters) - 1
        # rapidocr's Det defaults for PP-OCR
        self.post = DBPostProcess(thresh=0.3, box_thresh=0.5, max_candidates=1000, unclip_ratio=1.6,
                                  score_mode="fast", use_dilation=True)

    def detect(self, gray):
        """The text lines' quadrilaterals (4 x 2, clockwise from the top left) in image pixels."""
        import cv2
        import numpy as np

        h, w = gray.shape
        ratio = min(1.0, self.settings.detection_side / max(h, w))
        rh, rw = max(32, round(h * ratio / 32) * 32), max(32, round(w * ratio / 32) * 32)
        small = cv2.resize(gray, (rw, rh), interpolation=cv2.INTER_AREA if ratio < 1 else cv2.INTER_LINEAR)
        x = (small.astype(np.float32) * (2 / 255.0) - 1.0)[None, None]
        pred = self.det.run(None, {self.det.get_inputs()[0].name: x})[0]
        boxes, _ = self.post(pred, (h, w))
        return [np.asarray(b, dtype=np.float32) for b in boxes]

    def recognise(self, gray, quads) -> list["_Line"]:
        """Each line's words (text, confidence, box in image pixels), in the quads' order."""
        import numpy as np

        crops = [_warp_line(gray, q, self.settings.line_squeeze) for q in quads]
        order = np.argsort([c[0].shape[1] for c in crops], kind="stable")
        lines = [_Line([], 0.0) for _ in quads]
        batch = self.settings.rec_batch
        for start in range(0, len(order), batch):
            chosen = order[start:start + batch]
            width = max(crops[i][0].shape[1] for i in chosen)
            width = -(-width // _REC_STRIDE) * _REC_STRIDE
            x = np.zeros((len(chosen), 1, _REC_HEIGHT, width), dtype=np.float32)
            for row, i in enumerate(chosen):
                line = crops[i][0]
                x[row, 0, :, :line.shape[1]] = line.astype(np.float32) * (2 / 255.0) - 1.0
            probs = self.rec.run(None, {self.rec.get_inputs()[0].name: x})[0]
            for row, i in enumerate(chosen):
                image, inverse = crops[i]
                tl, tr, br, bl = quads[i]
                height = float(max(np.linalg.norm(bl - tl), np.linalg.norm(br - tr)))
                lines[i] = _Line(self._decode(probs[row], image.shape[1], inverse), height)
        return lines

    def _decode(self, probs, line_width: int, inverse) -> list["_Word"]:
        """CTC greedy decoding of one line; each word's box from the time steps of its
        characters, mapped back through the line's warp."""
        import numpy as np

        steps = max(1, min(len(probs), -(-line_width // _REC_STRIDE)))
        index = probs[:steps].argmax(axis=1)
        best = probs[np.arange(steps), index]
        keep = np.ones(steps, dtype=bool)
        keep[1:] = index[1:] != index[:-1]
        keep &= index != 0
        words, chars = [], []
        for t in np.flatnonzero(keep):
            if index[t] == self.space:
                if chars:
                    words.append(chars)
                chars = []
            else:
                chars.append((self.characters[index[t]], int(t), float(best[t])))
        if chars:
            words.append(chars)
        return [_word(w, line_width, inverse) for w in words]


def _word(chars, line_width: int, inverse) -> "_Word":
    import cv2
    import numpy as np

    text = "".join(c for c, _, _ in chars)
    first, last = chars[0][1], chars[-1][1]
    pitch = (last - first) / (len(chars) - 1) if len(chars) > 1 else 2.0
    # a character's spike sits near its middle: the word reaches half a pitch beyond them
    x0 = max(0.0, (first + 0.5 - 0.5 * pitch) * _REC_STRIDE)
    x1 = min(float(line_width), (last + 0.5 + 0.5 * pitch) * _REC_STRIDE)
    # the detector's box is its text band grown by about 0.8 of its height on each side
    top, bottom = _TEXT_BAND[0] * _REC_HEIGHT, _TEXT_BAND[1] * _REC_HEIGHT
    corners = np.array([[[x0, top], [x1, top], [x1, bottom], [x0, bottom]]], dtype=np.float32)
    points = cv2.perspectiveTransform(corners, inverse)[0]
    box = (float(points[:, 0].min()), float(points[:, 1].min()), float(points[:, 0].max()),
           float(points[:, 1].max()))
    confidence = float(np.mean([p for _, _, p in chars]))
    centre = points.mean(axis=0)
    return _Word(text, confidence, box, (float(centre[0]), float(centre[1])))


def _warp_line(gray, quad, squeeze: float):
    """The line inside `quad`, straightened to height 48 and squeezed; and the warp's inverse
    (line pixels -> page pixels)."""
    import cv2
    import numpy as np

    tl, tr, br, bl = quad
    width = max(np.linalg.norm(tr - tl), np.linalg.norm(br - bl))
    height = max(np.linalg.norm(bl - tl), np.linalg.norm(br - tr), 1.0)
    out_w = max(_REC_STRIDE, int(round(width * _REC_HEIGHT / height * squeeze)))
    target = np.array([[0, 0], [out_w, 0], [out_w, _REC_HEIGHT], [0, _REC_HEIGHT]], dtype=np.float32)
    warp = cv2.getPerspectiveTransform(quad.astype(np.float32), target)
    line = cv2.warpPerspective(gray, warp, (out_w, _REC_HEIGHT), flags=cv2.INTER_LINEAR,
                               borderMode=cv2.BORDER_REPLICATE)
    return line, np.linalg.inv(warp)


def _recogniser_model(path: Path, alphabet: str) -> tuple[bytes, list[str]]:
    """The recognition model (as bytes, built in memory) and its characters ("blank" first,
    space last). "western" keeps only the classifier's columns of those characters."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(path))
    _gray_input(model)
    meta = {p.key: p.value for p in model.metadata_props}
    characters = ["blank", *meta["character"].splitlines(), " "]
    if alphabet == "all":
        return model.SerializeToString(), characters
    keep = [i for i, c in enumerate(characters)
            if i == 0 or i == len(characters) - 1 or all(ord(x) < _WESTERN_END for x in c)]
    graph = model.graph
    last = next(n for n in reversed(graph.node) if n.op_type == "MatMul")
    add = next(n for n in graph.node if n.op_type == "Add" and last.output[0] in n.input)
    inits = {i.name: i for i in graph.initializer}
    weight = inits[last.input[1]]
    bias = inits[next(name for name in add.input if name in inits)]
    for init, array in ((weight, numpy_helper.to_array(weight)[:, keep]),
                        (bias, numpy_helper.to_array(bias)[keep])):
        init.CopyFrom(numpy_helper.from_array(np.ascontiguousarray(array), init.name))
    classes = len(characters)
    for value in [*graph.output, *graph.value_info]:  # the class dimension is now len(keep)
        dims = value.type.tensor_type.shape.dim
        if dims and dims[-1].dim_value == classes:
            dims[-1].dim_value = len(keep)
    return model.SerializeToString(), [characters[i] for i in keep]


def _detector_model(path: Path) -> bytes:
    import onnx

    model = onnx.load(str(path))
    _gray_input(model)
    return model.SerializeToString()


def _gray_input(model) -> None:
    """The model takes one grey channel instead of three equal ones: its first convolution's
    weights summed over their input channels give the same output (padding is 0 in all)."""
    import numpy as np
    from onnx import numpy_helper

    graph = model.graph
    source = graph.input[0]
    first = next(n for n in graph.node if n.op_type == "Conv" and n.input[0] == source.name)
    weight = next(i for i in graph.initializer if i.name == first.input[1])
    summed = numpy_helper.to_array(weight).sum(axis=1, keepdims=True)
    weight.CopyFrom(numpy_helper.from_array(np.ascontiguousarray(summed), weight.name))
    source.type.tensor_type.shape.dim[1].dim_value = 1


def _models_folder() -> Path:
    import rapidocr

    return Path(rapidocr.__file__).resolve().parent / "models"


def _gray(image):
    import numpy as np

    image = np.asarray(image)
    if image.ndim == 2:
        return np.ascontiguousarray(image, dtype=np.uint8)
    if image.ndim == 3 and image.shape[2] in (3, 4):
        rgb = image[:, :, :3].astype(np.float32)
        return (rgb @ np.array([0.299, 0.587, 0.114], dtype=np.float32)).clip(0, 255).astype(np.uint8)
    raise ValueError(f"recognise_image: expected an H x W or H x W x 3 uint8 image, got shape {image.shape}")


# -- reading order ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Word:
    text: str
    confidence: float
    box: tuple[float, float, float, float]  # x0, y0, x1, y1 in image pixels, from the top left
    centre: tuple[float, float]


@dataclass(frozen=True)
class _Line:
    words: list[_Word]
    height: float  # of its detected box, in image pixels


def _layout(lines: list[_Line], scale: float) -> tuple[str, list[OcrWord]]:
    """Reading order: rows top to bottom, lines in a row left to right, both measured along
    the page's skew. Boxes go from image pixels to points by `scale`."""
    lines = [line for line in lines if line.words]
    angle = _skew(lines)
    text, words = "", []
    for row in _rows(lines, angle):
        if text:
            text += "\n"
        for word in (w for line in row for w in line.words):
            if text and not text.endswith("\n"):
                text += " "
            start = len(text)
            text += word.text
            box = tuple(v * scale for v in word.box)
            words.append(OcrWord(start, len(text), box, word.confidence))
    return text, words


def _skew(lines: list[_Line]) -> float:
    """The page's skew (radians), the median slope of its lines of 3+ words."""
    import math
    import statistics

    slopes = []
    for line in lines:
        if len(line.words) >= 3:
            (x0, y0), (x1, y1) = line.words[0].centre, line.words[-1].centre
            if x1 - x0 > 1:
                slopes.append(math.atan2(y1 - y0, x1 - x0))
    return statistics.median(slopes) if slopes else 0.0


def _rows(lines: list[_Line], angle: float) -> list[list[_Line]]:
    import math

    cos, sin = math.cos(angle), math.sin(angle)

    def place(line: _Line):  # (top, bottom, left) after turning the page straight
        ys = [-w.centre[0] * sin + w.centre[1] * cos for w in line.words]
        middle = sum(ys) / len(ys)
        first = line.words[0].centre
        return middle - line.height / 2, middle + line.height / 2, first[0] * cos + first[1] * sin

    placed = sorted(((place(line), line) for line in lines), key=lambda p: p[0])
    rows: list[list[tuple]] = []
    for spot, line in placed:
        if rows and _same_row(rows[-1][-1][0], spot):
            rows[-1].append((spot, line))
        else:
            rows.append([(spot, line)])
    return [[line for _, line in sorted(row, key=lambda r: r[0][2])] for row in rows]


def _same_row(a, b) -> bool:
    overlap = min(a[1], b[1]) - max(a[0], b[0])
    return overlap > ROW_OVERLAP * min(a[1] - a[0], b[1] - b[0])


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
