"""Checking an answer sentence by sentence against its passages (engine.answer.sentence_check):
splitting code-aware, scoring words, code names and cosines, the source of each sentence, the
caution. Fast tests on hand-built passages and the tiny embedder; the slow one on the real
built-in embedder and a real manual's passages."""

from __future__ import annotations

import pytest

from engine.answer.sentence_check import (
    CheckSettings,
    answer_sentences,
    check_sentences,
    code_names,
    has_content,
    lead_words,
    needs_caution,
    sources,
    without_unsupported,
)
from engine.answer.terms import query_terms
from engine.types import CheckedSentence, Passage, Span


def passage(number: int, text: str) -> Passage:
    return Passage(document_id=number, path=f"/manuals/m{number}.pdf", title=f"M{number}", chunk_ids=(number,),
                   spans=(Span(1, 0, len(text)),), text=text, heading_path=(), score=1.0, similarity=0.5)


PASSAGES = [
    passage(1, "To read a table of data, call read.table with the file name. The header argument "
               "says whether the first line holds the variable names."),
    passage(2, "Prime the pump with clean water before the first start. Close the filler plug "
               "hand-tight afterwards."),
    passage(3, "Error E-12 means the motor overheated. Let the motor cool for thirty minutes."),
]


def pieces(text: str) -> list[str]:
    return [text[start:end] for start, end in answer_sentences(text)]


# -- splitting -----------------------------------------------------------------------------------

def test_a_full_stop_inside_code_or_an_abbreviation_ends_no_sentence():
    text = "Use read.csv(\"a.csv\") to read it, e.g. with sep. Then call hist(x). Done!"
    assert pieces(text) == ["Use read.csv(\"a.csv\") to read it, e.g. with sep.", "Then call hist(x).", "Done!"]


def test_citations_after_a_full_stop_stay_with_their_sentence():
    text = "Prime the pump. [2] Then start it [1]. Let it run. [1, 3]"
    assert pieces(text) == ["Prime the pump. [2]", "Then start it [1].", "Let it run. [1, 3]"]


def test_list_items_and_blank_lines_start_sentences_and_a_numbers_full_stop_ends_none():
    text = "Do this:\n1. Open the lid.\n2. Fill it. Close it.\n\n- Start the motor\n  slowly."
    assert pieces(text) == ["Do this:", "1. Open the lid.", "2. Fill it.", "Close it.",
                            "- Start the motor\n  slowly."]


def test_a_code_block_is_one_piece_even_left_open():
    text = "Set it:\n\n```\nset datafile separator \";\"\nplot 'a.csv'\n```\nThat is all.\n```r\nx <- 1"
    assert pieces(text) == ["Set it:", "```\nset datafile separator \";\"\nplot 'a.csv'\n```", "That is all.",
                            "```r\nx <- 1"]


def test_spans_index_the_answer_itself():
    text = "  Prime the pump.   Then start it.\n"
    spans = answer_sentences(text)
    assert [text[s:e] for s, e in spans] == ["Prime the pump.", "Then start it."]
    assert answer_sentences("") == [] and answer_sentences(" \n\n ") == []


def test_code_names_are_backticked_called_or_typed_like_code_not_english_compounds():
    assert code_names("Use `read.table` or hist(x) with --vanilla and -fpng, error E-12 on X11.") == \
        ["read.table", "hist", "vanilla", "fpng", "E-12", "X11"]
    assert code_names("The command-line tool, e.g. this one, is second-level and FOP-specific.") == []
    assert code_names("```\nset datafile separator\n```", is_code=True) == ["set", "datafile", "separator"]


# -- scoring and sources -------------------------------------------------------------------------

def check(answer: str, passages=PASSAGES, embedder=None, **settings) -> list[tuple[str, bool, int | None]]:
    checked = check_sentences(answer, passages, embedder, CheckSettings(**settings))
    return [(answer[c.start:c.end], c.supported, c.source) for c in checked]


