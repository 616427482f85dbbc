"""The indexing pipeline end to end: real parsers in child processes, real chunking, real
embeddings, the real store. Fast tests use the tiny embedder; slow ones the built-in one on
Debian's R manuals."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from engine.encoders.embedder import Embedder
from engine.errors import EngineError
from engine.paths import AppPaths
from engine.store.indexer import Indexer, IndexSettings, open_collection
from engine.types import StoredDocument
from tests.helpers.tiny_embedder import write_tiny_embedder

REPO = Path(__file__).resolve().parents[3]
SETTINGS = IndexSettings(parse_time_limit_s=30, parse_memory_limit_mb=1024)


def _write_docs(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pump.md").write_text("# Pump\n\nPrime the pump with water before starting.\n\n"
                                    "## Faults\n\nError E-1234 means the seal leaks.\n", encoding="utf-8")
    (folder / "notes.txt").write_text("Check the oil level every week.\n" * 30, encoding="utf-8")
    (folder / "broken.pdf").write_bytes(b"this is not a pdf")
    (folder / "empty.docx").write_bytes(b"")
    return folder


def _run(store, embedder, inputs, cancel=None):
    return list(Indexer(store, embedder, SETTINGS).run(inputs, cancel))


def _outcomes(events):
    return {Path(e.outcome.path).name: e.outcome for e in events if e.outcome is not None}


def test_folder_is_indexed_and_failures_do_not_stop_the_rest(tmp_path, tiny_embedder):
    docs = _write_docs(tmp_path / "docs")
    paths = AppPaths(tmp_path / "data").ensure()
    with open_collection(paths, "default", tiny_embedder) as store:
        events = _run(store, tiny_embedder, [docs])
        outcomes = _outcomes(events)
        assert outcomes["pump.md"].status == "ready" and outcomes["pump.md"].chunks >= 1
        assert outcomes["notes.txt"].status == "ready"
        assert outcomes["broken.pdf"].status == "failed" and "broken.pdf" in outcomes["broken.pdf"].reason
        assert outcomes["empty.docx"].status == "failed"
        listed = {Path(d.path).name: d for d in store.list_documents()}
        assert listed["broken.pdf"].status == "failed" and listed["broken.pdf"].error
        hits = store.search_keyword("E-1234", 5)
        assert hits and "E-1234" in store.chunk(hits[0][0])["text"]
        assert events[-1].documents_done == events[-1].documents_total == 4


class _Pause:
    """A pause flag set for its first `polls` looks, then clear; each look is logged."""

    def __init__(self, log: list[str], polls: int):
        self.log, self.polls = log, polls

    def is_set(self) -> bool:
        self.polls -= 1
        self.log.append("paused" if self.polls >= 0 else "go")
        return self.polls >= 0


class _LoggingEmbedder:
    def __init__(self, embedder: Embedder, log: list[str]):
        self.embedder, self.log = embedder, log

    def __getattr__(self, name):
        return getattr(self.embedder, name)

    def encode_documents(self, texts, **options):
        self.log.append("embed")
        return self.embedder.encode_documents(texts, **options)


def test_embedding_waits_while_paused_and_then_carries_on(tmp_path, tiny_embedder):
    """The window pauses indexing while a question is answered: no embedding step starts while
    the pause is set, and the run then finishes as usual."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "pump.md").write_text("# Pump\n\nPrime the pump with water before starting.\n", encoding="utf-8")
    log: list[str] = []
    paths = AppPaths(tmp_path / "data").ensure()
    with open_collection(paths, "default", tiny_embedder) as store:
        indexer = Indexer(store, _LoggingEmbedder(tiny_embedder, log), SETTINGS, pause=_Pause(log, 3))
        events = list(indexer.run([docs]))
        assert _outcomes(events)["pump.md"].status == "ready"
        assert store.search_keyword("prime", 3)
    assert log[:5] == ["paused", "paused", "paused", "go", "embed"]


