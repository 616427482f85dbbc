"""Real PDFs with a text layer, drawn by Qt, for GUI and ingest tests."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from PySide6.QtCore import QMarginsF, QPointF
from PySide6.QtGui import QPageLayout, QPageSize, QPainter, QPdfWriter

# A range of printed page labels, as pypdf's PdfWriter.set_page_label takes it: first and last
# page index (0-based), style ("/D" decimal, "/r" roman, ...; None: the prefix alone), prefix,
# start number.
LabelRange = tuple[int, int, str | None, str | None, int]


def write_pdf(path: Path, pages: list[str], labels: Sequence[LabelRange] = ()) -> Path:
    """A real PDF with a text layer, one page per string (a line per sentence), drawn by Qt;
    with `labels`, its catalog also declares those printed page labels (/PageLabels)."""
    writer = QPdfWriter(str(path))
    writer.setPageLayout(QPageLayout(QPageSize(QPageSize.PageSizeId.A4), QPageLayout.Orientation.Portrait,
                                     QMarginsF(15, 15, 15, 15)))
    painter = QPainter(writer)
    try:
        for number, text in enumerate(pages):
            if number:
                writer.newPage()
            for line, sentence in enumerate(text.split(". ")):
                painter.drawText(QPointF(0, 300 * (line + 1)), sentence)
    finally:
        painter.end()
    if labels:
        label_pages(path, labels)
    return path


def label_pages(path: Path, labels: Sequence[LabelRange]) -> Path:
    """Rewrite the PDF at `path` with these printed page labels (Qt cannot write them)."""
    from pypdf import PdfWriter

    writer = PdfWriter(clone_from=str(path))
    for first, last, style, prefix, start in labels:
        writer.set_page_label(first, last, style=style, prefix=prefix, start=start)
    writer.write(str(path))
    return path
