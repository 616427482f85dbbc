"""The `ask`, `chat` and `eval` commands: grounded answers from a terminal, and their measurement."""

from __future__ import annotations

import contextlib
import json
import sys
import threading
from dataclasses import replace

from engine.cli.common import (
    CANCELLED_EXIT,
    NOT_COVERED_EXIT,
    collection_option,
    collection_told,
    common_options,
    ctrl_c_sets,
    engine_of,
    engine_options,
    llm_folder,
    nothing_indexed,
    paths_of,
    plural,
    print_repairs,
)
from engine.errors import EngineError
from engine.evaluation.scoring import REPEAT_SAMPLE
from engine.safe_text import clip, visible

QUOTE_WIDTH = 160
NOT_IN_MANUALS = "[not in the manuals]"


def add_commands(commands) -> None:
    collection = collection_option()
    answering = _answering_options()
    common = common_options(runs_model=True)

    ask = commands.add_parser("ask", parents=[common, collection, answering],
                              help="answer one question from the indexed manuals, with sources",
                              epilog=f"Exit codes: 0 answered; {NOT_COVERED_EXIT} the manuals do not "
                                     "cover the question (the answer says so); 1 an error; "
                                     f"{CANCELLED_EXIT} stopped with Ctrl-C.")
    ask.add_argument("question", metavar="QUESTION", help="the question, in quotes")
    ask.add_argument("--json", action="store_true",
                     help="print one JSON object: lead, answer, sentences, citations, answerable, stats")
    ask.set_defaults(run=lambda args: _ask(args, paths_of(args)))

    chat = commands.add_parser("chat", parents=[common, collection, answering],
                               help="an interactive session that remembers the conversation")
    chat.set_defaults(run=lambda args: _chat(args, paths_of(args)))

    evaluate = commands.add_parser("eval", parents=[common, collection, answering],
                                   help="measure retrieval and answers on a QA set (JSON lines)")
    evaluate.add_argument("qa", metavar="QA.jsonl", nargs="+", help="one or more QA sets, measured together")
    evaluate.add_argument("--retrieval-only", action="store_true", help="skip generating answers")
    evaluate.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    evaluate.add_argument("--details", metavar="FILE", help="write one JSON line per question here")
    evaluate.add_argument("--repeat-sample", metavar="N", type=_count, default=REPEAT_SAMPLE,
                          help=f"ask N answerable questions twice to measure determinism "
                               f"(default {REPEAT_SAMPLE}; 0 skips it)")
    evaluate.set_defaults(run=lambda args: _eval(args, paths_of(args)))


def _answering_options():
    from argparse import ArgumentParser

    options = ArgumentParser(add_help=False, parents=[engine_options()])
    options.add_argument("--model", metavar="NAME",
                         help="an imported model's name (default: the built-in one)")
    options.add_argument("--no-rerank", action="store_true",
                         help="skip the imported cross-encoder even if there is one")
    return options


@contextlib.contextmanager
def _open(args, paths):
    """The answering session; what opening the collection repaired is printed first, on stderr,
    and a damaged collection's error is said once (by main), not also by the log."""
    from engine.answer.central import chosen_server
    from engine.answer.session import AnswerSession, SessionConfig
    from engine.config import load_settings
    from engine.llm.supervisor import ModelChoice

    settings = replace(load_settings(paths.settings_file), use_reranker=not args.no_rerank)
    thin = chosen_server(settings)[0] is not None  # a central server answers: nothing here is needed
    if not thin:
        _refuse_a_missing_collection(args, paths)  # before minutes of preparing the model
    url, key, model = engine_of(args, paths)
    folder = None if url or thin else llm_folder(paths, args.model)  # a remote engine needs no local model
    choice = ModelChoice(args.provider, folder, args.model, url, key, model)
    with collection_told(), AnswerSession(paths, args.collection, _tell) as session:
        session.open(SessionConfig(settings, args.provider, model=choice))
        if not thin:
            print_repairs(session.assistant().retriever.store.open_report.get("repaired"))
        yield session


def _tell(record) -> None:
    """What the model's supervisor says that a person at the command line should know: the
    remote engine went away, and what answers instead."""
    from engine.llm.supervisor import EngineUnreachable

    if isinstance(record, EngineUnreachable):
        print(visible(record.message), file=sys.stderr)


# -- ask and chat --------------------------------------------------------------------------

def _refuse_a_missing_collection(args, paths) -> None:
    from engine.store.health import collection_exists

    if not collection_exists(paths, args.collection):
        raise EngineError(nothing_indexed(args, paths))


