"""DOCX: paragraphs, headings ("Heading N" styles) and tables from word/document.xml.

Zip bombs are refused before anything is inflated: each part we read must declare at most
MAX_PART_BYTES uncompressed, and a part over RATIO_CHECK_BYTES must compress at most
MAX_RATIO to 1 (real Word XML is around 10:1, a bomb around 1000:1). The read itself is
bounded too, in case the declared sizes lie.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

from engine.errors import DocumentError
from engine.ingest.text import Sections
from engine.types import ParsedDocument

MAX_PART_BYTES = 128 * 1024 * 1024
RATIO_CHECK_BYTES = 1024 * 1024
MAX_RATIO = 200

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_DC_TITLE = "{http://purl.org/dc/elements/1.1/}title"
_HEADING_STYLE = re.compile(r"^heading\s*([1-9])$", re.IGNORECASE)


def parse_docx(path: str | Path) -> ParsedDocument:
    """A Word document as one page per heading section, labelled with the heading path."""
    path = Path(path)
    try:
        with zipfile.ZipFile(path) as archive:
            document_xml = _xml_part(archive, "word/document.xml", path)
            styles = _xml_part(archive, "word/styles.xml", path, required=False)
            core = _xml_part(archive, "docProps/core.xml", path, required=False)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError) as exc:
        raise DocumentError.of("invalid", path, f"{type(exc).__name__}: {exc}") from exc
    except OSError as exc:
        raise DocumentError.of("unreadable", path, exc.strerror or str(exc)) from exc
    reader = _BodyReader(_heading_levels(styles), path.stem)
    reader.read(document_xml.find(f"{_W}body"))
    document = reader.sections.document(path, [], _core_title(core) or reader.title)
    if not document.pages:
        raise DocumentError.of("empty", path, "it has no text")
    return document


# -- the zip ------------------------------------------------------------------------------
def _xml_part(archive: zipfile.ZipFile, name: str, path: Path, required: bool = True):
    try:
        info = archive.getinfo(name)
    except KeyError:
        if required:
            raise DocumentError.of("invalid", path, f"it has no {name}") from None
        return None
    _check_sizes(info, path)
    with archive.open(info) as part:
        data = part.read(MAX_PART_BYTES + 1)
    if len(data) > MAX_PART_BYTES:
        raise DocumentError.of("too_large", path, f"{name} inflates beyond {_mb(MAX_PART_BYTES)}")
    if b"<!DOCTYPE" in data or b"<!ENTITY" in data:  # Word never writes them; entity bombs do
        raise DocumentError.of("invalid", path, f"{name} declares a DOCTYPE")
    try:
        return ET.fromstring(data)
    except ET.ParseError as exc:
        raise DocumentError.of("invalid", path, f"{name}: {exc}") from exc


def _check_sizes(info: zipfile.ZipInfo, path: Path) -> None:
    if info.file_size > MAX_PART_BYTES:
        raise DocumentError.of("too_large", path, f"{info.filename} would inflate to "
                               f"{_mb(info.file_size)}, over the {_mb(MAX_PART_BYTES)} limit")
    ratio = info.file_size / max(info.compress_size, 1)
    if info.file_size > RATIO_CHECK_BYTES and ratio > MAX_RATIO:
        raise DocumentError.of("too_large", path, f"{info.filename} is compressed {ratio:.0f} "
                               f"to 1, which only zip bombs do")


def _mb(size: int) -> str:
    return f"{size / (1024 * 1024):,.0f} MB"


# -- styles and metadata ------------------------------------------------------------------
def _heading_levels(styles) -> dict[str, int]:
    """Style id -> heading level, from style names ("heading 1"; ids vary by language)."""
    levels = {}
    if styles is None:
        return levels
    for style in styles.iter(f"{_W}style"):
        name = style.find(f"{_W}name")
        match = _HEADING_STYLE.match(name.get(f"{_W}val", "") if name is not None else "")
        style_id = style.get(f"{_W}styleId")
        if match and style_id:
            levels[style_id] = int(match.group(1))
    return levels


def _core_title(core) -> str:
    title = core.find(_DC_TITLE) if core is not None else None
    return (title.text or "").strip() if title is not None else ""


# -- the body -----------------------------------------------------------------------------
class _BodyReader:
    """Walks the body in order: paragraphs, headings and tables (one line per row)."""

    def __init__(self, heading_levels: dict[str, int], fallback_title: str):
        self.sections = Sections(fallback_title)
        self.title = ""
        self._levels = heading_levels

    def read(self, container) -> None:
        if container is None:
            return
        for element in container:
            if element.tag == f"{_W}p":
                self._paragraph(element)
            elif element.tag == f"{_W}tbl":
                self._table(element)
            elif element.tag in (f"{_W}sdt", f"{_W}customXml", f"{_W}sdtContent"):
                self.read(element)  # content controls wrap ordinary body content

    def _paragraph(self, paragraph) -> None:
        text = _paragraph_text(paragraph).strip()
        style = _style_id(paragraph)
        level = self._levels.get(style) or _level_from_id(style)
        if text and level:
            self.sections.heading(level, text)
        elif text and style.lower() == "title" and not self.title:
            self.title = text
        if text:
            self.sections.add(text)
            self.sections.add_break()

    def _table(self, table) -> None:
        for row in table.findall(f"{_W}tr"):
            cells = [" ".join(_paragraph_text(p).strip() for p in cell.iter(f"{_W}p")).strip()
                     for cell in row.findall(f"{_W}tc")]
            if any(cells):
                self.sections.add("\t".join(cells))  # cells apart, as a PDF's are: the lead reads a row
        self.sections.add_break()


def _style_id(paragraph) -> str:
    style = paragraph.find(f"{_W}pPr/{_W}pStyle")
    return style.get(f"{_W}val", "") if style is not None else ""


def _level_from_id(style_id: str) -> int:
    """Without styles.xml, Word's English ids ("Heading1") still say the level."""
    match = _HEADING_STYLE.match(style_id)
    return int(match.group(1)) if match else 0


def _paragraph_text(paragraph) -> str:
    parts = []
    for node in paragraph.iter():
        if node.tag == f"{_W}t":
            parts.append(node.text or "")
        elif node.tag == f"{_W}tab":
            parts.append("\t")
        elif node.tag in (f"{_W}br", f"{_W}cr"):
            parts.append("\n")
        elif node.tag == f"{_W}noBreakHyphen":
            parts.append("-")
    return "".join(parts)