def test_reindexing_is_a_no_op_and_a_changed_file_replaces_its_chunks(tmp_path, tiny_embedder):
    docs = _write_docs(tmp_path / "docs")
    paths = AppPaths(tmp_path / "data").ensure()
    with open_collection(paths, "default", tiny_embedder) as store:
        _run(store, tiny_embedder, [docs])
        before = store.stats()["chunks"]
        again = _outcomes(_run(store, tiny_embedder, [docs]))
        assert again["pump.md"].reason == "unchanged" and store.stats()["chunks"] == before
        (docs / "pump.md").write_text("# Pump\n\nA different manual now.\n", encoding="utf-8")
        changed = _outcomes(_run(store, tiny_embedder, [docs]))
        assert changed["pump.md"].status == "ready" and changed["pump.md"].reason != "unchanged"
        assert not store.search_keyword("E-1234", 5)
        assert store.search_keyword("different manual", 5)


def test_cancel_leaves_a_consistent_collection_that_resumes(tmp_path, tiny_embedder):
    docs = _write_docs(tmp_path / "docs")
    paths = AppPaths(tmp_path / "data").ensure()
    cancel = threading.Event()
    with open_collection(paths, "default", tiny_embedder) as store:
        finished = []
        for event in Indexer(store, tiny_embedder, SETTINGS).run([docs], cancel):
            if event.outcome is not None:
                finished.append(event.outcome)
                if event.outcome.status == "ready":
                    cancel.set()  # stop after the first stored document
        assert [o.status for o in finished] == ["failed", "failed", "ready"]  # files go in name order
        assert store.quick_check() == "ok"
        assert {d.path for d in store.list_documents()} == {o.path for o in finished}
        resumed = _outcomes(_run(store, tiny_embedder, [docs]))
        assert resumed["notes.txt"].reason == "unchanged"
        assert resumed["broken.pdf"].status == "failed"  # failures are tried again
        assert resumed["pump.md"].status == "ready"
        assert len(store.list_documents()) == 4


def test_files_found_already_are_indexed_as_given_without_looking_again(tmp_path, tiny_embedder, monkeypatch):
    docs = _write_docs(tmp_path / "docs")
    files = [str(docs / "pump.md"), str(docs / "notes.txt")]

    def no_second_look(inputs):
        raise AssertionError(f"discovered again: {inputs}")

    monkeypatch.setattr("engine.store.indexer.discover", no_second_look)
    paths = AppPaths(tmp_path / "data").ensure()
    with open_collection(paths, "default", tiny_embedder) as store:
        events = list(Indexer(store, tiny_embedder, SETTINGS).run(files=files))
        assert [e.outcome.path for e in events if e.outcome] == files  # in the order given
        assert events[-1].documents_done == events[-1].documents_total == 2


@pytest.mark.parametrize("how", ["copy in another folder", "two copies in one run", "moved"])
def test_the_same_bytes_under_another_path_are_stored_once(tmp_path, tiny_embedder, how):
    """A manual dropped from two folders is searched once (its passages would show twice); one
    whose file moved is stored under its new path without being read or embedded again."""
    first, second = _write_docs(tmp_path / "a") / "pump.md", tmp_path / "b" / "pump.md"
    second.parent.mkdir()
    shutil.copy2(first, second)
    log: list[str] = []
    paths = AppPaths(tmp_path / "data").ensure()
    with open_collection(paths, "default", tiny_embedder) as store:
        indexer = Indexer(store, _LoggingEmbedder(tiny_embedder, log), SETTINGS)
        if how != "two copies in one run":
            list(indexer.run([first]))
            [stored] = store.list_documents()
            log.clear()
        if how == "moved":
            first.unlink()
        inputs = [first, second] if how == "two copies in one run" else [second]
        outcome = {e.outcome.path: e.outcome for e in indexer.run(inputs) if e.outcome}[str(second)]
        documents = store.list_documents()
        assert len(documents) == 1
        if how == "moved":
            assert outcome.reason == f"moved here from {first}" and not log  # not read, not embedded
            assert (outcome.not_read, outcome.stored_as) == ("moved", str(first))
            assert (documents[0].path, documents[0].id, documents[0].chunk_count) == (
                str(second), stored.id, stored.chunk_count)
            assert outcome.pages == outcome.chunks == 0  # none read: the run's rate counts none
        else:
            assert outcome.status == "ready" and outcome.reason == f"the same file as {first}"
            assert (outcome.not_read, outcome.stored_as) == ("copy", str(first))
            assert outcome.path == str(second) and documents[0].path == str(first)
        [hit] = store.search_keyword("E-1234", 5)
        assert store.chunk(hit[0])["path"] == documents[0].path
        assert _outcomes(list(indexer.run([documents[0].path])))["pump.md"].not_read == "unchanged"


