"""The markdown bench_scale.py prints and writes into docs/benchmarks.md."""

from __future__ import annotations

MB = 1e6
TARGET_SIZE = 1_000_000


def render(results: list[dict], derived, added_chunks: int) -> str:
    lines = ["## A plant's manuals in one collection (issue 32)", "",
             "```", "python bench/bench_scale.py                  # this section (sizes 100k and 1M)",
             "python bench/bench_scale.py --sweep 1000000  # index kinds side by side (below)", "```", ""]
    for result in results:
        lines += _table(result, added_chunks) + [""]
    lines += _targets(results, added_chunks) + [""]
    lines += _data(derived) + [""]
    return "\n".join(lines)


def _table(r: dict, added_chunks: int) -> list[str]:
    s, e, rb, a, b = r["search"], r["exact"], r["rebuild"], r["add"], r["built"]
    stats = s["stats"]
    rows = [
        ("dense search, k=10: p50 / p95 ms", _pp(e["dense10_ms"]), _pp(s["dense10_ms"])),
        ("dense search, k=40 (what retrieval asks): p50 / p95 ms", _pp(e["dense40_ms"]), _pp(s["dense40_ms"])),
        ("recall@10 / recall@40 against exact", "1 / 1", f"{r['recall10']:.3f} / {r['recall40']:.3f}"),
        ("RSS after open / after the searches / peak, MB", _rss(e), _rss(s)),
        ("open (load the file, check, catch up) s", "-", f"{s['open_s']:.1f}"),
        ("index built from SQLite (train + fill) s", f"{e['open_s']:.1f}", f"{rb['open_s']:.1f}"),
        (f"add one manual ({added_chunks:,} chunks, vectors ready): add_document + flush s", "-",
         f"{a['add_s']:.1f} + {a['flush_s']:.1f} (lists {a['lists_before']} -> {a['lists_after']})"),
        ("remove it again + flush s", "-", f"{a['remove_s']:.1f}"),
    ]
    out = [f"### {r['size']:,} chunks ({b['manuals']:,} manuals, database {b['database_bytes'] / 1e9:.1f} GB, "
           f"index {stats['index']} with {stats['index_lists']:,} lists)", "",
           "| | exact (flat), as before | by size (this issue) |", "|---|---|---|"]
    out += [f"| {name} | {before} | {now} |" for name, before, now in rows]
    out += ["", "Keyword search and the store's reads, same collection (the Retriever's stages, no reranker):", "",
            "| stage | p50 ms | p95 ms |", "|---|---|---|"]
    for stage, name in (("terms", "the question's words weighed (prefix_frequency per stem)"),
                        ("fts5", "FTS5 BM25 alone (40 hits)"),
                        ("dense", "dense (approximate, re-scored)"),
                        ("keyword", "keyword: FTS5 + the stored vectors of its hits"),
                        ("fuse", "fuse"), ("merge", "merge: chunks, neighbours, page labels"),
                        ("retrieve", "all of the above")):
        if f"{stage}_ms" in s:
            out.append(f"| {name} | {s[stage + '_ms']['p50']:.1f} | {s[stage + '_ms']['p95']:.1f} |")
    out.append(f"| docs list ({s['documents']:,} documents) | {s['list_documents_ms']:.0f} | |")
    out += ["", f"Built through add_document manual by manual in {b['build_s'] / 60:.0f} min; the index was "
            f"rebuilt {len(b['rebuilds'])} times on the way: " + "; ".join(b["rebuilds"])]
    return out


def _targets(results: list[dict], added_chunks: int) -> list[str]:
    at = next((r for r in results if r["size"] == TARGET_SIZE), None)
    if at is None:
        return []
    s, a = at["search"], at["add"]
    rss = max(s["rss"], s["rss_open"]) / MB
    rows = [("dense search p95, one query", "<= 20 ms", f"{s['dense10_ms']['p95']:.1f} ms", s["dense10_ms"]["p95"] <= 20),
            ("recall@10 against exact, after re-scoring", ">= 0.98", f"{at['recall10']:.3f}", at["recall10"] >= 0.98),
            ("RSS of the search side (collection open, after the searches)", "<= 1.5 GB", f"{rss:.0f} MB", rss <= 1500),
            (f"add one 200-page manual ({added_chunks:,} chunks), no full rebuild", "<= 60 s",
             f"{a['add_s'] + a['flush_s']:.1f} s", a["add_s"] + a["flush_s"] <= 60 and a["lists_before"] == a["lists_after"])]
    return ["Targets at 1M chunks (2 cores):", "", "| target | wanted | measured | met |", "|---|---|---|---|"] + \
        [f"| {name} | {want} | {got} | {'met' if ok else 'NOT met'} |" for name, want, got, ok in rows]


def _data(derived) -> list[str]:
    seed, sample, noise = derived.seed, derived.sample, derived.noise
    return [
        "How the collections were made (bench/scale_data.py): the 15 development manuals were indexed for "
        f"real ({len(seed.texts):,} chunks, real embeddings). {len(sample.base):,} variants of their chunks (each word "
        "replaced, with probability 0.3, by a word of another chunk of the same manual) were embedded for real; "
        f"their cosine to the original has median {noise.median_cosine:.2f}. Every other chunk is such a variant's "
        "text, not embedded: its vector is a real one (the seed chunk's or one of its real variants') plus Gaussian "
        "noise with the mean and covariance of the real (variant - original) differences, normalised. A derived "
        "manual is 650 consecutive chunks of one seed manual, cycled. The queries are the 268 questions of "
        "tests/qa/*.jsonl, embedded for real.",
    ]


def _pp(ms: dict) -> str:
    return f"{ms['p50']:.1f} / {ms['p95']:.1f}"


def _rss(r: dict) -> str:
    return f"{r['rss_open'] / MB:.0f} / {r['rss'] / MB:.0f} / {r['rss_peak'] / MB:.0f}"
