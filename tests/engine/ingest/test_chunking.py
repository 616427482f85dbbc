"""Structure-aware chunking: spans, sizes, headings, kept-together blocks, boilerplate, overlap."""

from __future__ import annotations

import statistics
import time

import pytest

from engine.ingest.chunking import boilerplate_keys, chunk_document, line_key
from engine.types import Chunk, Page, ParsedDocument


def words(text: str) -> int:
    """A token counter for tests: one token per word (additive at whitespace, like WordPiece)."""
    return len(text.split())


PARTS = ["pump", "valve", "filter", "motor", "gauge", "hose", "seal"]
ACTIONS = ["checks", "cleans", "tests", "replaces", "inspects"]


def sentence(i: int) -> str:
    part, action = PARTS[i % len(PARTS)], ACTIONS[i % len(ACTIONS)]
    return f"Step {i} of the procedure {action} the {part} and writes the value in the log."


def prose(first: int, count: int) -> str:
    return " ".join(sentence(i) for i in range(first, first + count))


def pdf(*texts: str) -> ParsedDocument:
    return ParsedDocument("manual.pdf", "Manual", tuple(Page(i + 1, t) for i, t in enumerate(texts)))


def chunk(doc: ParsedDocument, **sizes) -> list[Chunk]:
    return chunk_document(doc, words, **sizes)


def assert_spans_exact(doc: ParsedDocument, chunks: list[Chunk]) -> None:
    texts = {page.number: page.text for page in doc.pages}
    for c in chunks:
        assert texts[c.page][c.start:c.end] == c.text == c.text.strip() != ""


def uncovered(doc: ParsedDocument, chunks: list[Chunk]) -> str:
    """The page text that no chunk holds, whitespace removed."""
    left = []
    for page in doc.pages:
        covered = [False] * len(page.text)
        for c in (c for c in chunks if c.page == page.number):
            covered[c.start:c.end] = [True] * (c.end - c.start)
        left += [ch for ch, hit in zip(page.text, covered) if not hit and not ch.isspace()]
    return "".join(left)


# -- spans and sizes ------------------------------------------------------------------------
def test_spans_are_exact_slices_and_cover_all_text():
    doc = pdf(prose(0, 40), "1 Safety\n" + prose(100, 25) + "\n\n" + prose(200, 30))
    chunks = chunk(doc, target_tokens=100, overlap_tokens=20)
    assert_spans_exact(doc, chunks)
    assert uncovered(doc, chunks) == ""
    assert [c.page for c in chunks] == sorted(c.page for c in chunks)


def test_chunk_sizes_stay_within_target_plus_min_tokens():
    # the bound: target_tokens, plus a merged tail smaller than min_tokens at most
    doc = pdf(*(prose(i * 50, 50) + "\nDone." for i in range(3)))
    chunks = chunk(doc, target_tokens=100, overlap_tokens=20, min_tokens=8)
    sizes = [words(c.text) for c in chunks]
    assert max(sizes) <= 108
    assert statistics.median(sizes) >= 70  # packed, not one sentence each
    assert min(sizes) >= 8


def test_sentences_are_kept_whole_when_a_paragraph_is_too_big():
    doc = pdf(prose(0, 60))
    chunks = chunk(doc, target_tokens=80, overlap_tokens=16)
    assert len(chunks) > 5
    assert all(c.text.endswith(".") for c in chunks)


def test_a_block_without_sentences_is_split_at_words():
    doc = pdf(" ".join(f"word{i}" for i in range(1000)))
    chunks = chunk(doc, target_tokens=100, overlap_tokens=10)
    assert all(words(c.text) <= 100 for c in chunks)
    assert uncovered(doc, chunks) == ""


def test_a_word_longer_than_a_chunk_is_cut():
    doc = pdf("x" * 5000)
    chunks = chunk_document(doc, lambda t: len(t), target_tokens=256, overlap_tokens=0)
    assert all(len(c.text) <= 256 for c in chunks)
    assert "".join(c.text for c in chunks) == "x" * 5000


