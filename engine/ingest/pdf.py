"""PDF: text per physical page. Run it in a worker process (see parse_pool): a hostile file can
take minutes or much memory, and crash a C library.

Who does what:
  - PDFium (pypdfium2) reads each page's text: the text a viewer (QtPdf, Chromium) shows and
    selects, with its words spaced as they are drawn, about 10x faster than pypdf. pdf_text
    cleans it the same way for the index and for the source view's highlights.
  - pypdf opens the file first (encryption, damage and size limits, each with a message a
    person can act on), and reads the outline, the page labels and the title. It reads a
    page's text only where PDFium's is empty or poor (text_quality) and its own is better,
    and reads the whole file when PDFium cannot (the parse pool asks for that after PDFium
    crashed its worker: PDF_READERS).

parse_pdf reads the text layer alone. With OCR, the parse pool's worker calls read_pdf (the text
layer, and which pages need OCR: an empty, garbage or poor text layer on a page that draws an
image, or no text at all on a page that draws much), recognises those pages, then finish_pdf.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

from engine.errors import DocumentError
from engine.ingest.ocr import text_needs_ocr
from engine.ingest.pdf_text import HyphenWords, clean_text
from engine.ingest.pdfium_reader import PdfiumFile
from engine.ingest.text_quality import TextQuality, count_unreadable
from engine.types import OutlineEntry, Page, PageOcr, ParsedDocument

# pypdf's own limits, set in the worker (pypdf keeps them per thread, in a context variable).
# Defaults of pypdf 7.1 except where noted; a page's text never needs more.
PYPDF_LIMITS = {
    "maximum_declared_stream_length": 75_000_000,
    "zlib_maximum_output_length": 75_000_000,
    "lzw_maximum_output_length": 75_000_000,
    "run_length_maximum_output_length": 75_000_000,
    "brotli_maximum_output_length": 75_000_000,
    "jbig2_maximum_output_length": 75_000_000,
    "image_maximum_buffer_size": 75_000_000,
    "stream_decoding_work_maximum_length": 300_000_000,
    "stream_parsing_work_maximum_count": 2_000_000,
    "page_tree_maximum_depth": 100,
    "page_tree_maximum_entries": 100_000,
    "xform_maximum_invocations_per_extraction": 5_000,
    "jbig2dec_binary": None,  # never start an external decoder: images carry no text
}
UNSUPPORTED_COMPRESSION = "the file uses an unsupported compression"
MAX_WARNINGS = 10  # distinct reasons listed; the rest are counted
MAX_OUTLINE_ENTRIES = 20_000  # a hostile outline costs its headings, not the document
MAX_OUTLINE_DEPTH = 6  # as deep as chunking keeps heading paths
DRAWN_TEXT_BYTES = 4096  # a page's drawing commands beyond which it may be text drawn as shapes
MAX_LABEL_CHARS = 40  # a printed page label ("iv", "A-3"); a longer one is not a page number
PDF_READERS = ("pdfium", "pypdf")  # the text's reader; "pypdf" alone where PDFium cannot read the file
WITHOUT_OCR = "without OCR they cannot be searched"  # ends the warning of scanned pages left unread
# LimitReachedError covers sizes and structure (cycles, depth); only sizes are "too large"
_SIZE_WORDS = ("decompress", "decoding", "size", "length", "buffer", "memory")
_FILTER_NAME = re.compile(r"\b(\w+Decode)\b")  # "BrotliDecode", "Unsupported filter /FooDecode"
# pypdf names its decoders' modules in nothing it raises; these say which filter failed
_DECODER_MODULES = {"brotli": "BrotliDecode", "zlib": "FlateDecode"}


def apply_pypdf_limits() -> None:
    """Sets PYPDF_LIMITS for the calling thread's pypdf."""
    import pypdf

    pypdf.overwrite_configuration(**PYPDF_LIMITS)


def parse_pdf(path: str | Path, reader: str = PDF_READERS[0]) -> ParsedDocument:
    """The text of each physical page (1-based), labelled with the page's printed label where
    the PDF declares one that differs from its number; pages that fail are skipped with a
    warning. Scanned pages stay without text (a warning says so): see read_pdf for OCR."""
    return finish_pdf(read_pdf(path, reader))


