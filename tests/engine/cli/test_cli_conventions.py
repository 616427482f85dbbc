"""offline-assistant-cli follows the habits of git, pip and ollama (issue 15): global options
before the command, "did you mean", `help COMMAND`, -V, exit codes that say what happened,
output a log can read (no carriage returns off a terminal) and plurals that agree."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

from engine import __version__
from engine.cli.common import NOT_COVERED_EXIT, SOME_FAILED_EXIT, plural, progress_line
from engine.cli.index import _outcome_text, _ProgressBar, _Tally
from engine.cli.main import main
from engine.types import DocumentOutcome, IndexProgress
from tests.helpers.fake_clock import Clock

REPO = Path(__file__).resolve().parents[3]


def cli(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    """The CLI as a user runs it, with a private home: its exit code and output."""
    home = tmp_path / "home"
    env = {**os.environ, "HOME": str(home), "XDG_DATA_HOME": str(home / "data"), "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "engine", *args], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=120)


def one_document(data: Path, path: str = "/docs/pump.pdf") -> Path:
    """A data folder whose default collection holds one stored document."""
    from engine.paths import AppPaths
    from engine.store.index_store import IndexStore
    from engine.types import Chunk

    folder = AppPaths(data).ensure().collection("default")
    with IndexStore.open(folder, embedder_id="test-embedder", dimension=4) as store:
        store.add_document(path, "abc", 100, 1.5, "Pump", 2,
                           [Chunk(page=1, start=0, end=4, text="pump")], [[1.0, 0.0, 0.0, 0.0]])
    return data


# -- global options ---------------------------------------------------------------------------

def test_data_dir_before_the_command_works_as_after_it(tmp_path):
    data = str(one_document(tmp_path / "data"))
    before = cli(["--data-dir", data, "docs", "list"], tmp_path)
    after = cli(["docs", "list", "--data-dir", data], tmp_path)
    assert before.returncode == 0, before.stderr
    assert "/docs/pump.pdf" in before.stdout and before.stdout == after.stdout


def test_data_dir_after_the_command_wins_over_the_one_before(tmp_path, capsys):
    data = str(one_document(tmp_path / "data"))
    assert main(["--data-dir", str(tmp_path / "other"), "docs", "list", "--data-dir", data]) == 0
    assert "/docs/pump.pdf" in capsys.readouterr().out


@pytest.fixture
def ask_args(monkeypatch) -> list:
    """The arguments `ask` would run with; nothing runs."""
    seen = []
    monkeypatch.setattr("engine.cli.ask._ask", lambda args, paths: seen.append(args) or 0)
    return seen


@pytest.mark.parametrize("argv, provider, data_dir", [
    (["ask", "Q?"], "auto", None),
    (["--provider", "cpu", "ask", "Q?"], "cpu", None),
    (["ask", "Q?", "--provider", "cpu"], "cpu", None),
    (["--data-dir", "D", "--provider", "cpu", "ask", "Q?"], "cpu", "D"),
])
def test_provider_and_data_dir_before_or_after_ask(ask_args, argv, provider, data_dir):
    assert main(argv) == 0
    [args] = ask_args
    assert (args.provider, args.data_dir, args.question) == (provider, data_dir, "Q?")


@pytest.mark.parametrize("argv", [["docs", "list", "--provider", "cpu"], ["--provider", "cpu", "docs", "list"],
                                  ["admin", "audit", "--provider", "cpu"]])
def test_provider_is_not_offered_where_it_means_nothing_but_taken_like_a_global_option(argv, tmp_path, capsys):
    """Not in the command's --help (see test_cli.py); given anyway, as one set of options
    serves index, docs and ask alike, it changes nothing."""
    assert main([*argv, "--data-dir", str(tmp_path)]) == 0
    assert main([*argv[:argv.index("--provider")], *argv[argv.index("--provider") + 2:], "--help"]) == 0
    assert "--provider" not in capsys.readouterr().out


# -- typos, help and version ------------------------------------------------------------------

@pytest.mark.parametrize("argv, meant", [(["ak", "How?"], "ask"), (["indx", "docs"], "index"),
                                         (["docs", "lst"], "list"), (["models", "prepar"], "prepare"),
                                         (["docs", "list", "--colection", "x"], "--collection"),
                                         (["ask", "--provider", "cpux", "Q?"], "cpu")])
def test_a_mistyped_command_or_option_suggests_the_right_one(argv, meant, capsys):
    assert main(argv) == 2
    assert f"did you mean '{meant}'?" in capsys.readouterr().err


def test_a_word_nothing_resembles_gets_no_suggestion(capsys):
    assert main(["xyzzy"]) == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'xyzzy'" in err and "did you mean" not in err


@pytest.mark.parametrize("topic", [["ask"], ["docs"], ["docs", "list"], ["admin", "set-pin"], []])
def test_help_command_prints_what_dash_dash_help_prints(topic, capsys):
    assert main(["help", *topic]) == 0
    shown = capsys.readouterr().out
    assert main([*topic, "--help"]) == 0
    assert shown == capsys.readouterr().out and shown.startswith("usage: ")


def test_help_of_an_unknown_command_suggests_one(capsys):
    assert main(["help", "dcs"]) == 2
    assert "there is no command 'dcs'; did you mean 'docs'?" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["-V", "--version"])
def test_version(flag, tmp_path):
    done = cli([flag], tmp_path)
    assert (done.returncode, done.stdout) == (0, f"offline-assistant-cli {__version__}\n")


def test_help_lists_commands_says_where_options_go_and_documents_the_exit_codes(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^  -V, --version", out, re.MULTILINE)
    assert "--data-dir DIR" in out and "before or after the command" in out
    assert f"{NOT_COVERED_EXIT} `ask`: the manuals do not cover the question" in " ".join(out.split())
    assert f"{SOME_FAILED_EXIT} `index`: some documents failed" in " ".join(out.split())
    assert main(["ask", "--help"]) == 0
    assert f"{NOT_COVERED_EXIT} the manuals do not cover the question" in " ".join(capsys.readouterr().out.split())
    assert main(["index", "--help"]) == 0
    assert f"{SOME_FAILED_EXIT} some documents failed" in " ".join(capsys.readouterr().out.split())


def test_every_command_help_starts_with_what_it_does(capsys):
    assert main(["docs", "list", "--help"]) == 0
    assert "\nThe documents and their status.\n" in capsys.readouterr().out


def test_readme_documents_the_exit_code_of_a_question_the_manuals_do_not_cover():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## The command line"):]
    section = section[:section.index("\n## ", 1)]
    assert f"exits {NOT_COVERED_EXIT}" in section and "help COMMAND" in section


# -- exit codes -------------------------------------------------------------------------------

@pytest.fixture
def refusing_ask(monkeypatch, tmp_path, tiny_embedder) -> list[str]:
    """ask on the tiny collection with a relevance gate nothing passes: every question refused."""
    from engine.answer.assistant import Assistant, AssistantSettings
    from engine.answer.retrieval import Retriever
    from tests.helpers.scripted_llm import ScriptedLLM
    from tests.helpers.tiny_collection import fill, open_store

    @contextmanager
    def refusing(args, paths):
        with open_store(tmp_path / "manuals", tiny_embedder) as store:
            yield Assistant(Retriever(fill(store, tiny_embedder), tiny_embedder), ScriptedLLM("Never."),
                            AssistantSettings(relevance_threshold=1e9))

    monkeypatch.setattr("engine.cli.ask._open", refusing)
    return ["--data-dir", str(tmp_path / "data")]


@pytest.mark.parametrize("json_output", [False, True], ids=["text", "json"])
def test_ask_exits_3_when_the_manuals_do_not_cover_the_question(refusing_ask, json_output, capsys):
    from engine.answer.assistant import NOT_FOUND

    json_flag = ["--json"] if json_output else []
    assert main(["ask", "What is the capital of France?", *json_flag, *refusing_ask]) == NOT_COVERED_EXIT
    out = capsys.readouterr().out
    assert json.loads(out)["answer"] == NOT_FOUND if json_output else NOT_FOUND in out


def test_docs_list_on_an_empty_data_folder_says_so_and_exits_0(tmp_path):
    data = tmp_path / "data"
    done = cli(["docs", "list", "--data-dir", str(data)], tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert "The collection 'default' is empty: no documents are indexed yet" in done.stderr
    assert f"offline-assistant-cli index PATH --data-dir {data}" in done.stderr
    assert not data.exists()  # listing writes nothing


def test_docs_list_of_a_collection_with_no_documents_left(tmp_path, capsys):
    data = one_document(tmp_path / "data")
    assert main(["docs", "remove", "/docs/pump.pdf", "--data-dir", str(data)]) == 0
    assert capsys.readouterr().out == "Removed 1 document from the collection 'default'.\n"
    assert main(["docs", "list", "--json", "--data-dir", str(data)]) == 0
    out, err = capsys.readouterr()
    assert out == "" and "is empty" in err


def test_ask_on_an_empty_data_folder_says_how_to_index_before_preparing_a_model(tmp_path, monkeypatch, capsys):
    def no_model(*args):
        raise AssertionError("the model was prepared for a question with nothing to answer from")

    monkeypatch.setattr("engine.cli.ask.llm_folder", no_model)
    assert main(["ask", "How?", "--data-dir", str(tmp_path / "data"), "--collection", "pumps"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: The collection 'pumps' is empty")
    assert "index PATH --data-dir" in err and "--collection pumps" in err


# -- output -----------------------------------------------------------------------------------

def test_plurals():
    assert [plural(n, "document") for n in (0, 1, 2)] == ["0 documents", "1 document", "2 documents"]


def outcomes(*statuses: tuple) -> _Tally:
    """(status, reason, pages[, why it was not read]) each."""
    tally = _Tally()
    for status, reason, pages, *not_read in statuses:
        tally.count(DocumentOutcome("/a.pdf", status, reason, pages, pages, *not_read))
    tally.count(None)  # a progress step, not a finished document
    return tally


def test_the_summary_counts_only_documents_indexed_and_says_how_many_were_unchanged_or_failed():
    unchanged = ("ready", "unchanged", 0, "unchanged")
    tally = outcomes(("ready", "", 10), unchanged, unchanged,
                     ("failed", "'b.pdf' is encrypted", 0), ("ready_with_warnings", "no text was found", 1))
    assert _outcome_text(tally, 2.0) == ("Indexed 2 documents (1 with warnings), 11 pages in 2.0 s "
                                         "(5.5 pages/s); 2 unchanged (skipped), 1 failed.")
    assert _outcome_text(outcomes(("ready", "", 1)), 0.5) == "Indexed 1 document, 1 page in 0.5 s (2.0 pages/s)."
    assert _outcome_text(outcomes(unchanged), 0.1) == "Nothing new indexed: 1 unchanged (skipped)."
    not_read = outcomes(("ready", "the same file as /b.pdf", 0, "copy", "/b.pdf"),
                        ("ready", "moved here from /c.pdf", 3, "moved", "/c.pdf"))
    assert _outcome_text(not_read, 0.1) == ("Nothing new indexed: 1 copy of documents indexed already (skipped), "
                                            "1 moved (not read again).")


def progress(done: int, outcome: DocumentOutcome | None = None) -> IndexProgress:
    return IndexProgress(done, 2, done, "/docs/a.pdf", 1.0 + done, outcome, done, 2)


def test_the_index_progress_off_a_terminal_is_one_line_per_document():
    log = io.StringIO()
    bar = _ProgressBar(log)
    for event in (progress(0), progress(1, DocumentOutcome("/docs/a.pdf", "ready", "", 1, 1)), progress(1),
                  progress(2, DocumentOutcome("/docs/a.pdf", "ready", "unchanged", not_read="unchanged"))):
        bar.show(event)
    bar.note("failed (b.pdf): it is encrypted")
    bar.finish()
    assert "\r" not in log.getvalue() and "\x1b" not in log.getvalue()
    assert log.getvalue().splitlines() == [
        "[############............] 1/2 docs, 1 page, 0.5 pages/s ETA 2s  a.pdf",
        "[########################] 2/2 docs, 2 pages, 0.7 pages/s ETA 0s  a.pdf (unchanged)",
        "failed (b.pdf): it is encrypted"]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def prepare_steps(report, clock: Clock) -> None:
    """The built-in model's preparation as engine/models reports it: a layer a second."""
    report(0.0, "reading model.gguf")
    report(0.02, "writing tokenizer")
    for layer in range(1, 31):
        clock.now += 1.0
        report(0.08 + 0.024 * layer, f"layer {layer} of 30")
    report(0.8, "writing model.onnx")
    report(1.0, "done")


