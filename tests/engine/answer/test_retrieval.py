"""Retriever on a real store (SQLite + FTS5 + faiss): dense and keyword search fused, the
optional cross-encoder, neighbour merging. Mechanics run on the tiny generated embedder and
cross-encoder; quality on the real built-in embedder (slow)."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from engine.answer.retrieval import RetrievalSettings, Retriever, contents_listing
from engine.encoders.embedder import Embedder
from engine.encoders.reranker import CrossEncoder
from engine.ingest.chunking import chunk_document
from engine.store.index_store import IndexStore
from engine.types import Chunk, Page, ParsedDocument
from tests.helpers.service_manual import indexed_manual
from tests.helpers.tiny_cross_encoder import write_tiny_cross_encoder
from tests.helpers.tiny_embedder import write_tiny_embedder

ALL_STAGES = ["embed", "dense", "keyword", "fuse", "merge"]


@pytest.fixture(scope="module")
def tiny_embedder(tmp_path_factory):
    files = write_tiny_embedder(tmp_path_factory.mktemp("tiny_embedder"), max_positions=128)
    with Embedder.from_files(files) as embedder:
        yield embedder


@pytest.fixture(scope="module")
def tiny_reranker(tmp_path_factory):
    folder = write_tiny_cross_encoder(tmp_path_factory.mktemp("cross") / "tiny-reranker")
    with CrossEncoder.from_folder(folder) as reranker:
        yield reranker


@pytest.fixture
def store(tmp_path, tiny_embedder):
    with IndexStore.open(tmp_path / "collection", embedder_id=tiny_embedder.model_id,
                         dimension=tiny_embedder.dimension) as opened:
        yield opened


def _title(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1].rsplit(".", 1)[0]


def _store(store: IndexStore, embedder: Embedder, path: str, pages: tuple[Page, ...],
           chunks: list[Chunk]) -> None:
    store.add_document(path, hashlib.sha256(path.encode()).hexdigest(), size=1, mtime=0.0,
                       title=_title(path), page_count=len(pages), chunks=chunks,
                       embeddings=embedder.encode_documents([c.text for c in chunks]))


def add_chunked(store, embedder, path: str, page_texts: list[str], target_tokens=24,
                overlap_tokens=6) -> ParsedDocument:
    """A document of these pages, chunked by the real chunker (small chunks, with overlap)."""
    doc = ParsedDocument(path, _title(path),
                         tuple(Page(n, text) for n, text in enumerate(page_texts, 1)))
    chunks = chunk_document(doc, embedder.count_tokens, target_tokens=target_tokens,
                            overlap_tokens=overlap_tokens)
    _store(store, embedder, path, doc.pages, chunks)
    return doc


def add_page_chunks(store, embedder, path: str, page_texts: list[str],
                    headings: list[tuple[str, ...]] | None = None) -> ParsedDocument:
    """A document whose every page is exactly one chunk; by default each page is a section of
    its own (heading path ("Manual", "Page n"))."""
    doc = ParsedDocument(path, _title(path),
                         tuple(Page(n, text) for n, text in enumerate(page_texts, 1)))
    headings = headings or [("Manual", f"Page {p.number}") for p in doc.pages]
    chunks = [Chunk(p.number, 0, len(p.text), p.text, heading) for p, heading in zip(doc.pages, headings)]
    _store(store, embedder, path, doc.pages, chunks)
    return doc


def page_text(doc: ParsedDocument, number: int) -> str:
    return next(p.text for p in doc.pages if p.number == number)


def all_chunk_ids(passages) -> list[int]:
    return [i for p in passages for i in p.chunk_ids]


# -- exact names through the keyword side ----------------------------------------------------

ERROR_CODES = [f"E-47{n:02d}" for n in range(40)]  # E-4700 .. E-4739: E-4711 among them


def _error_code_manual(store, embedder) -> ParsedDocument:
    return add_page_chunks(store, embedder, "/manuals/pump-errors.txt", [
        f"Error {code}: the pump pressure is too low; open the valve and check the filter."
        for code in ERROR_CODES])


@pytest.mark.parametrize("fusion", ["rrf", "keyword"])
def test_an_error_code_is_found_first_by_its_exact_name(store, tiny_embedder, fusion):
    _error_code_manual(store, tiny_embedder)
    result = Retriever(store, tiny_embedder, settings=RetrievalSettings(fusion=fusion)).retrieve("E-4711", k=5)
    top = result.passages[0]
    assert "Error E-4711:" in top.text and top.keyword_score is not None
    assert top.page == ERROR_CODES.index("E-4711") + 1
    assert not any("E-4711" in p.text for p in result.passages[1:])
    expected = ALL_STAGES if fusion == "rrf" else ["embed", "keyword", "fuse", "merge"]
    assert result.stages == expected and set(result.timings_s) == set(expected)


@pytest.mark.parametrize("question, page", [("How do I set the feed rate?", 2), ("Switch to a log scale", 3)])
def test_two_words_a_manual_writes_as_one_find_its_page(store, tiny_embedder, question, page):
    """People type "feed rate" and "log scale"; manuals name the setting FEEDRATE and the
    command logscale: keyword search also looks for the two written as one."""
    pages = ["Spindle speed is given by SPEED.", "FEEDRATE sets the axis speed in mm/min.",
             "The logscale command switches the axis.", "Rates of the feed pump are in the table."]
    _store(store, tiny_embedder, "/m/cnc.md", tuple(Page(n, t) for n, t in enumerate(pages, 1)),
           [Chunk(page=n, start=0, end=len(t), text=t) for n, t in enumerate(pages, 1)])
    retriever = Retriever(store, tiny_embedder, settings=RetrievalSettings(fusion="keyword", merge_neighbours=False))
    query = retriever.query(question)
    assert query.joined == (("feedrate",) if page == 2 else ("logscale",))  # as the collection has them
    assert retriever.search(query, k=1)[0].page == page


@pytest.mark.parametrize("question, page", [
    ("What does E-12 mean?", 1), ("What does E 12 mean?", 1), ("What does e13 mean?", 2),
    ("A14", 3), ("A-14", 3), ("Fault F 15?", 4), ("F15", 4)])
def test_an_alarm_code_typed_one_way_finds_the_page_that_prints_it_another(store, tiny_embedder, question, page):
    pages = ["Error E12 means the motor overheated.", "Error E-13 means the door is open.",
             "Alarm A 14 means low oil.", "Fault F15: fan blocked.", "What the errors and alarms mean."]
    _store(store, tiny_embedder, "/m/codes.md", tuple(Page(n, t) for n, t in enumerate(pages, 1)),
           [Chunk(page=n, start=0, end=len(t), text=t) for n, t in enumerate(pages, 1)])
    retriever = Retriever(store, tiny_embedder, settings=RetrievalSettings(fusion="keyword", merge_neighbours=False))
    assert retriever.search(question, k=1)[0].page == page


def test_dense_only_fusion_runs_no_keyword_search(store, tiny_embedder):
    _error_code_manual(store, tiny_embedder)
    settings = RetrievalSettings(fusion="dense", merge_neighbours=False)
    result = Retriever(store, tiny_embedder, settings=settings).retrieve("E-4711", k=5)
    assert result.stages == ["embed", "dense", "fuse", "merge"]
    assert len(result.passages) == 5
    assert all(p.keyword_score is None for p in result.passages)
    # Dense order is the cosine order over every stored embedding.
    query = tiny_embedder.encode_queries(["E-4711"])[0]
    stored = store.embeddings(range(1, 1000))
    best = sorted(stored, key=lambda i: -float(stored[i] @ query))[:5]
    assert [p.chunk_ids[0] for p in result.passages] == best


def test_no_match_anywhere_gives_no_passages_from_keyword_search(store, tiny_embedder):
    _error_code_manual(store, tiny_embedder)
    retriever = Retriever(store, tiny_embedder, settings=RetrievalSettings(fusion="keyword"))
    assert retriever.search("kubernetes docker", k=5) == []
    assert retriever.search("", k=5) == []


@pytest.mark.parametrize("rows, searched", [(60_000, {"valve", "gasket"}), (4, {"gasket"})],
                         ids=["all-words", "over-the-budget"])
def test_keyword_search_ranks_the_rarest_words_that_fit_its_budget(store, tiny_embedder, rows, searched):
    """In a plant's collection BM25 would rank every chunk a common word matches: beyond
    keyword_rows chunks the most common words are left to dense search."""
    pages = [f"Valve {n} opens at {n} bar." for n in range(6)] + ["Replace the valve gasket yearly."]
    add_page_chunks(store, tiny_embedder, "/manuals/valves.md", pages)
    retriever = Retriever(store, tiny_embedder, settings=RetrievalSettings(fusion="keyword", keyword_rows=rows))
    query = retriever.query("valve gasket")
    assert set(retriever._keyword_terms(query)) == searched
    texts = [p.text for p in retriever.search(query, k=10)]
    assert "Replace the valve gasket yearly." in texts[0]
    assert len(texts) == (1 if searched == {"gasket"} else 7)


# -- what a passage carries ----------------------------------------------------------------

PUMP_PAGES = [
    "# Pump\n\nPrime the pump with water before starting. Close the valve. Then open the valve "
    "slowly and check the oil.\n\n## Faults\n\nError E-1234 means the seal leaks and the filter must be",
    "replaced before the motor is started again. Check the pressure after every start.",
    "## Safety\n\nRead the safety warning on the cover before you open the pump.",
]


@pytest.mark.parametrize("k", [1, 2, 3, 10])
def test_k_is_respected_and_passages_point_into_their_pages(store, tiny_embedder, k):
    docs = {"pump-manual.md": add_chunked(store, tiny_embedder, "/manuals/pump-manual.md", PUMP_PAGES),
            "car.txt": add_page_chunks(store, tiny_embedder, "C:\\manuals\\car.txt",
                                       ["The red car is fast.", "The blue car is slow.", "Stop the car."])}
    passages = Retriever(store, tiny_embedder).search("pump valve filter", k=k)
    ids = all_chunk_ids(passages)
    assert len(ids) == len(set(ids))  # no chunk twice
    if k < 10:
        assert len(passages) == k
    else:  # every chunk is a candidate here (fewer than `candidates`), so all are shown
        assert len(passages) < k and sorted(ids) == list(range(1, store.stats()["chunks"] + 1))
    for passage in passages:
        doc = docs[passage.document]
        assert passage.title == doc.title and passage.path == doc.path
        assert passage.pages == tuple(sorted({s.page for s in passage.spans}))
        assert len(passage.spans) == len(passage.chunk_ids)
        for chunk_id, span in zip(passage.chunk_ids, passage.spans):
            assert store.chunk(chunk_id)["text"] == page_text(doc, span.page)[span.start:span.end]
        assert passage.text.startswith(store.chunk(passage.chunk_ids[0])["text"])
        assert passage.heading_path in {store.chunk(i)["heading_path"] for i in passage.chunk_ids}
        assert passage.score > 0 and -1.0 <= passage.similarity <= 1.0
    scores = [p.score for p in passages]
    assert scores == sorted(scores, reverse=True)


def test_a_single_chunk_passage_is_exactly_its_span_of_the_page(store, tiny_embedder):
    doc = add_chunked(store, tiny_embedder, "/manuals/pump-manual.md", PUMP_PAGES)
    settings = RetrievalSettings(merge_neighbours=False)
    passages = Retriever(store, tiny_embedder, settings=settings).search("safety warning cover", k=4)
    assert len(passages) == 4 and all(len(p.chunk_ids) == 1 for p in passages)
    for passage in passages:
        (span,) = passage.spans
        assert passage.text == page_text(doc, span.page)[span.start:span.end]
    safety = next(p for p in passages if "safety warning" in p.text)
    assert safety.heading_path == ("Pump", "Safety") and safety.pages == (3,)


def test_keyword_only_hits_get_the_cosine_of_their_stored_embedding(store, tiny_embedder):
    add_chunked(store, tiny_embedder, "/manuals/pump-manual.md", PUMP_PAGES)
    _error_code_manual(store, tiny_embedder)
    query = "pump valve filter"
    vector = tiny_embedder.encode_queries([query])[0]
    dense_top = {i for i, _ in store.search_dense(vector, 5)}
    for settings in (RetrievalSettings(fusion="keyword", merge_neighbours=False),
                     RetrievalSettings(candidates=5, merge_neighbours=False)):
        passages = Retriever(store, tiny_embedder, settings=settings).search(query, k=8)
        keyword_only = [p for p in passages if p.chunk_ids[0] not in dense_top]
        assert len(passages) == 8 and keyword_only and all(p.keyword_score for p in keyword_only)
        for passage in passages:
            (chunk_id,) = passage.chunk_ids
            stored = store.embeddings([chunk_id])[chunk_id]
            recomputed = tiny_embedder.encode_documents([passage.text])[0]
            assert passage.similarity == pytest.approx(float(stored @ vector), abs=1e-6)
            assert passage.similarity == pytest.approx(float(recomputed @ vector), abs=1e-5)


def test_embeddings_and_prefix_frequency_of_the_store(store, tiny_embedder):
    doc = add_page_chunks(store, tiny_embedder, "/manuals/m.txt", [
        "Printing a report.", "The printer prints.", "Stop the pump.", "Pumps and printers."])
    texts = [p.text for p in doc.pages]
    ids = [i for i, _ in store.search_keyword("report printer pump", 10, ["print", "pump"])]
    stored = store.embeddings(ids + [99999])
    assert sorted(stored) == sorted(ids)  # the missing id is simply left out
    for chunk_id in ids:
        expected = tiny_embedder.encode_documents([store.chunk(chunk_id)["text"]])[0]
        np.testing.assert_allclose(stored[chunk_id], expected, atol=1e-6)
        assert np.linalg.norm(stored[chunk_id]) == pytest.approx(1.0, abs=1e-5)
    assert store.embeddings([]) == {}
    assert store.prefix_frequency("print") == 3 / 4  # printing, printer/prints, printers
    assert store.prefix_frequency("pump") == 2 / 4
    assert store.prefix_frequency("report") == 1 / 4 == sum("report" in t.lower() for t in texts) / 4
    assert store.prefix_frequency("zebra") == 0.0
    assert store.prefix_frequency("") == 0.0
    assert store.prefix_frequency("two words") == 0.0
    assert store.prefix_frequency("print", whole_word=True) == 0.0  # only printing, printer, prints
    assert store.prefix_frequency("pump", whole_word=True) == 1 / 4
    add_page_chunks(store, tiny_embedder, "/manuals/n.txt", ["A pump.", "Oil."])  # counts kept until a commit
    assert store.prefix_frequency("pump") == 3 / 6 and store.prefix_frequency("print") == 3 / 6


def test_a_short_word_is_weighed_and_matched_as_a_whole_word(store, tiny_embedder):
    """"OB" (a status code) is searched as the word "ob", so it weighs as rare as that word
    is, not as common as every word starting with "ob" (object, obtain, obvious...)."""
    pages = ["Objects are obtained from the object store.", "Obviously the object is obsolete.",
             "Status OB means the UPS runs on battery.", "Observe the objects."]
    add_page_chunks(store, tiny_embedder, "/manuals/ups.txt", pages)
    retriever = Retriever(store, tiny_embedder, settings=RetrievalSettings(fusion="keyword"))
    query = retriever.query("What does OB mean?")
    assert query.frequencies["ob"] == 1 / 4 and store.prefix_frequency("ob") == 1.0
    assert query.weights["ob"] == query.weights["mean"]  # each in one page of four
    assert query.share({"object", "obvious"}) == 0.0 and query.share({"ob"}) == 0.5
    assert query.marks(pages[0]) == () and query.marks(pages[2]) == ((7, 9), (10, 15))  # OB, means
    assert retriever.search(query, k=1)[0].page == 3


@pytest.mark.parametrize("twice", ["document", "page"])
def test_the_same_text_is_one_passage(store, tiny_embedder, twice):
    """A manual indexed twice (copies in two folders), or a warning printed on many pages, is
    shown once: the other passages are left for other text."""
    warning = "Warning: switch the pump off at the isolator before opening the valve cover."
    pages = [warning, "The valve cover has four screws.", warning, "Pump valve seals wear out."]
    add_page_chunks(store, tiny_embedder, "/a/pump.txt", pages)
    if twice == "document":
        add_page_chunks(store, tiny_embedder, "/b/pump.txt", pages)
    passages = Retriever(store, tiny_embedder, settings=RetrievalSettings(merge_neighbours=False)).search(
        "pump valve cover warning", k=4)
    texts = [" ".join(p.text.split()).casefold() for p in passages]
    assert len(texts) == len(set(texts)) == 3  # the warning, the screws, the seals


CONTENTS = ("Contents\n1 Pump valve cover . . . . . . . . . 3\n2 Pump valve seals . . . . . . . . . 4\n"
            "3 Pump warning labels . . . . . . . . 5\n4 Pump valve screws . . . . . . . . 6\nIndex 212")


def test_a_table_of_contents_or_an_index_is_never_a_passage(store, tiny_embedder):
    """A manual's contents name every topic (ngspice's ranked 1st for 'PSpice compatibility')
    and answer none: the passages are left for the pages they point to."""
    pages = [CONTENTS, "The valve cover has four screws.", "Pump valve seals wear out."]
    add_page_chunks(store, tiny_embedder, "/a/pump.txt", pages)
    passages = Retriever(store, tiny_embedder).search("pump valve cover seals screws", k=3)
    assert sorted(p.page for p in passages) == [2, 3]
    prose = "\n".join(["Fill the tank . . . . then wait 5"] * 4 + ["Open the valve and wait."] * 5)
    assert contents_listing(CONTENTS) and not contents_listing(prose)  # most lines are not listed
    index = "Index\nA\napt, 37\napt-file, 39\n[EMC] Section, 158, 160-162\nManuals . . . . . 3, 20, 66\nworld, 1265"
    assert contents_listing(index)  # a book's index, LinuxCNC's and R's
    # a listing's dot leaders take many tokens, so its chunks may hold two or three lines (HackRF's)
    assert contents_listing(". . . . . . . . . . 17\n4.9\tWhat gain controls are provided? . . . . . . . 17")
    assert not contents_listing("Torque, 35") and not contents_listing("Door code: 7731.\nValve, 12")


# -- neighbour merging -----------------------------------------------------------------------


def test_a_sentence_over_a_page_break_is_merged_into_one_passage(store, tiny_embedder):
    doc = add_chunked(store, tiny_embedder, "/manuals/pump-manual.md", PUMP_PAGES)
    chunks = [store.chunk(i) for i in range(1, store.stats()["chunks"] + 1)]
    end_of_page_1 = [c for c in chunks if c["page"] == 1][-2:]
    start_of_page_2 = next(c for c in chunks if c["page"] == 2)
    assert end_of_page_1[-1]["text"].endswith("the filter must be")  # the set-up itself
    assert end_of_page_1[0]["end"] > end_of_page_1[1]["start"]  # the two overlap

    settings = RetrievalSettings(fusion="keyword")
    top = Retriever(store, tiny_embedder, settings=settings).search("E-1234 seal leaks", k=1)[0]
    assert top.pages == (1, 2) and top.page == 1 and top.anchor == 0  # the heading's chunk ranked
    assert top.chunk_ids == tuple(c["id"] for c in end_of_page_1) + (start_of_page_2["id"],)
    page_1, page_2 = page_text(doc, 1), page_text(doc, 2)
    first, second = end_of_page_1
    assert top.text == (page_1[first["start"]:second["end"]] + "\n"
                        + page_2[start_of_page_2["start"]:start_of_page_2["end"]])
    assert top.text.count("means") == 1  # the overlap is not repeated
    assert "must be\nreplaced before the motor" in top.text

    single = Retriever(store, tiny_embedder, settings=RetrievalSettings(
        fusion="keyword", merge_neighbours=False)).search("E-1234 seal leaks", k=3)
    assert all(len(p.chunk_ids) == 1 and len(p.pages) == 1 for p in single)
    assert {p.chunk_ids[0] for p in single} == {c["id"] for c in end_of_page_1}


RUN_ON_PAGES = ["Open the grey cover and", "remove the old cartridge and", "insert the new cartridge and",
                "close the grey cover again."]


@pytest.mark.parametrize("limit, pages", [(1, (1,)), (2, (1, 2)), (3, (1, 2, 3)), (4, (1, 2, 3, 4)),
                                          (9, (1, 2, 3, 4))])
def test_merging_stops_at_max_merged_chunks(store, tiny_embedder, limit, pages):
    add_page_chunks(store, tiny_embedder, "/manuals/filter.txt", RUN_ON_PAGES)
    settings = RetrievalSettings(fusion="keyword", max_merged_chunks=limit)
    (passage,) = Retriever(store, tiny_embedder, settings=settings).search("open", k=3)
    # each page is a section of its own: only the unfinished sentences join them
    assert passage.pages == pages and len(passage.chunk_ids) == len(pages)
    assert passage.page == 1 and passage.heading_path == ("Manual", "Page 1")
    assert passage.text == "\n".join(RUN_ON_PAGES[:len(pages)])


def test_a_chunk_is_never_in_two_passages(store, tiny_embedder):
    # The end of page 1 ranks below the start of page 2 and outside the merge pool: merging it
    # with the page it runs on to must not repeat that page in a second passage.
    add_page_chunks(store, tiny_embedder, "/manuals/filter.txt", [
        "Before the first start the pressure valve must be",
        "closed and the valve pressure valve pressure checked.",
        "The motor has no pressure valve."])
    settings = RetrievalSettings(fusion="keyword", merge_pool=1)
    passages = Retriever(store, tiny_embedder, settings=settings).search("valve pressure", k=5)
    ids = all_chunk_ids(passages)
    assert sorted(ids) == [1, 2, 3] and len(ids) == len(set(ids))


def test_neighbours_of_the_same_section_that_rank_well_join_the_passage(store, tiny_embedder):
    add_page_chunks(store, tiny_embedder, "/manuals/pump.txt", [
        "The pump must be primed.", "The pump valve opens.", "Hello world.", "The pump is red."],
        headings=[("Service",)] * 4)  # a heading with the query's word would rank every chunk
    settings = RetrievalSettings(fusion="keyword")
    passages = Retriever(store, tiny_embedder, settings=settings).search("pump", k=5)
    assert sorted(p.pages for p in passages) == [(1, 2), (4,)]  # page 3 did not rank: not merged
    small_pool = RetrievalSettings(fusion="keyword", merge_pool=0)
    assert len(Retriever(store, tiny_embedder, settings=small_pool).search("pump", k=5)) == 3


def test_neighbours_of_another_section_are_not_merged_even_when_they_rank_well(store, tiny_embedder):
    add_page_chunks(store, tiny_embedder, "/manuals/pump.txt", [
        "Prime the pump with water.", "The pump valve opens slowly.", "Close the pump valve after use.",
        "The pump motor is red."],
        headings=[("Pump", "Priming"), ("Pump", "Valve"), ("Pump", "Valve"), ("Pump", "Motor")])
    settings = RetrievalSettings(fusion="keyword")
    passages = Retriever(store, tiny_embedder, settings=settings).search("pump", k=5)
    assert sorted(p.chunk_ids for p in passages) == [(1,), (2, 3), (4,)]
    for passage in passages:
        assert {store.chunk(i)["heading_path"] for i in passage.chunk_ids} == {passage.heading_path}


SECTION_PAGES = [
    "# Filter\n\nThe air filter keeps dust out of the compressor. Replace the filter every year.\n\n"
    "## Cartridge\n\nUse cartridge FC-2290 only. Slide the new cartridge FC-2290 in with the arrow "
    "towards the fan.\n\n## Alarm\n\nAlarm A-17 means the coolant is too hot. Press RESET.",
    "# Tank\n\nDrain the water tank every week through the brass valve.",
]


@pytest.mark.parametrize("query, section", [
    ("cartridge FC-2290 arrow", ("Filter", "Cartridge")),
    ("alarm A-17 coolant RESET", ("Filter", "Alarm")),
    ("drain water tank", ("Tank",)),
])
def test_a_passage_keeps_to_the_section_of_its_answer(store, tiny_embedder, query, section):
    # A small manual: every chunk is in the merge pool, so before sections counted the answer
    # took in its neighbours of the other sections too.
    doc = add_chunked(store, tiny_embedder, "/manuals/compressor.md", SECTION_PAGES, target_tokens=40,
                      overlap_tokens=0)
    chunks = [store.chunk(i) for i in range(1, store.stats()["chunks"] + 1)]
    assert len({c["heading_path"] for c in chunks}) == 4 and len(chunks) <= 12  # the set-up itself
    for settings in (RetrievalSettings(), RetrievalSettings(fusion="keyword")):
        top = Retriever(store, tiny_embedder, settings=settings).search(query, k=3)[0]
        assert top.heading_path == section
        assert [store.chunk(i)["heading_path"] for i in top.chunk_ids] == [section] * len(top.chunk_ids)
        assert top.chunk_ids == tuple(c["id"] for c in chunks if c["heading_path"] == section)
        assert top.page == top.pages[0] == (2 if section == ("Tank",) else 1)
        assert top.text == " ".join(page_text(doc, top.page)[c["start"]:c["end"]]
                                    for c in map(store.chunk, top.chunk_ids))


def test_the_page_of_a_passage_is_the_page_of_the_chunk_that_ranked(store, tiny_embedder):
    # Page 1 ranks below page 2 but is in the merge pool and of the same section: it is merged
    # in front, and a citation must still open page 2, where the best match is.
    add_page_chunks(store, tiny_embedder, "/manuals/pump.txt", [
        "The pump is red.", "Pump pump pump: prime the pump.", "Hello world."],
        headings=[("Service",)] * 3)  # a heading with the query's word would rank every chunk
    settings = RetrievalSettings(fusion="keyword")
    (top,) = Retriever(store, tiny_embedder, settings=settings).search("pump", k=3)
    assert top.chunk_ids == (1, 2) and top.pages == (1, 2)
    assert top.anchor == 1 and top.page == 2 and top.spans[top.anchor].page == 2
    assert top.to_dict()["pages"] == [1, 2] and top.to_dict()["anchor"] == 1
    single = RetrievalSettings(fusion="keyword", merge_neighbours=False)
    assert [(p.page, p.anchor) for p in Retriever(store, tiny_embedder, settings=single).search("pump", k=3)] \
        == [(2, 0), (1, 0)]


def test_a_page_break_continuation_is_merged_across_sections_and_keeps_the_ranked_page(store, tiny_embedder):
    add_page_chunks(store, tiny_embedder, "/manuals/filter.txt", [
        "Intro text.", "Error E-9 means the seal of the", "valve leaks and must be replaced.", "Other text."],
        headings=[("Intro",), ("Faults",), ("Valves",), ("Other",)])
    settings = RetrievalSettings(fusion="keyword")
    top = Retriever(store, tiny_embedder, settings=settings).search("E-9", k=3)[0]
    assert top.chunk_ids == (2, 3) and top.pages == (2, 3)
    assert top.anchor == 0 and top.page == 2 and top.heading_path == ("Faults",)
    assert top.text == "Error E-9 means the seal of the\nvalve leaks and must be replaced."


# -- reranking -------------------------------------------------------------------------------

RERANK_PAGES = [
    "Pump valve.",  # 2 of its tokens occur in the query
    "Check the check and the check of the pump.",  # 7: check x3, the x3, pump
    "The pump valve is shut.",  # 3
] + [f"The {colour} car is fast and the {colour} dog is slow." for colour in ("red", "blue", "green")] * 3


def test_the_cross_encoder_reorders_candidates(store, tiny_embedder, tiny_reranker):
    add_page_chunks(store, tiny_embedder, "/manuals/pump.txt", RERANK_PAGES)
    query = "check the pump valve"
    settings = RetrievalSettings(fusion="keyword", merge_neighbours=False)
    plain = Retriever(store, tiny_embedder, settings=settings).retrieve(query, k=3)
    reranked = Retriever(store, tiny_embedder, tiny_reranker, settings).retrieve(query, k=3)
    assert "rerank" not in plain.stages
    assert reranked.stages == ["embed", "keyword", "fuse", "rerank", "merge"]
    assert [p.page for p in plain.passages] == [1, 3, 2]  # BM25: 'check', 'the' are stopwords
    assert [p.page for p in reranked.passages] == [2, 3, 1]
    assert [p.rerank_score for p in reranked.passages] == [7.0, 3.0, 2.0]
    assert all(p.score == p.rerank_score for p in reranked.passages)
    assert all(p.rerank_score is None for p in plain.passages)
    expected = tiny_reranker.predict([(query, p.text) for p in reranked.passages])
    assert [p.rerank_score for p in reranked.passages] == expected.tolist()


def test_only_rerank_candidates_are_reranked(store, tiny_embedder, tiny_reranker):
    add_page_chunks(store, tiny_embedder, "/manuals/pump.txt", RERANK_PAGES)
    query = "check the pump valve"
    settings = RetrievalSettings(fusion="keyword", merge_neighbours=False)
    plain = Retriever(store, tiny_embedder, settings=settings).search(query, k=3)
    settings = RetrievalSettings(fusion="keyword", merge_neighbours=False, rerank_candidates=2)
    reranked = Retriever(store, tiny_embedder, tiny_reranker, settings).search(query, k=3)
    head = sorted(plain[:2], key=lambda p: -tiny_reranker.predict([(query, p.text)])[0])
    assert [p.chunk_ids for p in reranked] == [p.chunk_ids for p in head] + [plain[2].chunk_ids]
    assert reranked[2].rerank_score is None and reranked[2].score == plain[2].score


# -- documents that go away -------------------------------------------------------------------


def test_a_document_removed_between_searches_is_gone(store, tiny_embedder, tiny_reranker):
    add_chunked(store, tiny_embedder, "/manuals/pump-manual.md", PUMP_PAGES)
    add_page_chunks(store, tiny_embedder, "/manuals/filter.txt", RUN_ON_PAGES)
    for retriever in (Retriever(store, tiny_embedder), Retriever(store, tiny_embedder, tiny_reranker)):
        before = retriever.search("open the pump cover", k=10)
        assert {p.document for p in before} == {"pump-manual.md", "filter.txt"}
    store.remove_document("/manuals/pump-manual.md")
    for retriever in (Retriever(store, tiny_embedder), Retriever(store, tiny_embedder, tiny_reranker)):
        after = retriever.search("open the pump cover", k=10)
        assert after and {p.document for p in after} == {"filter.txt"}
    store.remove_document("/manuals/filter.txt")
    assert Retriever(store, tiny_embedder, tiny_reranker).search("open the pump cover", k=10) == []


def test_a_reader_sees_a_document_another_connection_removed(tmp_path, store, tiny_embedder):
    add_chunked(store, tiny_embedder, "/manuals/pump-manual.md", PUMP_PAGES)
    add_page_chunks(store, tiny_embedder, "/manuals/filter.txt", RUN_ON_PAGES)
    store.flush()
    with IndexStore.open(store.folder, embedder_id=tiny_embedder.model_id,
                         dimension=tiny_embedder.dimension, read_only=True) as reader:
        retriever = Retriever(reader, tiny_embedder)
        assert {p.document for p in retriever.search("pump cover", k=10)} == {"pump-manual.md", "filter.txt"}
        store.remove_document("/manuals/pump-manual.md")
        assert {p.document for p in retriever.search("pump cover", k=10)} == {"filter.txt"}


# -- the real built-in embedder ----------------------------------------------------------------


@pytest.fixture(scope="module")
def manual_store(tmp_path_factory):
    with indexed_manual(tmp_path_factory.mktemp("manual")) as indexed:
        yield indexed


PARAPHRASES = [
    ("How do I swap out the dirty cartridge that cleans the intake air?", "Replacing the air filter"),
    ("The compressor shut down because it got too hot; how do I acknowledge the alarm?", "Alarm codes"),
    ("My gauge readings seem off; how can I make the sensor accurate again?",
     "Calibrating the pressure sensor"),
    ("How do I get rid of the water that builds up in the bottom of the machine?",
     "Cleaning the water tank"),
    ("Who do I contact to get the unit repaired under guarantee?", "Warranty and service contact"),
]


@pytest.mark.slow
@pytest.mark.parametrize("question, section", PARAPHRASES)
def test_a_paraphrased_question_finds_its_page_first(manual_store, question, section):
    store, embedder, pages = manual_store
    single = Retriever(store, embedder, settings=RetrievalSettings(merge_neighbours=False))
    assert single.search(question, k=3)[0].page == pages[section]
    top = Retriever(store, embedder).search(question, k=3)[0]
    assert top.heading_path[-1] == section and top.page == pages[section]
    assert top.pages == (pages[section],)  # no neighbour of another section taken in
    assert {store.chunk(i)["heading_path"] for i in top.chunk_ids} == {top.heading_path}
    assert top.document == "compressor-manual.md"


@pytest.mark.slow
@pytest.mark.parametrize("query", ["FC-2290", "Which cartridge is FC-2290?", "A-22"])
def test_an_exact_part_number_or_alarm_code_finds_its_page(manual_store, query):
    store, embedder, pages = manual_store
    section = "Alarm codes" if "A-22" in query else "Replacing the air filter"
    for fusion in ("rrf", "keyword"):
        settings = RetrievalSettings(fusion=fusion, merge_neighbours=False)
        top = Retriever(store, embedder, settings=settings).search(query, k=3)[0]
        assert top.page == pages[section] and top.keyword_score is not None
        assert query.split()[-1].rstrip("?") in top.text
