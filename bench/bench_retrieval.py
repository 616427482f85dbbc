#!/usr/bin/env python
"""Retrieval benchmark (issue 4): dense vs keyword vs hybrid, chunk sizes, the relevance gate.

    python bench/bench_retrieval.py              # tables in docs/retrieval.md, plot docs/retrieval-hitk.svg
    python bench/bench_retrieval.py --answers    # also the full answers (built-in LLM): keywords, latency
    python bench/bench_retrieval.py --no-doc     # stdout only
    python bench/bench_retrieval.py --families [--before DATA_DIR]
        # issue 13: both development sets, per family, every variant tried, side by side;
        # rewrites only the "Issue 13: across families" section of docs/retrieval.md

Indexes the five R manuals of the development set (tests/qa/r_manuals_dev.jsonl) once per
chunk size into bench/.cache/retrieval-<size> (reused while the engine's chunking and
embedder are unchanged; delete the folder to rebuild), then runs every question through each
retrieval variant. Needs tests/.manuals (tests/fetch_manuals.sh).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.answer.grounding import DEFAULT_THRESHOLD, judge_relevance  # noqa: E402
from engine.answer.retrieval import RetrievalSettings, Retriever  # noqa: E402
from engine.evaluation.qa import load_qa  # noqa: E402
from engine.evaluation.scoring import evaluate, first_hit_rank, summarize  # noqa: E402
from engine.paths import AppPaths  # noqa: E402
from engine.store.indexer import Indexer, IndexSettings, default_embedder, open_collection  # noqa: E402

QA = ROOT / "tests" / "qa" / "r_manuals_dev.jsonl"
DEV_SETS = (QA, ROOT / "tests" / "qa" / "dev_mixed.jsonl")
MANUALS = ROOT / "tests" / ".manuals"
CACHE = ROOT / "bench" / ".cache"
DOCS = ROOT / "docs"
CHUNK_SIZES = (128, 256, 384)
CHOSEN_SIZE = 256
GATE_PASSAGES = 4  # AssistantSettings.passages: the gate reads what the model would get
VARIANTS = {
    "dense": RetrievalSettings(fusion="dense"),
    "keyword": RetrievalSettings(fusion="keyword"),
    "hybrid": RetrievalSettings(),
}
EXTRA_VARIANTS = {  # at the chosen chunk size only
    "hybrid, no neighbour merging": RetrievalSettings(merge_neighbours=False),
    "hybrid, RRF k=20": RetrievalSettings(rrf_k=20),
    "hybrid, dense weight 2": RetrievalSettings(dense_weight=2.0),
    "hybrid, 20 candidates per side": RetrievalSettings(candidates=20),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", action="store_true", help="also generate answers (slow)")
    parser.add_argument("--latency", action="store_true",
                        help="also time the first token at several prompt budgets (slow)")
    parser.add_argument("--no-doc", action="store_true", help="do not write docs/")
    parser.add_argument("--families", action="store_true",
                        help="issue 13: both development sets, per family, the variants side by side")
    parser.add_argument("--before", type=Path, help="with --families: also a data dir indexed "
                        "before issue 13 (format 1, e.g. /tmp/lead-data), read-only")
    args = parser.parse_args()
    if args.families:
        return _families(args.before, write_doc=not args.no_doc)
    items = load_qa(QA)
    embedder = default_embedder(AppPaths(CACHE / "retrieval-models").ensure())
    rows, gates, curves = [], {}, {}
    for size in CHUNK_SIZES:
        paths = _indexed(size, embedder)
        with open_collection(paths, embedder=embedder, read_only=True) as store:
            variants = dict(VARIANTS, **(EXTRA_VARIANTS if size == CHOSEN_SIZE else {}))
            for name, settings in variants.items():
                measured = _measure(items, Retriever(store, embedder, settings=settings))
                rows.append({"chunk_tokens": size, "variant": name, **measured["summary"]})
                print(json.dumps(rows[-1]), flush=True)
                if size == CHOSEN_SIZE:
                    curves[name] = measured["hit_curve"]
                    gates[name] = measured["gate"]
    answers = _answers(items, embedder) if args.answers else None
    latency = _latency(items) if args.latency else None
    if not args.no_doc:
        _write_docs(rows, gates["hybrid"], curves, answers, latency)
    return 0


def _indexed(size: int, embedder) -> AppPaths:
    paths = AppPaths(CACHE / f"retrieval-{size}").ensure()
    store = open_collection(paths, embedder=embedder)
    try:
        manuals = sorted({MANUALS / item.doc for item in load_qa(QA) if item.doc})
        for _ in Indexer(store, embedder, IndexSettings(chunk_tokens=size)).run(manuals):
            pass
    finally:
        store.close()
    return paths


def _measure(items, retriever: Retriever) -> dict:
    ranks, gate = [], []
    for item in items:
        passages = retriever.search(item.question, 10)
        ranks.append((item.answerable, first_hit_rank(item, passages)))
        relevance = judge_relevance(item.question, passages[:GATE_PASSAGES],
                                    retriever.store.prefix_frequency)
        gate.append((item.answerable, relevance.similarity, relevance.score))
    answerable = [rank for ok, rank in ranks if ok]
    curve = [sum(r is not None and r <= k for r in answerable) / len(answerable) for k in range(1, 11)]
    results = evaluate(items, retriever)  # the same questions through the product's own code
    summary = {k: v for k, v in summarize(results).items() if k != "latency_s" and v is not None}
    summary["search_p50_ms"] = round(1000 * _p50([sum(r.timings_s.values()) for r in results]), 1)
    return {"summary": summary, "hit_curve": curve, "gate": gate}


def _answers(items, embedder) -> dict:
    from engine.answer.session import open_assistant
    from engine.models.registry import prepare_builtin_llm

    paths = AppPaths(CACHE / f"retrieval-{CHOSEN_SIZE}")
    llm_folder = prepare_builtin_llm(AppPaths(CACHE / "retrieval-models").ensure())
    with open_assistant(paths, llm_folder=llm_folder) as assistant:
        results = evaluate(items, assistant.retriever, assistant)
    summary = summarize(results)
    print(json.dumps(summary), flush=True)
    return summary


LATENCY_BUDGETS = (480, 640, 1024)  # 1024: about what peers' 3-4 chunks of 1000 characters take
LATENCY_QUESTIONS = 15


def _latency(items) -> list[dict]:
    """Question to first token, retrieval included, per prompt budget: interleaved, medians."""
    from dataclasses import replace

    from engine.answer.assistant import AssistantSettings
    from engine.answer.session import open_assistant
    from engine.models.registry import prepare_builtin_llm

    questions = [item.question for item in items if item.answerable][:LATENCY_QUESTIONS]
    llm_folder = prepare_builtin_llm(AppPaths(CACHE / "retrieval-models").ensure())
    times: dict[int, list[float]] = {b: [] for b in LATENCY_BUDGETS}
    tokens: dict[int, list[int]] = {b: [] for b in LATENCY_BUDGETS}
    with open_assistant(AppPaths(CACHE / f"retrieval-{CHOSEN_SIZE}"), llm_folder=llm_folder) as assistant:
        for question in questions:
            for budget in LATENCY_BUDGETS:
                assistant.settings = replace(AssistantSettings(), prompt_budget_tokens=budget, max_new_tokens=1)
                done = [e for e in assistant.ask(question) if e.kind == "done"][0]
                if done.stats.time_to_first_token_s is not None:
                    times[budget].append(done.stats.time_to_first_token_s)
                    tokens[budget].append(done.stats.prompt_tokens)
    rows = [{"budget": b, "prompt_tokens_p50": _p50(tokens[b]), "first_token_p50_s": round(_p50(times[b]), 3),
             "first_token_max_s": round(max(times[b], default=0.0), 3)} for b in LATENCY_BUDGETS]
    print(json.dumps(rows), flush=True)
    return rows


def _p50(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else 0.0


# -- issue 13: across families ----------------------------------------------------------------
BEFORE = dict(dense_weight=1.0, rrf_k=60)  # the retrieval settings before issue 13
# Each index: how it is built. "guessed headings" is the chunker before issue 13 (heading lines
# guessed from the text, the PDF outline unused, nothing but the text embedded).
FAMILY_INDEXES = {
    "guessed headings": IndexSettings(outline_headings=False, embedded_headings=0),
    "outline headings": IndexSettings(embedded_headings=0),
    "outline + embedded": IndexSettings(),
    "outline + embedded, 128 tokens": IndexSettings(chunk_tokens=128),
}
# (index, variant, retrieval settings, FTS weight of the heading-path column)
FAMILY_VARIANTS = [
    ("guessed headings", "before: text-only FTS, dense weight 1, RRF k=60", RetrievalSettings(**BEFORE), 0.0),
    ("guessed headings", "before's index, chosen retrieval settings", RetrievalSettings(), 0.0),
    ("outline headings", "outline, text-only FTS", RetrievalSettings(**BEFORE), 0.0),
    ("outline headings", "outline, FTS heading column", RetrievalSettings(**BEFORE), 1.0),
    ("outline + embedded", "+ headings embedded", RetrievalSettings(**BEFORE), 1.0),
    ("outline + embedded", "+ dense weight 1.5", RetrievalSettings(**dict(BEFORE, dense_weight=1.5)), 1.0),
    ("outline + embedded", "+ RRF k=20 (chosen)", RetrievalSettings(), 1.0),
    ("outline + embedded", "chosen, FTS heading weight 2", RetrievalSettings(), 2.0),
    ("outline + embedded", "chosen, RRF k=10", RetrievalSettings(rrf_k=10), 1.0),
    ("outline + embedded", "chosen, dense weight 2", RetrievalSettings(dense_weight=2.0), 1.0),
    ("outline + embedded", "chosen, 80 candidates per side", RetrievalSettings(candidates=80), 1.0),
    ("outline + embedded", "chosen, no neighbour merging", RetrievalSettings(merge_neighbours=False), 1.0),
    ("outline + embedded, 128 tokens", "chosen at 128-token chunks", RetrievalSettings(), 1.0),
]
FAMILY_SECTION = "## Issue 13: across families"


def _families(before: Path | None, write_doc: bool) -> int:
    items = [item for qa in DEV_SETS for item in load_qa(qa)]
    embedder = default_embedder(AppPaths(CACHE / "retrieval-models").ensure())
    rows = []
    if before is not None:  # the collection as users have it today: format 1, read as it is
        with open_collection(AppPaths(before), embedder=embedder, read_only=True) as store:
            rows.append(_family_row(f"{before.name}: as indexed before", items, store, embedder,
                                    RetrievalSettings(**BEFORE)))
    for index, settings in FAMILY_INDEXES.items():
        paths = _family_index(index, settings, items, embedder)
        with open_collection(paths, embedder=embedder, read_only=True) as store:
            for name, retrieval, heading_weight in ((v, r, w) for i, v, r, w in FAMILY_VARIANTS if i == index):
                store.heading_weight = heading_weight
                rows.append(_family_row(name, items, store, embedder, retrieval))
    if write_doc:
        _write_family_section(rows, items)
    return 0


def _family_index(name: str, settings: IndexSettings, items, embedder) -> AppPaths:
    slug = "".join(ch if ch.isalnum() else "-" for ch in name)
    paths = AppPaths(CACHE / f"families-{slug}").ensure()
    manuals = sorted({MANUALS / item.doc for item in items if item.doc})
    with open_collection(paths, embedder=embedder) as store:
        for _ in Indexer(store, embedder, settings).run(manuals):
            pass
    return paths


def _family_row(name: str, items, store, embedder, settings: RetrievalSettings) -> dict:
    results = evaluate(items, Retriever(store, embedder, settings=settings))
    summary = summarize(results)
    row = {"variant": name, **{k: summary[k] for k in ("hit@1", "hit@5", "hit@10", "mrr@5",
                                                       "refusal_accuracy", "false_refusal_rate")},
           "search_p50_ms": round(1000 * _p50([sum(r.timings_s.values()) for r in results]), 1),
           "families": {f: {"hit@5": v["hit@5"], "mrr@5": v["mrr@5"]} for f, v in sorted(summary["by_family"].items())}}
    print(json.dumps(row), flush=True)
    return row


def _write_family_section(rows: list[dict], items) -> None:
    families = list(rows[0]["families"])
    answerable = sum(item.answerable for item in items)
    head = ("| variant | hit@1 | hit@5 | hit@10 | MRR@5 | " + " | ".join(f"{f} hit@5 / MRR@5" for f in families)
            + " | refusal acc. | false refusals | search p50 |")
    lines = [FAMILY_SECTION, "",
             f"Written by `bench/bench_retrieval.py --families` over both development sets "
             f"({len(items)} questions, {answerable} answerable, five families of manuals), "
             "retrieval only, every variant in the same run. Each row changes one thing from the "
             "row above it, except the rows that start with \"chosen\", which each change one "
             "thing from the chosen configuration. Refusal accuracy and false refusals are the "
             "relevance gate's (engine/answer/grounding.py, not re-calibrated here) on each variant's "
             "passages.", "", head, "|" + "---|" * (8 + len(families))]
    for r in rows:
        cells = " | ".join(f"{v['hit@5']:.2f} / {v['mrr@5']:.2f}" for v in r["families"].values())
        lines.append(f"| {r['variant']} | {r['hit@1']:.3f} | {r['hit@5']:.3f} | {r['hit@10']:.3f} | "
                     f"{r['mrr@5']:.3f} | {cells} | {r['refusal_accuracy']:.3f} | "
                     f"{r['false_refusal_rate']:.3f} | {r['search_p50_ms']} ms |")
    lines.append("")
    doc = DOCS / "retrieval.md"
    text = doc.read_text(encoding="utf-8") if doc.exists() else "# Retrieval quality\n"
    notes = _section(text, FAMILY_SECTION + " - notes")  # hand-written, kept as it is
    text = _without_section(_without_section(text, FAMILY_SECTION + " - notes"), FAMILY_SECTION)
    doc.write_text(text.rstrip() + "\n\n" + "\n".join(lines) + ("\n" + notes if notes else ""),
                   encoding="utf-8")


def _section(text: str, heading: str) -> str:
    start = text.find("\n" + heading + "\n")
    if start < 0:
        return ""
    end = text.find("\n## ", start + len(heading) + 2)
    return text[start + 1:end if end >= 0 else len(text)].rstrip() + "\n"


def _without_section(text: str, heading: str) -> str:
    section = _section(text, heading)
    return text.replace(section, "") if section else text


# -- docs ------------------------------------------------------------------------------------

def _write_docs(rows, gate, curves, answers, latency) -> None:
    DOCS.mkdir(exist_ok=True)
    (DOCS / "retrieval-hitk.svg").write_text(hit_curve_svg(curves), encoding="utf-8")
    text = ["# Retrieval quality\n",
            "Written by `bench/bench_retrieval.py` on the development set "
            f"`tests/qa/r_manuals_dev.jsonl` ({_count(rows)}). A hit is a passage from the right "
            "manual covering an answer page. Refusal accuracy: unanswerable questions the gate "
            "refused; false refusals: answerable ones it refused.\n",
            _rows_table(rows), "\n![hit@k](retrieval-hitk.svg)\n", "## The relevance gate\n",
            "Chosen configuration (hybrid, 256-token chunks). The gate's score is the best "
            "passage's cosine similarity plus 0.5 x the IDF-weighted share of the question's "
            "topic words found in the top passages (engine/answer/grounding.py). Similarity alone, "
            "as peers gate, cannot separate near-topic questions the manuals never answer.\n",
            _gate_table(gate)]
    if answers:
        text += ["## Answers end to end (built-in models)\n", _answers_table(answers)]
    if latency:
        text += ["## Question to first token, by prompt budget\n",
                 f"{LATENCY_QUESTIONS} answerable questions, each at every budget in turn (2 cores, "
                 "SmolLM2-135M, retrieval included). The default budget is 640 tokens.\n",
                 "| budget (tokens) | prompt tokens p50 | first token p50 | slowest |", "|---|---|---|---|"]
        text += [f"| {r['budget']} | {r['prompt_tokens_p50']} | {r['first_token_p50_s']} s | "
                 f"{r['first_token_max_s']} s |" for r in latency]
        text.append("")
    (DOCS / "retrieval.md").write_text("\n".join(text), encoding="utf-8")


def _count(rows) -> str:
    first = rows[0]
    return f"{first['answerable']} answerable and {first['unanswerable']} unanswerable questions"


def _rows_table(rows) -> str:
    head = "| chunk tokens | variant | hit@1 | hit@3 | hit@5 | hit@10 | MRR@5 | refusal acc. | false refusals | search p50 |"
    lines = [head, "|" + "---|" * 10]
    for r in rows:
        lines.append(f"| {r['chunk_tokens']} | {r['variant']} | {r['hit@1']:.3f} | {r['hit@3']:.3f} | "
                     f"{r['hit@5']:.3f} | {r['hit@10']:.3f} | {r['mrr@5']:.3f} | "
                     f"{r['refusal_accuracy']:.3f} | {r['false_refusal_rate']:.3f} | {r['search_p50_ms']} ms |")
    return "\n".join(lines) + "\n"


def _gate_table(gate) -> str:
    lines = ["| gate | threshold | refusal acc. | false refusals |", "|---|---|---|---|"]
    for label, index, thresholds in (("similarity only", 1, (0.3, 0.4, 0.45, 0.5, 0.55)),
                                     ("similarity + coverage", 2, (0.6, 0.7, 0.75, DEFAULT_THRESHOLD, 0.85))):
        for t in thresholds:
            refused = [(ok, g[index] < t) for g in gate for ok in [g[0]]]
            acc = _share(r for ok, r in refused if not ok)
            false = _share(r for ok, r in refused if ok)
            mark = " (default)" if index == 2 and t == DEFAULT_THRESHOLD else ""
            lines.append(f"| {label} | {t}{mark} | {acc:.3f} | {false:.3f} |")
    return "\n".join(lines) + "\n"


def _answers_table(s: dict) -> str:
    lines = [f"Answers containing all their keywords: {s['keyword_hit_rate']}; at least one: "
             f"{s['keyword_any_rate']}; sources shown with the answer containing all: "
             f"{s['evidence_hit_rate']}. hit@5 {s['hit@5']}, refusal accuracy "
             f"{s['refusal_accuracy']}, false refusals {s['false_refusal_rate']}.\n",
             "| stage | p50 s | p95 s |", "|---|---|---|"]
    lines += [f"| {stage} | {v['p50']} | {v['p95']} |" for stage, v in s["latency_s"].items()]
    return "\n".join(lines) + "\n"


def _share(flags) -> float:
    flags = list(flags)
    return sum(flags) / len(flags) if flags else 0.0


def hit_curve_svg(curves: dict[str, list[float]], width: int = 560, height: int = 300) -> str:
    """A small line plot of hit@k (k = 1..10), one line per variant, as plain SVG."""
    left, right, top, bottom = 50, 210, 20, 40
    plot_w, plot_h = width - left - right, height - top - bottom
    low = 0.3

    def xy(k: int, value: float) -> str:
        x = left + (k - 1) * plot_w / 9
        y = top + (1 - (value - low) / (1 - low)) * plot_h
        return f"{x:.1f},{y:.1f}"

    colours = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             'font-family="sans-serif" font-size="11">',
             f'<rect width="{width}" height="{height}" fill="white"/>']
    for tick in (0.3, 0.5, 0.7, 0.9, 1.0):
        y = xy(1, tick).split(",")[1]
        parts.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y}" y2="{y}" stroke="#ddd"/>')
        parts.append(f'<text x="{left - 6}" y="{y}" text-anchor="end" dy="4">{tick:.1f}</text>')
    for k in range(1, 11):
        x = xy(k, low).split(",")[0]
        parts.append(f'<text x="{x}" y="{top + plot_h + 16}" text-anchor="middle">{k}</text>')
    parts.append(f'<text x="{left + plot_w / 2}" y="{height - 6}" text-anchor="middle">k (passages)</text>')
    parts.append(f'<text x="14" y="{top + plot_h / 2}" transform="rotate(-90 14 {top + plot_h / 2})" '
                 'text-anchor="middle">hit@k</text>')
    for i, (name, curve) in enumerate(curves.items()):
        colour = colours[i % len(colours)]
        points = " ".join(xy(k, v) for k, v in enumerate(curve, 1))
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{points}"/>')
        parts.append(f'<text x="{left + plot_w + 8}" y="{top + 12 + 14 * i}" fill="{colour}">{name}</text>')
    parts.append("</svg>\n")
    return "\n".join(parts)


if __name__ == "__main__":
    sys.exit(main())
