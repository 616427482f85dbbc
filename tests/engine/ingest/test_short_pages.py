"""Short pages and short documents are indexed: a page of a few words is a chunk of its own
(issue 14: pages under min_tokens used to be dropped, so a one-line note got no chunk)."""

from __future__ import annotations

from pathlib import Path

from engine.ingest import parse_file
from engine.ingest.chunking import chunk_document
from engine.paths import AppPaths
from engine.store.indexer import Indexer, IndexSettings, open_collection
from engine.types import Page, ParsedDocument

SETTINGS = IndexSettings(parse_time_limit_s=30, parse_memory_limit_mb=1024)


def words(text: str) -> int:
    return len(text.split())


def long_page(n: int) -> str:
    return " ".join(f"Step {i} of part {n} checks the valve and writes the value in the log."
                    for i in range(30))


def test_a_one_line_text_file_gets_one_chunk(tmp_path):
    door = tmp_path / "door.txt"
    door.write_text("Door code: 7731.\n", encoding="utf-8")
    chunks = chunk_document(parse_file(door), words)
    assert [c.text for c in chunks] == ["Door code: 7731."]


def test_a_short_page_between_long_ones_keeps_its_words():
    pages = (Page(1, long_page(1)), Page(2, "Fuse F3: 10 A."), Page(3, long_page(3)))
    chunks = chunk_document(ParsedDocument("m.pdf", "M", pages), words, target_tokens=100)
    short = [c for c in chunks if c.page == 2]
    assert [c.text for c in short] == ["Fuse F3: 10 A."]
    assert {c.page for c in chunks} == {1, 2, 3}


def test_a_title_page_of_one_heading_is_kept():
    pages = (Page(1, "Service Manual"), Page(2, long_page(2)))
    chunks = chunk_document(ParsedDocument("m.pdf", "M", pages), words, target_tokens=100)
    assert any(c.page == 1 and "Service Manual" in c.text for c in chunks)


def test_a_tiny_tail_still_joins_its_neighbour_on_the_page():
    page = long_page(1)[:400] + "\nDone."
    chunks = chunk_document(ParsedDocument("m.pdf", "M", (Page(1, page),)), words,
                            target_tokens=100)
    assert len(chunks) == 1 and chunks[0].text.endswith("Done.")


def test_a_one_line_file_is_indexed_and_found(tmp_path, tiny_embedder):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "door.txt").write_text("Open the valve.\n", encoding="utf-8")
    assert tiny_embedder.count_tokens("Open the valve.") < 8  # below the old floor
    paths = AppPaths(tmp_path / "data").ensure()
    with open_collection(paths, "default", tiny_embedder) as store:
        events = list(Indexer(store, tiny_embedder, SETTINGS).run([docs]))
        outcome = next(e.outcome for e in events if e.outcome)
        assert (Path(outcome.path).name, outcome.status, outcome.chunks) == ("door.txt", "ready", 1)
        hits = store.search_keyword("valve", 5)
        assert hits and store.chunk(hits[0][0])["text"] == "Open the valve."


def test_a_document_that_is_all_one_line_per_page_is_not_taken_for_running_headers():
    # each page's only line looks like a running header ("Potato 1", "Potato 2", ...)
    pages = tuple(Page(n, f"Potato {n}") for n in range(1, 7))
    chunks = chunk_document(ParsedDocument("potato.pdf", "P", pages), words)
    assert [c.text for c in chunks] == [f"Potato {n}" for n in range(1, 7)]
    same = tuple(Page(n, "Background") for n in range(1, 7))
    assert len(chunk_document(ParsedDocument("same.pdf", "S", same), words)) == 6
