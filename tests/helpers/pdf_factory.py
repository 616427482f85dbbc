"""Real PDFs with a text layer, drawn by Qt, for GUI tests."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QMarginsF, QPointF
from PySide6.QtGui import QPageLayout, QPageSize, QPainter, QPdfWriter


def write_pdf(path: Path, pages: list[str]) -> Path:
    """A real PDF with a text layer, one page per string (a line per sentence), drawn by Qt."""
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
    return path
