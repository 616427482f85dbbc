"""DOCX: paragraphs, headings ("Heading N" styles), list numbers and bullets (numbering.xml) and
tables from word/document.xml.

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
from engine.ingest.text import Sections, list_marker, number_or
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
            numbering = _xml_part(archive, "word/numbering.xml", path, required=False)
            core = _xml_part(archive, "docProps/core.xml", path, required=False)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError) as exc:
        raise DocumentError.of("invalid", path, f"{type(exc).__name__}: {exc}") from exc
    except OSError as exc:
        raise DocumentError.of("unreadable", path, exc.strerror or str(exc)) from exc
    reader = _BodyReader(_heading_levels(styles), _Numbering(numbering, styles), path.stem)
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

    def __init__(self, heading_levels: dict[str, int], numbering: _Numbering, fallback_title: str):
        self.sections = Sections(fallback_title)
        self.title = ""
        self._levels = heading_levels
        self._numbering = numbering
        self._in_list = False  # a list's items are one block: no blank line between them

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
        marker = self._numbering.marker(paragraph, style) if text else ""
        text = f"{marker} {text}" if marker else text
        level = self._levels.get(style) or _level_from_id(style)
        if marker and not level:
            self._in_list = True
            self.sections.add(text)
            return
        self._end_list()
        if text and level:
            self.sections.heading(level, text)
        elif text and style.lower() == "title" and not self.title:
            self.title = text
        if text:
            self.sections.add(text)
            self.sections.add_break()

    def _end_list(self) -> None:
        if self._in_list:
            self._in_list = False
            self.sections.add_break()

    def _table(self, table) -> None:
        self._end_list()
        for row in table.findall(f"{_W}tr"):
            cells = [" ".join(_paragraph_text(p).strip() for p in cell.iter(f"{_W}p")).strip()
                     for cell in row.findall(f"{_W}tc")]
            if any(cells):
                self.sections.add("\t".join(cells))  # cells apart, as a PDF's are: the lead reads a row
        self.sections.add_break()


_FORMATS = {"decimal": "1", "decimalZero": "1", "lowerLetter": "a", "upperLetter": "A", "lowerRoman": "i",
            "upperRoman": "I", "bullet": "bullet"}  # Word's numFmt -> list_marker's; "none" draws none
_LEVEL_NUMBER = re.compile(r"%([1-9])")


class _Numbering:
    """Word's list numbering (word/numbering.xml): the number or bullet Word draws before a
    paragraph, counted per list as Word counts (a level restarts under a new item above it)."""

    def __init__(self, numbering, styles):
        self._lists = _lists(numbering) if numbering is not None else {}
        self._by_style = {}  # a style that numbers its paragraphs ("List Number"): style id -> numPr
        for style in styles.iter(f"{_W}style") if styles is not None else ():
            number = style.find(f"{_W}pPr/{_W}numPr")
            if number is not None:
                self._by_style[style.get(f"{_W}styleId")] = number
        self._counts: dict[str, dict[int, int]] = {}

    def marker(self, paragraph, style_id: str) -> str:
        own, styled = paragraph.find(f"{_W}pPr/{_W}numPr"), self._by_style.get(style_id)
        if own is None and styled is None:
            return ""
        # what the paragraph leaves out its style gives ("List Number 2": its level, the list's id)
        list_id = _val(own, "numId", "") or _val(styled, "numId", "0")
        depth = number_or(_val(own, "ilvl", "") or _val(styled, "ilvl", "0"), 0)
        levels = self._lists.get(list_id, {})
        if depth not in levels:
            return ""
        counts = self._counts.setdefault(list_id, {})
        counts[depth] = counts.get(depth, levels[depth][2] - 1) + 1
        for deeper in [level for level in counts if level > depth]:
            del counts[deeper]
        numbering, text, _ = levels[depth]
        if numbering == "bullet":
            return list_marker("bullet", 0, depth)
        return _LEVEL_NUMBER.sub(lambda match: self._number(levels, counts, int(match.group(1)) - 1), text)

    @staticmethod
    def _number(levels: dict, counts: dict, level: int) -> str:
        if level not in levels:
            return ""
        numbering, _, start = levels[level]
        return list_marker(numbering, counts.get(level, start)) if numbering != "bullet" else ""


def _lists(numbering) -> dict[str, dict[int, tuple[str, str, int]]]:
    """numId -> {level: (numbering, text like "%1.%2.", start)}, with a list's restarts applied."""
    abstract = {}
    for definition in numbering.iter(f"{_W}abstractNum"):
        levels = {}
        for level in definition.findall(f"{_W}lvl"):
            fmt = _val(level, "numFmt", "decimal")
            if fmt != "none":
                levels[number_or(level.get(f"{_W}ilvl", "0"), 0)] = (
                    _FORMATS.get(fmt, "1"), _val(level, "lvlText", ""), number_or(_val(level, "start", "1"), 1))
        abstract[definition.get(f"{_W}abstractNumId")] = levels
    lists = {}
    for instance in numbering.iter(f"{_W}num"):
        levels = dict(abstract.get(_val(instance, "abstractNumId", ""), {}))
        for override in instance.findall(f"{_W}lvlOverride"):
            level, start = number_or(override.get(f"{_W}ilvl", "0"), 0), override.find(f"{_W}startOverride")
            if level in levels and start is not None:
                levels[level] = levels[level][:2] + (number_or(start.get(f"{_W}val", "1"), 1),)
        lists[instance.get(f"{_W}numId")] = levels
    return lists


def _val(element, child: str, default: str) -> str:
    found = element.find(f"{_W}{child}") if element is not None else None
    return found.get(f"{_W}val", default) if found is not None else default


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