def test_progress_line_redraws_on_a_terminal_and_elsewhere_writes_each_stage_then_a_line_per_ten_seconds():
    """Issue 29: in a log, the first `ask` wrote 30 lines of "layer K of 30"."""
    clock = Clock(0.0)
    terminal = Terminal()
    with progress_line("Preparing", terminal, clock) as report:
        prepare_steps(report, clock)
    assert terminal.getvalue().count("\r") == 34 and terminal.getvalue().endswith("\n")
    log = io.StringIO()
    with progress_line("Preparing", log, clock) as report:
        prepare_steps(report, clock)
    assert "\r" not in log.getvalue()
    assert log.getvalue().splitlines() == [
        "Preparing:   0% reading model.gguf", "Preparing:   2% writing tokenizer",
        "Preparing:  10% layer 1 of 30", "Preparing:  34% layer 11 of 30", "Preparing:  58% layer 21 of 30",
        "Preparing:  80% writing model.onnx", "Preparing: 100% done"]


def test_a_long_document_in_a_log_shows_its_pages_every_ten_seconds(tmp_path):
    """Issue 29: a 1,300-page manual printed nothing for minutes, then one line. In a log: a
    line as the run starts, the document's pages at most every 10 s, then its line."""
    manual = tmp_path / "big.pdf"
    manual.write_bytes(b"%PDF-1.7\n" + b"0" * 2_000_000)
    log = io.StringIO()
    bar = _ProgressBar(log)
    bar.begin([manual])
    path = str(manual)
    events = [IndexProgress(0, 1, 0, path, 64.0, document_pages=1300)]  # read in 64 s
    events += [IndexProgress(0, 1, 0, path, 64.0 + 2 * step, document_pages=1300, document_pages_done=10 * step)
               for step in range(1, 60)]  # 10 pages embedded every 2 s
    events.append(IndexProgress(1, 1, 1300, path, 182.5, DocumentOutcome(path, "ready", "", 1300, 4100),
                                manual.stat().st_size, manual.stat().st_size))
    for event in events:
        bar.show(event)
    lines = log.getvalue().splitlines()
    assert lines[:4] == ["Indexing 1 file (2.0 MB)", "big.pdf: 1300 pages read; embedding (1m04s)",
                         "big.pdf: page 50 of 1300 embedded (1m14s)", "big.pdf: page 100 of 1300 embedded (1m24s)"]
    assert len(lines) == 2 + 11 + 1 and lines[-1].startswith("[########################] 1/1 docs, 1300 pages")
    times = [re.search(r"\((\d+)m(\d+)s\)$", line).groups() for line in lines[1:-1]]
    seconds = [int(minutes) * 60 + int(secs) for minutes, secs in times]
    assert all(later - earlier >= 10 for earlier, later in zip(seconds, seconds[1:]))


