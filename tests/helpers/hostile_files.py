"""Documents for the ingestion tests, written by hand as bytes: well-formed ones with known
text on known pages, and hostile or broken ones, each with the outcome it must end with."""

from __future__ import annotations

import io
import struct
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

GiB = 1024 ** 3

# -- building PDFs ------------------------------------------------------------------------


def build_pdf(objects: list[bytes], trailer: bytes = b"/Root 1 0 R", xref_loop: bool = False,
              ) -> bytes:
    """A PDF of `objects` (numbered from 1) with a correct xref table. With `xref_loop`,
    the trailer's /Prev points back at this same xref table."""
    out = bytearray(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    loop = b" /Prev %d" % xref if xref_loop else b""
    out += b"trailer\n<< /Size %d %s%s >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1, trailer, loop, xref)
    return bytes(out)


def stream(data: bytes, entries: bytes = b"") -> bytes:
    return b"<< /Length %d %s >>\nstream\n%s\nendstream" % (len(data), entries, data)


def _pdf_string(text: str) -> bytes:
    raw = text.encode("latin-1")
    return b"(" + raw.replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)") + b")"


def text_content(text: str) -> bytes:
    """A content stream showing `text` line by line in Helvetica."""
    lines = [b"BT /F1 12 Tf 14 TL 72 720 Td"]
    lines += [_pdf_string(line) + b" Tj T*" for line in text.split("\n")]
    lines.append(b"ET")
    return b"\n".join(lines)


def text_pdf(pages: list[str], title: str | None = None, page_tree: bytes | None = None,
             extra_objects: list[bytes] = (), page_entries: bytes = b"", **build) -> bytes:
    """One page per string. Objects: 1 catalog, 2 page tree, 3 font, then page and content
    pairs, then `extra_objects`, then the /Info dictionary if `title`. `page_entries` go
    into every page's dictionary."""
    return pages_pdf([text_content(text) for text in pages], b"Helvetica", title, page_tree,
                     extra_objects, page_entries, **build)


def pages_pdf(contents: list[bytes], font: bytes = b"Helvetica", title: str | None = None,
              page_tree: bytes | None = None, extra_objects: list[bytes] = (), page_entries: bytes = b"",
              **build) -> bytes:
    """One page per content stream, in one font (/F1): text_pdf's objects."""
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"",
               b"<< /Type /Font /Subtype /Type1 /BaseFont /%s >>" % font]
    kids = []
    for content in contents:
        kids.append(len(objects) + 1)
        objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] %s"
                       b"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>"
                       % (page_entries, len(objects) + 2))
        objects.append(stream(content))
    references = b" ".join(b"%d 0 R" % kid for kid in kids)
    objects[1] = page_tree or b"<< /Type /Pages /Kids [%s] /Count %d >>" % (references, len(kids))
    objects += extra_objects
    trailer = b"/Root 1 0 R"
    if title:
        objects.append(b"<< /Title %s >>" % _pdf_string(title))
        trailer += b" /Info %d 0 R" % len(objects)
    return build_pdf(objects, trailer, **build)


# -- the well-formed documents ------------------------------------------------------------

def table_pdf(path: Path, title: str, rows: list[list[str]], columns: tuple[float, ...] = (72, 260, 400)) -> Path:
    """One page: a title line, then a table whose cells start at the `columns` (points from
    the left), as a PDF maker lays tables out: no tab or space characters between the cells."""
    lines = [b"BT /F1 11 Tf 1 0 0 1 72 720 Tm " + _pdf_string(title) + b" Tj ET"]
    for number, row in enumerate(rows):
        y = 690 - 16 * number
        lines += [b"BT /F1 10 Tf 1 0 0 1 %d %d Tm %s Tj ET" % (x, y, _pdf_string(cell))
                  for x, cell in zip(columns, row)]
    path.write_bytes(pages_pdf([b"\n".join(lines)]))
    return path


def positioned_words_pdf(path: Path, pages: list[str], kern: int = 250) -> Path:
    """Pages whose words are set apart by position alone, as XeTeX's xdvipdfmx writes them:
    no space characters, each line one TJ array with a gap of `kern`/1000 em between words
    (Courier, where pypdf's text then runs the words together and PDFium's does not)."""
    def content(text: str) -> bytes:
        lines = [b"[" + (b" -%d " % kern).join(_pdf_string(word) for word in line.split()) + b"] TJ T*"
                 for line in text.split("\n")]
        return b"\n".join([b"BT /F1 10 Tf 12 TL 72 720 Td", *lines, b"ET"])

    path.write_bytes(pages_pdf([content(text) for text in pages], b"Courier"))
    return path