def _ask(args, paths) -> int:
    """0 answered; NOT_COVERED_EXIT when the manuals do not cover the question; 1 an error."""
    cancel = threading.Event()
    with _open(args, paths) as session, ctrl_c_sets(cancel):
        events = session.ask(args.question, cancel=cancel)
        if args.json:
            record = _print_json(args.question, events)
            answerable = None if record is None else record.get("stats", {}).get("answerable")
        else:
            done = _print_answer(events)
            answerable = None if done is None else done.stats.answerable
    if answerable is None:
        return 1
    if cancel.is_set():
        return CANCELLED_EXIT
    return 0 if answerable else NOT_COVERED_EXIT


def _chat(args, paths) -> int:
    history: list[dict] = []
    print("Ask about your manuals. An empty line or Ctrl-D ends; Ctrl-C stops an answer.", file=sys.stderr)
    with _open(args, paths) as session:
        while True:
            try:
                question = input("\n> ").strip()
            except EOFError:
                break
            if not question or question.lower() in ("exit", "quit"):
                break
            cancel = threading.Event()
            with ctrl_c_sets(cancel):
                done = _print_answer(session.ask(question, history, cancel))
            if done is not None:
                history += [{"role": "user", "content": question},
                            {"role": "assistant", "content": done.answer}]
    return 0


def _print_answer(events):
    """Prints the lead sentences, streams the text, then lists the sources; the done event
    (the answer and its stats), or None after an error. Every text from a manual or the model goes through visible(): a
    document's escape sequences never reach the terminal."""
    from engine.answer.grounding import not_mentioned
    from engine.answer.sentence_check import NO_TEXT_OF_ITS_OWN, needs_caution, no_text_of_its_own

    _utf8_safe(sys.stdout)
    done, citations, wrote = None, (), False
    for event in events:
        if event.kind == "passages" and not event.answerable and event.relevance.unknown_names:
            print(visible(not_mentioned(event.relevance.unknown_names)))
        elif event.kind == "lead":
            _print_lead(event.quotes)
        elif event.kind == "text":
            sys.stdout.write(visible(event.text))
            sys.stdout.flush()
            wrote = wrote or bool(event.text.strip())
        elif event.kind == "citations":
            if wrote:
                sys.stdout.write("\n")  # ends the streamed text's line
            citations = event.citations
        elif event.kind == "done":
            done = event
            if no_text_of_its_own(event.answer, event.stats.answerable):
                print(f"Note: {NO_TEXT_OF_ITS_OWN}")
            _print_checked(event.answer, event.sentences)
            if event.stats.answerable and needs_caution(event.answer, event.sentences, event.stats.well_supported):
                print(f"\nNote: {_caution(event.stats, event.answer, event.sentences)}; "
                      "check it against the passages below.")
            _print_sources(citations)
            _print_stats(event.stats)
        elif event.kind == "error":
            print(f"error: {visible(event.message)}", file=sys.stderr)
    return done


def _print_lead(quotes) -> None:
    """The manual's own sentences first, each with where it is, as soon as they are known."""
    if not quotes:
        return
    print("From the manuals:")
    for quote in quotes:
        where = quote.passage.pages_text((quote.page,))
        text = visible(quote.text).replace("\n", "\n   ")  # a row under its header: lines kept, indented
        print(f"  \u201c{text}\u201d ({visible(quote.document)}, {where}) [{quote.number}]")
    print(flush=True)


def _print_checked(answer: str, sentences) -> None:
    """The answer's sentences with content again, each with the passage it came from, or
    marked when the passages do not say it."""
    from engine.answer.sentence_check import has_content

    lines = [checked_line(answer, s) for s in sentences if has_content(s)]
    if lines:
        print("\nChecked against the passages:")
        for line in lines:
            print(f"  {line}")


def checked_line(answer: str, sentence) -> str:
    """One checked sentence as the CLI shows it: its text, then its mark (sentence_check.mark_of):
    "[n]", its source, or NOT_IN_MANUALS. A code block keeps its lines, indented."""
    from engine.answer.sentence_check import mark_of

    text = visible(answer[sentence.start:sentence.end]).replace("\n", "\n    ")
    mark = mark_of(answer, sentence)
    if mark is None:
        return text
    return f"{text} {NOT_IN_MANUALS if isinstance(mark, str) else f'[{mark}]'}"


