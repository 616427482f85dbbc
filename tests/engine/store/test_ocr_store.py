"""What OCR produced, kept by the store: the ocr_pages table (confidence, engine, page size, word
boxes), the documents' OCR counts, passages and citations that know their recognised pages, older
and read-only collections without the table, and index bundles that carry it. Real SQLite and
the tiny ONNX embedder; no OCR models needed here."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest

from engine.answer.retrieval import Retriever
from engine.fleet import bundle as fleet
from engine.paths import DB_NAME, AppPaths
from engine.store.index_store import IndexStore
from engine.types import Chunk, Citation, OcrWord, PageOcr, Quote

NAME = "manuals"
PAGES = ["Chapter one. Prime the pump with water before starting it.",
         "The gearbox oil is drained through the plug marked DRAIN.",
         "Error E-1234 means the seal leaks; replace the seal kit."]


def ocr_of(text: str, confidence: float, engine: str = "test-engine") -> PageOcr:
    """A PageOcr whose words are the text's words, laid on one line each 40 points wide."""
    words, start = [], 0
    for index, word in enumerate(text.split(" ")):
        words.append(OcrWord(start, start + len(word), (10.0 + 40 * index, 50.0, 48.0 + 40 * index, 62.0), 0.9))
        start += len(word) + 1
    return PageOcr(confidence, 612.0, 792.0, tuple(words), engine)


def add(store: IndexStore, embedder, path: Path, ocr_pages: dict[int, PageOcr] | None = None,
        edition: str = "") -> int:
    """The manual's PAGES, each ending with `edition` (retrieval shows a text repeated once)."""
    pages = [text + edition for text in PAGES]
    path.write_text("\n\n".join(pages), encoding="utf-8")
    chunks = [Chunk(page=n, start=0, end=len(text), text=text) for n, text in enumerate(pages, 1)]
    return store.add_document(str(path), hashlib.sha256(path.read_bytes()).hexdigest(), size=path.stat().st_size,
                              mtime=1.0, title=path.stem, page_count=len(pages), chunks=chunks,
                              embeddings=embedder.encode_documents(pages), ocr_pages=ocr_pages)


@pytest.fixture
def paths(tmp_path) -> AppPaths:
    return AppPaths(tmp_path / "data").ensure()


def writer(paths: AppPaths, embedder) -> IndexStore:
    return IndexStore.open(paths.collection(NAME), embedder_id=embedder.model_id, dimension=embedder.dimension)


@pytest.fixture
def stored(paths, tmp_path, tiny_embedder):
    """A collection with a scanned manual (pages 2 and 3 recognised) and a text one."""
    recognised = {2: ocr_of(PAGES[1], 0.96), 3: ocr_of(PAGES[2], 0.9)}
    with writer(paths, tiny_embedder) as store:
        scanned = add(store, tiny_embedder, tmp_path / "scanned.md", recognised)
        text = add(store, tiny_embedder, tmp_path / "text.md", edition=" (Second edition.)")
    return {"scanned": scanned, "text": text, "recognised": recognised, "folder": tmp_path}


def sql(paths, statement: str) -> list[tuple]:
    """Runs `statement` on the collection's database from outside the store (committed); its rows."""
    db = sqlite3.connect(paths.collection(NAME) / DB_NAME)
    try:
        rows = db.execute(statement).fetchall()
        db.commit()
        return rows
    finally:
        db.close()


def test_a_recognised_page_comes_back_as_it_was_stored(paths, stored, tiny_embedder):
    with writer(paths, tiny_embedder) as store:
        assert store.page_ocr(stored["scanned"], 2) == stored["recognised"][2]
        assert store.page_ocr_by_path(str(stored["folder"] / "scanned.md"), 3) == stored["recognised"][3]
        assert store.page_ocr(stored["scanned"], 1) is None  # its text layer was read
        assert store.page_ocr(stored["text"], 2) is None
        assert store.page_ocr_by_path("/nowhere/else.pdf", 2) is None
        box = store.page_ocr(stored["scanned"], 3).words[1].box
    assert box == (50.0, 50.0, 88.0, 62.0)


def test_documents_count_their_recognised_pages_and_their_mean_confidence(paths, stored, tiny_embedder):
    with writer(paths, tiny_embedder) as store:
        documents = {Path(d.path).name: d for d in store.list_documents()}
        found = store.find_document(stored["folder"] / "scanned.md")
    scanned, text = documents["scanned.md"], documents["text.md"]
    assert (scanned.ocr_pages, text.ocr_pages) == (2, 0)
    assert scanned.ocr_confidence == pytest.approx(0.93) and text.ocr_confidence is None
    assert found == scanned
    assert scanned.to_dict()["ocr_pages"] == 2 and scanned.to_dict()["ocr_confidence"] == pytest.approx(0.93)
    assert "ocr_pages" not in text.to_dict()  # as before OCR for a document without it