MANUAL_PAGES = [
    "Safety instructions\nDisconnect the mains supply before opening the cover.",
    "Installation\nMount the pump on a level concrete base.",
    "Maintenance\nReplace the impeller seal every 4000 operating hours.",
    "Troubleshooting\nError E42 means the pressure sensor is disconnected.",
]
MANUAL_TITLE = "Pump P-200 Service Manual"


def write_manual_pdf(folder: Path, name: str = "manual.pdf") -> Path:
    """A 4-page manual whose passages are known page by page (MANUAL_PAGES)."""
    path = folder / name
    path.write_bytes(text_pdf(MANUAL_PAGES, title=MANUAL_TITLE))
    return path


def write_long_pdf(folder: Path, pages: int = 8000) -> Path:
    """Many small pages: a read that takes pypdf about 10 s here (for the time limit)."""
    path = folder / "long.pdf"
    texts = [f"Page {number} of the long manual.\n" + "Filler text for timing. " * 20
             for number in range(1, pages + 1)]
    path.write_bytes(text_pdf(texts))
    return path


# -- deflate bombs ------------------------------------------------------------------------


class _Bits:
    """Packs bits as deflate does: fields from their low bit, Huffman codes from their high."""

    def __init__(self):
        self.value = 0
        self.count = 0

    def field(self, value: int, width: int) -> None:
        self.value |= value << self.count
        self.count += width

    def code(self, value: int, width: int) -> None:
        self.field(int(f"{value:0{width}b}"[::-1], 2), width)

    def bytes(self) -> bytes:
        return self.value.to_bytes((self.count + 7) // 8, "little")


def _copy_258(bits: _Bits) -> None:
    bits.code(0xC0 + 285 - 280, 8)  # length 258 (fixed code for symbol 285)
    bits.code(0, 5)  # distance 1


def deflate_bomb(size: int) -> tuple[bytes, int]:
    """Raw deflate data that inflates to about `size` spaces, and the exact size: one
    fixed-Huffman block of a space followed by copies of 258 bytes at distance 1.
    13 bytes hold 8 copies, so it is built in no time whatever the size."""
    head = _Bits()
    head.field(1, 1)  # the final block
    head.field(1, 2)  # fixed Huffman codes
    head.code(0x30 + ord(" "), 8)
    _copy_258(head)  # 24 bits: what follows starts on a byte
    group = _Bits()
    for _ in range(8):
        _copy_258(group)
    tail = _Bits()
    tail.code(0, 7)  # end of block
    groups = max(0, (size - 259) // (8 * 258))
    data = head.bytes() + group.bytes() * groups + tail.bytes()
    return data, 1 + 258 * (1 + 8 * groups)


def zlib_bomb(size: int) -> tuple[bytes, int]:
    """deflate_bomb in a zlib wrapper (as PDF's FlateDecode wants), with its Adler-32."""
    data, inflated = deflate_bomb(size)
    a = (1 + 32 * inflated) % 65521
    b = (inflated + 32 * inflated * (inflated + 1) // 2) % 65521
    return b"\x78\x01" + data + struct.pack(">I", (b << 16) | a), inflated


def _spaces_crc32(size: int) -> int:
    block = b" " * (16 * 1024 * 1024)
    crc = 0
    for start in range(0, size, len(block)):
        crc = zlib.crc32(block[:min(len(block), size - start)], crc)
    return crc


def write_zip(path: Path, entries: list[tuple[str, bytes, int, int]]) -> None:
    """A zip of (name, deflated data, CRC-32, declared uncompressed size) entries."""
    out, central = bytearray(), bytearray()
    for name, data, crc, size in entries:
        raw = name.encode()
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 8, 0, 0x21,
                               crc, len(data), size, len(raw), 0, 0, 0, 0, 0, len(out)) + raw
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0x21, crc, len(data), size,
                           len(raw), 0) + raw + data
    out += central + struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(entries), len(entries),
                                 len(central), len(out), 0)
    path.write_bytes(bytes(out))


# -- DOCX ---------------------------------------------------------------------------------

W_NS = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"


def docx_paragraph(text: str, style: str = "", number: tuple[int, int] | None = None) -> str:
    """A paragraph; `number` (list id, level) makes it an item of a list in docx_numbering."""
    props = f'<w:pStyle w:val="{style}"/>' if style else ""
    if number:
        props += f'<w:numPr><w:ilvl w:val="{number[1]}"/><w:numId w:val="{number[0]}"/></w:numPr>'
    props = f"<w:pPr>{props}</w:pPr>" if props else ""
    return f"<w:p>{props}<w:r><w:t xml:space=\"preserve\">{text}</w:t></w:r></w:p>"


