"""Scanned pages through the indexing pipeline: recognised in the parse pool's worker (real
rapidocr models), page by page with progress, resumable through the cache after a kill -9, within
a per-page time limit; poorly recognised pages are not searched. Real SQLite, the tiny embedder.

The R-intro pages used: 12 (the readline and Emacs page), 13 (three short lines) and 30 ("5.6
Generalized transpose of an array"); scanned with tests/helpers/scanned.py. Every test that runs the
recogniser is marked slow (the models load in each worker: about a minute on 2 cores); `make test`
runs them."""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path

import pytest

from engine.errors import DocumentError
from engine.hashing import sha256_file
from engine.ingest import OcrOptions, ParsePool
from engine.ingest.ocr_pages import cache_folder
from engine.paths import AppPaths
from engine.store.indexer import LOW_CONFIDENCE, Indexer, IndexSettings, open_collection, searched_pages
from engine.types import OcrWord, Page, PageOcr, PageProgress, ParsedDocument
from tests.helpers.scanned import scanned_pdf

SCANNED_PAGES = [12, 13, 30]  # of R-intro; in the scan they are pages 1, 2, 3
TEXT_PAGES = [8, 9]  # of R-intro; the mixed PDF is these two, then R-intro page 13 scanned


def mixed_pdf(manuals: Path, out: Path) -> Path:
    """Two pages with their text layer, then a scanned page (image only)."""
    from pypdf import PdfReader, PdfWriter

    scan = scanned_pdf(manuals / "R-intro.pdf", [13], out.with_name("page13-scan.pdf"))
    writer = PdfWriter()
    source = PdfReader(manuals / "R-intro.pdf")
    for number in TEXT_PAGES:
        writer.add_page(source.pages[number - 1])
    writer.add_page(PdfReader(scan).pages[0])
    with open(out, "wb") as file:
        writer.write(file)
    return out


@pytest.fixture(scope="module")
def documents(tmp_path_factory, manuals_dir) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("scans")
    return {"scan": scanned_pdf(manuals_dir / "R-intro.pdf", SCANNED_PAGES, folder / "scan.pdf"),
            "mixed": mixed_pdf(manuals_dir, folder / "mixed.pdf")}


def settings(cache: Path | None, **overrides) -> IndexSettings:
    return IndexSettings(parse_time_limit_s=120, ocr_cache=cache, **overrides)


@pytest.fixture(scope="module")
def indexed(tmp_path_factory, documents, tiny_embedder):
    """Both PDFs indexed once with OCR (the module's only full recognition): the events, the
    collection's folder and the OCR cache."""
    root = tmp_path_factory.mktemp("ocr_data")
    paths = AppPaths(root / "data").ensure()
    cache = root / "cache"
    with open_collection(paths, "default", tiny_embedder) as store:
        events = list(Indexer(store, tiny_embedder, settings(cache)).run([documents["scan"], documents["mixed"]]))
    return {"events": events, "paths": paths, "cache": cache}


def pages_in(folder: Path) -> list[Path]:
    """The recognised pages kept in a cache folder (a kill mid-write may leave a temporary)."""
    return list(folder.glob("[0-9]*.json"))


def outcomes(events) -> dict:
    return {Path(e.outcome.path).name: e.outcome for e in events if e.outcome is not None}


def store_of(indexed, embedder):
    return open_collection(indexed["paths"], "default", embedder)


def keyword_pages(store, query: str, name: str) -> set[int]:
    return {chunk["page"] for chunk in store.chunks(i for i, _ in store.search_keyword(query, 10))
            if chunk["path"].endswith(name)}