def test_a_sentence_the_passages_say_is_supported_by_the_passage_that_says_it():
    assert check("Before the first start, prime the pump with clean water.") == \
        [("Before the first start, prime the pump with clean water.", True, 2)]
    assert check("E-12 means that the motor overheated.") == [("E-12 means that the motor overheated.", True, 3)]


def test_a_sentence_the_passages_do_not_say_is_unsupported_with_no_source():
    assert check("Open the PDF in Adobe Acrobat and print it twice.") == \
        [("Open the PDF in Adobe Acrobat and print it twice.", False, None)]


def test_a_made_up_name_is_unsupported_though_its_other_words_are_there():
    good, made_up = "Call read.table with the file name.", "Call `read.tables` with the file name."
    assert check(good) == [(good, True, 1)]
    assert check(made_up) == [(made_up, False, None)]


@pytest.mark.parametrize("answer, supported", [
    ("Let the motor cool for thirty minutes after error E-12 [3].", True),  # "E-12" is a name
    ("Tighten the cover screws to 9 Nm.", True),
    ("Tighten the cover screws to 3.5 Nm.", False),  # a value the table does not hold
    ("Tighten the cover screws to 9,0 Nm.", False),
    ("The maximum feed override is 1,2.", True),  # a decimal comma for the table's point
])
def test_a_value_is_supported_only_where_a_passage_holds_it(answer, supported):
    table = passage(4, "Part | Thread | Torque\nCover screws | M6 | 9 Nm\nMAX_FEED_OVERRIDE = 1.2")
    (checked,) = check_sentences(answer, PASSAGES + [table])
    assert checked.supported is supported, checked
    if not supported:
        from engine.answer.sentence_check import unsupported_actions

        assert unsupported_actions(answer, [checked])  # a made-up value calls for the caution


def test_a_copied_source_header_is_not_checked_as_a_claim():
    answer = "[2] m2.pdf, page 1:\nPrime the pump with clean water before the first start."
    (checked,) = check_sentences(answer, PASSAGES)
    assert (checked.supported, checked.source) == (True, 2)
    for copied in ("[3] m3.pdf, pages 4, 5:", "[3] m3.pdf, page iv:", "[1] R-admin.pdf, pages T-1, T-2:"):
        (header,) = check_sentences(copied, PASSAGES)  # printed page labels too
        assert not has_content(header), copied


def test_a_sentence_with_nothing_to_check_is_neither_marked_nor_cited():
    (checked,) = check_sentences("Here is how:", PASSAGES)
    assert (checked.supported, checked.source) == (True, None) and not has_content(checked)


def test_a_cited_passage_is_the_source_when_it_supports_the_sentence():
    both = [passage(1, "Prime the pump with water before the start of the day."),
            passage(2, "Prime the pump with water before the start.")]
    sentence = "Prime the pump with water before the start"
    assert check(sentence + ".", both) == [(sentence + ".", True, 1)]  # the best, the first of equals
    assert check(sentence + " [2].", both) == [(sentence + " [2].", True, 2)]
    # a cited passage that does not say it gives way to the one that does
    assert check("Let the motor cool for thirty minutes [2].")[0][1:] == (True, 3)


def test_a_sentence_is_checked_against_the_numbered_passages_only():
    assert check("Let the motor cool for thirty minutes.", PASSAGES[:2])[0][1:] == (False, None)
    assert check("Let the motor cool for thirty minutes.", [])[0][1:] == (False, None)


def test_scores_lie_in_0_1_and_the_embedder_is_called_once(tiny_embedder, monkeypatch):
    calls = []
    real = tiny_embedder.encode_documents
    monkeypatch.setattr(tiny_embedder, "encode_documents", lambda texts: calls.append(len(texts)) or real(texts))
    answer = "Prime the pump with clean water. Let the motor cool. Open the PDF in Acrobat now."
    checked = check_sentences(answer, PASSAGES, tiny_embedder)
    assert len(checked) == 3 and len(calls) == 1 and calls[0] > 3  # the sentences and the passages' ones
    assert all(0.0 <= c.score <= 1.0 for c in checked)
    assert [c.source for c in checked][:1] == [2] and checked[2].supported is False