def test_the_eval_count_off_a_terminal_is_a_line_per_tenth_of_the_questions():
    from engine.cli.ask import _progress_to

    log = io.StringIO()
    report = _progress_to(20, None, log)
    for _ in range(20):
        report(None)
    assert "\r" not in log.getvalue()
    assert log.getvalue().splitlines() == [f"{n}/20 questions" for n in range(2, 21, 2)]


@pytest.mark.parametrize("fields, said", [
    ((0, 1, 2, 1), "it adds little to the question that the manual's words above say"),
    ((1, 3, 2, 0), "an address, command or value in this answer is not in the manuals"),
    ((0, None, 2, 1), "1 of its 2 sentences is not in the manuals"),  # stats of an older server
    ((0, None, 3, 2), "2 of its 3 sentences are not in the manuals")])
def test_the_caution_says_why_and_agrees_in_number(fields, said):
    from types import SimpleNamespace

    from engine.cli.ask import _caution

    names = ("unsupported_actions", "lead_words", "checked", "unsupported")
    assert _caution(SimpleNamespace(**dict(zip(names, fields)))) == said


def test_a_document_that_failed_or_warned_is_named_once():
    from engine.cli.index import _report, _Took

    log = io.StringIO()
    bar = _ProgressBar(log)
    took = _Took(1.0, 0.5)
    _report(progress(1, DocumentOutcome("/docs/scan.pdf", "ready_with_warnings", "no text was found to index")),
            bar, False, took)
    _report(progress(2, DocumentOutcome("/docs/c.pdf", "failed", "'c.pdf' is damaged")), bar, False, took)
    notes = [line for line in log.getvalue().splitlines() if not line.startswith("[")]
    assert notes == ["ready with warnings (scan.pdf): no text was found to index", "failed: 'c.pdf' is damaged"]


