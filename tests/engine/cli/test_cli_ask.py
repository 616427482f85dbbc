"""offline-assistant-cli ask, chat and eval.

The slow tests run the real built-in models: each indexes a small Markdown manual with `index`
into its own collection of the shared data dir in which the built-in LLM has been prepared once
(conftest's builtin_data_dir).
"""

from __future__ import annotations

import io
import json
import re
from contextlib import contextmanager
from pathlib import Path

import pytest

from engine.answer.assistant import NOT_FOUND
from engine.cli.common import NOT_COVERED_EXIT
from engine.cli.main import main

MANUAL = """# Pump P-200 manual

## Priming

Before the first start, prime the pump: open the filler plug on top of the pump housing and fill
the housing with clean water until it overflows. Close the filler plug hand-tight.

## Changing the filter

Replace the suction filter every 500 operating hours. Stop the motor, close the inlet valve,
unscrew the filter bowl, and fit a new filter cartridge (part number F-77).

## Error codes

Error E-12 means the motor overheated. Let the pump cool down for 30 minutes and check that the
air vents are not blocked.
"""
SOURCE_LINE = re.compile(r'^  \[(\d+)\] pump\.md, pages? (\d+(?:, \d+)*): "(.+)"$', re.MULTILINE)
QA_LINES = [
    {"id": "prime", "question": "How do I prime the pump?", "doc": "pump.md", "pages": [2],
     "keywords": ["water"]},
    {"id": "filter", "question": "Which filter cartridge part number fits the pump?",
     "doc": "pump.md", "pages": [3], "keywords": ["F-77"]},
    {"id": "france", "question": "What is the capital of France?", "doc": None, "answerable": False},
]


def write_qa(path: Path, lines: list) -> Path:
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    return path


# -- no model needed -----------------------------------------------------------------------------

@pytest.mark.parametrize("command, options", [
    ("ask", ["--json", "--collection NAME", "--model NAME", "--no-rerank", "--data-dir DIR"]),
    ("chat", ["--collection NAME", "--model NAME", "--no-rerank", "--provider {auto,"]),
    ("eval", ["--retrieval-only", "--details FILE", "--json", "--collection NAME", "--repeat-sample N"]),
])
def test_help_of_each_command(command, options, capsys):
    assert main([command, "--help"]) == 0
    out = capsys.readouterr().out
    assert all(option in out for option in options), out