def docx_numbering(lists: dict[int, list[tuple[str, str]]], restarts: dict[int, tuple[int, int]] = None) -> str:
    """word/numbering.xml: list id -> its levels' (numFmt, lvlText), each level starting at 1;
    `restarts`: a list id -> (the list it copies, the number its first level starts at)."""
    defined = "".join(
        f'<w:abstractNum w:abstractNumId="{list_id}">' + "".join(
            f'<w:lvl w:ilvl="{level}"><w:start w:val="1"/><w:numFmt w:val="{fmt}"/><w:lvlText w:val="{text}"/></w:lvl>'
            for level, (fmt, text) in enumerate(levels)) + "</w:abstractNum>"
        for list_id, levels in lists.items())
    instances = "".join(f'<w:num w:numId="{list_id}"><w:abstractNumId w:val="{list_id}"/></w:num>' for list_id in lists)
    instances += "".join(f'<w:num w:numId="{list_id}"><w:abstractNumId w:val="{copied}"/><w:lvlOverride w:ilvl="0">'
                         f'<w:startOverride w:val="{start}"/></w:lvlOverride></w:num>'
                         for list_id, (copied, start) in (restarts or {}).items())
    return f'<w:numbering xmlns:w="{W_NS}">{defined}{instances}</w:numbering>'



def docx_table(rows: list[list[str]]) -> str:
    cells = "".join("<w:tr>" + "".join(f"<w:tc>{docx_paragraph(cell)}</w:tc>" for cell in row)
                    + "</w:tr>" for row in rows)
    return f"<w:tbl>{cells}</w:tbl>"


def docx_document(body: str) -> str:
    return (f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
            f'<w:document xmlns:w="{W_NS}"><w:body>{body}<w:sectPr/></w:body></w:document>')


def write_docx(path: Path, body: str, title: str = "", padding: int = 0, numbering: str = "",
               styles: str = "") -> Path:
    """A minimal Word document; style ids H1/H2 are named "heading 1"/"heading 2" (as a
    localised Word would do), `padding` spaces bloat document.xml, `numbering` is numbering.xml,
    `styles` more <w:style> elements."""
    styles = (f'<w:styles xmlns:w="{W_NS}">'
              '<w:style w:type="paragraph" w:styleId="H1"><w:name w:val="heading 1"/></w:style>'
              '<w:style w:type="paragraph" w:styleId="H2"><w:name w:val="heading 2"/></w:style>'
              '<w:style w:type="paragraph" w:styleId="Title"><w:name w:val="Title"/></w:style>'
              f"{styles}</w:styles>")
    core = ('<cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/'
            'metadata/core-properties" xmlns:dc="http://purl.org/dc/elements/1.1/">'
            f"<dc:title>{title}</dc:title></cp:coreProperties>")
    document = docx_document(body + " " * padding)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr("word/document.xml", document)
        archive.writestr("word/styles.xml", styles)
        if numbering:
            archive.writestr("word/numbering.xml", numbering)
        if title:
            archive.writestr("docProps/core.xml", core)
    return path


# -- the hostile and broken files ---------------------------------------------------------


def flate_bomb_pdf(folder: Path) -> Path:
    """One page whose content stream is 13 MB that inflates to 2 GiB."""
    data, _ = zlib_bomb(2 * GiB)
    path = folder / "flate-bomb.pdf"
    path.write_bytes(text_pdf(["placeholder"]).replace(
        stream(text_content("placeholder")), stream(data, b"/Filter /FlateDecode")))
    return path


def flate_bomb_on_page_two_pdf(folder: Path) -> Path:
    """Page 1 has text; page 2's content stream is a flate bomb."""
    data, _ = zlib_bomb(2 * GiB)
    path = folder / "bomb-on-page-2.pdf"
    path.write_bytes(text_pdf(["First page text.", "second"]).replace(
        stream(text_content("second")), stream(data, b"/Filter /FlateDecode")))
    return path


def cyclic_page_tree_pdf(folder: Path) -> Path:
    """The root page tree's kid is a page tree whose kids include the root again."""
    path = folder / "cyclic-page-tree.pdf"
    tree = b"<< /Type /Pages /Kids [6 0 R] /Count 2 >>"
    inner = b"<< /Type /Pages /Parent 2 0 R /Kids [2 0 R 4 0 R] /Count 2 >>"
    path.write_bytes(text_pdf(["In a loop."], page_tree=tree, extra_objects=[inner]))
    return path


def xref_loop_pdf(folder: Path) -> Path:
    path = folder / "xref-loop.pdf"
    path.write_bytes(text_pdf(["Text behind an xref loop."], xref_loop=True))
    return path


def truncated_pdf(folder: Path) -> Path:
    """The manual cut off before its second page's content: no xref, no trailer."""
    data = text_pdf(MANUAL_PAGES)
    path = folder / "truncated.pdf"
    path.write_bytes(data[:data.index(b"Installation")])
    return path


def empty_pdf(folder: Path) -> Path:
    path = folder / "empty.pdf"
    path.write_bytes(b"")
    return path


