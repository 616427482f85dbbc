"""Printed page labels (issue 13): a citation names the page as printed ("page 5 (PDF page 10)")
where the PDF declares labels, from parsing through the store and the retriever to the CLI, the
prompt, the audit log and saved conversations; opening a source still uses the physical page."""

from __future__ import annotations

import json
import re
import sqlite3
from contextlib import contextmanager
from pathlib import Path

import pytest

from engine.answer.grounding import build_prompt
from engine.answer.retrieval import Retriever
from engine.cli.main import main
from engine.ingest.parse_pool import ParsePool
from engine.ingest.pdf import parse_pdf
from engine.kiosk.audit import Source
from engine.paths import DB_NAME
from engine.store.index_store import SCHEMA_VERSION, IndexStore
from engine.store.indexer import Indexer, printed_labels
from engine.types import Chunk, Citation, Page, ParsedDocument, Passage, Quote, Span
from tests.helpers.pdf_factory import write_pdf

PAGES = ["Cover of the pump manual.", "Preface about safety rules.",
         "Prime pump with water before start.", "Error E-12 means motor overheated."]
# T-1 on the cover, i on the preface, then 1 and 2: none is its physical number
LABELS = [(0, 0, "/D", "T-", 1), (1, 1, "/r", None, 1), (2, 3, "/D", None, 1)]


@pytest.fixture
def labelled_pdf(tmp_path, qapp) -> Path:
    return write_pdf(tmp_path / "pump.pdf", PAGES, LABELS)


def open_store(folder: Path, embedder, **options) -> IndexStore:
    return IndexStore.open(folder, embedder_id=embedder.model_id, dimension=embedder.dimension, **options)


def add(store: IndexStore, embedder, path: str, pages: list[str], labels: dict[int, str]) -> int:
    chunks = [Chunk(number, 0, len(text), text) for number, text in enumerate(pages, 1)]
    return store.add_document(path, f"sha-{path}", size=1, mtime=1.0, title=Path(path).stem,
                              page_count=len(pages), chunks=chunks,
                              embeddings=embedder.encode_documents(pages), page_labels=labels)


def passage(labels=(), pages=(10,)) -> Passage:
    return Passage(1, "/m/R-admin.pdf", "R-admin", (1,), tuple(Span(p, 0, 4) for p in pages), "text",
                   (), 0.1, 0.5, page_labels=labels)


# -- parsing --------------------------------------------------------------------------------

def test_a_pdf_with_page_labels_gives_each_page_its_printed_label(labelled_pdf):
    pages = parse_pdf(labelled_pdf).pages
    assert [(p.number, p.label) for p in pages] == [(1, "T-1"), (2, "i"), (3, "1"), (4, "2")]


def test_a_label_that_is_the_page_number_is_no_label(tmp_path, qapp):
    path = write_pdf(tmp_path / "plain.pdf", PAGES, [(0, 1, "/r", None, 1), (2, 3, "/D", None, 3)])
    assert [p.label for p in parse_pdf(path).pages] == ["i", "ii", "", ""]


def test_a_pdf_without_page_labels_has_none(tmp_path, qapp):
    assert [p.label for p in parse_pdf(write_pdf(tmp_path / "plain.pdf", PAGES)).pages] == ["", "", "", ""]


def test_a_cyclic_label_tree_costs_the_labels_not_the_document(tmp_path, qapp):
    from pypdf import PdfWriter
    from pypdf.generic import ArrayObject, DictionaryObject, NameObject, NumberObject

    path = write_pdf(tmp_path / "broken.pdf", PAGES)
    writer = PdfWriter(clone_from=str(path))
    tree = DictionaryObject()
    ref = writer._add_object(tree)
    tree[NameObject("/Kids")] = ArrayObject([ref])  # its own kid: pypdf gives up on it
    tree[NameObject("/Limits")] = ArrayObject([NumberObject(0), NumberObject(9)])
    writer._root_object[NameObject("/PageLabels")] = ref
    writer.write(str(path))
    from pypdf import PdfReader

    with pytest.raises(NotImplementedError):  # what the parser must survive
        _ = PdfReader(str(path)).page_labels
    with ParsePool(time_limit_s=30) as pool:  # PDFium crashes on it: its worker, read again with pypdf
        parsed = pool.parse(path)
    assert [" ".join(p.text.split()) for p in parsed.pages] == PAGES
    assert all(not p.label for p in parsed.pages)
    assert parsed.warnings == ()


def test_any_error_reading_labels_costs_only_the_labels(tmp_path, qapp, monkeypatch):
    path = write_pdf(tmp_path / "pump.pdf", PAGES, LABELS)

    def broken(self, index):
        raise KeyError("/Nums")

    monkeypatch.setattr("pypdfium2.PdfDocument.get_page_label", broken)
    assert [p.label for p in parse_pdf(path).pages] == ["", "", "", ""]