@dataclass
class PdfText:
    """A PDF's text layer, read; what finish_pdf needs to make it a ParsedDocument."""

    path: Path
    title: str
    page_count: int
    pages: list[Page]
    failures: dict[str, list[int]]  # {reason: page numbers} of the pages that could not be read
    image_only: list[int]  # pages with images and no text: scanned, most likely
    needs_ocr: list[int]  # pages whose text an OCR pass should recognise (see _needs_ocr)
    damage: list[str]  # what pypdf logged: its only sign of damage it recovered from
    outline: tuple[OutlineEntry, ...]
    poor: dict[str, list[int]] = field(default_factory=dict)  # {problem: pages} whose text stays poor


def read_pdf(path: str | Path, reader: str = PDF_READERS[0]) -> PdfText:
    """The text layer of each page (PDFium's, unless `reader` is "pypdf" or PDFium cannot open
    the file), and which pages need OCR; raises DocumentError when the file cannot be opened or
    none of its pages can be read."""
    path = Path(path)
    pdf = PdfiumFile.open(path) if reader == "pdfium" else None
    if pdf is None:
        return _read_with_pypdf(path)
    with pdf, _pypdf_log() as damage:
        raws = [pdf.raw_text(index) for index in range(pdf.page_count)]
        found = _read_pages_pdfium(_LazyReader(path), raws, pdf.labels(MAX_LABEL_CHARS))
        if not found.pages:
            _raise_unreadable(path, found.failures, pdf.page_count)
        outline = pdf.outline(MAX_OUTLINE_ENTRIES, MAX_OUTLINE_DEPTH)
        return PdfText(path, pdf.title() or path.stem, pdf.page_count, found.pages, found.failures,
                       found.image_only, found.needs_ocr, damage, outline, found.poor)


def _read_with_pypdf(path: Path) -> PdfText:
    with _pypdf_log() as damage:
        document, page_count = _open(path)
        labels = _page_labels(document, page_count)
        found = _read_pages(document, page_count, labels)
    if not found.pages:
        _raise_unreadable(path, found.failures, page_count)
    return PdfText(path, _title(document, path), page_count, found.pages, found.failures,
                   found.image_only, found.needs_ocr, damage, _outline(document, page_count), found.poor)


def finish_pdf(text: PdfText, recognised: dict[int, tuple[str, PageOcr]] | None = None,
               ocr_warnings: Sequence[str] = ()) -> ParsedDocument:
    """The document. Without OCR (`recognised` None) the scanned pages stay without text, with
    a warning, or DocumentError "no_text" when no page has text. With OCR, each page of
    `recognised` ({page: (text, PageOcr)}) takes its recognised text, and keeps its PageOcr
    even when nothing was found (confidence 0, for the indexer to say so); `ocr_warnings` say
    which pages OCR could not read."""
    if recognised is None:
        return _document(text, text.pages, _image_only_warning(text.image_only) + _poor_warnings(text.poor))
    pages = [_recognised_page(page, recognised.get(page.number)) for page in text.pages]
    if not any(page.text.strip() for page in pages):
        _raise_nothing_recognised(text, ocr_warnings)
    read_again = {number for number, found in recognised.items() if found[0].strip()}
    poor = {problem: [n for n in numbers if n not in read_again] for problem, numbers in text.poor.items()}
    return _document(text, pages, list(ocr_warnings) + _poor_warnings(poor))


def _document(text: PdfText, pages: Sequence[Page], warnings: list[str]) -> ParsedDocument:
    if not any(page.text.strip() for page in pages):
        _raise_no_text(text.path, text.page_count, text.image_only, text.damage)
    return ParsedDocument(str(text.path), text.title, tuple(pages),
                          tuple(_failure_warnings(text.failures) + warnings), text.outline)


def _recognised_page(page: Page, found: tuple[str, PageOcr] | None) -> Page:
    if found is None:
        return page
    recognised, ocr = found
    if recognised.strip() or not page.text.strip():
        return Page(page.number, recognised, page.label, ocr)
    return page  # OCR found nothing where a (garbage) text layer is: that layer, as before