def test_a_collection_refuses_another_embedder(tmp_path, tiny_embedder):
    paths = AppPaths(tmp_path / "data").ensure()
    with open_collection(paths, "default", tiny_embedder) as store:
        _run(store, tiny_embedder, [_write_docs(tmp_path / "docs")])
    other = write_tiny_embedder(tmp_path / "other", max_positions=64, token_type_ids=False)
    with Embedder.from_files(other) as embedder, pytest.raises(EngineError, match="re-?embed|index"):
        open_collection(paths, "default", embedder)


# -- real manuals, real embedder --------------------------------------------------------------

KNOWN_PASSAGES = [  # (file, phrase, physical page as a PDF viewer counts)
    ("R-data.pdf", "AccessDatabaseEngine.exe", 26),
    ("R-data.pdf", "conventional in spreadsheets", 13),
]


@pytest.fixture(scope="module")
def builtin_embedder():
    from engine.models.registry import builtin_embedder_files

    with Embedder.from_files(builtin_embedder_files()) as embedder:
        yield embedder


@pytest.mark.slow
def test_real_manuals_keep_their_page_numbers(tmp_path, manuals_dir, builtin_embedder):
    paths = AppPaths(tmp_path / "data").ensure()
    inputs = [manuals_dir / "R-data.pdf", manuals_dir / "R-FAQ.pdf"]
    with open_collection(paths, "default", builtin_embedder) as store:
        events = _run(store, builtin_embedder, inputs)
        outcomes = _outcomes(events)
        assert outcomes["R-data.pdf"].status == "ready" and outcomes["R-data.pdf"].pages == 41
        working = [e for e in events if e.outcome is None and e.current_file.endswith("R-data.pdf")]
        done = [e.document_pages_done for e in working]  # the page progress a view shows
        assert {e.document_pages for e in working} == {41}
        assert done[0] == 0 and done == sorted(done) and done[-1] == 41 and len(set(done)) > 2
        assert outcomes["R-FAQ.pdf"].pages > 40
        for name, phrase, page in KNOWN_PASSAGES:
            hits = [store.chunk(cid) for cid, _ in store.search_keyword(phrase, 5)]
            found = [h for h in hits if phrase in h["text"] and h["path"].endswith(name)]
            assert found and found[0]["page"] == page
        chunks = store.stats()["chunks"]
        assert 150 < chunks < 600  # about 2-5 chunks of ~256 tokens per page of R manuals
        query = builtin_embedder.encode_queries("How do I read a spreadsheet file into R?")
        top = [store.chunk(cid) for cid, _ in store.search_dense(query, 5)]
        assert any(h["path"].endswith("R-data.pdf") for h in top)
        again = _outcomes(_run(store, builtin_embedder, inputs))
        assert all(o.reason == "unchanged" for o in again.values()) and store.stats()["chunks"] == chunks


def _index_command(data_dir: Path, *inputs: Path) -> list[str]:
    return [sys.executable, "-m", "engine", "index", "--data-dir", str(data_dir), *map(str, inputs)]


@pytest.mark.slow
def test_killing_the_indexing_process_never_breaks_the_collection(tmp_path, manuals_dir):
    """kill -9 the real CLI while it indexes, several times; each time the collection opens,
    is consistent, and the next run carries on: once at each of three moments.
    (tests/engine/store/test_crash_safety.py kills a writer 30 times at finer-grained moments.)"""
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in ("R-data.pdf", "R-FAQ.pdf", "R-admin.pdf"):
        shutil.copy(manuals_dir / name, docs / name)
    data = tmp_path / "data"
    for attempt in range(3):
        with subprocess.Popen(_index_command(data, docs) + ["--json"], cwd=REPO, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True) as process:
            for _ in range(attempt):  # kill after 0, 1 or 2 documents have been stored
                if not process.stdout.readline():
                    break
            os.kill(process.pid, signal.SIGKILL)
        _check_consistent(data)
    finished = subprocess.run(_index_command(data, docs), cwd=REPO, capture_output=True, text=True)
    assert finished.returncode == 0, finished.stderr
    stored = _check_consistent(data)
    assert {Path(d.path).name for d in stored} == {"R-data.pdf", "R-FAQ.pdf", "R-admin.pdf"}


