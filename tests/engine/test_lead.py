"""Lead sentences: measured choice, fragments left out, and spans that point at the page's own text."""

from __future__ import annotations

import pytest

from engine.answer.lead import (
    LeadWeights,
    candidates,
    lead_sentences,
    page_runs,
)
from engine.answer.retrieval import RetrievalSettings, Retriever
from engine.ingest.chunking import chunk_document
from engine.types import Page, ParsedDocument, Passage, Quote, Span
from tests.helpers.tiny_collection import open_store

TERMS_ONLY = LeadWeights(cosine=0.0)


def passage(text: str, spans=None, heading_path=(), path="/manuals/pump.pdf") -> Passage:
    spans = spans or (Span(3, 0, len(text)),)
    return Passage(document_id=1, path=path, title="pump", chunk_ids=(1,), spans=tuple(spans), text=text,
                   heading_path=tuple(heading_path), score=1.0, similarity=0.5)


def normal(text: str) -> str:
    return " ".join(text.split())


def test_the_sentence_that_answers_leads_not_the_first():
    text = ("The pump is a sturdy machine built for years of service. "
            "Before the first start, prime the pump casing with clean water through the priming plug. "
            "Keep the manual near the machine.")
    quotes = lead_sentences("How do I prime the pump casing?", [passage(text)], weights=TERMS_ONLY)
    assert quotes[0].text == ("Before the first start, prime the pump casing with clean water "
                              "through the priming plug.")
    assert (quotes[0].number, quotes[0].document, quotes[0].page) == (1, "pump.pdf", 3)


def test_fragments_never_lead():
    text = ("4.2 Priming the pump\n"
            "Priming the pump . . . . . . . . . . . . 12\n"
            "Chapter 4: Pump priming 12\n"
            "Prime pump.\n"
            "Prime the pump casing with water until it runs out of the vent.")
    quotes = lead_sentences("How do I prime the pump?", [passage(text, heading_path=("4.2 Priming the pump",))],
                            weights=TERMS_ONLY)
    assert [q.text for q in quotes] == ["Prime the pump casing with water until it runs out of the vent."]


def test_a_heading_line_ingest_did_not_recognise_is_not_glued_onto_the_sentence():
    text = ("Multiple keys\n"
            "It is possible to construct a legend with several keys by placing each key with set key at.\n"
            "Syntax\n"
            "set key at <position> sets the position of the key box.")
    quotes = lead_sentences("How do I construct a legend with several keys?", [passage(text)], weights=TERMS_ONLY)
    assert quotes[0].text == "It is possible to construct a legend with several keys by placing each key with set key at."
    assert all(not q.text.startswith(("Multiple keys", "Syntax")) for q in quotes)


def test_a_short_line_inside_a_sentence_stays_in_it():
    text = ("Prime the pump casing with clean water through the\n"
            "Priming Plug\n"
            "before the first start.")
    quotes = lead_sentences("How do I prime the pump casing?", [passage(text)], weights=TERMS_ONLY)
    assert normal(quotes[0].text) == ("Prime the pump casing with clean water through the Priming Plug "
                                      "before the first start.")


def test_at_most_limit_quotes_each_once_and_the_passage_number_kept():
    first = passage("Nothing here is about the subject of this question at all, sadly.")
    text = "Open the drain valve slowly. Open the drain valve slowly. Then open the drain valve fully."
    second = passage(text, spans=(Span(8, 10, 10 + len(text)),))
    quotes = lead_sentences("How do I open the drain valve?", [first, second], limit=2, weights=TERMS_ONLY)
    assert len(quotes) == 2
    assert len({q.text for q in quotes}) == 2
    assert all(q.number == 2 and q.page == 8 for q in quotes)


def test_no_passages_no_lead():
    assert lead_sentences("How do I prime the pump?", []) == []


def test_the_embedder_measures_too(tiny_embedder):
    text = "Prime the pump with water before start. Error E-12 means the motor overheated."
    quotes = lead_sentences("prime pump water", [passage(text)], embedder=tiny_embedder)
    assert quotes and all(q.text in normal(text) for q in quotes)
    vector = tiny_embedder.encode_queries(["prime pump water"])[0]
    again = lead_sentences("prime pump water", [passage(text)], query_vector=vector, embedder=tiny_embedder)
    assert [q.text for q in again] == [q.text for q in quotes]