# -- a scanned PDF, and a mixed one ------------------------------------------------------------
@pytest.mark.slow
def test_a_scanned_manual_is_recognised_and_its_pages_are_searchable(indexed, tiny_embedder):
    result = outcomes(indexed["events"])["scan.pdf"]
    assert (result.status, result.pages) == ("ready", 3) and result.chunks >= 3
    with store_of(indexed, tiny_embedder) as store:
        [document] = [d for d in store.list_documents() if d.path.endswith("scan.pdf")]
        assert document.ocr_pages == 3 and document.ocr_confidence > LOW_CONFIDENCE
        assert keyword_pages(store, '"Generalized transpose"', "scan.pdf") == {3}
        assert keyword_pages(store, "readline library", "scan.pdf") == {1}
        ocr = store.page_ocr(document.id, 3)
    assert ocr is not None and ocr.confidence > LOW_CONFIDENCE and len(ocr.words) > 100
    assert all(0 <= w.box[0] < w.box[2] <= ocr.width and 0 <= w.box[1] < w.box[3] <= ocr.height
               for w in ocr.words)


@pytest.mark.slow
def test_a_mixed_manual_keeps_its_text_layer_and_recognises_its_scanned_page(indexed, tiny_embedder):
    result = outcomes(indexed["events"])["mixed.pdf"]
    assert (result.status, result.pages) == ("ready", 3)
    with store_of(indexed, tiny_embedder) as store:
        [document] = [d for d in store.list_documents() if d.path.endswith("mixed.pdf")]
        assert document.ocr_pages == 1
        assert store.page_ocr(document.id, 1) is None and store.page_ocr(document.id, 2) is None
        assert store.page_ocr(document.id, 3) is not None
        assert keyword_pages(store, '"several analyses"', "mixed.pdf") == {3}  # the scanned page
        assert keyword_pages(store, '"integrated suite of software"', "mixed.pdf") == {1}


@pytest.mark.slow
def test_recognition_reports_each_page_before_the_document_is_stored(indexed):
    events = [e for e in indexed["events"] if e.current_file.endswith("scan.pdf")]
    recognising = [(e.document_pages_done, e.document_pages) for e in events if e.stage == "recognising"]
    assert recognising == [(0, 3), (1, 3), (2, 3), (3, 3)]
    last = max(i for i, e in enumerate(events) if e.stage == "recognising")
    assert all(e.stage == "" for e in events[last + 1:]) and events[-1].outcome is not None


def scan_cache(cache: Path, documents) -> Path:
    """The cache folder of the scanned PDF's recognised pages."""
    from engine.ingest.ocr import PageRecogniser

    return cache_folder(cache, sha256_file(documents["scan"]), PageRecogniser().engine_id)


@pytest.mark.slow
def test_each_recognised_page_is_kept_in_the_cache(indexed, documents):
    folder = scan_cache(indexed["cache"], documents)
    assert sorted(p.name for p in folder.iterdir()) == ["1.json", "2.json", "3.json"]


@pytest.mark.slow
def test_a_page_blamed_for_a_kill_that_is_in_the_cache_was_recognised_after_all(indexed, documents):
    """The worker may write a page to the cache and be killed before it reports that page: the
    pool then skips it on the next try, but the page is there and is kept."""
    from engine.ingest.ocr_pages import recognise_pages

    reports = []
    found, warnings = recognise_pages(documents["scan"], [1, 2, 3], OcrOptions(cache=indexed["cache"]),
                                      lambda done, total: reports.append(done), skip={1: "it stopped the reader"})
    assert sorted(found) == [1, 2, 3] and "several analyses" in found[2][0]
    assert warnings == [] and reports == [0, 1, 2, 3]


def test_without_ocr_scanned_pages_are_skipped_as_before(tmp_path, documents, tiny_embedder):
    paths = AppPaths(tmp_path / "data").ensure()
    with open_collection(paths, "default", tiny_embedder) as store:
        events = list(Indexer(store, tiny_embedder, settings(tmp_path / "cache", ocr=False)).run(
            [documents["scan"], documents["mixed"]]))
    result = outcomes(events)
    assert result["scan.pdf"].status == "failed" and "OCR is turned off" in result["scan.pdf"].reason
    assert result["mixed.pdf"].status == "ready_with_warnings"
    assert result["mixed.pdf"].reason.startswith("page 3 has only images")
    assert not any(e.stage for e in events) and not (tmp_path / "cache").exists()