@pytest.mark.slow
def test_indexing_again_counts_the_unchanged_documents_apart(tmp_path):
    """The real CLI and embedder, its stderr a pipe: one plain line per document, then a
    summary that counts only what was indexed this time."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "pump.md").write_text("# Pump\n\nPrime the pump with water.\n", encoding="utf-8")
    (docs / "oil.txt").write_text("Check the oil weekly.\n", encoding="utf-8")
    index = ["index", str(docs), "--data-dir", str(tmp_path / "data")]
    first = cli(index, tmp_path)
    assert first.returncode == 0, first.stderr
    assert "\r" not in first.stderr and len(re.findall(r"^\[#+\.*\] \d/2 docs", first.stderr, re.MULTILINE)) == 2
    assert re.search(r"^Indexed 2 documents, 2 pages in [\d.]+ s \([\d.]+ pages/s\)\. "
                     r"The collection holds 2 documents, 2 chunks\.$", first.stderr, re.MULTILINE), first.stderr
    again = cli(index, tmp_path)
    assert "Nothing new indexed: 2 unchanged (skipped). The collection holds 2 documents" in again.stderr
    (docs / "oil.txt").write_text("Check the oil every day.\n", encoding="utf-8")
    changed = cli(index, tmp_path)
    assert re.search(r"^Indexed 1 document, 1 page in .*; 1 unchanged \(skipped\)\.", changed.stderr, re.MULTILINE)
    copies = shutil.copytree(docs, tmp_path / "copies")
    copied = cli(["index", str(copies), "--data-dir", str(tmp_path / "data")], tmp_path)
    assert f"pump.md: not read again, the same file as {docs / 'pump.md'}\n" in copied.stderr
    assert "Nothing new indexed: 2 copies of documents indexed already (skipped). The collection holds 2 documents" \
        in copied.stderr
    shutil.rmtree(docs)
    moved = cli(["index", str(copies), "--data-dir", str(tmp_path / "data")], tmp_path)
    assert "Nothing new indexed: 2 moved (not read again). The collection holds 2 documents" in moved.stderr