def not_a_pdf(folder: Path) -> Path:
    path = folder / "photo.pdf"
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40)
    return path


def encrypted_pdf(folder: Path, algorithm: str = "RC4-128", user_password: str = "secret",
                  ) -> Path:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(text_pdf(MANUAL_PAGES))))
    writer.encrypt(user_password=user_password, owner_password="owner", algorithm=algorithm)
    label = "owner-only" if not user_password else "locked"
    path = folder / f"{label}-{algorithm.lower()}.pdf"
    with path.open("wb") as file:
        writer.write(file)
    return path


def deep_array_pdf(folder: Path, depth: int = 200_000) -> Path:
    """The page's dictionary holds an array nested 200,000 deep."""
    path = folder / "deep-array.pdf"
    deep = b"/Deep " + b"[" * depth + b"]" * depth + b" "
    path.write_bytes(text_pdf(["Deep below."], page_entries=deep))
    return path


def scanned_pdf(folder: Path, texts: tuple[str | None, ...] = (None, None),
                name: str = "scanned.pdf") -> Path:
    """Pages that draw an 8x8 grey image, as a scanner without OCR writes them; where
    `texts` has a string instead of None, that page has text and no image."""
    image = stream(bytes(range(0, 256, 4)), b"/Type /XObject /Subtype /Image /Width 8 "
                   b"/Height 8 /ColorSpace /DeviceGray /BitsPerComponent 8")
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"", image,
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    kids = []
    for text in texts:
        kids.append(len(objects) + 1)
        objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources "
                       b"<< /XObject << /Im1 3 0 R >> /Font << /F1 4 0 R >> >> /Contents %d 0 R >>"
                       % (len(objects) + 2))
        drawing = text_content(text) if text is not None else b"q 400 0 0 600 100 100 cm /Im1 Do Q"
        objects.append(stream(drawing))
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (
        b" ".join(b"%d 0 R" % kid for kid in kids), len(kids))
    path = folder / name
    path.write_bytes(build_pdf(objects))
    return path


def zip_bomb_docx(folder: Path) -> Path:
    """word/document.xml: 6 MB that truthfully declares 1 GiB (about 160 to 1)."""
    data, size = deflate_bomb(GiB)
    path = folder / "zip-bomb.docx"
    write_zip(path, [("word/document.xml", data, _spaces_crc32(size), size)])
    return path


def ratio_bomb_docx(folder: Path) -> Path:
    """Under the size limit (50 MB) but compressed about 1000 to 1."""
    return write_docx(folder / "ratio-bomb.docx", docx_paragraph("Hello"), padding=50_000_000)


def huge_text(folder: Path) -> Path:
    """A 1 GiB text file, written sparse: it must be refused by its size alone."""
    path = folder / "huge.txt"
    with path.open("wb") as file:
        file.truncate(GiB)
    return path


@dataclass(frozen=True)
class Hostile:
    make: object  # (folder) -> Path
    status: str  # "ready", "ready_with_warnings" or "failed"
    kind: str = ""  # DocumentError.kind when failed
    reason: str = ""  # a fragment the reason must contain


HOSTILE = {
    "flate bomb": Hostile(flate_bomb_pdf, "failed", "too_large", "too large"),
    "flate bomb on page 2": Hostile(flate_bomb_on_page_two_pdf, "ready_with_warnings",
                                    reason="page 2 skipped: too large"),
    "cyclic page tree": Hostile(cyclic_page_tree_pdf, "failed", "invalid"),
    "xref loop": Hostile(xref_loop_pdf, "ready"),
    "truncated": Hostile(truncated_pdf, "failed", "invalid"),
    "empty file": Hostile(empty_pdf, "failed", "empty"),
    "not a PDF": Hostile(not_a_pdf, "failed", "invalid"),
    "encrypted RC4": Hostile(encrypted_pdf, "failed", "encrypted", "password"),
    "encrypted AES-256": Hostile(lambda folder: encrypted_pdf(folder, "AES-256"),
                                 "failed", "encrypted", "password"),
    "owner password only": Hostile(lambda folder: encrypted_pdf(folder, "AES-256", ""), "ready"),
    # pypdf recursed to its limit in the page's dictionary; PDFium reads the page's text
    "200,000-deep array": Hostile(deep_array_pdf, "ready"),
    "scanned only": Hostile(scanned_pdf, "failed", "no_text", "no text layer"),
    "zip-bomb DOCX": Hostile(zip_bomb_docx, "failed", "too_large", "1,024 MB"),
    "ratio-bomb DOCX": Hostile(ratio_bomb_docx, "failed", "too_large", "to 1"),
    "1 GB text": Hostile(huge_text, "failed", "too_large", "1,024 MB"),
}