def test_only_pdf_labels_are_kept_as_printed_labels():
    pdf = ParsedDocument("/m/a.pdf", "a", (Page(1, "x", "iv"), Page(2, "y")))
    text = ParsedDocument("/m/a.txt", "a", (Page(1, "x", "lines 1-100"),))
    assert printed_labels(pdf) == {1: "iv"} and printed_labels(text) == {}


# -- the store --------------------------------------------------------------------------------

def test_labels_are_stored_with_their_document_and_go_with_it(tmp_path, tiny_embedder):
    with open_store(tmp_path / "c", tiny_embedder) as store:
        first = add(store, tiny_embedder, "/m/a.pdf", PAGES[:2], {1: "iv", 2: "v"})
        other = add(store, tiny_embedder, "/m/b.pdf", PAGES[2:], {2: "7"})
        assert store.page_labels([(first, 1), (first, 2), (other, 1), (other, 2), (99, 1)]) == \
            {(first, 1): "iv", (first, 2): "v", (other, 2): "7"}
        again = add(store, tiny_embedder, "/m/a.pdf", PAGES[:2], {2: "x"})  # indexed again
        assert store.page_labels([(first, 1), (first, 2), (again, 1), (again, 2)]) == {(again, 2): "x"}
        store.remove_document("/m/b.pdf")
        assert store.page_labels([(other, 2)]) == {}
        rows = store._db.execute("SELECT document_id, page, label FROM page_labels").fetchall()
        assert [tuple(r) for r in rows] == [(again, 2, "x")]


def test_a_collection_without_the_table_reads_without_labels_and_gains_it_when_written(tmp_path, tiny_embedder):
    folder = tmp_path / "old"
    with open_store(folder, tiny_embedder) as store:
        document = add(store, tiny_embedder, "/m/a.pdf", PAGES, {})
    db = sqlite3.connect(folder / DB_NAME)
    db.execute("DROP TABLE page_labels")  # as a collection indexed before labels were kept
    db.commit()
    db.close()
    with open_store(folder, tiny_embedder, read_only=True) as store:
        assert store.page_labels([(document, 1)]) == {}
        passages = Retriever(store, tiny_embedder).search("prime pump with water", k=2)
        assert passages and all(p.page_labels == () for p in passages)
        assert store.stats()["schema_version"] == SCHEMA_VERSION  # no new format for labels
    with open_store(folder, tiny_embedder) as store:
        assert store.page_labels([(document, 1)]) == {}
        document = add(store, tiny_embedder, "/m/a.pdf", PAGES, {3: "1"})
        assert store.page_labels([(document, 3)]) == {(document, 3): "1"}


def test_the_indexer_stores_a_pdfs_printed_labels_and_the_passage_carries_them(labelled_pdf, tmp_path,
                                                                               tiny_embedder, monkeypatch):
    with open_store(tmp_path / "c", tiny_embedder) as store:
        list(Indexer(store, tiny_embedder).run([labelled_pdf]))
        calls = []
        reads = store.page_labels
        monkeypatch.setattr(store, "page_labels", lambda pages: calls.append(1) or reads(pages))
        passages = Retriever(store, tiny_embedder).search("error E-12 motor overheated", k=4)
    assert len(calls) == 1  # one query for all the passages returned
    found = next(p for p in passages if p.page == 4)
    assert found.page_label(4) == "2" and found.pages_text((4,)) == "page 2 (PDF page 4)"
    assert all(p.page_label(n) == {1: "T-1", 2: "i", 3: "1", 4: "2"}[n] for p in passages for n in p.pages)


# -- the passage and what is saved ---------------------------------------------------------------

def test_a_passage_names_its_pages_as_printed_and_by_number():
    labelled = passage(((10, "5"), (11, "6")), pages=(10, 11))
    assert labelled.page_label(10) == "5" and labelled.page_label(12) == "12"
    assert labelled.pages_text() == "pages 5, 6 (PDF pages 10, 11)"
    assert labelled.pages_text((10,)) == "page 5 (PDF page 10)"
    assert passage().pages_text() == "page 10" and passage().page_label(10) == "10"