# -- headings ---------------------------------------------------------------------------------
def test_numbered_and_title_case_headings_make_the_path_across_pages():
    body = prose(0, 2)
    doc = pdf(
        f"2 Installing\n{body}\n2.3 Installing packages\n{body}\n"
        f"Safety Instructions For Operators\n{body}",
        f"{body}\n2.4 Removing packages\n{body}\n3 Servicing\n{body}",
    )
    paths = [c.heading_path for c in chunk(doc, target_tokens=40, overlap_tokens=5)]
    assert paths == [
        ("2 Installing",),
        ("2 Installing", "2.3 Installing packages"),
        ("2 Installing", "2.3 Installing packages", "Safety Instructions For Operators"),
        ("2 Installing", "2.3 Installing packages", "Safety Instructions For Operators"),
        ("2 Installing", "2.4 Removing packages"),
        ("3 Servicing",),
    ]


def test_lines_that_only_look_like_headings_are_not_headings():
    doc = pdf(
        "1 Usage\nThe pump holds\n3 litres of oil in its sump when it is full.\n"
        "1. Open the lid.\n# compute the mean\nx <- mean(y)\n"
        "Name Size Weight\n10 20 30\nContents . . . . . . . 4\n" + prose(0, 3)
    )
    assert {c.heading_path for c in chunk(doc, target_tokens=200)} == {("1 Usage",)}


def test_markdown_headings_under_the_page_label():
    doc = ParsedDocument("guide.md", "Guide", (
        Page(1, "## Setup\n" + prose(0, 3) + "\n\n### Linux\n" + prose(10, 3), "Guide > Setup"),
        Page(2, "## Use\n" + prose(20, 2), "Guide > Use"),
    ))
    paths = [c.heading_path for c in chunk(doc, target_tokens=50, overlap_tokens=0)]
    assert paths == [("Guide", "Setup"), ("Guide", "Setup", "Linux"), ("Guide", "Use")]


@pytest.mark.parametrize("path, headed", [("guide.md", True), ("notes.txt", True),
                                          ("help.html", False), ("notes.docx", False)])
def test_hash_lines_are_headings_in_markdown_and_text_only(path, headed):
    """In HTML's <pre> and Word, a '#' line is a script's comment, as in apcupsd's manual."""
    page = Page(1, prose(0, 3) + "\n# Now halt or reboot.\nhalt -p\n" + prose(10, 3), "Guide > Shutdown")
    paths = {c.heading_path for c in chunk(ParsedDocument(path, "Guide", (page,)), target_tokens=50)}
    assert (("Guide", "Shutdown", "Now halt or reboot.") in paths) is headed
    assert ("Guide", "Shutdown") in paths


def test_location_labels_and_pdf_labels_are_not_headings():
    text = ParsedDocument("notes.txt", "notes", (Page(1, prose(0, 3), "lines 1-100"),))
    assert chunk(text)[0].heading_path == ()
    labelled_pdf = ParsedDocument("m.pdf", "m", (Page(1, prose(0, 3), "iv"),))
    assert chunk(labelled_pdf)[0].heading_path == ()


# -- blocks kept together -----------------------------------------------------------------------
STEPS = ("Steps to follow:\n1. Open the lid of the pump housing.\n2. Remove the old filter.\n"
         "3. Insert the new filter cartridge.\n4. Close the lid and tighten all the screws.")
CODE = "```python\ndef check(pump):\n    return pump.pressure > 2\n```"
TABLE = "Name      Size    Weight\nPump A    10 cm   2 kg\nPump B    12 cm   3 kg"


def test_lists_code_and_tables_are_not_split_when_they_fit():
    page = "\n\n".join([prose(0, 2), STEPS, prose(10, 1), CODE, prose(20, 1), TABLE,
                        prose(30, 2)])
    doc = pdf(page)
    chunks = chunk(doc, target_tokens=40, overlap_tokens=0)
    for block in (STEPS.split("\n", 1)[1], CODE, TABLE):
        assert sum(block in c.text for c in chunks) == 1, block
    assert_spans_exact(doc, chunks)