def _caution(stats, answer: str = "", sentences=()) -> str:
    from engine.answer.sentence_check import unsupported_actions

    if stats.unsupported_actions or unsupported_actions(answer, sentences):
        return "an address, command or value in this answer is not in the manuals"
    if stats.lead_words is not None:
        return "it adds little to the question that the manual's words above say"
    if stats.checked is None:
        return "much of this answer is not in the manuals"
    if not stats.checked:
        return "nothing in this answer could be found in the manuals"
    verb = "is" if stats.unsupported == 1 else "are"
    return f"{stats.unsupported} of its {plural(stats.checked, 'sentence')} {verb} not in the manuals"


def _print_sources(citations) -> None:
    if not citations:
        return
    cited = any(c.cited for c in citations)
    print("\nSources:" if cited else "\nPassages (the answer cites none of them):")
    for c in citations:
        quote = clip(c.quote.replace("\n", " / "), QUOTE_WIDTH)  # made visible first: the cut never splits an escape
        print(f"  [{c.number}] {visible(c.passage.document)}, {c.passage.pages_text()}: \"{quote}\"")


def _print_stats(stats) -> None:
    first = stats.time_to_first_token_s
    first_text = f"first token after {first:.2f} s, " if first is not None else ""
    print(f"[{first_text}{plural(stats.new_tokens, 'token')}, total {stats.timings_s.get('total', 0):.2f} s, "
          f"stages: {' '.join(stats.stages)}]", file=sys.stderr)


def _print_json(question: str, events) -> dict | None:
    """One JSON object for the whole answer (nothing streamed); None after an error."""
    record: dict = {"question": question, "lead": []}
    for event in events:
        if event.kind == "passages":
            record["answerable"] = event.answerable
        elif event.kind == "lead":
            record["lead"] = [_quote_json(q) for q in event.quotes]
        elif event.kind == "citations":
            record["citations"] = [_citation_json(c) for c in event.citations]
        elif event.kind == "done":
            record.update(answer=event.answer, stats=event.stats.to_dict(),
                          sentences=[_sentence_json(event.answer, c) for c in event.sentences])
        elif event.kind == "error":
            record.update(error=event.message)
    print(json.dumps(record))  # \u escapes: valid on any console's encoding (Windows' cp1252 too)
    return None if "error" in record else record


def _citation_json(citation) -> dict:
    found = citation.to_dict()
    return {key: found[key] for key in ("number", "document", "path", "page", "page_label", "pages",
                                           "page_labels", "quote", "cited")}


def _sentence_json(answer: str, sentence) -> dict:
    return {**sentence.to_dict(), "text": answer[sentence.start:sentence.end]}


def _quote_json(quote) -> dict:
    found = quote.to_dict()
    return {key: found[key] for key in ("number", "text", "document", "path", "page", "page_label", "span")}


def _utf8_safe(stream) -> None:
    if hasattr(stream, "reconfigure"):
        stream.reconfigure(errors="replace")  # a console that cannot show every character


# -- eval ----------------------------------------------------------------------------------

def _eval(args, paths) -> int:
    from engine.evaluation.qa import load_qa
    from engine.evaluation.scoring import evaluate, summarize

    items = [item for path in args.qa for item in load_qa(path)]
    try:
        details = open(args.details, "w", encoding="utf-8") if args.details else None
    except OSError as exc:
        raise EngineError(f"The details file '{args.details}' could not be written ({exc.strerror}); "
                          "choose another path.") from exc
    try:
        with _eval_parts(args, paths) as (retriever, assistant):
            results = evaluate(items, retriever, assistant, on_result=_progress_to(len(items), details),
                               repeat_sample=args.repeat_sample)
    finally:
        if details is not None:
            details.close()
    if sys.stderr.isatty():
        print(file=sys.stderr)  # ends the redrawn count
    summary = summarize(results)
    print(json.dumps(summary, indent=1) if args.json else summary_table(summary))
    return 0


@contextlib.contextmanager
def _eval_parts(args, paths):
    """(retriever, assistant) with the LLM, or (retriever, None) for --retrieval-only."""
    if not args.retrieval_only:
        with _open(args, paths) as session:
            assistant = session.assistant()
            yield assistant.retriever, assistant
        return
    from engine.answer.assistant import imported_reranker
    from engine.answer.retrieval import Retriever
    from engine.store.indexer import default_embedder, open_collection

    _refuse_a_missing_collection(args, paths)
    embedder = default_embedder(paths)
    with collection_told(), open_collection(paths, args.collection, embedder, read_only=True) as store:
        print_repairs(store.open_report.get("repaired"))
        store.refuse_if_emptied()
        reranker = None if args.no_rerank else imported_reranker(paths)
        yield Retriever(store, embedder, reranker), None