def _raise_nothing_recognised(text: PdfText, ocr_warnings: Sequence[str]) -> NoReturn:
    if not text.image_only and text.damage:  # not scanned: damaged beyond reading
        raise DocumentError.of("invalid", text.path, f"no page has readable text; {text.damage[0]}")
    why = f" ({ocr_warnings[0]})" if ocr_warnings else ""
    raise DocumentError(f"'{text.path.name}' has no text layer, and OCR found no text on its "
                        f"{text.page_count} page{'s' if text.page_count != 1 else ''}{why}, so it cannot be searched. Add a version with "
                        "text (exported from the original), or a cleaner scan.", "no_text", str(text.path))


# -- opening ------------------------------------------------------------------------------
def _open(path: Path):
    """The reader and its page count, decrypted with the empty password when that works."""
    from pypdf import PdfReader

    try:
        reader = PdfReader(path)
        if reader.is_encrypted:
            _decrypt(reader, path)
        return reader, len(reader.pages)
    except DocumentError:
        raise
    except OSError as exc:
        raise DocumentError.of("unreadable", path, exc.strerror or str(exc)) from exc
    except Exception as exc:  # pypdf raises far more than its own errors on damaged files
        raise _open_error(path, exc) from exc


def _decrypt(reader, path: Path) -> None:
    from pypdf.errors import DependencyError

    try:
        opened = reader.decrypt("")  # many manuals only have an owner password
    except DependencyError as exc:
        raise DocumentError.of("encrypted", path, f"its encryption needs a package that is "
                               f"not installed: {exc}") from exc
    except NotImplementedError as exc:
        raise DocumentError.of("encrypted", path, f"unsupported encryption: {exc}") from exc
    if not opened:
        raise DocumentError.of("encrypted", path, "a password is needed to open it")


@contextlib.contextmanager
def _pypdf_log():
    """What pypdf logs meanwhile: its only sign of damage it recovered from (a page object
    that failed to parse comes back nearly empty, and would look blank)."""
    handler = _Collect()
    logger = logging.getLogger("pypdf")
    logger.addHandler(handler)
    try:
        yield handler.messages
    finally:
        logger.removeHandler(handler)


class _Collect(logging.Handler):
    def __init__(self, keep: int = 5):
        super().__init__(logging.WARNING)
        self.messages: list[str] = []
        self._keep = keep

    def emit(self, record: logging.LogRecord) -> None:
        if len(self.messages) < self._keep:
            self.messages.append(" ".join(record.getMessage().split())[:160])


def _open_error(path: Path, exc: Exception) -> DocumentError:
    from pypdf.errors import EmptyFileError, FileNotDecryptedError

    if isinstance(exc, EmptyFileError):
        return DocumentError.of("empty", path)
    if isinstance(exc, FileNotDecryptedError):
        return DocumentError.of("encrypted", path, "a password is needed to open it")
    if (compression := _unsupported_compression(exc)) is not None:
        return unsupported_compression(path, compression)
    if _is_size_limit(exc):
        return DocumentError.of("too_large", path, describe(exc))
    if not _has_pdf_header(path):
        return DocumentError.of("invalid", path, "it has no PDF header; it may be another "
                                "kind of file with a .pdf name")
    return DocumentError.of("invalid", path, describe(exc))


def _has_pdf_header(path: Path) -> bool:
    try:
        with path.open("rb") as file:
            return b"%PDF-" in file.read(1024)
    except OSError:
        return False


def describe(exc: BaseException) -> str:
    """A short "Type: message" for a reason; pypdf's messages can be very long."""
    if isinstance(exc, RecursionError):
        return "it is nested too deeply (RecursionError)"
    text = " ".join(str(exc).split())
    text = text if len(text) <= 160 else text[:157] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _title(reader, path: Path) -> str:
    try:
        title = reader.metadata.title if reader.metadata else None
    except Exception:  # damaged metadata only costs the title
        title = None
    title = " ".join(str(title).split()) if title else ""
    return title or path.stem