def test_a_list_too_big_for_a_chunk_is_split_between_items():
    items = "\n".join(f"- Check item {i} on the pump and write it down" for i in range(12))
    doc = pdf(items)
    chunks = chunk(doc, target_tokens=25, overlap_tokens=0)
    assert len(chunks) > 3
    for c in chunks:
        assert all(line.startswith("- Check item") for line in c.text.split("\n"))


# -- boilerplate ------------------------------------------------------------------------------
def manual_pages(count: int) -> list[str]:
    return [f"ACME P-100 Service Manual\n{prose(i * 10, 6)}\nPage {i + 1} of {count}"
            for i in range(count)]


def test_running_headers_and_footers_are_dropped():
    doc = pdf(*manual_pages(6))
    chunks = chunk(doc, target_tokens=60, overlap_tokens=0)
    assert chunks and not any("ACME" in c.text or "Page" in c.text for c in chunks)
    assert all(c.start > 0 for c in chunks)  # spans still point into the original text
    assert_spans_exact(doc, chunks)
    assert uncovered(doc, chunks).replace("ACMEP-100ServiceManual", "").startswith("Page1of6")


def test_short_documents_keep_their_first_and_last_lines():
    chunks = chunk(pdf(*manual_pages(3)), target_tokens=200)
    assert sum("ACME" in c.text for c in chunks) == 3


def test_chapter_headers_and_page_numbers_in_pdfs():
    pages = [f"{prose(n * 3, 2)}\n{n}" for n in range(1, 4)]
    pages += [f"Chapter 2: Installing {n}\n{prose(n, 2)}\n{n}" for n in range(4, 7)]
    pages += [f"Chapter 3: Servicing {n}\n{prose(n, 2)}\n{n}" for n in range(7, 11)]
    keys = boilerplate_keys([Page(i + 1, t) for i, t in enumerate(pages)])
    assert {line_key("Chapter 2: Installing 5"), line_key("17")} <= keys
    assert line_key(sentence(0)) not in keys
    chunks = chunk(pdf(*pages), target_tokens=200)
    assert len(chunks) == 10 and not any("Chapter" in c.text for c in chunks)


def test_a_chapter_header_that_heads_a_chapter_far_away_too_is_dropped_on_both():
    """ngspice: "3.3. ELEMENTARY DEVICES 79" over pages 77-91 and "31.2. ELEMENTARY DEVICES 643" over
    643-647 are one key, on too few of the pages between to be a header by their count; the page
    numbers they end in tell. "Answer 1" over "Answer 2" on two pages of a FAQ stays text."""
    pages = [prose(n, 2) for n in range(40)]
    for n in (*range(2, 16, 2), 30, 32, 34):  # a chapter, then one far away
        pages[n] = f"{n // 30 + 3}.{n // 30 + 1}. ELEMENTARY DEVICES\t{n + 1}\n{pages[n]}"
    pages[20] += "\nAnswer 1"
    pages[21] = "Answer 2\n" + pages[21]
    pages[33] += "\nAnswer 2"  # the FAQ's answers are numbered per question
    keys = boilerplate_keys([Page(i + 1, t) for i, t in enumerate(pages)])
    assert line_key("3.3. ELEMENTARY DEVICES\t79") in keys and line_key("Answer 1") not in keys
    chunks = chunk(pdf(*pages), target_tokens=200)
    assert not any("ELEMENTARY" in c.text for c in chunks) and sum("Answer" in c.text for c in chunks) == 3


def test_text_repeated_inside_pages_is_kept():
    pages = [f"{prose(i, 3)}\nACME P-100 Service Manual\n{prose(i + 5, 3)}" for i in range(6)]
    chunks = chunk(pdf(*pages), target_tokens=200)
    assert sum("ACME" in c.text for c in chunks) == 6


def test_empty_and_boilerplate_only_pages_produce_nothing():
    assert chunk(pdf("", "   \n\n  ", "-----\n* * *\n", "\x0c")) == []
    pages = manual_pages(5) + ["ACME P-100 Service Manual\nPage 6 of 6"]
    chunks = chunk(pdf(*pages))
    assert chunks and all(c.page <= 5 for c in chunks)