def test_eval_names_a_bad_line_of_the_qa_file(tmp_path, capsys):
    qa = write_qa(tmp_path / "qa.jsonl", [QA_LINES[0], {"question": "Q?", "pages": [1]}])
    assert main(["eval", str(qa), "--retrieval-only", "--data-dir", str(tmp_path / "data")]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: '{qa}' line 2: an answerable question needs 'doc'")
    assert not (tmp_path / "data").exists()  # nothing was opened


def test_eval_details_in_a_missing_folder_is_an_error_not_a_traceback(tmp_path, capsys):
    qa = write_qa(tmp_path / "qa.jsonl", QA_LINES)
    details = tmp_path / "no-such-folder" / "details.jsonl"
    code = main(["eval", str(qa), "--retrieval-only", "--details", str(details),
                 "--data-dir", str(tmp_path / "data")])
    assert code == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: The details file '{details}' could not be written")
    assert "Traceback" not in err


# -- eval on the tiny models: fast --------------------------------------------------------------

# What issue 13 asks eval to report, overall and for each document and family.
EVAL_KEYS = {"hit@1", "hit@5", "hit@10", "mrr@5", "refusal_accuracy", "false_refusal_rate",
             "keyword_hit_rate", "keyword_hit_generated", "lead_hit_rate", "loop_rate", "deterministic_rate",
             "latency_s", "caution_rate", "caution_on_wrong", "caution_on_right"}
TINY_QA = [
    {"id": "filter", "question": "How do I replace the filter?", "doc": "filter.md", "pages": [1],
     "keywords": ["F-77"], "family": "pumps"},
    {"id": "drain", "question": "Where do I drain old oil?", "doc": "oil.md", "pages": [2],
     "keywords": ["tray"], "family": "oil"},
    {"id": "france", "question": "What is the capital of France?", "answerable": False, "family": "oil"},
]


@contextmanager
def tiny_assistant(tmp_path, tiny_embedder, tiny_llm_dir, max_new_tokens: int):
    """An Assistant on the tiny collection, embedder and random LLM, with the gate open."""
    from engine.answer.assistant import Assistant, AssistantSettings
    from engine.answer.retrieval import Retriever
    from engine.llm.local import LocalLLM
    from tests.helpers.tiny_collection import fill, open_store

    with open_store(tmp_path / "manuals", tiny_embedder) as store, \
            LocalLLM(tiny_llm_dir, provider="cpu") as llm:
        settings = AssistantSettings(relevance_threshold=-10, max_new_tokens=max_new_tokens)  # answers all
        yield Assistant(Retriever(fill(store, tiny_embedder), tiny_embedder), llm, settings)


@pytest.fixture
def tiny_eval(monkeypatch, tmp_path, tiny_embedder, tiny_llm_dir) -> list[str]:
    """eval's retriever and assistant on the tiny collection, embedder and random LLM; its options."""
    @contextmanager
    def parts(args, paths):
        with tiny_assistant(tmp_path, tiny_embedder, tiny_llm_dir, max_new_tokens=24) as assistant:
            yield assistant.retriever, None if args.retrieval_only else assistant

    monkeypatch.setattr("engine.cli.ask._eval_parts", parts)
    return [str(write_qa(tmp_path / "qa.jsonl", TINY_QA)), "--data-dir", str(tmp_path / "data")]


def test_eval_json_reports_every_measure_overall_per_document_and_per_family(tiny_eval, capsys):
    assert main(["eval", *tiny_eval, "--json", "--repeat-sample", "2"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert EVAL_KEYS <= summary.keys()
    assert set(summary["by_doc"]) == {"filter.md", "oil.md", "(no document)"}
    assert set(summary["by_family"]) == {"pumps", "oil"}
    for group in [*summary["by_doc"].values(), *summary["by_family"].values()]:
        assert EVAL_KEYS <= group.keys()
    assert summary["refusal_accuracy"] == pytest.approx(2 / 3, abs=1e-4)  # France answered: the gate is off
    assert summary["false_refusal_rate"] == 0.0
    assert summary["deterministic_rate"] == 1.0  # temperature 0: asked twice, the same bytes
    assert summary["loop_rate"] is not None and summary["keyword_hit_generated"] is not None
    assert {"first_token", "generate"} <= summary["latency_s"].keys()
    if summary["lead_hit_rate"] is not None:  # the assistant shows lead sentences
        assert "lead" in summary["latency_s"]


def test_eval_table_shows_the_measures_then_each_family_and_document(tiny_eval, capsys):
    assert main(["eval", *tiny_eval, "--repeat-sample", "0"]) == 0
    table = capsys.readouterr().out
    assert table.startswith("3 questions: 2 answerable, 1 not")
    for key in ("refusal_accuracy", "keyword_hit_generated", "lead_hit_rate", "loop_rate", "caution_rate",
                "caution_on_wrong", "caution_on_right", "keyword_hit_supported_only"):
        assert re.search(rf"^  {key} +(\d\.\d{{3}}|-)$", table, re.MULTILINE), key
    assert re.search(r"^  deterministic_rate +-$", table, re.MULTILINE)  # nothing asked twice
    assert re.search(r"^  by family +n +hit@5 .* loop +caut +caut_w +caut_r +det +lead s +1st s$", table, re.MULTILINE)
    assert re.search(r"^    pumps +1 +1\.000 ", table, re.MULTILINE)
    assert re.search(r"^  by document +n ", table, re.MULTILINE)
    assert re.search(r"^    \(no document\) +1 +- +- +0\.000 ", table, re.MULTILINE)


def test_eval_repeat_sample_must_be_a_count(tiny_eval, capsys):
    assert main(["eval", *tiny_eval, "--repeat-sample", "some"]) == 2
    assert "not a whole number of questions" in capsys.readouterr().err


# -- the real built-in models: slow ------------------------------------------------------------

@pytest.fixture
def tiny_ask(monkeypatch, tmp_path, tiny_embedder, tiny_llm_dir) -> list[str]:
    """ask and chat on the tiny collection, embedder and random LLM (every question answered)."""
    monkeypatch.setattr("engine.cli.ask._open", lambda args, paths: tiny_assistant(
        tmp_path, tiny_embedder, tiny_llm_dir, max_new_tokens=8))
    return ["--data-dir", str(tmp_path / "data")]


LEAD_LINE = re.compile(r"^  \u201c(.+)\u201d \((\S+), page (\d+)\) \[(\d+)\]$", re.MULTILINE)


def test_ask_prints_the_lead_sentences_first_with_their_citations(tiny_ask, capsys):
    assert main(["ask", "How do I replace the filter cartridge?", *tiny_ask]) == 0
    out = capsys.readouterr().out
    assert out.startswith("From the manuals:\n")
    lead, _, rest = out.partition("\n\n")
    quotes = LEAD_LINE.findall(lead)
    assert quotes and len(quotes) == len(lead.splitlines()) - 1
    assert quotes[0] == ("Replace filter cartridge yearly.", "filter.md", "1", "1")
    assert rest.strip()  # the model's text and the sources follow


def test_ask_json_has_the_lead_with_document_page_number_and_span(tiny_ask, capsys):
    assert main(["ask", "How do I replace the filter cartridge?", "--json", *tiny_ask]) == 0
    record = json.loads(capsys.readouterr().out)
    first = record["lead"][0]
    assert set(first) == {"number", "text", "document", "path", "page", "page_label", "span"}
    assert (first["text"], first["document"], first["page"], first["number"]) == \
        ("Replace filter cartridge yearly.", "filter.md", 1, 1)
    assert first["page_label"] == "1"  # no printed label: the page number
    assert first["span"] == [1, 0, len("Replace filter cartridge yearly.")]
    assert record["citations"][0]["number"] == 1


def test_chat_prints_each_answers_lead_first(tiny_ask, capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("How do I replace the filter cartridge?\n"
                                                 "How do I drain the old oil?\n"))
    assert main(["chat", *tiny_ask]) == 0
    answers = capsys.readouterr().out.split("\n> ")[1:3]
    assert [a.startswith("From the manuals:\n") for a in answers] == [True, True]
    assert "filter.md" in LEAD_LINE.search(answers[0]).group(2)
    assert "oil.md" in LEAD_LINE.search(answers[1]).group(2)


SCRIPT = ("Replace the filter cartridge yearly, part F-77. Ask the dealer hotline for advice. "
          "Then reboot the controller twice.")


@pytest.fixture
def scripted_ask(monkeypatch, tmp_path, tiny_embedder) -> list[str]:
    """ask on the tiny collection and embedder with a model that writes SCRIPT."""
    return _scripted(monkeypatch, tmp_path, tiny_embedder, SCRIPT)


def _scripted(monkeypatch, tmp_path, tiny_embedder, script: str) -> list[str]:
    from engine.answer.assistant import Assistant, AssistantSettings
    from engine.answer.retrieval import Retriever
    from tests.helpers.scripted_llm import ScriptedLLM
    from tests.helpers.tiny_collection import fill, open_store

    @contextmanager
    def scripted(args, paths):
        with open_store(tmp_path / "manuals", tiny_embedder) as store:
            yield Assistant(Retriever(fill(store, tiny_embedder), tiny_embedder), ScriptedLLM(script),
                            AssistantSettings(relevance_threshold=-10, prompt_budget_tokens=5000))

    monkeypatch.setattr("engine.cli.ask._open", scripted)
    return ["--data-dir", str(tmp_path / "data")]


def test_ask_marks_a_sentence_the_manuals_do_not_say_and_cites_the_others(scripted_ask, capsys):
    assert main(["ask", "How do I replace the filter?", *scripted_ask]) == 0
    out = capsys.readouterr().out
    streamed, _, checked = out.partition("\n\nChecked against the passages:\n")
    assert SCRIPT in streamed  # the model's text as it came
    lines = checked.split("\n\n")[0].splitlines()
    number = re.fullmatch(r"  Replace the filter cartridge yearly, part F-77\. \[(\d)\]", lines[0]).group(1)
    assert lines[1:] == ["  Ask the dealer hotline for advice. [not in the manuals]",
                         "  Then reboot the controller twice. [not in the manuals]"]
    assert "Note:" not in out  # it says what the lead quotes ("cartridge yearly"): marked, not cautioned
    assert re.search(rf"^Sources:\n  \[{number}\] filter\.md, page 1: ", out, re.MULTILINE)


def test_ask_cautions_an_answer_that_says_nothing_the_lead_does(monkeypatch, tmp_path, tiny_embedder, capsys):
    args = _scripted(monkeypatch, tmp_path, tiny_embedder, "You can replace the filter when it needs replacing.")
    assert main(["ask", "How do I replace the filter?", *args]) == 0
    assert ("\nNote: it adds little to the question that the manual's words above say; check it against the passages "
            "below.\n") in capsys.readouterr().out


def test_an_answer_the_guard_cut_to_nothing_says_so_and_prints_no_blank_lines(monkeypatch, tmp_path, tiny_embedder,
                                                                              capsys):
    """The model copies the prompt's worked example (AVRDUDE's JTAG ICE question): the guard
    leaves none of it, and the CLI says why there is no answer under the manual's words."""
    from engine.answer.grounding import EXAMPLE_ANSWER
    from engine.answer.sentence_check import NO_TEXT_OF_ITS_OWN

    args = _scripted(monkeypatch, tmp_path, tiny_embedder, EXAMPLE_ANSWER)
    assert main(["ask", "How do I replace the filter?", *args]) == 0
    out = capsys.readouterr().out
    assert f"\n\nNote: {NO_TEXT_OF_ITS_OWN}\n" in out and "\n\n\n" not in out
    assert "check it against the passages" not in out and EXAMPLE_ANSWER[:20] not in out


def test_ask_json_has_each_sentence_checked_with_its_source(scripted_ask, capsys):
    assert main(["ask", "How do I replace the filter?", "--json", *scripted_ask]) == 0
    record = json.loads(capsys.readouterr().out)
    sentences = record["sentences"]
    assert [set(s) for s in sentences] == [{"start", "end", "text", "supported", "source", "score"}] * 3
    assert [record["answer"][s["start"]:s["end"]] for s in sentences] == [s["text"] for s in sentences]
    assert [(s["supported"], s["source"] is None) for s in sentences] == [(True, False), (False, True), (False, True)]
    assert [c["number"] for c in record["citations"]] == [sentences[0]["source"]]
    stats = record["stats"]
    assert (stats["checked"], stats["unsupported"], stats["lead_words"], stats["well_supported"]) == (3, 2, 2, True)


@pytest.fixture
def common(builtin_data_dir, tmp_path, request, capsys) -> list[str]:
    """--data-dir/--collection/--provider of a fresh collection holding the pump manual."""
    (tmp_path / "manuals").mkdir()
    (tmp_path / "manuals" / "pump.md").write_text(MANUAL, encoding="utf-8")
    collection = "cli-ask-" + re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")
    options = ["--data-dir", str(builtin_data_dir), "--collection", collection, "--provider", "cpu"]
    assert main(["index", str(tmp_path / "manuals"), *options]) == 0
    assert "The collection holds 1 document, " in capsys.readouterr().err
    return options


@pytest.mark.slow
def test_ask_streams_an_answer_then_names_its_sources(common, capsys, recorded_prompts):
    assert main(["ask", "How do I prime the pump?", *common]) == 0
    out, err = capsys.readouterr()
    (prompt,) = recorded_prompts
    assert prompt.marker not in out  # SmolLM2 may open its answer with the fence marker: hidden

    answer, _, sources = out.partition("\n\nSources:" if "\n\nSources:" in out else
                                       "\n\nPassages (the answer cites none of them):")
    assert answer.strip() and sources, out
    cited = SOURCE_LINE.findall(sources)
    assert cited, sources
    number, pages, quote = cited[0]
    assert number == "1" and "2" in pages.split(", ")  # "Priming" is the manual's second section
    assert "prime the pump" in quote
    assert "first token after" in err and "stages: " in err and " generate " in err


@pytest.mark.slow
def test_an_engine_that_cannot_be_reached_leaves_the_local_model_answering(common, capsys):
    """The window's rule, met by the CLI through the same supervisor (engine/llm/supervisor.py)."""
    from tests.helpers.http_engines import refused_url

    url = refused_url()
    assert main(["ask", "How do I prime the pump?", "--json", "--engine-url", url, *common]) == 0
    out, err = capsys.readouterr()
    record = json.loads(out)
    assert record["stats"]["provider"] == "cpu" and record["stats"]["new_tokens"] > 0
    assert f"The engine at {url}: it cannot be reached" in err and "Answering with the local model" in err


@pytest.mark.slow
def test_ask_json_prints_one_object_with_answer_citations_and_stats(common, capsys, recorded_prompts):
    assert main(["ask", "How do I prime the pump?", "--json", *common]) == 0
    out = capsys.readouterr().out
    assert len(out.strip().splitlines()) == 1
    record = json.loads(out)

    assert record["question"] == "How do I prime the pump?"
    assert record["answerable"] is True and isinstance(record["answer"], str)
    (prompt,) = recorded_prompts
    assert record["answer"].strip() and prompt.marker not in record["answer"]
    assert record["citations"]
    for citation in record["citations"]:
        assert citation["document"] == "pump.md" and Path(citation["path"]).name == "pump.md"
        assert citation["page"] in citation["pages"] and isinstance(citation["page"], int)
        assert citation["quote"] and isinstance(citation["cited"], bool)
    assert any("prime the pump" in c["quote"] for c in record["citations"])
    assert any("prime the pump" in q["text"] for q in record["lead"])
    assert all(q["document"] == "pump.md" and q["span"][0] == q["page"] for q in record["lead"])
    stats = record["stats"]
    assert stats["answerable"] is True and stats["relevance"]["relevant"] is True
    assert {"gate", "prompt", "generate", "cite"} <= set(stats["stages"])
    assert stats["prompt_tokens"] > 0 and stats["new_tokens"] > 0 and stats["provider"] == "cpu"
    assert stats["time_to_first_token_s"] > 0
    assert record["sentences"] and all(s["text"] == record["answer"][s["start"]:s["end"]]
                                       for s in record["sentences"])
    assert stats["checked"] == sum(not s["supported"] or s["source"] is not None for s in record["sentences"])


@pytest.mark.slow
def test_an_off_topic_question_is_not_answered(common, capsys):
    assert main(["ask", "What is the capital of France?", "--json", *common]) == NOT_COVERED_EXIT
    record = json.loads(capsys.readouterr().out)
    assert record["answerable"] is False and record["answer"] == NOT_FOUND and record["lead"] == []
    assert record["stats"]["relevance"]["missing_terms"] == ["capital", "france"]
    assert "generate" not in record["stats"]["stages"] and record["stats"]["new_tokens"] == 0
    assert record["citations"]  # the nearest passages, in case they help
    assert {c["document"] for c in record["citations"]} == {"pump.md"}
    assert not any(c["cited"] for c in record["citations"])

    assert main(["ask", "What is the capital of France?", *common]) == NOT_COVERED_EXIT
    out = capsys.readouterr().out
    assert out.startswith(NOT_FOUND)
    assert "Passages (the answer cites none of them):" in out and SOURCE_LINE.search(out)


@pytest.mark.slow
def test_a_refusal_names_the_words_no_manual_mentions(common, capsys):
    assert main(["ask", "How do I run the pump from a Jupyter notebook?", "--json", *common]) == NOT_COVERED_EXIT
    record = json.loads(capsys.readouterr().out)
    assert record["answerable"] is False and record["stats"]["relevance"]["unknown_names"] == ["Jupyter"]
    assert main(["ask", "How do I run the pump from a Jupyter notebook?", *common]) == NOT_COVERED_EXIT
    out = capsys.readouterr().out
    assert out.startswith(f"The manuals do not mention Jupyter.\n{NOT_FOUND}")


@pytest.mark.slow
def test_an_empty_question_is_an_error(common, capsys):
    assert main(["ask", "   ", *common]) == 1
    assert "error: The question is empty" in capsys.readouterr().err
    assert main(["ask", "", "--json", *common]) == 1
    record = json.loads(capsys.readouterr().out)
    assert "question is empty" in record["error"] and "answer" not in record


@pytest.mark.slow
def test_eval_retrieval_only_json_and_details(common, tmp_path, capsys):
    qa = write_qa(tmp_path / "qa.jsonl", QA_LINES)
    details = tmp_path / "details.jsonl"

    assert main(["eval", str(qa), "--retrieval-only", "--json", "--details", str(details), *common]) == 0
    out, err = capsys.readouterr()
    summary = json.loads(out)
    assert (summary["questions"], summary["answerable"], summary["unanswerable"]) == (3, 2, 1)
    assert {"hit@1", "hit@3", "hit@5", "hit@10", "mrr@5"} <= summary.keys()
    assert summary["hit@10"] == 1.0  # a one-manual collection: its passages cover every section
    assert summary["unanswerable_refused_rate"] == 1.0 and summary["keyword_hit_rate"] is None
    assert "embed" in summary["latency_s"] and "generate" not in summary["latency_s"]
    assert "3/3 questions" in err
    rows = [json.loads(line) for line in details.read_text(encoding="utf-8").splitlines()]
    assert [row["id"] for row in rows] == ["prime", "filter", "france"]
    assert rows[2]["refused"] is True and rows[0]["answer"] is None

    assert main(["eval", str(qa), "--retrieval-only", *common]) == 0
    table = capsys.readouterr().out
    assert table.startswith("3 questions: 2 answerable, 1 not")
    assert re.search(r"^  hit@1 +1\.000$", table, re.MULTILINE)
    assert re.search(r"^  keyword_hit_rate +-$", table, re.MULTILINE)


@pytest.mark.slow
def test_chat_answers_two_questions_then_ends_at_end_of_input(common, capsys, monkeypatch, recorded_prompts):
    monkeypatch.setattr("sys.stdin", io.StringIO("How do I prime the pump?\nand the filter?\n"))
    assert main(["chat", *common]) == 0
    out, err = capsys.readouterr()
    assert len(recorded_prompts) == 2 and not any(prompt.marker in out for prompt in recorded_prompts)

    assert out.count("\n> ") == 3  # two questions, then the prompt that met the end of input
    answers = out.split("\n> ")[1:3]
    for answer in answers:
        assert SOURCE_LINE.search(answer), answer
        assert re.split(r"\n\n(?:Sources:|Passages )", answer)[0].strip()  # text before the sources
    assert "Ask about your manuals" in err
    assert len(re.findall(r"stages: .* generate ", err)) == 2


@pytest.mark.slow
def test_chat_answers_a_follow_up_that_refers_back_with_the_previous_question(
        common, capsys, monkeypatch, recorded_prompts):
    # Alone, "And how do I close it again?" barely touches the manual; after the priming
    # question it is searched and judged with it, and answered from the priming section.
    monkeypatch.setattr("sys.stdin", io.StringIO("How do I prime the pump?\nAnd how do I close it again?\n"))
    assert main(["chat", *common]) == 0
    out = capsys.readouterr().out
    follow_up = out.split("\n> ")[2]
    assert not follow_up.startswith(NOT_FOUND), follow_up
    first, second = recorded_prompts
    assert second.passages[0].text == first.passages[0].text  # the priming section, ranked first
    assert "Priming" in second.passages[0].text or "prime the pump" in second.passages[0].text


@pytest.mark.slow
@pytest.mark.parametrize("command", [["ask", "How do I prime the pump?"], ["chat"],
                                     ["eval", "QA", "--retrieval-only"]], ids=lambda c: c[0])
def test_a_missing_collection_says_to_index_documents_first(builtin_data_dir, tmp_path, capsys,
                                                            monkeypatch, command):
    qa = tmp_path / "qa.jsonl"
    qa.write_text(json.dumps({"question": "Q?", "doc": "a.md", "pages": [1]}) + "\n", encoding="utf-8")
    monkeypatch.setattr("sys.stdin", io.StringIO("How do I prime the pump?\n"))
    command = [str(qa) if part == "QA" else part for part in command]
    code = main([*command, "--data-dir", str(builtin_data_dir), "--collection", "never-indexed",
                 "--provider", "cpu"])
    assert code == 1
    err = capsys.readouterr().err
    assert re.search(r"^error: The collection 'never-indexed' is empty: no documents are indexed yet "
                     r"\(in .*never-indexed\)\. Add some with: offline-assistant-cli index PATH "
                     r"--data-dir .* --collection never-indexed$", err, re.MULTILINE), err
    assert "Traceback" not in err


@pytest.mark.slow
def test_eval_with_answers_scores_keywords_and_times_generation(common, tmp_path, capsys):
    qa = write_qa(tmp_path / "qa.jsonl", QA_LINES)
    assert main(["eval", str(qa), "--json", *common]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["questions"] == 3 and summary["unanswerable_refused_rate"] == 1.0
    assert summary["keyword_hit_rate"] is not None  # answers were written and checked
    assert {"generate", "first_token", "total"} <= summary["latency_s"].keys()
