"""The audit log: one whole JSON line per question, rotated, append-only, built from ask's events."""

from __future__ import annotations

import hashlib
import json
import stat
import threading
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from engine.answer.assistant import (
    AnswerStats,
    Assistant,
    AssistantSettings,
    CitationsEvent,
    DoneEvent,
    ErrorEvent,
    PassagesEvent,
    TextEvent,
)
from engine.answer.grounding import Relevance
from engine.answer.retrieval import Retriever
from engine.errors import EngineError
from engine.kiosk.audit import (
    AuditEntry,
    AuditLog,
    AuditSink,
    Source,
    collection_version,
    model_version,
    read_tail,
)
from engine.llm.local import LocalLLM
from engine.paths import AppPaths
from engine.types import Citation, Passage, Span, StoredDocument
from tests.helpers.tiny_collection import MANUALS, fill, open_store

QUESTION = "How do I prime the pump?"
NOON = datetime(2025, 3, 1, 12, 0, 0, 250000, tzinfo=timezone.utc)


def entry(question: str = "How do I prime the pump?", **fields) -> AuditEntry:
    values = dict(time="2025-03-01T12:00:00.000Z", question=question, answerable=True,
                  passages=(Source("pump.md", 1), Source("oil.md", 2)),
                  citations=(Source("pump.md", 1, 1),), model="tiny", model_version="m" * 16,
                  collection="default", collection_version="c" * 16)
    return AuditEntry(**{**values, **fields})


def lines_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def passage(path: str, page: int, document_id: int = 1) -> Passage:
    return Passage(document_id, path, Path(path).stem, (document_id,), (Span(page, 0, 5),),
                   "text.", (), 1.0, 0.5)


def relevance(relevant: bool) -> Relevance:
    return Relevance(similarity=0.5, coverage=1.0, score=0.5, relevant=relevant, missing_terms=())


# -- the file ------------------------------------------------------------------------------
def test_each_record_is_one_line_of_sorted_json(tmp_path):
    log = AuditLog(tmp_path)
    log.record(entry())
    log.record(entry(answerable=False, citations=()))
    text = log.path.read_text(encoding="utf-8")
    assert log.path == tmp_path / "audit.jsonl" and text.count("\n") == 2
    first, second = lines_of(log.path)
    assert list(first) == sorted(first)
    assert first == {
        "time": "2025-03-01T12:00:00.000Z", "question": "How do I prime the pump?",
        "answerable": True, "refused": False,
        "passages": [{"document": "pump.md", "page": 1}, {"document": "oil.md", "page": 2}],
        "citations": [{"number": 1, "document": "pump.md", "page": 1}],
        "model": "tiny", "model_version": "m" * 16, "collection": "default",
        "collection_version": "c" * 16, "session": None, "error": None, "finish_reason": None,
    }
    assert second["refused"] is True and second["citations"] == []
    assert stat.S_IMODE(log.path.stat().st_mode) == 0o600


def test_the_folder_is_in_the_data_dir_and_made_on_first_record(tmp_path):
    folder = AppPaths(tmp_path).audit_folder
    assert folder == tmp_path / "audit" and not folder.exists()
    AuditLog(folder).record(entry())
    assert len(lines_of(folder / "audit.jsonl")) == 1


def test_unicode_questions_are_kept_as_written(tmp_path):
    question = "Wie wechsle ich den Ölfilter? 油泵怎么启动？ \u2028\x85 \"quoted\"\nnew line 🚰"
    log = AuditLog(tmp_path)
    log.record(entry(question))
    log.record(entry("next"))
    assert len(log.path.read_text(encoding="utf-8").splitlines()) == 2  # even splitlines sees 2
    assert lines_of(log.path)[0]["question"] == question
    assert json.loads(read_tail(tmp_path, 2)[0])["question"] == question
    assert "Ölfilter".encode() in log.path.read_bytes()  # UTF-8, not \u escapes