def _check_consistent(data_dir: Path) -> list[StoredDocument]:
    from engine.store.indexer import default_embedder

    paths = AppPaths(data_dir)
    if not (paths.collections / "default").exists():
        return []
    embedder = default_embedder(paths)
    with open_collection(paths, "default", embedder) as store:
        assert store.quick_check() == "ok"
        documents = store.list_documents()
        ready_chunks = sum(d.chunk_count for d in documents if d.status != "failed")
        assert store.stats()["vectors"] == ready_chunks
        assert all(d.chunk_count > 0 for d in documents if d.status == "ready")
        return documents


@pytest.mark.slow
def test_ctrl_c_stops_cleanly_and_the_next_run_carries_on(tmp_path, manuals_dir):
    data = tmp_path / "data"
    inputs = [manuals_dir / "R-data.pdf", manuals_dir / "R-FAQ.pdf"]
    with subprocess.Popen(_index_command(data, *inputs) + ["--json"], cwd=REPO, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as process:
        assert process.stdout.readline()  # the first document is stored
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    assert "Traceback" not in err and "carry on" in err
    assert len(_check_consistent(data)) == 1
    finished = subprocess.run(_index_command(data, *inputs), cwd=REPO, capture_output=True, text=True)
    assert finished.returncode == 0, finished.stderr
    assert len(_check_consistent(data)) == 2


# -- a collection whose PDFs were read with an older text reader (issue 26) --------------------
def _forget_text_versions(store) -> None:
    """As a collection indexed before text versions were kept: every text is version 1."""
    store._db.execute("DELETE FROM text_versions")
    store._db.commit()


def test_pdfs_read_with_the_old_reader_are_read_again_by_the_next_run(tmp_path, tiny_embedder):
    from tests.helpers.hostile_files import positioned_words_pdf

    docs = tmp_path / "docs"
    docs.mkdir()
    manual = positioned_words_pdf(docs / "spindle.pdf", ["Moving this slider changes the feed rate"])
    (docs / "notes.txt").write_text("Check the oil level every week.\n", encoding="utf-8")
    paths = AppPaths(tmp_path / "data").ensure()
    with open_collection(paths, "default", tiny_embedder) as store:
        _run(store, tiny_embedder, [docs])
        [stored] = [d for d in store.list_documents() if d.path == str(manual)]
        assert stored.text_version == 3
        _forget_text_versions(store)
        outcomes = _outcomes(_run(store, tiny_embedder, [docs]))
        assert outcomes["spindle.pdf"].reason == "" and outcomes["spindle.pdf"].chunks == 1
        assert outcomes["notes.txt"].reason == "unchanged"  # its format's reading did not change
        assert {d.text_version for d in store.list_documents()} == {None, 3}  # notes.txt: as it was
        assert _outcomes(_run(store, tiny_embedder, [docs]))["spindle.pdf"].reason == "unchanged"


def test_an_old_copy_that_cannot_be_read_again_is_kept(tmp_path, tiny_embedder):
    from tests.helpers.hostile_files import positioned_words_pdf

    manual = positioned_words_pdf(tmp_path / "spindle.pdf", ["Moving this slider changes the feed rate"])
    paths = AppPaths(tmp_path / "data").ensure()
    with open_collection(paths, "default", tiny_embedder) as store:
        _run(store, tiny_embedder, [manual])
        _forget_text_versions(store)
        [before] = store.list_documents()
        failing = IndexSettings(parse_time_limit_s=0.001)  # reading it again fails: out of time
        [event] = [e for e in Indexer(store, tiny_embedder, failing).run([manual]) if e.outcome]
        assert event.outcome.status == "ready" and event.outcome.chunks == before.chunk_count
        assert event.outcome.reason.startswith("kept as indexed before: reading it again failed")
        [after] = store.list_documents()
        assert (after.id, after.status, after.chunk_count, after.text_version) == (before.id, "ready", 1, None)
        assert store.search_keyword("slider", 5)
