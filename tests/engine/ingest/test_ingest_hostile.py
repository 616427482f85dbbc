"""Hostile and broken documents end with their stated outcome within their limits, and the
pool survives every one of them."""

from __future__ import annotations

import collections
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from engine.errors import DocumentError
from engine.ingest import ParsePool, outcome_for
from tests.helpers.hostile_files import HOSTILE, write_long_pdf, write_manual_pdf

LIMIT_S = 10.0
SLACK_S = 2.0  # killing and reaping a worker past its limit
KINDS = set(DocumentError._MESSAGES)
CORPUS = Path(__file__).resolve().parents[3].parent / "shared" / "corpora" / "hostile-pdfs"


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("hostile")


@pytest.fixture(scope="module")
def good(folder) -> Path:
    return write_manual_pdf(folder, "good.pdf")


@pytest.fixture(scope="module")
def long_pdf(folder) -> Path:
    return write_long_pdf(folder)


@pytest.fixture(scope="module")
def pool():
    with ParsePool(workers=1, time_limit_s=LIMIT_S, memory_limit_mb=1024) as pool:
        yield pool


def outcome_of(result):
    return result.outcome if isinstance(result, DocumentError) else outcome_for(result)


def assert_parses_good(pool: ParsePool, good: Path) -> None:
    document = pool.parse(good)
    [page] = [page.number for page in document.pages if "Error E42" in page.text]
    assert page == 4


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_file_ends_with_its_outcome_and_the_pool_survives(name, folder, good, pool):
    hostile = HOSTILE[name]
    path = hostile.make(folder)
    started = time.monotonic()
    [(returned, result)] = list(pool.imap([path]))
    assert time.monotonic() - started < LIMIT_S + SLACK_S
    outcome = outcome_of(result)
    assert returned == path and outcome.path == str(path)
    assert outcome.status == hostile.status, outcome.reason
    assert hostile.reason in outcome.reason
    if hostile.status == "failed":
        assert result.kind == hostile.kind, str(result)
        assert f"'{path.name}'" in outcome.reason
    assert_parses_good(pool, good)


def test_past_the_time_limit_a_document_times_out_and_the_next_gets_a_fresh_worker(
        long_pdf, good):
    with ParsePool(time_limit_s=1.0) as pool:
        assert_parses_good(pool, good)
        [first_worker] = pool.pids
        started = time.monotonic()
        with pytest.raises(DocumentError) as error:
            pool.parse(long_pdf)
        assert time.monotonic() - started < 1.0 + SLACK_S
        assert error.value.kind == "timed_out"
        assert "'long.pdf'" in str(error.value) and "limit 1 s" in str(error.value)
        assert pool.pids == []
        assert_parses_good(pool, good)
        assert pool.pids != [first_worker]


@pytest.mark.skipif(sys.platform != "linux", reason="the memory cap is RLIMIT_AS, on Linux")
def test_a_document_over_the_memory_cap_is_too_large(tmp_path, good):
    big = tmp_path / "big.txt"
    with big.open("w") as file:
        block = "The quick brown fox jumps over the lazy dog, again and again.\n" * 1000
        for _ in range(1600):  # about 100 MB: several times that in memory once parsed
            file.write(block)
    with ParsePool(memory_limit_mb=256, max_text_mb=200) as pool:
        with pytest.raises(DocumentError) as error:
            pool.parse(big)
        assert error.value.kind == "too_large"
        assert "'big.txt'" in str(error.value) and "256 MB memory limit" in str(error.value)
        assert_parses_good(pool, good)


@pytest.mark.parametrize("kill_with, kind, words", [
    (signal.SIGSEGV, "crashed", "SIGSEGV"),
    (signal.SIGKILL, "too_large", "ran out of memory"),  # what the kernel's OOM killer does
])
def test_a_worker_that_dies_costs_only_its_document(long_pdf, good, kill_with, kind, words):
    with ParsePool(time_limit_s=60) as pool:
        results = pool.imap([good, long_pdf, good])
        assert next(results)[0] == good
        [worker] = pool.pids  # already parsing long.pdf while we look at good.pdf
        os.kill(worker, kill_with)
        # the second try (with pypdf, after PDFium's worker died) dies too
        killer = _kill_the_next_worker(pool, worker, kill_with)
        path, result = next(results)
        killer.join()
        assert path == long_pdf and result.kind == kind and words in str(result)
        path, result = next(results)
        assert path == good and result.pages[3].number == 4
        assert worker not in pool.pids


def _kill_the_next_worker(pool: ParsePool, dead: int, signal_number: int) -> threading.Thread:
    """A thread that kills the first worker of `pool` other than `dead` once it is there."""
    def kill() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            others = [pid for pid in list(pool.pids) if pid != dead]
            if others:
                os.kill(others[0], signal_number)
                return
            threading.Event().wait(0.01)

    thread = threading.Thread(target=kill, daemon=True)
    thread.start()
    return thread