def test_replacing_or_removing_a_document_removes_its_recognised_pages(paths, stored, tiny_embedder):
    with writer(paths, tiny_embedder) as store:
        add(store, tiny_embedder, stored["folder"] / "scanned.md", {1: ocr_of(PAGES[0], 0.99)})
        [replaced] = [d for d in store.list_documents() if d.path.endswith("scanned.md")]
        assert replaced.ocr_pages == 1 and store.page_ocr(replaced.id, 2) is None
        assert store.page_ocr(replaced.id, 1).confidence == 0.99
        assert store.remove_document(replaced.id)
    assert sql(paths, "SELECT count(*) FROM ocr_pages") == [(0,)]


def test_a_collection_from_before_ocr_reads_and_answers_without_the_table(paths, stored, tiny_embedder):
    sql(paths, "DROP TABLE ocr_pages")
    with IndexStore.open(paths.collection(NAME), embedder_id=None, dimension=None, read_only=True) as store:
        documents = store.list_documents()
        assert [d.ocr_pages for d in documents] == [0, 0]
        assert store.page_ocr(stored["scanned"], 2) is None
        assert store.recognised_pages([(stored["scanned"], 2)]) == set()
        passages = Retriever(store, tiny_embedder).search("gearbox oil drained", k=3)
        assert passages and all(p.ocr_pages == () for p in passages)
    with writer(paths, tiny_embedder) as store:  # a writer gives it the table again
        assert store.page_ocr(stored["scanned"], 2) is None
        add(store, tiny_embedder, stored["folder"] / "again.md", {2: ocr_of(PAGES[1], 0.97)})
        assert store.find_document(stored["folder"] / "again.md").ocr_pages == 1


def test_passages_and_citations_say_which_of_their_pages_were_recognised(paths, stored, tiny_embedder):
    with writer(paths, tiny_embedder) as store:
        passages = Retriever(store, tiny_embedder).search("Error E-1234 seal leaks gearbox oil", k=6)
    by_document = {}
    for passage in passages:
        by_document.setdefault(Path(passage.path).name, []).append(passage)
    scanned = [p for p in by_document["scanned.md"] if 3 in p.pages]
    assert scanned and all(3 in p.ocr_pages for p in scanned)
    assert all(set(p.ocr_pages) <= set(p.pages) & {2, 3} for p in by_document["scanned.md"])
    assert all(p.ocr_pages == () for p in by_document["text.md"])
    passage = scanned[0]
    assert passage.to_dict()["ocr_pages"] == list(passage.ocr_pages)
    saved = json.loads(json.dumps(Citation(1, passage, passage.text, True).to_dict()))
    assert saved["ocr_pages"] == list(passage.ocr_pages)
    assert Citation.from_dict(saved).passage.ocr_pages == passage.ocr_pages
    older = {k: v for k, v in saved.items() if k != "ocr_pages"}  # saved before OCR
    assert Citation.from_dict(older).passage.ocr_pages == ()
    span = next(s for s in passage.spans if s.page == 3)
    quote = Quote(1, passage.text[:20], passage, span)
    assert Quote.from_dict(json.loads(json.dumps(quote.to_dict()))).passage.ocr_pages == (3,)


def test_damaged_word_boxes_are_a_damaged_collection_not_a_crash(paths, stored, tiny_embedder):
    from engine.errors import EngineError

    # damaged while open (at open, the health scan repairs it: test_collection_damage.py)
    with IndexStore.open(paths.collection(NAME), embedder_id=None, dimension=None, read_only=True) as store:
        sql(paths, "UPDATE ocr_pages SET words = '{\"not\": \"a list\"' WHERE page = 2")
        with pytest.raises(EngineError, match="damaged|could not be read"):
            store.page_ocr(stored["scanned"], 2)
        assert store.page_ocr(stored["scanned"], 3) == stored["recognised"][3]


def test_docs_list_json_shows_the_recognised_pages(paths, stored, capsys):
    from engine.cli.main import main

    assert main(["docs", "list", "--json", "--collection", NAME, "--data-dir", str(paths.root)]) == 0
    rows = {Path(row["path"]).name: row for row in map(json.loads, capsys.readouterr().out.splitlines())}
    assert rows["scanned.md"]["ocr_pages"] == 2 and rows["scanned.md"]["ocr_confidence"] == pytest.approx(0.93)
    assert "ocr_pages" not in rows["text.md"]
    assert main(["docs", "list", "--collection", NAME, "--data-dir", str(paths.root)]) == 0
    assert "[OCR: 2 pages, 93%]" in capsys.readouterr().out


def test_a_bundle_installed_on_a_kiosk_keeps_the_recognised_pages(paths, stored, tmp_path, tiny_embedder):
    key = fleet.generate_keys(tmp_path / "signing.pem", tmp_path / "signing.pub")
    out = tmp_path / "out" / f"{NAME}-1.tar"
    fleet.build_bundle(paths, NAME, key, out, version=1)
    kiosk = AppPaths(tmp_path / "kiosk").ensure()
    folder = fleet.install_bundle(kiosk, out, [fleet.public_key_text(key)], expected_embedder=tiny_embedder.model_id)
    with IndexStore.open(folder, embedder_id=tiny_embedder.model_id, dimension=tiny_embedder.dimension,
                         read_only=True) as store:
        [scanned] = [d for d in store.list_documents() if d.path.endswith("scanned.md")]
        assert scanned.ocr_pages == 2
        assert store.page_ocr_by_path(scanned.path, 2) == stored["recognised"][2]