def test_the_cosine_weighs_by_the_settings(tiny_embedder):
    answer = "Prime the pump with clean water."
    words_only = check_sentences(answer, PASSAGES, tiny_embedder, CheckSettings(cosine_weight=0.0))
    assert words_only == check_sentences(answer, PASSAGES)  # no embedder: words and names alone
    assert check_sentences(answer, PASSAGES, tiny_embedder, CheckSettings(cosine_weight=1.0))[0].score <= 1.0


# -- the caution and what follows from the checks ------------------------------------------------

def sentence(supported: bool, source: int | None, start: int = 0, end: int = 1) -> CheckedSentence:
    return CheckedSentence(start, end, supported, source, 0.5)


@pytest.mark.parametrize("answer, count", [
    ("Prime the pump with clean water [2]. Close the filler plug.", 5),  # clean water filler plug close
    ("You should prime the pump before you start it.", 0),  # the question turned round; "start" is asked
    ("Prime it with oil and open the drain valve.", 0),  # its own words: none is the lead's
    ("Prime the pump with water, water and more water.", 1),  # a word counts once
])
def test_lead_words_are_the_answers_words_beyond_the_question_that_the_lead_holds(answer, count):
    lead = "Prime the pump with clean water before the first start. Close the filler plug hand-tight afterwards."
    assert lead_words(answer, query_terms("How do I prime the pump before the first start?"), lead) == count


def test_the_caution_is_for_text_the_model_wrote_an_answer_cut_to_nothing_gets_none():
    assert needs_caution("The valve opens.", [], well_supported=False)
    assert not needs_caution("The valve opens.", [], well_supported=True)
    assert not needs_caution("", [], well_supported=False) and not needs_caution(" \n", [], well_supported=False)


def test_sources_in_order_of_first_use_once_each():
    assert sources([sentence(True, 3), sentence(False, None), sentence(True, 1), sentence(True, 3)]) == [3, 1]


def test_leaving_out_the_unsupported_sentences():
    answer = "Prime the pump with water. Open the PDF in Acrobat.\n\nThen start the pump."
    checked = check_sentences(answer, PASSAGES)
    assert [c.supported for c in checked] == [True, False, True]
    assert without_unsupported(answer, checked) == "Prime the pump with water.\n\nThen start the pump."


@pytest.mark.slow
def test_real_embedder_marks_a_sentence_the_manual_does_not_say(builtin_data_dir, tmp_path):
    """Real passages of an indexed manual, the built-in embedder: a paraphrase of the manual is
    supported by its passage; an invented step and a made-up option are not."""
    from engine.answer.retrieval import Retriever
    from engine.cli.main import main
    from engine.paths import AppPaths
    from engine.store.indexer import default_embedder, open_collection

    manual = tmp_path / "pump.md"
    manual.write_text("# Pump P-200\n\n## Priming\n\nBefore the first start, prime the pump: open the filler "
                      "plug and fill the housing with clean water until it overflows.\n\n## Filter\n\n"
                      "Replace the filter cartridge (part F-77) once a year, or when the pressure drops "
                      "below 2 bar.\n", encoding="utf-8")
    assert main(["index", str(manual), "--data-dir", str(builtin_data_dir), "--collection", "check"]) == 0
    paths = AppPaths(builtin_data_dir)
    embedder = default_embedder(paths)
    with open_collection(paths, "check", embedder, read_only=True) as store:
        passages = Retriever(store, embedder).retrieve("How do I prime the pump?", 4).passages
    answer = ("Fill the pump housing with clean water until it overflows. "
              "Then reboot the controller from the settings menu. Run `pump --calibrate` afterwards.")
    checked = check_sentences(answer, passages, embedder)
    assert [c.supported for c in checked] == [True, False, False]
    assert "prime the pump" in passages[checked[0].source - 1].text