@pytest.mark.slow  # pypdf reads all 8,000 pages again (about 8 s on 2 cores); `make test` runs it
def test_a_worker_that_pdfium_stops_reads_the_document_again_with_pypdf(long_pdf, good, caplog):
    with ParsePool(time_limit_s=60) as pool, caplog.at_level("INFO", logger="engine.ingest.parse_pool"):
        results = pool.imap([good, long_pdf])
        assert next(results)[0] == good
        [worker] = pool.pids  # reading long.pdf with PDFium now
        os.kill(worker, signal.SIGABRT)  # as PDFium does when an allocation fails
        path, result = next(results)
    assert path == long_pdf and not isinstance(result, DocumentError)
    assert len(result.pages) == 8000
    assert "long.pdf: PDFium stopped its reader process" in caplog.text


def test_imap_yields_in_input_order_with_two_workers(folder, good, tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("Torque the bolts to 40 Nm.\n")
    paths = [good, HOSTILE["not a PDF"].make(folder), text, tmp_path / "missing.pdf",
             HOSTILE["scanned only"].make(folder), good]
    with ParsePool(workers=2) as pool:
        results = list(pool.imap(paths))
        assert len(pool.pids) <= 2
    assert [path for path, _ in results] == paths
    assert [outcome_of(result).status for _, result in results] == [
        "ready", "failed", "ready", "failed", "failed", "ready"]
    assert [getattr(result, "kind", "") for _, result in results] == [
        "", "invalid", "", "unreadable", "no_text", ""]


def test_the_next_document_parses_while_the_caller_works_on_this_one(good, long_pdf):
    with ParsePool(workers=1, time_limit_s=60) as pool:
        results = pool.imap([good, long_pdf])
        next(results)
        assert pool.pids and pool._idle == []  # the worker is busy with long.pdf already
        results.close()  # stopping early stops that parse too
        assert pool.pids == []


def test_cancel_stops_between_and_during_documents(good, long_pdf):
    cancel = threading.Event()
    with ParsePool(time_limit_s=60) as pool:
        results = pool.imap([good, long_pdf, good], cancel=cancel)
        assert next(results)[0] == good
        cancel.set()  # long.pdf is parsing now
        started = time.monotonic()
        assert list(results) == []
        assert time.monotonic() - started < SLACK_S
        assert pool.pids == []
        assert list(pool.imap([good], cancel=cancel)) == []  # set before: nothing starts
        assert_parses_good(pool, good)


def test_files_refused_up_front_never_reach_a_worker(tmp_path):
    (tmp_path / "drawing.dwg").write_bytes(b"AC1032")
    (tmp_path / "folder.pdf").mkdir()
    paths = [tmp_path / "drawing.dwg", tmp_path / "missing.md", tmp_path / "folder.pdf"]
    with ParsePool() as pool:
        results = list(pool.imap(paths))
        assert pool.pids == []
    assert [result.kind for _, result in results] == ["unsupported", "unreadable", "unreadable"]
    assert "No such file" in str(results[1][1]) and "folder" in str(results[2][1])


def test_a_pool_needs_a_worker():
    with pytest.raises(ValueError):
        ParsePool(workers=0)


# -- the shared corpus of real broken PDFs ------------------------------------------------
def corpus_files(links: Path) -> list[Path]:
    """Every file of the corpus; fuzzer inputs without a .pdf name are reached through a
    link that has one (nothing is copied)."""
    files = []
    for number, file in enumerate(sorted(CORPUS.rglob("*"))):
        if not file.is_file() or file.name == "README.md":
            continue
        if file.suffix.lower() != ".pdf":
            link = links / f"{number:04d}-{file.name}.pdf"
            link.symlink_to(file)
            file = link
        files.append(file)
    return files


@pytest.mark.slow
@pytest.mark.skipif(not CORPUS.is_dir(), reason=f"no shared hostile PDF corpus at {CORPUS}")
def test_every_file_of_the_shared_hostile_corpus_ends_classified(tmp_path, good, capsys):
    files = corpus_files(tmp_path)
    counts = collections.Counter()
    started = time.monotonic()
    with ParsePool(workers=2, time_limit_s=60) as pool:
        for path, result in pool.imap(files):
            outcome = outcome_of(result)
            assert outcome.path == str(path)
            if isinstance(result, DocumentError):
                assert result.kind in KINDS and f"'{path.name}'" in outcome.reason
                counts[f"failed ({result.kind})"] += 1
            else:
                counts[outcome.status] += 1
        assert_parses_good(pool, good)
    elapsed = time.monotonic() - started
    with capsys.disabled():
        summary = ", ".join(f"{name} {count}" for name, count in sorted(counts.items()))
        print(f"\nhostile corpus: {len(files)} files in {elapsed:.1f} s: {summary}")
    assert sum(counts.values()) == len(files)
    assert counts["failed (crashed)"] == 0  # every exception pypdf raised was classified