# -- outline ----------------------------------------------------------------------------
def _outline(reader, page_count: int) -> tuple[OutlineEntry, ...]:
    """The bookmarks that point to a page, in outline order, each with the titles above it.
    Headings guessed from the text's lines misfire on many manuals; the outline is what
    the author declared. A damaged outline only costs the headings."""
    entries: list[OutlineEntry] = []
    try:
        _walk_outline(reader, reader.outline, (), page_count, entries)
    except Exception as exc:  # pypdf raises many types on damaged outlines
        logging.getLogger(__name__).info("outline unreadable (%s); headings from the text", describe(exc))
        return ()
    return tuple(entries)


def _walk_outline(reader, items, above: tuple[str, ...], page_count: int,
                  entries: list[OutlineEntry]) -> None:
    """pypdf's outline: a list of bookmarks, each followed by a list of its children."""
    last: tuple[str, ...] | None = None
    for item in items:
        if len(entries) >= MAX_OUTLINE_ENTRIES:
            return
        if isinstance(item, list):
            if last is not None and len(last) < MAX_OUTLINE_DEPTH:
                _walk_outline(reader, item, last, page_count, entries)
            continue
        title = " ".join(str(getattr(item, "title", "") or "").split())
        try:
            index = reader.get_destination_page_number(item)
        except Exception:  # a bookmark to a missing or odd destination: its children still count
            index = None
        last = above + (title,) if title else above
        if title and index is not None and 0 <= index < page_count:
            entries.append(OutlineEntry(index + 1, last))


# -- page labels ------------------------------------------------------------------------
def _page_labels(reader, page_count: int) -> dict[int, str]:
    """{physical page: printed label} for the pages whose label differs from their number
    ("T-1", "iv", "5" on page 10). Without /PageLabels in the catalog pypdf numbers the
    pages 1, 2, 3, which says nothing; a damaged label tree only costs the labels."""
    try:
        if "/PageLabels" not in reader.root_object:
            return {}
        labels = reader.page_labels
    except Exception as exc:  # pypdf raises many types on damaged number trees
        logging.getLogger(__name__).info("page labels unreadable (%s); page numbers instead", describe(exc))
        return {}
    found = {}
    for number, label in enumerate(labels[:page_count], start=1):
        label = " ".join(str(label).split())
        if label and label != str(number) and len(label) <= MAX_LABEL_CHARS:
            found[number] = label
    return found


# -- pages --------------------------------------------------------------------------------
@dataclass
class _Pages:
    """What reading the pages found, page by page."""

    pages: list[Page] = field(default_factory=list)
    failures: dict[str, list[int]] = field(default_factory=dict)
    image_only: list[int] = field(default_factory=list)
    needs_ocr: list[int] = field(default_factory=list)
    poor: dict[str, list[int]] = field(default_factory=dict)

    def add(self, page, number: int, text: str, label: str, quality: TextQuality | None = None) -> None:
        """A page read (`page`: pypdf's, to look at what it draws when its text is poor)."""
        self.pages.append(Page(number, text, label))
        problems = quality.problems if quality is not None else ()
        for problem in problems:
            self.poor.setdefault(problem, []).append(number)
        if not text_needs_ocr(text) and not problems:
            return
        images = _has_images(page)
        if images and not text.strip():
            self.image_only.append(number)
        if images or problems or (not text.strip() and _draws_much(page)):
            self.needs_ocr.append(number)

    def fail(self, number: int, exc: Exception) -> None:
        self.failures.setdefault(_page_reason(exc), []).append(number)


def _read_pages(reader, page_count: int, labels: dict[int, str]) -> _Pages:
    """Each page's text, as pypdf reads it."""
    found = _Pages()
    for number in range(1, page_count + 1):
        try:
            page = reader.pages[number - 1]
            text, quality = _pypdf_text(page)
        except Exception as exc:  # one bad page must not cost the others
            found.fail(number, exc)
            continue
        found.add(page, number, text, labels.get(number, ""), quality)
    return found


def _pypdf_text(page) -> tuple[str, TextQuality]:
    """pypdf's text of a page, cleaned as PDFium's is (what a font cannot draw left out), and its
    quality, unreadable glyphs counted before they were left out."""
    raw = page.extract_text() or ""
    text = clean_text(raw)
    return text, TextQuality.of(text, count_unreadable(raw))