def _progress_to(total: int, details, stream=None):
    """Counts the questions on stderr: one line redrawn on a terminal, else a line at each
    tenth of the set (a log gets no carriage returns); writes each result to `details`."""
    stream = stream or sys.stderr
    live = stream.isatty()
    done = 0

    def report(result) -> None:
        nonlocal done
        done += 1
        if live:
            stream.write(f"\r{done}/{total} questions")
        elif done == total or done * 10 // total != (done - 1) * 10 // total:
            stream.write(f"{done}/{total} questions\n")
        stream.flush()
        if details is not None:
            details.write(json.dumps(result.to_dict(), ensure_ascii=False) + "\n")
            details.flush()
    return report


def _count(text: str) -> int:
    from argparse import ArgumentTypeError

    if not text.isdigit():
        raise ArgumentTypeError(f"'{text}' is not a whole number of questions (0 or more)")
    return int(text)


SUMMARY_KEYS = ("hit@1", "hit@3", "hit@5", "hit@10", "mrr@5", "refusal_accuracy", "false_refusal_rate",
                "unanswerable_refused_rate", "keyword_hit_rate", "keyword_hit_generated", "lead_hit_rate",
                "lead_chars", "keyword_any_rate", "evidence_hit_rate", "keyword_hit_supported_only", "caution_rate",
                "caution_on_wrong", "caution_on_right", "loop_rate", "streamed_beyond_rate", "deterministic_rate")
# per family and per document: (column heading, summary key); "s" columns are latency p50s
GROUP_COLUMNS = (("n", "questions"), ("hit@5", "hit@5"), ("mrr@5", "mrr@5"), ("refuse", "refusal_accuracy"),
                 ("false", "false_refusal_rate"), ("kw", "keyword_hit_rate"),
                 ("kw_gen", "keyword_hit_generated"), ("lead", "lead_hit_rate"), ("chars", "lead_chars"),
                 ("loop", "loop_rate"),
                 ("caut", "caution_rate"), ("caut_w", "caution_on_wrong"), ("caut_r", "caution_on_right"),
                 ("det", "deterministic_rate"), ("lead s", "lead"), ("1st s", "first_token"))
GROUP_NAME_WIDTH = 26


def summary_table(summary: dict) -> str:
    """The summary for a person: each measure, latency per stage, then one row per family and
    per document (refuse = refusal_accuracy, false = false_refusal_rate, kw = keyword_hit_rate,
    kw_gen = keyword_hit_generated, chars = lead_chars (what the lead shows), caut = caution_rate, caut_w = caution_on_wrong, caut_r =
    caution_on_right, det = deterministic_rate; lead s and 1st s are p50s)."""
    lines = [f"{summary['questions']} questions: {summary['answerable']} answerable, "
             f"{summary['unanswerable']} not"]
    for key in SUMMARY_KEYS:
        lines.append(f"  {key:<26} {_figure(summary.get(key))}")
    lines.append(f"  {'latency (s)':<26} {'p50':>7}  {'p95':>7}")
    for stage, figures in summary["latency_s"].items():
        lines.append(f"    {stage:<24} {figures['p50']:>7.3f}  {figures['p95']:>7.3f}")
    for title, key in (("by family", "by_family"), ("by document", "by_doc")):
        if summary.get(key):
            lines += _group_rows(title, summary[key])
    return "\n".join(lines)


def _group_rows(title: str, groups: dict) -> list[str]:
    lines = [f"  {title:<{GROUP_NAME_WIDTH}}" + "".join(f"{heading:>7}" for heading, _ in GROUP_COLUMNS)]
    for name, figures in groups.items():
        name = name if len(name) <= GROUP_NAME_WIDTH - 2 else name[:GROUP_NAME_WIDTH - 3] + "…"
        cells = [_group_cell(figures, key) for _, key in GROUP_COLUMNS]
        lines.append(f"    {name:<{GROUP_NAME_WIDTH - 2}}" + "".join(f"{cell:>7}" for cell in cells))
    return lines


def _group_cell(figures: dict, key: str) -> str:
    if key == "questions":
        return str(figures[key])
    if key in figures:
        return _figure(figures[key])
    latency = figures["latency_s"].get(key)
    return "-" if latency is None else f"{latency['p50']:.2f}"


def _figure(value) -> str:
    if value is None:
        return "-"
    return f"{value:.0f}" if value >= 10 else f"{value:.3f}"  # a count of characters, or a share