def test_rotation_shifts_the_files_and_drops_the_oldest(tmp_path):
    one = len(entry("q000").to_json()) + 1
    log = AuditLog(tmp_path, max_bytes=2 * one, backups=3)
    for n in range(10):
        log.record(entry(f"q{n:03}"))
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["audit.1.jsonl", "audit.2.jsonl", "audit.3.jsonl", "audit.jsonl"]
    questions = {name: [e["question"] for e in lines_of(tmp_path / name)] for name in files}
    assert questions == {"audit.3.jsonl": ["q002", "q003"], "audit.2.jsonl": ["q004", "q005"],
                         "audit.1.jsonl": ["q006", "q007"], "audit.jsonl": ["q008", "q009"]}
    assert all((tmp_path / name).stat().st_size <= 2 * one for name in files)
    assert read_tail(tmp_path, 5) == [entry(f"q{n:03}").to_json() for n in range(5, 10)]
    assert len(read_tail(tmp_path, 100)) == 8 and read_tail(tmp_path, 0) == []


def test_existing_lines_are_never_rewritten(tmp_path):
    log = AuditLog(tmp_path)
    log.record(entry("first"))
    before = log.path.read_bytes()
    AuditLog(tmp_path).record(entry("second"))  # a new log on the same folder, as after a restart
    assert log.path.read_bytes().startswith(before)


