"""Reading documents into pages of text: one module per format, run in worker processes.

    with ParsePool(workers=2) as pool:
        for path, result in pool.imap(discover([folder])):
            ...  # a ParsedDocument, or a DocumentError saying why not

    ParsePool(ocr=OcrOptions(cache=paths.ocr_cache))   # scanned pages recognised (ocr_pages)

`parse_file` reads one file in the calling process: only worker processes should call it on
files nobody has vetted (see parse_pool). `inbox` says which files in a watched folder are
whole and ready to index. `locate` finds a cited passage in a page's text as another reader
(PDFium, for the source view) extracted it.
"""

from __future__ import annotations

from pathlib import Path

from engine.errors import DocumentError
from engine.ingest.discover import SUPPORTED, discover, is_supported
from engine.ingest.ocr_pages import OcrOptions
from engine.ingest.parse_pool import ParsePool
from engine.types import DocumentOutcome, OutlineEntry, Page, ParsedDocument

__all__ = ["SUPPORTED", "OcrOptions", "ParsePool", "discover", "is_supported", "outcome_for", "parse_file"]


def parse_file(path: str | Path) -> ParsedDocument:
    """The pages of one document, chosen by extension; raises DocumentError."""
    path = Path(path)
    parser = _parser_for(path)
    if parser is None:
        raise DocumentError.of("unsupported", path, f"'{path.suffix or 'no extension'}'")
    return cleaned(parser(path))


def outcome_for(document: ParsedDocument) -> DocumentOutcome:
    """ready, or ready with warnings (the warnings as the reason)."""
    status = "ready_with_warnings" if document.warnings else "ready"
    return DocumentOutcome(document.path, status, "; ".join(document.warnings),
                           pages=len(document.pages))


def _parser_for(path: Path):
    suffix = path.suffix.lower()
    if suffix == ".pdf":
        from engine.ingest.pdf import parse_pdf
        return parse_pdf
    if suffix == ".txt":
        from engine.ingest.text import parse_text
        return parse_text
    if suffix in (".md", ".markdown"):
        from engine.ingest.text import parse_markdown
        return parse_markdown
    if suffix in (".html", ".htm"):
        from engine.ingest.html import parse_html
        return parse_html
    if suffix == ".docx":
        from engine.ingest.docx import parse_docx
        return parse_docx
    return None


def cleaned(document: ParsedDocument) -> ParsedDocument:
    """Text that SQLite, JSON and tokenizers all accept: no NULs, no lone surrogates. A page
    recognised by OCR keeps its text as it is: its word boxes count its characters."""
    pages = tuple(page if page.ocr is not None else Page(page.number, _clean(page.text), _clean(page.label))
                  for page in document.pages)
    outline = tuple(OutlineEntry(entry.page, tuple(_clean(t) for t in entry.path))
                    for entry in document.outline)
    return ParsedDocument(document.path, _clean(document.title), pages, document.warnings, outline)


def _clean(text: str) -> str:
    text = text.replace("\x00", "")
    if text.isascii():
        return text
    # pairs of surrogates become one character; a lone one becomes U+FFFD
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