def _read_pages_pdfium(reader, raws: list[str | None], labels: dict[int, str]) -> _Pages:
    """PDFium's text of each page, cleaned; where it is missing, empty or poor, pypdf's when
    that reads better. The document's own words decide the hyphens at line ends."""
    words = HyphenWords(raw for raw in raws if raw)
    found = _Pages()
    for number, raw in enumerate(raws, start=1):
        text = clean_text(raw, words) if raw is not None else None
        quality = TextQuality.of(text, count_unreadable(raw)) if raw is not None else None
        page = _LazyPage(reader, number)
        if quality is None or quality.problems or not text.strip():
            try:
                text, quality = _better_reading(page.get(), text, quality)
            except Exception as exc:  # pypdf failed this page too: PDFium's text, if it has any
                if not (text or "").strip():
                    found.fail(number, exc)
                    continue
        found.add(page, number, text, labels.get(number, ""), quality)
    return found


def _better_reading(page, text: str | None, quality: TextQuality | None) -> tuple[str, TextQuality]:
    """pypdf's text of a page where it reads better than PDFium's (`text`: None when PDFium
    could not read the page)."""
    other, other_quality = _pypdf_text(page)
    if text is None or quality is None:
        return other, other_quality
    letters, other_letters = _letters(text), _letters(other)
    if other_letters > 1.2 * letters + 20 and not other_quality.problems:
        return other, other_quality  # PDFium missed text that pypdf finds
    if other_quality.badness < quality.badness and other_letters >= 0.8 * letters:
        return other, other_quality
    return text, quality


def _letters(text: str) -> int:
    return sum(1 for c in text if c.isalnum())


class _LazyReader:
    """pypdf's reader of a file PDFium has read, opened only when a page needs it (opening
    flattens the page tree: seconds on a large manual)."""

    def __init__(self, path: Path):
        self.path = path
        self._reader = None
        self._failure: DocumentError | None = None

    @property
    def pages(self):
        if self._failure is not None:
            raise self._failure
        if self._reader is None:
            try:
                self._reader, _ = _open(self.path)
            except DocumentError as exc:
                self._failure = exc
                raise
        return self._reader.pages


class _LazyPage:
    """pypdf's page object, resolved only when something needs it (PDFium read the text)."""

    def __init__(self, reader, number: int):
        self._reader, self._number, self._page = reader, number, None

    def get(self):
        if self._page is None:
            self._page = self._reader.pages[self._number - 1]
        return self._page

    def __getitem__(self, key):
        return self.get()[key]

    def get_contents(self):
        return self.get().get_contents()


def _is_size_limit(exc: Exception) -> bool:
    from pypdf.errors import LimitReachedError

    if isinstance(exc, MemoryError):
        return True
    return (isinstance(exc, LimitReachedError) and not _is_decode_failure(exc)
            and any(word in str(exc).lower() for word in _SIZE_WORDS))


def _is_decode_failure(exc: Exception) -> bool:
    """pypdf reports a decoder's error on damaged data (brotli.error, zlib.error) as a
    LimitReachedError raised from it: the stream is damaged, not too large."""
    from pypdf.errors import LimitReachedError

    cause = exc.__cause__
    return cause is not None and not isinstance(cause, (LimitReachedError, MemoryError))


def _unsupported_compression(exc: Exception) -> str | None:
    """The filter's name ("BrotliDecode") when pypdf cannot decode a stream's compression:
    no decoder for it, or a decoder package that is missing. pypdf's own advice (pip
    install ...) is no use to someone with an installed app."""
    from pypdf.errors import DependencyError

    text = str(exc)
    if isinstance(exc, DependencyError) or (
            isinstance(exc, NotImplementedError) and "filter" in text.lower()):
        match = _FILTER_NAME.search(text)
        return match.group(1) if match else "unknown"
    return None


def unsupported_compression(path: Path, compression: str) -> DocumentError:
    return DocumentError(f"'{path.name}' uses an unsupported compression ({compression}), so "
                         "its text cannot be read. Save it again as a standard PDF from the "
                         "application that made it, or remove it.", "unsupported", str(path))


