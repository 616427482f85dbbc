"""`index --json` gives each document's duration; a slow one is named in the plain output
(issue 14: two files took 68 and 89 s and nothing said which)."""

from __future__ import annotations

import io
import json

import pytest

from engine.cli.index import _DocumentTimer, _ProgressBar, _report
from engine.cli.main import main
from engine.types import DocumentOutcome, IndexProgress


def event(path: str, elapsed: float, outcome: DocumentOutcome | None = None) -> IndexProgress:
    return IndexProgress(0, 3, 0, path, elapsed, outcome)


def ready(path: str) -> DocumentOutcome:
    return DocumentOutcome(path, "ready", "", 10, 20)


def test_each_document_is_timed_from_the_end_of_the_one_before():
    timer = _DocumentTimer()
    events = [event("/a.pdf", 2.0), event("/a.pdf", 3.0), event("/a.pdf", 5.0, ready("/a.pdf")),
              event("/b.pdf", 73.0), event("/b.pdf", 94.0, ready("/b.pdf")),
              event("/c.txt", 94.5, ready("/c.txt"))]  # unchanged: not read at all
    took = [timer.see(e) for e in events]
    assert took[:2] == [None, None]
    assert [(round(t.seconds, 3), round(t.read_s, 3)) for t in took if t] == [
        (5.0, 2.0), (89.0, 68.0), (0.5, 0.0)]


def test_json_lines_carry_seconds_and_a_slow_document_is_named(capsys):
    timer = _DocumentTimer()
    bar = _ProgressBar(io.StringIO())
    for e in [event("/slow.pdf", 80.0), event("/slow.pdf", 89.0, ready("/slow.pdf"))]:
        _report(e, bar, True, timer.see(e))
    row = json.loads(capsys.readouterr().out)
    assert (row["path"], row["seconds"], row["read_s"]) == ("/slow.pdf", 89.0, 80.0)

    plain = io.StringIO()
    timer = _DocumentTimer()
    for e in [event("/slow.pdf", 80.0), event("/slow.pdf", 89.0, ready("/slow.pdf")),
              event("/quick.pdf", 90.0, ready("/quick.pdf"))]:
        _report(e, _ProgressBar(plain), False, timer.see(e))
    notes = [line for line in plain.getvalue().splitlines() if " took " in line]
    assert notes == ["slow.pdf took 1m29s (1m20s of it reading the file)"]


@pytest.mark.slow
def test_index_json_reports_durations_and_indexes_a_one_line_file(builtin_data_dir, tmp_path, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "door.txt").write_text("Door code: 7731.\n", encoding="utf-8")
    (docs / "notes.txt").write_text("Check the oil level every week.\n" * 30, encoding="utf-8")
    options = ["--data-dir", str(builtin_data_dir), "--collection", "durations", "--provider", "cpu"]
    assert main(["index", str(docs), "--json", *options]) == 0
    rows = {row["path"].rsplit("/", 1)[-1]: row for row in map(json.loads, capsys.readouterr().out.splitlines())}
    assert rows["door.txt"]["chunks"] == 1 and rows["door.txt"]["status"] == "ready"
    for row in rows.values():
        assert row["seconds"] >= row["read_s"] >= 0
    from engine.paths import AppPaths
    from engine.store.indexer import open_collection

    with open_collection(AppPaths(builtin_data_dir), "durations", read_only=True) as store:
        hits = store.search_keyword("door code", 5)
        assert hits and store.chunk(hits[0][0])["text"] == "Door code: 7731."