@pytest.mark.slow
def test_turning_ocr_on_recognises_the_pages_skipped_without_it(tmp_path, indexed, documents, tiny_embedder):
    paths = AppPaths(tmp_path / "data").ensure()
    with open_collection(paths, "default", tiny_embedder) as store:
        skipped = outcomes(Indexer(store, tiny_embedder, settings(indexed["cache"], ocr=False)).run(
            [documents["mixed"]]))
        assert skipped["mixed.pdf"].status == "ready_with_warnings"
        again = outcomes(Indexer(store, tiny_embedder, settings(indexed["cache"])).run([documents["mixed"]]))
        assert (again["mixed.pdf"].status, again["mixed.pdf"].reason) == ("ready", "")  # from the cache
        assert store.find_document(documents["mixed"]).ocr_pages == 1
        unchanged = outcomes(Indexer(store, tiny_embedder, settings(indexed["cache"])).run([documents["mixed"]]))
        assert unchanged["mixed.pdf"].reason == "unchanged"


@pytest.mark.slow
def test_a_damaged_cache_file_is_recognised_again(tmp_path, indexed, documents):
    from engine.ingest.ocr import PageRecogniser

    cache = tmp_path / "cache"
    source = cache_folder(indexed["cache"], sha256_file(documents["scan"]), PageRecogniser().engine_id)
    folder = cache_folder(cache, sha256_file(documents["scan"]), PageRecogniser().engine_id)
    folder.mkdir(parents=True)
    for name in ("1.json", "3.json"):
        (folder / name).write_bytes((source / name).read_bytes())
    (folder / "2.json").write_text('{"format": 1, "text": "half a fi')  # page 13: three short lines
    # loading the models and recognising page 2 take longer than the document's 3 s: each page
    # reported moves its deadline
    with ParsePool(time_limit_s=3, ocr=OcrOptions(cache=cache)) as pool:
        parsed = pool.parse(documents["scan"])
    assert "several analyses" in parsed.pages[1].text and parsed.pages[1].ocr is not None
    assert "several analyses" in json.loads((folder / "2.json").read_text())["text"]  # kept again


# -- limits: a page's time, a killed worker --------------------------------------------------
@pytest.mark.slow
def test_a_page_over_its_time_limit_is_given_up_and_the_rest_is_indexed(tmp_path, documents, tiny_embedder):
    paths = AppPaths(tmp_path / "data").ensure()
    with open_collection(paths, "default", tiny_embedder) as store:
        events = list(Indexer(store, tiny_embedder, settings(tmp_path / "cache", ocr_page_time_limit_s=0.01)).run(
            [documents["mixed"]]))
        result = outcomes(events)["mixed.pdf"]
        assert result.status == "ready_with_warnings" and result.pages == 3
        assert "page 3 could not be recognised (OCR): it took longer than the 0.01 s limit per page" in result.reason
        assert 1 in keyword_pages(store, '"integrated suite of software"', "mixed.pdf")
        assert keyword_pages(store, '"several analyses"', "mixed.pdf") == set()  # the scanned page
        assert store.list_documents()[0].ocr_pages == 0


class _RecogniserBusyInAClassBody:
    """A recogniser whose page is still being set up (a class body, as pypdfium2's first import
    runs) when the page's time limit fires: Python wraps the timer's exception in a RuntimeError
    from __set_name__."""

    engine_id = "busy"

    def load(self) -> None:
        pass

    def recognise_pdf_pages(self, path, numbers, parallel):
        class Busy:
            def __set_name__(self, owner, name):
                while True:  # until the timer's signal raises in here
                    pass

        class _Page:
            attribute = Busy()

        yield from ()


