"""Plain text and Markdown: decoding, blocks of lines, sections by heading."""

from __future__ import annotations

import codecs
import re
from pathlib import Path

from engine.errors import DocumentError
from engine.types import Page, ParsedDocument

LINES_PER_PAGE = 100  # a "page" of a text file: small enough to cite, big enough to chunk
HEADING_SEPARATOR = " > "

_BOMS = (  # UTF-32 first: its little-endian BOM starts with UTF-16's
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
# What editors save legacy text in, the most common first (it names a guess when several read
# the bytes alike). The detector's other code pages (DOS, Mac, rare ISO parts) made more wrong
# guesses than right ones in bench/bench_charset.py.
_LEGACY_ENCODINGS = (
    "cp1252", "latin_1", "iso8859_15", "cp1250", "iso8859_2", "cp1251", "koi8_r", "koi8_u",
    "iso8859_5", "cp1253", "iso8859_7", "cp1254", "iso8859_9", "cp1257", "iso8859_13", "cp1255",
    "iso8859_8", "cp1256", "iso8859_6", "cp1258", "cp874", "shift_jis", "cp932", "euc_jp",
    "gb2312", "gbk", "gb18030", "big5", "cp950", "euc_kr", "cp949",
)
# A pipe table's delimiter row ("|---|:--:|", "--- | ---"): at least one pipe, dashes in each cell.
_TABLE_DELIMITER = re.compile(r"^\s*\|?(\s*:?-+:?\s*\|)+\s*(:?-+:?)?\s*$")
_CELL_PIPE = re.compile(r"(?<!\\)\|")
_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-{2,})[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


# -- decoding -----------------------------------------------------------------------------
def decode_text(data: bytes, path: Path, declared: str | None = None) -> tuple[str, list[str]]:
    """The text of `data` and any warnings: a BOM wins, then `declared` (an HTML charset), then
    UTF-8; other bytes are read in charset-normalizer's guess, else as UTF-8 with undecodable
    bytes replaced. A guess or a replacement comes with a warning."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return _decode(data, encoding, path)
    if b"\x00" in data[:8192]:
        raise DocumentError.of("invalid", path, "it contains binary data; if it is UTF-16 "
                               "text without a byte-order mark, save it as UTF-8")
    encoding = _known_codec(declared)
    if encoding:
        return _decode(data, encoding, path)
    try:
        return data.decode("utf-8"), []
    except UnicodeDecodeError as exc:
        return _guessed(data, path) or _replaced(data, "utf-8", path, exc)


def _decode(data: bytes, encoding: str, path: Path) -> tuple[str, list[str]]:
    try:
        return data.decode(encoding), []
    except UnicodeDecodeError as exc:
        return _replaced(data, encoding, path, exc)


def _replaced(data: bytes, encoding: str, path: Path,
              exc: UnicodeDecodeError) -> tuple[str, list[str]]:
    warning = (f"'{path.name}' is not valid {encoding.upper()} (first bad byte at offset "
               f"{exc.start}); unreadable characters were replaced. Save it as UTF-8 "
               "to fix this.")
    return data.decode(encoding, errors="replace"), [warning]


def _guessed(data: bytes, path: Path) -> tuple[str, list[str]] | None:
    """`data` read in charset-normalizer's best guess, with a warning naming it; None when it
    has no confident guess."""
    from charset_normalizer import from_bytes  # imported here: ~30 ms that UTF-8 never needs

    match = from_bytes(data, cp_isolation=list(_LEGACY_ENCODINGS)).best()
    if match is None:
        return None
    warning = (f"'{path.name}' is not UTF-8; it was read as "
               f"{_encoding_name(match.could_be_from_charset)} (a guess). If characters look "
               "wrong, save it as UTF-8.")
    return data.decode(match.encoding), [warning]


def _encoding_name(alike: list[str]) -> str:
    """A name people know, for the most common of the encodings that read the bytes alike
    (to the detector, German text is as much Windows-1250 as Windows-1252)."""
    rank = {name: index for index, name in enumerate(_LEGACY_ENCODINGS)}
    codec = min(alike, key=lambda name: rank.get(name, len(rank)))
    if codec.startswith("cp"):
        return "Windows-" + codec[2:]
    if codec == "latin_1":
        return "ISO-8859-1"
    return codec.upper().replace("_", "-").replace("ISO8859", "ISO-8859")


def _known_codec(name: str | None) -> str | None:
    if not name:
        return None
    try:
        return codecs.lookup(name).name
    except LookupError:
        return None


def read_text(path: Path) -> tuple[str, list[str]]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DocumentError.of("unreadable", path, exc.strerror or str(exc)) from exc
    text, warnings = decode_text(data, path)
    if not text.strip():
        raise DocumentError.of("empty", path, "it contains no text")
    return text, warnings


def split_lines(text: str) -> list[str]:
    """Lines as an editor numbers them: str.splitlines would also split at form feeds,
    which old manuals use as page breaks, and the "lines 1-100" labels would drift."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return lines[:-1] if lines and lines[-1] == "" else lines


# -- plain text ---------------------------------------------------------------------------
def parse_text(path: str | Path) -> ParsedDocument:
    """A text file as pages of LINES_PER_PAGE lines, labelled "lines 1-100"."""
    path = Path(path)
    text, warnings = read_text(path)
    lines = split_lines(text)
    pages = []
    for index, start in enumerate(range(0, len(lines), LINES_PER_PAGE), 1):
        block = lines[start:start + LINES_PER_PAGE]
        if any(line.strip() for line in block):
            label = f"lines {start + 1}-{start + len(block)}"
            pages.append(Page(index, "\n".join(block), label))
    return ParsedDocument(str(path), path.stem, tuple(pages), tuple(warnings))


# -- Markdown -----------------------------------------------------------------------------
def parse_markdown(path: str | Path) -> ParsedDocument:
    """A Markdown file as one page per section; a section's label is its heading path."""
    path = Path(path)
    text, warnings = read_text(path)
    sections = Sections(path.stem)
    for line, heading in _markdown_lines(_without_front_matter(split_lines(text))):
        if heading is not None:
            sections.heading(*heading)
        sections.add(line)
    return sections.document(path, warnings)


def _markdown_lines(lines: list[str]):
    """Yields (line, (level, title) or None); a setext heading's underline is dropped, and a
    pipe table's rows are cells apart (tabs, as a PDF's cells are: the lead reads them as rows)
    without its delimiter row."""
    fence = None
    underline_next = in_table = False
    for index, line in enumerate(lines):
        if underline_next:
            underline_next = False
            continue
        fence, in_code = _fence_state(line, fence)
        following = lines[index + 1] if index + 1 < len(lines) else ""
        in_table = not in_code and "|" in line and (in_table or bool(_TABLE_DELIMITER.match(following)))
        if in_table:
            if not _TABLE_DELIMITER.match(line):
                yield table_row(line), None
            continue
        atx = None if in_code else _ATX.match(line)
        if atx:
            yield line, (len(atx.group(1)), (atx.group(2) or "").strip())
            continue
        underline = None if in_code else _SETEXT.match(following)
        if underline and _can_be_setext(line):
            underline_next = True
            yield line, (1 if underline.group(1)[0] == "=" else 2, line.strip())
            continue
        yield line, None


def table_row(line: str) -> str:
    """A pipe table's row as its cells apart by tabs: "| Cover screws | M6 |" -> "Cover screws\tM6"."""
    line = line.strip()
    line = line[1:] if line.startswith("|") else line
    line = line[:-1] if line.endswith("|") and not line.endswith("\\|") else line
    return "\t".join(cell.strip().replace("\\|", "|") for cell in _CELL_PIPE.split(line))


def _fence_state(line: str, fence: str | None) -> tuple[str | None, bool]:
    """The open fence's character after `line`, and whether `line` is code (fences included)."""
    match = _FENCE.match(line)
    if fence is None:
        return (match.group(1)[0], True) if match else (None, False)
    if match and match.group(1)[0] == fence:
        return None, True
    return fence, True


def _can_be_setext(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith(("-", "*", "+", ">", "#", "|"))


def _without_front_matter(lines: list[str]) -> list[str]:
    """YAML front matter (between --- lines at the very top) is metadata, not text."""
    if lines and lines[0].strip() == "---":
        for end in range(1, len(lines)):
            if lines[end].strip() in ("---", "..."):
                return lines[end + 1:]
    return lines


def list_marker(numbering: str, number: int, depth: int = 0) -> str:
    """A list item's number as a reader sees it ("3", "c", "iii", "C", "III"), or its bullet:
    "•", "◦" when nested (as PDF text reads them, engine.ingest.pdf_text)."""
    if numbering == "bullet":
        return "◦" if depth else "•"
    if numbering in ("a", "A") and 1 <= number <= 26:
        return chr(ord(numbering) + number - 1)
    if numbering in ("i", "I") and 1 <= number < 40:
        tens, ones = divmod(number, 10)
        roman = "x" * tens + ("", "i", "ii", "iii", "iv", "v", "vi", "vii", "viii", "ix")[ones]
        return roman if numbering == "i" else roman.upper()
    return str(number)


def number_or(text: str | None, default: int) -> int:
    """A list's number as a file wrote it (an HTML start=, a Word ilvl), or `default` where a
    damaged file has none."""
    try:
        return int(text) if text is not None else default
    except ValueError:
        return default


class Sections:
    """Collects lines into sections headed by a heading path; used for Markdown, HTML, DOCX."""

    def __init__(self, title: str):
        self.title = title
        self._first_heading = ""
        self._path: list[tuple[int, str]] = []
        self._lines: list[str] = []
        self._pages: list[Page] = []
        self._label = ""

    def heading(self, level: int, title: str) -> None:
        self._close()
        while self._path and self._path[-1][0] >= level:
            self._path.pop()
        self._path.append((level, title))
        self._label = HEADING_SEPARATOR.join(name for _, name in self._path)
        if level == 1 and not self._first_heading:
            self._first_heading = title

    def add(self, line: str) -> None:
        self._lines.append(line)

    def add_break(self) -> None:
        """A blank line between paragraphs, never two in a row."""
        if self._lines and self._lines[-1] != "":
            self._lines.append("")

    def document(self, path: Path, warnings: list[str], title: str = "") -> ParsedDocument:
        self._close()
        title = title or self._first_heading or self.title
        pages = tuple(page if page.label else Page(page.number, page.text, title)
                      for page in self._pages)
        return ParsedDocument(str(path), title, pages, tuple(warnings))

    def _close(self) -> None:
        text = "\n".join(self._lines).strip("\n")
        if text.strip():
            self._pages.append(Page(len(self._pages) + 1, text, self._label))
        self._lines = []