def test_four_threads_appending_at_once_leave_only_whole_lines(tmp_path):
    log = AuditLog(tmp_path, max_bytes=10**9)

    def write(thread: int) -> None:
        for n in range(200):
            log.record(entry(f"thread {thread} question {n} " + "x" * (n % 50)))

    threads = [threading.Thread(target=write, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    questions = [e["question"] for e in lines_of(log.path)]
    assert len(questions) == 800
    for t in range(4):
        mine = [q for q in questions if q.startswith(f"thread {t} ")]
        assert [int(q.split()[3]) for q in mine] == list(range(200))


def test_a_line_cut_by_a_crash_does_not_stop_new_records(tmp_path):
    log = AuditLog(tmp_path)
    log.record(entry("whole"))
    with open(log.path, "ab") as handle:
        handle.write(entry("cut").to_json().encode()[:30])
    log.record(entry("after"))
    lines = log.path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3
    assert json.loads(lines[0])["question"] == "whole"
    assert json.loads(lines[2])["question"] == "after"
    with pytest.raises(ValueError):
        json.loads(lines[1])


def test_a_folder_that_cannot_be_written_is_an_engine_error_naming_it(tmp_path):
    blocker = tmp_path / "audit"
    blocker.write_text("a file where the folder should be")
    with pytest.raises(EngineError, match="audit.jsonl.*writable"):
        AuditLog(blocker).record(entry())


# -- versions ------------------------------------------------------------------------------
def test_model_version_hashes_the_manifest(tmp_path):
    (tmp_path / "manifest.json").write_text('{"files": {"a": 1}}')
    (tmp_path / "model.onnx").write_bytes(b"x" * 10)
    expected = hashlib.sha256(b'{"files": {"a": 1}}').hexdigest()[:16]
    assert model_version(tmp_path) == expected
    (tmp_path / "model.onnx").write_bytes(b"y" * 10)
    assert model_version(tmp_path) == expected  # the manifest, not the files, names the version
    (tmp_path / "manifest.json").write_text('{"files": {"a": 2}}')
    assert model_version(tmp_path) != expected


def test_model_version_without_a_manifest_follows_file_names_and_sizes(tmp_path):
    (tmp_path / "model.onnx").write_bytes(b"x" * 10)
    first = model_version(tmp_path)
    assert len(first) == 16 and int(first, 16) >= 0
    (tmp_path / "model.onnx").write_bytes(b"x" * 11)
    assert model_version(tmp_path) != first


def test_collection_version_changes_with_added_removed_or_replaced_documents():
    docs = [StoredDocument("/m/a.pdf", "ready", sha256="1"),
            StoredDocument("/m/b.pdf", "ready_with_warnings", sha256="2"),
            StoredDocument("/m/c.pdf", "failed", sha256="3")]
    base = collection_version(docs, "emb")
    assert len(base) == 16
    assert collection_version(list(reversed(docs)), "emb") == base  # order does not matter
    assert collection_version(docs[:2], "emb") == base  # a failed document is not used
    assert collection_version(docs[:1], "emb") != base  # removed
    added = StoredDocument("/m/d.pdf", "ready", sha256="4")
    assert collection_version([*docs, added], "emb") != base
    assert collection_version([replace(docs[0], sha256="9"), *docs[1:]], "emb") != base  # replaced
    assert collection_version(docs, "other-embedder") != base


# -- from the assistant's events -----------------------------------------------------------
def test_an_entry_from_hand_built_events_keeps_order_and_only_cited_sources():
    passages = (passage("/m/pump.md", 2, 1), passage("C:\\m\\oil.md", 1, 2),
                passage("/m/filter.md", 1, 3))
    stats = AnswerStats(True, relevance(True), (), {}, finish_reason="length")
    events = [PassagesEvent(passages, True, relevance(True)), TextEvent("Prime it [3] and [1]."),
              CitationsEvent((Citation(3, passages[2], "q", True), Citation(1, passages[0], "q", True),
                              Citation(2, passages[1], "q", False))),
              DoneEvent("Prime it [3] and [1].", stats)]
    made = AuditEntry.from_events("Prime?", events, model="tiny", model_version="v1",
                                  collection="default", collection_version="c1", session="abc",
                                  time=NOON + timedelta(hours=1, minutes=0))
    assert made.time == "2025-03-01T13:00:00.250Z"
    assert made.passages == (Source("pump.md", 2), Source("oil.md", 1), Source("filter.md", 1))
    assert made.citations == (Source("filter.md", 1, 3), Source("pump.md", 2, 1))
    assert (made.answerable, made.refused, made.error) == (True, False, None)
    assert made.finish_reason == "length"
    assert (made.model, made.model_version, made.collection, made.collection_version,
            made.session) == ("tiny", "v1", "default", "c1", "abc")


def test_an_entry_from_an_error_before_the_gate_has_no_verdict():
    made = AuditEntry.from_events("", [ErrorEvent("The question is empty.", "EngineError")])
    assert made.answerable is None and not made.refused
    assert made.error == "The question is empty." and made.passages == ()
    assert made.time.endswith("Z") and datetime.fromisoformat(made.time[:-1] + "+00:00")


@pytest.fixture(scope="module")
def assistant_parts(tmp_path_factory, tiny_embedder, tiny_llm_dir):
    with open_store(tmp_path_factory.mktemp("collection") / "manuals", tiny_embedder) as store, \
            LocalLLM(tiny_llm_dir, provider="cpu") as llm:
        yield fill(store, tiny_embedder), llm


@pytest.mark.parametrize("threshold,answerable", [(-10.0, True), (10.0, False)],
                         ids=["answered", "refused"])
def test_a_real_ask_is_audited_from_its_events(tmp_path, tiny_embedder, tiny_llm_dir, assistant_parts,
                                               threshold, answerable):
    store, llm = assistant_parts
    settings = AssistantSettings(relevance_threshold=threshold)
    events = list(Assistant(Retriever(store, tiny_embedder), llm, settings).ask(QUESTION))
    log = AuditLog(tmp_path)
    log.record(AuditEntry.from_events(
        QUESTION, events, model=tiny_llm_dir.name, model_version=model_version(tiny_llm_dir),
        collection="manuals",
        collection_version=collection_version(store.list_documents(), store.embedder_id)))
    (record,) = lines_of(log.path)
    shown = only(events, PassagesEvent)
    assert record["question"] == QUESTION and record["error"] is None
    assert record["answerable"] is answerable and record["refused"] is not answerable
    assert record["passages"] == [{"document": p.document, "page": p.page} for p in shown.passages]
    assert {p["document"] for p in record["passages"]} <= {Path(m).name for m in MANUALS}
    assert record["passages"]
    cited = [c for c in only(events, CitationsEvent).citations if c.cited]
    assert record["citations"] == [
        {"number": c.number, "document": c.passage.document, "page": c.passage.page} for c in cited]
    assert record["finish_reason"] == only(events, DoneEvent).stats.finish_reason
    manifest = (tiny_llm_dir / "manifest.json").read_bytes()
    assert record["model_version"] == hashlib.sha256(manifest).hexdigest()[:16]
    assert len(record["collection_version"]) == 16


def only(events, kind: type):
    (found,) = [event for event in events if isinstance(event, kind)]
    return found


# -- the sink the assistant's worker feeds -------------------------------------------------
def answered_events(finish_reason: str = "stop") -> list:
    passages = (passage("/m/pump.md", 2, 1), passage("/m/oil.md", 1, 2))
    stats = AnswerStats(True, relevance(True), (), {}, finish_reason=finish_reason)
    return [PassagesEvent(passages, True, relevance(True)), TextEvent("Prime it [1]."),
            CitationsEvent((Citation(1, passages[0], "q", True), Citation(2, passages[1], "q", False))),
            DoneEvent("Prime it [1].", stats)]


def test_the_sink_writes_one_line_per_answer_from_the_events_it_was_fed(tmp_path, tiny_llm_dir):
    recorded = []
    sink = AuditSink(AuditLog(tmp_path), on_recorded=recorded.append)
    for question in ("Prime?", "Oil?"):
        sink.begin(question, collection="default", session="abc")
        for event in answered_events():
            sink.feed(event)
        sink.end(model_folder=tiny_llm_dir, collection_version="c1")
    first, second = lines_of(tmp_path / "audit.jsonl")
    assert [first["question"], second["question"]] == ["Prime?", "Oil?"]
    assert first["passages"] == [{"document": "pump.md", "page": 2}, {"document": "oil.md", "page": 1}]
    assert first["citations"] == [{"number": 1, "document": "pump.md", "page": 2}]
    assert first["finish_reason"] == "stop" and first["refused"] is False and first["error"] is None
    assert (first["model"], first["model_version"]) == (tiny_llm_dir.name, model_version(tiny_llm_dir))
    assert (first["collection"], first["collection_version"], first["session"]) == ("default", "c1", "abc")
    assert [e.question for e in recorded] == ["Prime?", "Oil?"] and sink.wait(0)


def test_a_stopped_answer_is_cancelled_and_a_failed_one_keeps_its_error(tmp_path):
    sink = AuditSink(AuditLog(tmp_path))
    sink.begin("Stopped?")
    sink.feed(answered_events()[0])
    sink.end(stopped=True)
    sink.begin("Failed?")
    sink.feed(ErrorEvent("The model stopped unexpectedly.", "EngineProcessError"))
    sink.end()
    stopped, failed = lines_of(tmp_path / "audit.jsonl")
    assert stopped["finish_reason"] == "cancelled" and stopped["passages"] and stopped["answerable"]
    assert failed["error"] == "The model stopped unexpectedly." and failed["answerable"] is None
    assert failed["model"] == "" and failed["model_version"] == ""


def test_a_sink_that_cannot_write_reports_it_and_a_closed_one_records_nothing(tmp_path):
    blocker = tmp_path / "audit"
    blocker.write_text("a file where the folder should be")
    failures = []
    sink = AuditSink(AuditLog(blocker), on_failed=failures.append)
    sink.begin("Prime?")
    assert sink.end() is None and "audit.jsonl" in failures[0]
    sink = AuditSink(AuditLog(tmp_path / "closed"))
    sink.close()
    sink.begin("Prime?")
    assert sink.end() is None and not (tmp_path / "closed").exists()


def test_wait_returns_once_the_line_being_written_is_on_disk(tmp_path):
    sink = AuditSink(AuditLog(tmp_path))
    sink.begin("Prime?")
    assert not sink.wait(0)  # an answer is being recorded
    writer = threading.Thread(target=sink.end)
    writer.start()
    assert sink.wait(10)
    writer.join()
    assert len(lines_of(tmp_path / "audit.jsonl")) == 1