def test_a_time_limit_that_fires_inside_a_class_body_is_still_a_time_limit():
    from engine.ingest.ocr_pages import _InOrder

    reader = _InOrder(_RecogniserBusyInAClassBody(), Path("scan.pdf"), [3], 0.01, lambda: None)
    assert reader.next(3) == "it took longer than the 0.01 s limit per page"


def frozen_on_first_page(pool: ParsePool, path: Path) -> list:
    """What imap yields for `path` when its first worker freezes (SIGSTOP, as a page stuck in one
    native call would leave it) as soon as it reports its first progress."""
    items = []
    for _, item in pool.imap([path], progress=True):
        if isinstance(item, PageProgress) and not items:
            os.kill(pool.pids[0], signal.SIGSTOP)
        items.append(item)
    return items


@pytest.mark.slow
def test_a_page_that_stops_the_reader_is_given_up_and_the_rest_recognised(tmp_path, indexed, documents,
                                                                          monkeypatch):
    """The caller stops the frozen worker once the page's limit and grace have passed, and
    starts the document again without that page; the other pages come from the cache."""
    import engine.ingest.parse_pool

    cache = tmp_path / "cache"
    shutil.copytree(indexed["cache"], cache)
    (scan_cache(cache, documents) / "1.json").unlink()  # never recognised: a page in the cache was read after all
    monkeypatch.setattr(engine.ingest.parse_pool, "_PAGE_GRACE_S", 0.5)
    with ParsePool(time_limit_s=4, ocr=OcrOptions(cache=cache, page_time_limit_s=1.0)) as pool:
        items = frozen_on_first_page(pool, documents["scan"])
    assert items[:2] == [PageProgress(0, 3), PageProgress(0, 3)]  # the second worker starts over
    parsed = items[-1]
    assert isinstance(parsed, ParsedDocument)
    assert parsed.warnings == ("page 1 could not be recognised (OCR): it went past the 1 s limit per page "
                               "and stopped the reader",)
    assert parsed.pages[0].ocr is None and parsed.pages[0].text == ""
    assert "several analyses" in parsed.pages[1].text and parsed.pages[2].ocr is not None


@pytest.mark.slow
def test_a_document_whose_pages_keep_stopping_the_reader_times_out_naming_the_page(documents, monkeypatch):
    import engine.ingest.parse_pool

    monkeypatch.setattr(engine.ingest.parse_pool, "_PAGE_GRACE_S", 0.5)
    monkeypatch.setattr(engine.ingest.parse_pool, "MAX_SKIPPED_PAGES", 0)
    with ParsePool(time_limit_s=4, ocr=OcrOptions(cache=None, page_time_limit_s=1.0)) as pool:
        items = frozen_on_first_page(pool, documents["scan"])
        assert pool.pids == []  # the frozen worker was stopped
    assert items[0] == PageProgress(0, 3)
    error = items[-1]
    assert isinstance(error, DocumentError) and error.kind == "timed_out"
    assert "recognising page 1 of the 3 without text went past the 1 s limit per page" in str(error)