def _page_reason(exc: Exception) -> str:
    if (compression := _unsupported_compression(exc)) is not None:
        return f"{UNSUPPORTED_COMPRESSION} ({compression})"
    if _is_decode_failure(exc) and "decompress" in str(exc).lower():
        cause = exc.__cause__
        decoder = _DECODER_MODULES.get(type(cause).__module__.split(".")[0], "")
        detail = " ".join(str(cause).split())[:160] or type(cause).__name__
        return f"a compressed stream is damaged ({decoder + ': ' if decoder else ''}{detail})"
    if _is_size_limit(exc):
        return f"too large to read within the limits ({describe(exc)})"
    return describe(exc)


def _has_images(page) -> bool:
    """Whether the page draws an image directly: a page of images and no text is scanned."""
    try:
        xobjects = page["/Resources"].get_object().get("/XObject")
        xobjects = xobjects.get_object() if xobjects is not None else {}
        return any(x.get_object().get("/Subtype") == "/Image" for x in xobjects.values())
    except Exception:  # odd resources: then it is just an empty page
        return False


def _draws_much(page) -> bool:
    """Whether a page without text or images draws enough to be text drawn as shapes (some
    PDF makers outline their fonts); a blank page, or one with a rule or a logo, draws little."""
    try:
        contents = page.get_contents()
        return contents is not None and len(contents.get_data()) > DRAWN_TEXT_BYTES
    except Exception:  # odd contents: then it is just an empty page
        return False


def _raise_unreadable(path: Path, failures: dict[str, list[int]], page_count: int) -> NoReturn:
    if not failures:
        raise DocumentError.of("empty", path, "it has no pages")
    reason = next(iter(failures))
    if reason.startswith(UNSUPPORTED_COMPRESSION):
        raise unsupported_compression(path, reason[len(UNSUPPORTED_COMPRESSION):].strip(" ()"))
    kind = "too_large" if reason.startswith("too large") else "invalid"
    raise DocumentError.of(kind, path, f"none of its {page_count} pages could be read: {reason}")


def _raise_no_text(path: Path, page_count: int, image_only: list[int],
                   damage: list[str]) -> NoReturn:
    if image_only:
        raise DocumentError.of("no_text", path, f"its pages are only images, as scanned "
                               f"pages are; none of its {page_count} pages has text")
    if damage:  # not scanned: its pages were damaged beyond reading
        raise DocumentError.of("invalid", path, f"no page has readable text; {damage[0]}")
    raise DocumentError.of("no_text", path, f"none of its {page_count} pages has text")


def _failure_warnings(failures: dict[str, list[int]]) -> list[str]:
    warnings = [f"{page_numbers_text(numbers)} skipped: {reason}"
                for reason, numbers in list(failures.items())[:MAX_WARNINGS]]
    rest = sum(len(numbers) for numbers in list(failures.values())[MAX_WARNINGS:])
    if rest:
        warnings.append(f"{rest} more pages skipped for other reasons")
    return warnings


def _image_only_warning(numbers: list[int]) -> list[str]:
    if not numbers:
        return []
    verb = "has" if len(numbers) == 1 else "have"
    return [f"{page_numbers_text(numbers)} {verb} only images and no text (scanned?); {WITHOUT_OCR}"]


def _poor_warnings(poor: dict[str, list[int]]) -> list[str]:
    """"pages 3, 7-9: their text has words run together (searched as it is)"."""
    warnings = []
    for problem, numbers in poor.items():
        if numbers:
            whose = "its" if len(numbers) == 1 else "their"
            warnings.append(f"{page_numbers_text(numbers)}: {whose} text has {problem} (searched as it is)")
    return warnings


def page_numbers_text(numbers: list[int]) -> str:
    """"page 4" or "pages 3, 7-9"."""
    ranges, start = [], numbers[0]
    for previous, current in zip(numbers, numbers[1:] + [None]):
        if current != previous + 1:
            ranges.append(str(start) if start == previous else f"{start}-{previous}")
            start = current
    word = "page" if len(numbers) == 1 else "pages"
    return f"{word} {', '.join(ranges)}"