def test_a_quote_round_trips_and_narrows_its_passage_to_itself():
    quote = lead_sentences("prime pump casing", [passage("Prime the pump casing with clean water first.",
                                                         spans=(Span(5, 40, 85),))], weights=TERMS_ONLY)[0]
    assert quote.span == Span(5, 40, 85)
    back = Quote.from_dict(quote.to_dict())
    assert (back.number, back.text, back.document, back.span) == (1, quote.text, "pump.pdf", quote.span)
    narrowed = back.as_passage()
    assert narrowed.spans == (quote.span,) and narrowed.page == 5 and narrowed.path == "/manuals/pump.pdf"


def test_a_passage_whose_text_does_not_fit_its_spans_has_no_runs():
    assert page_runs(passage("Some text of the passage.", spans=(Span(1, 0, 0),))) == []


# -- spans against the page text, through the real chunker and retrieval's merging --------------
PAGE_ONE = " ".join(f"Sentence {w} of the first page tells how to prime pump number {w}." for w in
                    ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"))
PAGE_TWO = ("The second page goes on about the pump\nwith wrapped lines, as a PDF gives them.\n\n"
            + " ".join(f"Step {w} asks you to prime pump casing {w} with water." for w in
                       ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta")))
PAGES = {1: PAGE_ONE, 2: PAGE_TWO}


@pytest.fixture
def merged_passages(tmp_path, tiny_embedder) -> list[Passage]:
    doc = ParsedDocument("/manuals/pump.pdf", "pump", tuple(Page(n, t) for n, t in PAGES.items()))
    chunks = chunk_document(doc, lambda text: len(text.split()), target_tokens=24, overlap_tokens=8,
                            min_tokens=2)
    store = open_store(tmp_path / "collection", tiny_embedder)
    store.add_document(doc.path, "sha", size=1, mtime=1.0, title="pump", page_count=2, chunks=chunks,
                       embeddings=tiny_embedder.encode_documents([c.text for c in chunks]))
    retriever = Retriever(store, tiny_embedder, settings=RetrievalSettings(max_merged_chunks=3))
    found = retriever.search("prime pump casing water", 6)
    yield found
    store.close()


def test_merged_passages_map_every_sentence_to_its_page_text(merged_passages):
    merged = [p for p in merged_passages if len(p.spans) > 1]
    assert merged, "retrieval should have merged neighbouring chunks"
    assert any(len(p.pages) > 1 for p in merged_passages) or any(
        p.spans[1].start < p.spans[0].end for p in merged)
    checked = 0
    for p in merged_passages:
        assert page_runs(p), p
        for c in candidates("prime pump casing water", [p]):
            page_text = PAGES[c.span.page]
            assert normal(page_text[c.span.start:c.span.end]) == c.text
            checked += 1
    assert checked >= 10


def test_the_lead_of_merged_passages_highlights_its_own_words(merged_passages):
    for quote in lead_sentences("prime pump casing water", merged_passages, weights=TERMS_ONLY):
        assert normal(PAGES[quote.page][quote.span.start:quote.span.end]) == quote.text


def test_pieces_joined_across_pages_and_after_blank_lines_map_back():
    from engine.answer.retrieval import _joined

    page_one = "Fill the casing with water first.\n\nThen close the vent screw by hand. Start the pump and watch the gauge."
    page_two = "The pump then runs quietly. Check the seal for drips after an hour."
    cut = page_one.index("Then")
    chunks = [{"page": 1, "start": 0, "end": cut - 2, "text": page_one[:cut - 2]},
              {"page": 1, "start": 20, "end": len(page_one), "text": page_one[20:]},
              {"page": 2, "start": 0, "end": len(page_two), "text": page_two}]
    text = _joined(chunks)
    spans = tuple(Span(c["page"], c["start"], c["end"]) for c in chunks)
    found = candidates("casing vent seal pump", [passage(text, spans=spans)])
    assert len(found) == 5
    for c in found:
        assert normal((page_one, page_two)[c.span.page - 1][c.span.start:c.span.end]) == c.text