@pytest.mark.slow
def test_a_killed_worker_keeps_the_pages_it_recognised_and_the_next_run_does_the_rest(
        tmp_path, documents, tiny_embedder):
    cache = tmp_path / "cache"
    with ParsePool(ocr=OcrOptions(cache=cache)) as pool:  # the worker killed after page 1, as by the OOM killer
        items = []
        for _, item in pool.imap([documents["scan"]], progress=True):
            items.append(item)
            if item == PageProgress(1, 3) and items.count(item) == 1:
                os.kill(pool.pids[0], signal.SIGKILL)
    parsed = items[-1]
    # two pages are recognised at once: page 2 may have been reported too before the kill, and
    # then page 3 is the one in work that the kill cost; or page 2 was in the cache, not yet
    # reported, and nothing is lost
    lost = [int(warning.split()[1]) for warning in parsed.warnings]
    assert lost in ([], [2], [3]) and parsed.warnings == tuple(
        f"page {n} could not be recognised (OCR): it stopped the reader process (killed by signal SIGKILL)"
        for n in lost)
    assert "readline library" in parsed.pages[0].text
    assert all(parsed.pages[n - 1].text.strip() for n in (1, 2, 3) if n not in lost)
    [folder] = list(cache.glob("*/*"))
    kept = {p.name: p.stat().st_ino for p in pages_in(folder)}
    assert sorted(kept) == [f"{n}.json" for n in (1, 2, 3) if n not in lost]

    paths = AppPaths(tmp_path / "data").ensure()  # the next run recognises the lost page only
    with open_collection(paths, "default", tiny_embedder) as store:
        events = list(Indexer(store, tiny_embedder, settings(cache)).run([documents["scan"]]))
        assert 2 in keyword_pages(store, '"several analyses"', "scan.pdf")
        assert keyword_pages(store, '"Generalized transpose"', "scan.pdf") == {3}
    assert outcomes(events)["scan.pdf"].status == "ready"
    after = {p.name: p.stat().st_ino for p in pages_in(folder)}
    assert sorted(after) == ["1.json", "2.json", "3.json"]
    assert all(after[name] == inode for name, inode in kept.items())  # read back, not recognised again


@pytest.mark.slow
def test_a_run_killed_while_recognising_keeps_its_pages_for_the_next_run(tmp_path, manuals_dir, tiny_embedder):
    """The whole run dies (its worker killed, its caller gone), as with kill -9 of the app. Six
    pages: two are recognised at once, so when the first is reported the kill must still find
    pages not done, even on a loaded machine."""
    scan = scanned_pdf(manuals_dir / "R-intro.pdf", SCANNED_PAGES * 2, tmp_path / "scan.pdf")
    cache = tmp_path / "cache"
    with ParsePool(ocr=OcrOptions(cache=cache)) as pool:
        results = pool.imap([scan], progress=True)
        for _, item in results:
            if item == PageProgress(1, 6):
                os.kill(pool.pids[0], signal.SIGKILL)
                results.close()
                break
    [folder] = list(cache.glob("*/*"))
    kept = {p.name: p.stat().st_ino for p in pages_in(folder)}
    assert "1.json" in kept and len(kept) < 6
    paths = AppPaths(tmp_path / "data").ensure()
    with open_collection(paths, "default", tiny_embedder) as store:
        events = list(Indexer(store, tiny_embedder, settings(cache)).run([scan]))
    assert (outcomes(events)["scan.pdf"].status, outcomes(events)["scan.pdf"].reason) == ("ready", "")
    after = {p.name: p.stat().st_ino for p in pages_in(folder)}
    assert sorted(after) == [f"{n}.json" for n in range(1, 7)]
    assert all(after[name] == inode for name, inode in kept.items())


@pytest.mark.slow
def test_a_cancel_while_recognising_keeps_the_pages_done(tmp_path, documents, tiny_embedder):
    import threading

    cache = tmp_path / "cache"
    cancel = threading.Event()
    paths = AppPaths(tmp_path / "data").ensure()
    with open_collection(paths, "default", tiny_embedder) as store:
        for event in Indexer(store, tiny_embedder, settings(cache)).run([documents["scan"]], cancel):
            if event.stage == "recognising" and event.document_pages_done == 1:
                cancel.set()
        assert store.list_documents() == []
    assert "1.json" in {p.name for p in cache.glob("*/*/*.json")}


# -- confidence ------------------------------------------------------------------------------
def page_ocr(confidence: float, words: int = 3) -> PageOcr:
    return PageOcr(confidence, 612, 792, tuple(OcrWord(i * 5, i * 5 + 4, (0, 0, 10, 10), confidence)
                                               for i in range(words)), "test")