def test_citations_and_quotes_keep_their_labels_when_saved_and_older_saves_load():
    labelled = passage(((10, "5"),), pages=(10, 11))
    citation = Citation(1, labelled, "quote", True)
    saved = json.loads(json.dumps(citation.to_dict()))
    assert (saved["page"], saved["page_label"], saved["page_labels"]) == (10, "5", ["5", "11"])
    assert Citation.from_dict(saved).passage.pages_text() == "pages 5, 11 (PDF pages 10, 11)"
    quote = Quote(1, "A sentence.", labelled, Span(10, 0, 4))
    saved_quote = json.loads(json.dumps(quote.to_dict()))
    assert saved_quote["page"] == 10 and saved_quote["page_label"] == "5"
    assert Quote.from_dict(saved_quote).passage.page_label(10) == "5"
    for old in ({k: v for k, v in saved.items() if not k.startswith("page_label")},):
        assert Citation.from_dict(old).passage.pages_text() == "pages 10, 11"
    old_quote = {k: v for k, v in saved_quote.items() if k != "page_label"}
    assert Quote.from_dict(old_quote).passage.pages_text((10,)) == "page 10"
    assert Citation.of_quote(quote).passage.page_label(10) == "5"  # opening it keeps page 10


def test_the_prompt_names_the_printed_page():
    labelled = passage(((10, "5"),))
    prompt = build_prompt("How is R installed?", [labelled], [], lambda s: len(s.split()), 5000)
    assert "[1] R-admin.pdf, page 5:\ntext" in prompt.messages[-1]["content"]


def test_the_audit_log_names_the_printed_page_where_it_differs():
    assert Source.of(passage(((10, "5"),)), 2).to_dict() == \
        {"number": 2, "document": "R-admin.pdf", "page": 10, "page_label": "5"}
    assert Source.of(passage()).to_dict() == {"document": "R-admin.pdf", "page": 10}


# -- the CLI ------------------------------------------------------------------------------------

MANUAL = ["Front matter of the filter manual.", "Replace filter cartridge yearly. Use part F-77 only."]


@contextmanager
def labelled_assistant(tmp_path, embedder, llm_dir):
    from engine.answer.assistant import Assistant, AssistantSettings
    from engine.llm.local import LocalLLM

    with open_store(tmp_path / "manuals", embedder) as store, LocalLLM(llm_dir, provider="cpu") as llm:
        add(store, embedder, "/manuals/filter.pdf", MANUAL, {1: "ii", 2: "5"})
        settings = AssistantSettings(relevance_threshold=-10, max_new_tokens=8)  # answers all
        yield Assistant(Retriever(store, embedder), llm, settings)


@pytest.fixture
def labelled_ask(monkeypatch, tmp_path, tiny_embedder, tiny_llm_dir) -> list[str]:
    monkeypatch.setattr("engine.cli.ask._open", lambda args, paths: labelled_assistant(
        tmp_path, tiny_embedder, tiny_llm_dir))
    return ["--data-dir", str(tmp_path / "data")]


def test_ask_names_the_printed_page_and_the_pdf_page(labelled_ask, capsys):
    assert main(["ask", "How do I replace the filter cartridge?", *labelled_ask]) == 0
    out = capsys.readouterr().out
    assert "\u201cReplace filter cartridge yearly.\u201d (filter.pdf, page 5 (PDF page 2)) [" in out
    # the source is that page, or both pages merged into one passage
    assert re.search(r"^  \[\d\] filter\.pdf, (page 5 \(PDF page 2\)|pages ii, 5 \(PDF pages 1, 2\)): ",
                     out, re.MULTILINE)


def test_ask_json_keeps_the_physical_page_and_adds_the_label(labelled_ask, capsys):
    assert main(["ask", "How do I replace the filter cartridge?", "--json", *labelled_ask]) == 0
    record = json.loads(capsys.readouterr().out)
    lead = record["lead"][0]
    assert (lead["page"], lead["page_label"], lead["span"][0]) == (2, "5", 2)
    labels = {1: "ii", 2: "5"}
    cited = next(c for c in record["citations"] if 2 in c["pages"])
    assert cited["page_label"] == labels[cited["page"]] and isinstance(cited["page"], int)
    assert cited["page_labels"] == [labels[n] for n in cited["pages"]]


# -- a real manual ------------------------------------------------------------------------------

@pytest.mark.slow
def test_r_admin_cites_physical_page_10_as_printed_page_5(manuals_dir, tmp_path, tiny_embedder):
    path = manuals_dir / "R-admin.pdf"
    parsed = parse_pdf(path)
    assert parsed.pages[9].number == 10 and parsed.pages[9].label == "5"
    assert parsed.pages[0].label == "T-1" and parsed.pages[2].label == "i"
    with open_store(tmp_path / "c", tiny_embedder) as store:
        list(Indexer(store, tiny_embedder).run([path]))
        document = store.find_document(str(path)).id
        assert store.page_labels([(document, 10)]) == {(document, 10): "5"}
        passages = Retriever(store, tiny_embedder).search("R_DISABLE_HTTPD loopback interface", k=10)
    found = next(p for p in passages if 10 in p.pages)
    assert found.pages_text((10,)) == "page 5 (PDF page 10)" and 10 in [s.page for s in found.spans]