def test_a_tiny_tail_joins_the_chunk_before_it():
    doc = pdf(prose(0, 12) + "\nDone.")
    chunks = chunk(doc, target_tokens=100, overlap_tokens=10, min_tokens=8)
    assert chunks[-1].text.endswith("Done.") and words(chunks[-1].text) > 8


# -- overlap ----------------------------------------------------------------------------------
def test_consecutive_chunks_of_a_page_overlap_by_about_overlap_tokens():
    doc = pdf(prose(0, 40), prose(100, 40))
    chunks = chunk(doc, target_tokens=100, overlap_tokens=20)
    for before, after in zip(chunks, chunks[1:]):
        if before.page != after.page:
            continue
        assert after.start < before.end
        shared = doc.pages[0].text[after.start:before.end] if after.page == 1 else \
            doc.pages[1].text[after.start:before.end]
        assert before.text.endswith(shared) and 0 < words(shared) <= 20


def test_no_overlap_into_a_new_section_or_a_new_page():
    doc = pdf(prose(0, 10) + "\n2 Servicing\n" + prose(20, 10), prose(40, 10))
    chunks = chunk(doc, target_tokens=120, overlap_tokens=30)
    section = next(c for c in chunks if c.text.startswith("2 Servicing"))
    assert all(c.end <= section.start for c in chunks if c.page == 1 and c is not section
               and c.start < section.start)
    assert next(c for c in chunks if c.page == 2).start == 0


# -- real-manual-like text and speed --------------------------------------------------------------
def manual_page(n: int) -> str:
    return "\n".join([
        f"ACME P-100 Service Manual {n}",
        f"{n} Maintenance of the {PARTS[n % len(PARTS)]}",
        prose(n, 12),
        f"{n}.1 Changing the filter",
        "Before you start, switch the pump off and wait until it has cooled down. " * 3,
        STEPS,
        f"{n}.2 Checking the pressure",
        "> pressure(pump)\n[1] 2.4",
        TABLE,
        prose(n + 50, 25),
        f"Page {n}",
    ])


def test_a_long_manual_with_the_real_tokenizer():
    from engine.models.registry import builtin_embedder_files

    files = builtin_embedder_files()
    if files is None:
        pytest.skip("the built-in embedder packages are not installed")
    from engine.encoders.embedder import Embedder

    embedder = Embedder.from_files(files)
    doc = pdf(*(manual_page(n) for n in range(1, 21)))
    chunks = chunk_document(doc, embedder.count_tokens,
                            count_tokens_batch=embedder.count_tokens_batch)
    assert_spans_exact(doc, chunks)
    sizes = embedder.count_tokens_batch([c.text for c in chunks])
    assert max(sizes) <= 256 + 8 and statistics.median(sizes) > 120
    assert not any("ACME" in c.text or "Page " in c.text for c in chunks)
    for c in chunks:
        assert c.heading_path[0] == f"{c.page} Maintenance of the {PARTS[c.page % len(PARTS)]}"
    left = uncovered(doc, chunks)
    assert left == "".join(f"ACMEP-100ServiceManual{n}Page{n}" for n in range(1, 21))


def test_thousands_of_pages_count_each_text_about_once():
    counted = []

    def count_batch(texts):
        counted.append(sum(len(t) for t in texts))
        return [words(t) for t in texts]

    doc = pdf(*(manual_page(n) for n in range(1, 2401)))
    started = time.perf_counter()
    chunks = chunk_document(doc, words, count_tokens_batch=count_batch)
    elapsed = time.perf_counter() - started
    assert len({c.page for c in chunks}) == 2400
    assert sum(counted) < 1.5 * sum(len(p.text) for p in doc.pages)
    assert elapsed < 30  # a few seconds on a laptop; generous for busy CI machines


def test_batch_and_single_counting_give_the_same_chunks():
    doc = pdf(*(manual_page(n) for n in range(1, 4)))
    assert chunk(doc) == chunk_document(doc, words,
                                        count_tokens_batch=lambda ts: [words(t) for t in ts])