def test_pages_under_the_low_confidence_are_not_searched_and_say_so():
    text = "word word word"
    document = ParsedDocument("/m.pdf", "M", (
        Page(1, "a text layer page"), Page(2, text, ocr=page_ocr(0.97)), Page(7, text, ocr=page_ocr(0.38)),
        Page(8, "", ocr=page_ocr(0.0, words=0))))
    kept, recognised = searched_pages(document)
    assert [p.text for p in kept.pages] == ["a text layer page", text, "", ""]
    assert set(recognised) == {2}
    assert kept.warnings == ("page 7 was recognised with low confidence (38%) and is not searched",
                             "page 8 has only images and OCR found no text")


@pytest.mark.slow
def test_an_unreadable_scan_comes_out_under_the_low_confidence(tmp_path, manuals_dir, tiny_embedder):
    import numpy as np
    from PIL import Image

    noisy = scanned_pdf(manuals_dir / "R-intro.pdf", [12], tmp_path / "noisy.pdf", noise=170)
    noise = tmp_path / "noise.pdf"
    pixels = np.random.default_rng(3).integers(0, 256, (1650, 1275), dtype=np.uint8)
    Image.fromarray(pixels, "L").save(noise, "PDF", resolution=150.0)
    paths = AppPaths(tmp_path / "data").ensure()
    with open_collection(paths, "default", tiny_embedder) as store:
        result = outcomes(Indexer(store, tiny_embedder, settings(None)).run([noisy, noise]))
        assert store.stats()["chunks"] == 0
    assert result["noisy.pdf"].status == "ready_with_warnings"
    assert "page 1 was recognised with low confidence (" in result["noisy.pdf"].reason
    assert result["noise.pdf"].status in ("failed", "ready_with_warnings")
    assert "OCR found no text" in result["noise.pdf"].reason or "low confidence" in result["noise.pdf"].reason


def test_the_cli_progress_line_says_which_page_is_being_recognised():
    import io

    from engine.cli.index import _ProgressBar, stage_text
    from engine.types import IndexProgress

    event = IndexProgress(0, 1, 0, "/docs/scan.pdf", 3.0, document_pages=80, document_pages_done=11,
                          stage="recognising")
    bar = _ProgressBar(io.StringIO())
    bar.show(event)
    assert bar.stream.getvalue() == ""  # not a terminal: only finished documents are printed
    assert bar._line(event).endswith("scan.pdf, recognising text, page 12 of 80")
    assert stage_text(IndexProgress(0, 1, 0, "/docs/scan.pdf", 3.0, document_pages=80, document_pages_done=11)) == ""


@pytest.mark.slow
def test_the_cli_recognises_unless_told_not_to_by_flag_or_setting(tmp_path, manuals_dir, capsys):
    from engine.cli.common import SOME_FAILED_EXIT
    from engine.cli.main import main

    scan = scanned_pdf(manuals_dir / "R-intro.pdf", [13], tmp_path / "short-scan.pdf")

    def index(data: Path, *flags: str) -> dict:
        code = main(["index", str(scan), "--json", "--data-dir", str(data), "--provider", "cpu", *flags])
        [row] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert code == (SOME_FAILED_EXIT if row["status"] == "failed" else 0), row
        return row

    flagged = index(tmp_path / "flagged", "--no-ocr")
    assert flagged["status"] == "failed" and "OCR is turned off" in flagged["reason"]
    data = tmp_path / "data"
    data.mkdir()
    (data / "settings.toml").write_text("ocr = false\n", encoding="utf-8")
    assert "OCR is turned off" in index(data)["reason"]
    (data / "settings.toml").unlink()
    recognised = index(data)  # a failed document is read again; now with OCR
    assert (recognised["status"], recognised["pages"]) == ("ready", 1) and recognised["chunks"] >= 1
    assert list((data / "cache" / "ocr").glob("*/*/1.json"))
