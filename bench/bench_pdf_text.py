#!/usr/bin/env python
"""PDF text (issue 26): PDFium's text layer against pypdf's, on the development manuals.

  text     every page of every development PDF read both ways: words run together (runs of
           18+ letters, engine.ingest.text_quality), the worst page and the pages at >= 1%,
           and the pages a check still calls poor
  speed    pages/s of parsing alone (ParsePool, 1 worker) and of indexing end to end (Indexer
           with the built-in embedder, a fresh collection per run), both readers alternated
           over --rounds rounds on three families: medians, and PDFium's as a ratio of pypdf's

    python bench/bench_pdf_text.py                  # table on stdout, section in docs/benchmarks.md
    python bench/bench_pdf_text.py --rounds 3 --no-doc

Needs tests/.manuals (tests/fetch_manuals.sh). The machine is shared and noisy: read the ratios.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchdoc import update_section  # bench/ is on sys.path when run as a script

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.ingest.parse_pool import ParsePool  # noqa: E402
from engine.ingest.text_quality import TextQuality  # noqa: E402
from engine.paths import AppPaths  # noqa: E402

MANUALS = ROOT / "tests" / ".manuals"
DOC = ROOT / "docs" / "benchmarks.md"
HEADING = "## PDF text: PDFium against pypdf (issue 26)"
READERS = ("pdfium", "pypdf")
FAMILIES = {
    "R manuals": ["R-intro.pdf", "R-admin.pdf", "R-data.pdf", "R-exts.pdf", "R-FAQ.pdf", "R-lang.pdf", "R-ints.pdf"],
    "gnuplot": ["gnuplot.pdf"],
    "debian-faq (XeTeX)": ["debian-faq.pdf"],
}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def development_pdfs() -> list[Path]:
    return sorted(p for p in MANUALS.glob("*.pdf") if p.name != "refman.pdf")


def read_all(files: list[Path], reader: str) -> dict[str, list[str]]:
    with ParsePool(time_limit_s=600, pdf_reader=reader) as pool:
        return {path.name: [page.text for page in document.pages]
                for path, document in pool.imap(files)}


def text_rows(files: list[Path]) -> list[dict]:
    """Per PDF and reader: pages, glued share (all pages, worst page), pages >= 1% glued, poor pages."""
    rows = []
    texts = {reader: read_all(files, reader) for reader in READERS}
    for path in files:
        row = {"file": path.name}
        for reader in READERS:
            qualities = [TextQuality.of(text) for text in texts[reader][path.name]]
            words = sum(q.words for q in qualities)
            row[reader] = {
                "pages": len(qualities),
                "glued": sum(q.glued for q in qualities) / words if words else 0.0,
                "worst": max((q.glued_share for q in qualities), default=0.0),
                "over_1pct": [n for n, q in enumerate(qualities, 1) if q.glued_share >= 0.01],
                "poor": [n for n, q in enumerate(qualities, 1) if q.problems],
            }
        rows.append(row)
    return rows


def parse_speed(files: list[Path], reader: str) -> tuple[int, float]:
    started = time.perf_counter()
    with ParsePool(time_limit_s=600, pdf_reader=reader) as pool:
        pages = sum(len(document.pages) for _, document in pool.imap(files))
    return pages, time.perf_counter() - started


def index_speed(files: list[Path], reader: str, data: Path) -> tuple[int, float]:
    from engine.store.indexer import Indexer, IndexSettings, default_embedder, open_collection

    paths = AppPaths(data)
    embedder = default_embedder(paths)
    settings = IndexSettings(pdf_reader=reader, ocr=False)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=data) as folder:
        name = Path(folder).name
        with open_collection(paths, name, embedder) as store:
            events = list(Indexer(store, embedder, settings).run(files))
    elapsed = time.perf_counter() - started
    embedder.close()
    return events[-1].pages_done, elapsed


def speed_rows(rounds: int, data: Path) -> list[dict]:
    rows = []
    for family, names in FAMILIES.items():
        files = [MANUALS / name for name in names]
        found = {(stage, reader): [] for stage in ("parse", "index") for reader in READERS}
        for round_number in range(rounds):
            order = READERS if round_number % 2 == 0 else READERS[::-1]
            for reader in order:
                log(f"{family}: round {round_number + 1}, {reader}")
                found["parse", reader].append(parse_speed(files, reader))
                found["index", reader].append(index_speed(files, reader, data))
        row = {"family": family}
        for (stage, reader), runs in found.items():
            row[stage, reader] = statistics.median(pages / seconds for pages, seconds in runs)
            row["pages"] = runs[0][0]
        rows.append(row)
    return rows


def glued_text(value: float) -> str:
    return f"{100 * value:.1f}%"


def section(text: list[dict], speed: list[dict], rounds: int) -> str:
    lines = [HEADING, "",
             f"`python bench/bench_pdf_text.py --rounds {rounds}` on {platform.processor() or platform.machine()}, "
             f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f} at the end; "
             f"{time.strftime('%Y-%m-%d')}.", "",
             "Words run together: the share of a PDF's words that hold a run of 18 or more letters "
             "(`engine/ingest/text_quality.py`), over all its pages and on its worst page; "
             "pages at or over 1%; pages the check calls poor (and so reads again with the other "
             "reader, or OCR). Every page of each development PDF, read both ways.", "",
             "| PDF | pages | glued, PDFium / pypdf | worst page, PDFium / pypdf | pages >= 1%, PDFium / pypdf | poor, PDFium / pypdf |",
             "|---|---|---|---|---|---|"]
    for row in text:
        a, b = row["pdfium"], row["pypdf"]
        lines.append(f"| {row['file']} | {a['pages']} | {glued_text(a['glued'])} / {glued_text(b['glued'])} | "
                     f"{glued_text(a['worst'])} / {glued_text(b['worst'])} | {_pages(a['over_1pct'])} / "
                     f"{len(b['over_1pct'])} | {_pages(a['poor'])} / {len(b['poor'])} |")
    lines += ["", f"Speed, medians of {rounds} alternated rounds: parsing alone (a ParsePool of one worker) and "
              "indexing end to end (the Indexer with the built-in embedder, OCR off, a fresh collection).", "",
              "| family | pages | parse pages/s, PDFium / pypdf | x | end to end pages/s, PDFium / pypdf | x |",
              "|---|---|---|---|---|---|"]
    for row in speed:
        lines.append(f"| {row['family']} | {row['pages']} | {row['parse', 'pdfium']:.0f} / {row['parse', 'pypdf']:.0f} | "
                     f"x{row['parse', 'pdfium'] / row['parse', 'pypdf']:.2f} | {row['index', 'pdfium']:.1f} / "
                     f"{row['index', 'pypdf']:.1f} | x{row['index', 'pdfium'] / row['index', 'pypdf']:.2f} |")
    return "\n".join(lines) + "\n"


def _pages(numbers: list[int]) -> str:
    if not numbers:
        return "0"
    shown = ", ".join(str(n) for n in numbers[:8])
    return f"{len(numbers)} ({shown}{', ...' if len(numbers) > 8 else ''})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-doc", action="store_true", help="print only; leave docs/benchmarks.md alone")
    parser.add_argument("--no-speed", action="store_true", help="the text table alone")
    parser.add_argument("--data-dir", type=Path, help="where the collections go (default: a new folder)")
    args = parser.parse_args()
    if not (MANUALS / "R-intro.pdf").is_file():
        log("tests/.manuals is missing: run tests/fetch_manuals.sh")
        return 1
    text = text_rows(development_pdfs())
    with tempfile.TemporaryDirectory() as scratch:
        data = args.data_dir or AppPaths(Path(scratch)).ensure().root
        speed = [] if args.no_speed else speed_rows(args.rounds, data)
    out = section(text, speed, args.rounds)
    print(out)
    if not args.no_doc:
        update_section(DOC, HEADING, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
