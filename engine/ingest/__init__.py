"""Reading documents into pages of text: one module per format, run in worker processes.

    with ParsePool(workers=2) as pool:
        for path, result in pool.imap(discover([folder])):
            ...  # a ParsedDocument, or a DocumentError saying why not

    ParsePool(ocr=OcrOptions(cache=paths.ocr_cache))   # scanned pages recognised (ocr_pages)

`parse_file` reads one file in the calling process: only worker processes should call it on
files nobody has vetted (see parse_pool). A PDF's text is PDFium's (`pdfium_reader`), cleaned by
`pdf_text` and checked by `text_quality` (pypdf reads the pages PDFium reads poorly, and the
files it cannot: see `pdf`). `inbox` says which files in a watched folder are whole and ready to
index. `locate` maps a cited passage's span back to the page as the source view holds it.
`text_version` says which reading of a format a stored document's text comes from.
"""

from __future__ import annotations

from pathlib import Path

from engine.errors import DocumentError
from engine.ingest.discover import SUPPORTED, discover, is_supported
from engine.ingest.ocr_pages import OcrOptions
from engine.ingest.parse_pool import ParsePool
from engine.types import DocumentOutcome, OutlineEntry, Page, ParsedDocument

__all__ = ["SUPPORTED", "OcrOptions", "ParsePool", "discover", "is_supported", "outcome_for", "parse_file",
           "text_version"]

# Which reading of a format a document's text comes from, stored with it: a document indexed
# with an older one is read again by the next index run. PDF 2: PDFium's text, cleaned (1: pypdf's).
# Markdown, HTML and DOCX 2: a table's cells apart by tabs (1: " | " or the Markdown as written).
# HTML and DOCX 3: a '#' line is no heading (a script's comment in <pre>; chunked again).
# PDF 3: a list's bullet glyphs ("●", Word's Symbol-font bullet) read as "•": items again.
# HTML and DOCX 4: list items with the number or bullet drawn before them, a list one block.
# HTML 5: a table cell's paragraphs (Sphinx's, Asciidoctor's) on its row's line.
_TEXT_VERSIONS = {".pdf": 3, ".md": 2, ".markdown": 2, ".html": 5, ".htm": 5, ".docx": 4}


def text_version(path: str | Path) -> int:
    """The reading of this file's format that indexing uses now."""
    return _TEXT_VERSIONS.get(Path(path).suffix.lower(), 1)


def parse_file(path: str | Path, pdf_reader: str = "pdfium") -> ParsedDocument:
    """The pages of one document, chosen by extension; raises DocumentError. A PDF's text is
    PDFium's unless `pdf_reader` is "pypdf" (see pdf.PDF_READERS)."""
    path = Path(path)
    parser = _parser_for(path)
    if parser is None:
        raise DocumentError.of("unsupported", path, f"'{path.suffix or 'no extension'}'")
    if parser.__name__ == "parse_pdf":
        return cleaned(parser(path, pdf_reader))
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
