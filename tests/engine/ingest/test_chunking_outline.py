"""Heading paths from a PDF's outline (bookmarks): read by the PDF parser, carried through the
parse pool, and placed on the lines where their titles stand."""

from __future__ import annotations

import io

from engine.ingest import ParsePool
from engine.ingest.chunking import chunk_document
from engine.ingest.pdf import parse_pdf
from engine.types import OutlineEntry, Page, ParsedDocument
from tests.engine.ingest.test_chunking import prose, words
from tests.helpers.hostile_files import text_pdf


def outlined(pages: list[str], bookmarks: list[tuple[int, tuple[str, ...]]]) -> ParsedDocument:
    return ParsedDocument("manual.pdf", "Manual", tuple(Page(i + 1, t) for i, t in enumerate(pages)),
                          outline=tuple(OutlineEntry(page, path) for page, path in bookmarks))


def paths_of(doc: ParsedDocument) -> list[tuple[str, ...]]:
    return [c.heading_path for c in chunk_document(doc, words, target_tokens=40, overlap_tokens=0)]


def test_bookmarks_name_the_sections_where_their_titles_stand():
    body = prose(0, 2)
    doc = outlined(
        [f"Part III\nCommands\n{body}\nLogscale\n{body}\nGraph Border Encoding\n{body}",
         f"{body}\n3.2 Macros\n{body}\n3.2.1 Macro names\n{body}"],
        [(1, ("III Commands",)), (1, ("III Commands", "Set-show", "Logscale")),
         (2, ("III Commands", "Set-show", "Macros")), (2, ("III Commands", "Not on the page"))])
    assert paths_of(doc) == [
        ("III Commands",),  # "Part III" and "Commands" on two lines, as the title wraps
        ("III Commands", "Set-show", "Logscale"),  # a title-case line is no heading here
        ("III Commands", "Set-show", "Logscale"),
        ("III Commands", "Set-show", "Logscale"),  # the section carries on onto page 2
        ("III Commands", "Set-show", "Macros"),  # found after its section number
        ("III Commands", "Set-show", "Macros", "3.2.1 Macro names"),  # numbered, not bookmarked
    ]


def test_a_title_inside_a_sentence_is_not_where_its_section_starts():
    body = prose(0, 2)
    doc = outlined([f"Intro\n{body}\nTo draw on a log axis, see logscale\n{body}\nLogscale\n{body}"],
                   [(1, ("Intro",)), (1, ("Logscale",)), (1, ("Macros",))])
    chunks = chunk_document(doc, words, target_tokens=40, overlap_tokens=0)
    starts = {c.heading_path: c.text.split("\n")[0] for c in chunks}
    assert starts[("Logscale",)] == "Logscale"


def test_a_tiny_outline_leaves_the_headings_found_in_the_text():
    body = prose(0, 2)
    doc = outlined([f"2 Installing\n{body}\nSafety Instructions For Operators\n{body}"],
                   [(1, ("Pump Manual",))])
    assert paths_of(doc) == [("2 Installing",), ("2 Installing", "Safety Instructions For Operators")]


def with_outline(pdf: bytes, bookmarks: list[tuple[str, int, int | None]]) -> bytes:
    """`pdf` with bookmarks (title, page index, index of the parent bookmark or None)."""
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf)))
    made = []
    for title, page, parent in bookmarks:
        made.append(writer.add_outline_item(title=title, page_number=page,
                                            parent=made[parent] if parent is not None else None))
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def test_the_pdf_parser_reads_the_outline_with_each_bookmarks_parents(tmp_path):
    path = tmp_path / "pump.pdf"
    path.write_bytes(with_outline(
        text_pdf(["Contents", "Installation\nMount the pump.", "Wiring\nConnect the mains."]),
        [("Setting up", 1, None), ("Installation", 1, 0), ("Wiring", 2, 0), ("Index", 2, None)]))
    expected = (OutlineEntry(2, ("Setting up",)), OutlineEntry(2, ("Setting up", "Installation")),
                OutlineEntry(3, ("Setting up", "Wiring")), OutlineEntry(3, ("Index",)))
    assert parse_pdf(path).outline == expected
    with ParsePool(workers=1) as pool:  # the outline survives the trip from the worker
        assert pool.parse(path).outline == expected


def test_a_pdf_without_outline_has_none(tmp_path):
    path = tmp_path / "plain.pdf"
    path.write_bytes(text_pdf(["Installation\nMount the pump."]))
    assert parse_pdf(path).outline == ()
