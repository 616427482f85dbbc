"""What PDFium (pypdfium2) reads of a PDF: each page's raw text, the outline, the page labels
and the title. engine.ingest.pdf decides what to do with them; this module only reads.

    with PdfiumFile.open(path, page_count=None) as pdf:   # None: PDFium cannot open the file
        pdf.page_count, pdf.raw_text(index), pdf.labels(), pdf.outline(), pdf.title()

Measured on gnuplot.pdf (311 pages): pypdf spent 2.6 s flattening the page tree before it read
a word (its page count, labels and outline all need it); PDFium opens, counts and reads the
text of every page in 0.9 s. So PDFium reads the structure too, and pypdf is opened only for
what PDFium cannot do (see pdf.py).
"""

from __future__ import annotations

import logging
from pathlib import Path

from engine.errors import DocumentError
from engine.types import OutlineEntry

log = logging.getLogger(__name__)

# PDFium's FPDF_GetLastError codes (fpdfview.h) that say something to the person
_PASSWORD, _SECURITY = 4, 5
# A space wider than this many ems sets apart a table's cells (or a term and its description),
# not words: a justified line stretches its spaces to about half an em at most.
CELL_GAP_EM = 1.0


class PdfiumFile:
    """An open PDF in PDFium. Use it in a `with` block: PDFium's handles are freed on exit."""

    def __init__(self, document, path: Path):
        self._document = document
        self.path = path
        self.page_count = len(document)

    @classmethod
    def open(cls, path: Path) -> "PdfiumFile | None":
        """The file opened, with the empty password when that works; None when PDFium cannot
        open it (pypdf then reads it, and says why when it cannot either). A password or an
        unsupported encryption raises DocumentError."""
        import pypdfium2

        try:
            return cls(pypdfium2.PdfDocument(str(path)), path)
        except pypdfium2.PdfiumError as exc:
            if exc.err_code == _PASSWORD:
                raise DocumentError.of("encrypted", path, "a password is needed to open it") from exc
            if exc.err_code == _SECURITY:
                raise DocumentError.of("encrypted", path, "unsupported encryption") from exc
            log.info("%s: PDFium cannot open it (%s); pypdf reads it", path.name, exc)
            return None

    def __enter__(self) -> "PdfiumFile":
        return self

    def __exit__(self, *exc) -> None:
        self._document.close()

    def raw_text(self, index: int) -> str | None:
        """Page `index`'s text as PDFium gives it (lines end in "\\r\\n"), with a tab for each
        space as wide as a table's gap between cells (one character for one, so offsets stay
        PDFium's); None when PDFium cannot load the page."""
        import pypdfium2

        try:
            page = self._document[index]
        except pypdfium2.PdfiumError:
            return None
        try:
            textpage = page.get_textpage()
            try:
                return _cells_apart(textpage, textpage.get_text_range())
            finally:
                textpage.close()
        except pypdfium2.PdfiumError:
            return None
        finally:
            page.close()

    def labels(self, max_chars: int) -> dict[int, str]:
        """{physical page: printed label} for the pages whose label differs from their number;
        a damaged label tree only costs the labels."""
        found = {}
        try:
            for index in range(self.page_count):
                label = " ".join(self._document.get_page_label(index).split())
                if label and label != str(index + 1) and len(label) <= max_chars:
                    found[index + 1] = label
        except Exception as exc:  # what pypdfium2 raises on odd label trees is not documented
            log.info("%s: page labels unreadable (%s); page numbers instead", self.path.name, exc)
            return {}
        return found

    def outline(self, max_entries: int, max_depth: int) -> tuple[OutlineEntry, ...]:
        """The bookmarks that point to a page, in outline order, each with the titles above it;
        a damaged outline only costs the headings."""
        try:
            return self._outline(max_entries, max_depth)
        except Exception as exc:  # as for the labels
            log.info("%s: outline unreadable (%s); headings from the text", self.path.name, exc)
            return ()

    def _outline(self, max_entries: int, max_depth: int) -> tuple[OutlineEntry, ...]:
        entries: list[OutlineEntry] = []
        above: list[str] = []
        for bookmark in self._document.get_toc(max_depth=max_depth):
            if len(entries) >= max_entries:
                break
            title = " ".join(bookmark.get_title().split())
            del above[bookmark.level:]
            above.extend([""] * (bookmark.level - len(above)))
            above.append(title)
            dest = bookmark.get_dest()
            index = dest.get_index() if dest is not None else None
            if title and index is not None and 0 <= index < self.page_count:
                entries.append(OutlineEntry(index + 1, tuple(t for t in above if t)))
        return tuple(entries)

    def title(self) -> str:
        try:
            title = self._document.get_metadata_value("Title")
        except Exception:  # damaged metadata only costs the title
            title = ""
        return " ".join(title.split())


def _cells_apart(textpage, text: str) -> str:
    """`text` with a tab for each space between two characters further apart than CELL_GAP_EM
    of the font's size: the cells of a table row, a term and its description. Left as it is
    where PDFium's text does not count its characters one for one (rare)."""
    import pypdfium2.raw as pdfium_c

    if len(text) != textpage.count_chars() or " " not in text:
        return text
    chars = list(text)
    for at in range(1, len(text) - 1):
        if text[at] != " " or text[at - 1].isspace() or text[at + 1].isspace():
            continue
        gap = textpage.get_charbox(at + 1)[0] - textpage.get_charbox(at - 1)[2]
        if gap > CELL_GAP_EM * pdfium_c.FPDFText_GetFontSize(textpage, at - 1):
            chars[at] = "\t"
    return "".join(chars)
