#!/usr/bin/env python
"""OCR benchmark (issue 18): scanned pages of the R manuals, ours vs Tesseract, in one run.

Dense pages of five R manuals are rendered to image-only PDFs (tests/helpers/scanned.py), clean
and skewed 2.5 degrees with noise, at 150 dpi. Each engine reads every page end to end (render
+ detection + recognition; models loaded and warmed on one page first), in its own child
process, so its peak RSS is its own:

  ours            engine.ingest.ocr defaults, two pages at a time on one thread each
                  (PageRecogniser.recognise_pdf_pages), as the parse pool runs it
  ours 2 threads  one page at a time on two onnxruntime threads
  ours squeeze X  lines squeezed X (default 0.85; 1.0 is the line's own shape)
  ours all chars  the recogniser's whole alphabet (18708 characters, CJK included)
  tesseract       Debian's tesseract-ocr (`tesseract page.png -`, its default threads), on the
                  page rendered at the scan's dpi; "tesseract 1 thread" with OMP_THREAD_LIMIT=1

Per engine: pages/s (1 / the median time between pages done), CPU seconds per page (of the
process and its children: on a shared machine the steadier figure; 2 cores / it is what an idle
2-core machine would do at best), character error rate against
the original page's text layer (pypdf), median and worst, and peak RSS. RAGFlow's figure is
quoted from its issue tracker, not measured here.

    python bench/ocr_bench.py                 # table on stdout
    python bench/ocr_bench.py --pages 4 --json out.json
    python bench/ocr_bench.py --engines ours,tesseract

Needs tests/.manuals (tests/fetch_manuals.sh) and, for its column, `tesseract` on PATH
(apt-get install tesseract-ocr). The machine is shared: compare columns of one run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

MANUALS = ROOT / "tests" / ".manuals"
# dense pages of prose, lists, code and tables (not contents or index pages)
PAGES = [("R-intro", 24), ("R-intro", 15), ("R-intro", 92), ("R-lang", 38), ("R-lang", 32),
         ("R-exts", 25), ("R-exts", 13), ("R-admin", 49), ("R-admin", 32), ("R-data", 24)]
CONDITIONS = {"clean": {"skew_deg": 0.0, "noise": 0.0}, "skewed 2.5° + noise": {"skew_deg": 2.5, "noise": 12.0}}
SCAN_DPI = 150
ENGINES = {
    "ours": {"settings": {"threads": 1}, "parallel": 2},
    "ours 2 threads": {"settings": {"threads": 2}, "parallel": 1},
    "ours squeeze 1.0": {"settings": {"threads": 1, "line_squeeze": 1.0}, "parallel": 2},
    "ours squeeze 0.8": {"settings": {"threads": 1, "line_squeeze": 0.8}, "parallel": 2},
    "ours all chars": {"settings": {"threads": 1, "alphabet": "all"}, "parallel": 2},
    "tesseract": {},
    "tesseract 1 thread": {"env": {"OMP_THREAD_LIMIT": "1"}},
}
RAGFLOW = ("RAGFlow's CPU layout + OCR: 2,643 s for 10 pages (0.004 pages/s), as reported in "
           "infiniflow/ragflow issue 11529; not measured here")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("OCR (bench/ocr_bench.py)")
    group.add_argument("--ocr-pages", type=int, default=len(PAGES), help="how many of the dense pages (default all 10)")
    group.add_argument("--ocr-engines", default=",".join(ENGINES),
                       help=f"comma-separated, of: {', '.join(ENGINES)}")


def run(args) -> dict:
    engines = [e.strip() for e in args.ocr_engines.split(",") if e.strip()]
    unknown = [e for e in engines if e not in ENGINES]
    if unknown:
        raise SystemExit(f"--ocr-engines: unknown {', '.join(unknown)}; known: {', '.join(ENGINES)}")
    pages = PAGES[:max(1, args.ocr_pages)]
    missing = sorted({name for name, _ in pages if not (MANUALS / f"{name}.pdf").exists()})
    if missing:
        raise SystemExit(f"missing {', '.join(missing)} in {MANUALS}; run tests/fetch_manuals.sh")
    results = {"pages": [f"{n} p{p}" for n, p in pages], "dpi": SCAN_DPI, "load_before": os.getloadavg(),
               "cpus": os.cpu_count(), "conditions": {}, "ragflow": RAGFLOW}
    references = _references(pages)
    with tempfile.TemporaryDirectory(prefix="ocr-bench-") as folder:
        for condition, effects in CONDITIONS.items():
            scan = _scan(pages, Path(folder) / f"{condition.split()[0]}.pdf", effects)
            rows = {}
            for engine in engines:
                if engine.startswith("tesseract") and not shutil.which("tesseract"):
                    rows[engine] = {"skipped": "tesseract is not on PATH (apt-get install tesseract-ocr)"}
                    continue
                _log(f"{condition}: {engine}")
                rows[engine] = _measure(engine, scan, len(pages), references, folder)
            results["conditions"][condition] = rows
    results["load_after"] = os.getloadavg()
    return results


def section(results: dict) -> str:
    lines = ["## OCR of scanned pages (issue 18)", "",
             f"{len(results['pages'])} dense pages of the R manuals ({', '.join(results['pages'])}), "
             f"scanned at {results['dpi']} dpi; end to end (render + detection + recognition) per page, "
             f"{results['cpus']} cores, load {results['load_before'][0]:.1f} before and "
             f"{results['load_after'][0]:.1f} after. CER: character error rate against the page's text "
             "layer (whitespace runs as one space).", ""]
    for condition, rows in results["conditions"].items():
        lines += [f"**{condition}**", "",
                  "| engine | pages/s | s/page (median) | CPU s/page | CER median | CER worst | peak RSS |",
                  "|---|---:|---:|---:|---:|---:|---:|"]
        for engine, row in rows.items():
            if "skipped" in row:
                lines.append(f"| {engine} | – | – | – | – | – | {row['skipped']} |")
                continue
            lines.append(f"| {engine} | {row['pages_per_s']:.2f} | {row['median_s']:.2f} | {row['cpu_s']:.2f} | "
                         f"{row['cer_median']:.2%} | {row['cer_worst']:.2%} | {row['rss_mib']:.0f} MiB |")
        lines.append("")
    lines += [f"Reference only: {results['ragflow']}.", ""]
    return "\n".join(lines)


# -- measuring -----------------------------------------------------------------------------


def _references(pages) -> list[str]:
    import logging

    import pypdf

    logging.getLogger("pypdf").setLevel(logging.ERROR)
    readers = {name: pypdf.PdfReader(MANUALS / f"{name}.pdf") for name in {n for n, _ in pages}}
    return [readers[name].pages[number - 1].extract_text() for name, number in pages]


def _scan(pages, out: Path, effects: dict) -> Path:
    """One image-only PDF of all pages (each page's seed its number)."""
    from pypdf import PdfReader, PdfWriter

    from tests.helpers.scanned import scanned_pdf

    writer = PdfWriter()
    for i, (name, number) in enumerate(pages):
        one = scanned_pdf(MANUALS / f"{name}.pdf", [number], out.with_suffix(f".{i}.pdf"), dpi=SCAN_DPI,
                          seed=number, **effects)
        writer.add_page(PdfReader(one).pages[0])
    writer.write(out)
    return out


def _measure(engine: str, scan: Path, count: int, references: list[str], folder: str) -> dict:
    """The engine's run in a child process; its texts scored here."""
    request = json.dumps({"engine": engine, "scan": str(scan), "count": count, "folder": folder})
    done = subprocess.run([sys.executable, __file__, "--worker", request], capture_output=True, text=True,
                          cwd=ROOT)
    if done.returncode:
        raise SystemExit(f"{engine} failed:\n{done.stderr[-3000:]}")
    report = json.loads(done.stdout.strip().splitlines()[-1])
    from tests.helpers.scanned import character_error_rate

    cers = [character_error_rate(text, ref) for text, ref in zip(report["texts"], references)]
    median_s = statistics.median(report["intervals"])
    return {"pages_per_s": 1 / median_s, "median_s": median_s, "cpu_s": report["cpu_s"],
            "cer_median": statistics.median(cers), "cer_worst": max(cers), "rss_mib": report["rss_mib"],
            "cers": cers, "intervals": report["intervals"]}


def _worker(request: dict) -> dict:
    engine, scan, count = request["engine"], request["scan"], request["count"]
    if engine.startswith("tesseract"):
        os.environ.update(ENGINES[engine].get("env", {}))
        texts, intervals, cpu = _tesseract(scan, count, Path(request["folder"]))
        rss = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    else:
        texts, intervals, cpu = _ours(ENGINES[engine], scan, count)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"texts": texts, "intervals": intervals, "rss_mib": rss / 1024, "cpu_s": cpu / count}


def _cpu() -> float:
    """CPU seconds of this process and its waited-for children so far."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _ours(engine: dict, scan: str, count: int):
    from engine.ingest.ocr import OcrSettings, PageRecogniser

    recogniser = PageRecogniser(OcrSettings(**engine["settings"]))
    recogniser.recognise_pdf_page(scan, count)  # load and warm the models
    texts, intervals = [], []
    cpu = _cpu()
    last = time.perf_counter()
    for _, text, _ in recogniser.recognise_pdf_pages(scan, range(1, count + 1), parallel=engine["parallel"]):
        now = time.perf_counter()
        texts.append(text)
        intervals.append(now - last)
        last = now
    return texts, intervals, _cpu() - cpu


def _tesseract(scan: str, count: int, folder: Path):
    from engine.ingest.ocr import render_page

    def read(number: int) -> str:
        from PIL import Image

        image, _, _ = render_page(scan, number, SCAN_DPI)
        png = folder / f"tesseract-{os.getpid()}-{number}.png"
        Image.fromarray(image).save(png)
        done = subprocess.run(["tesseract", str(png), "-", "--dpi", str(SCAN_DPI)], capture_output=True,
                              text=True, check=True)
        return done.stdout

    read(count)  # warm: its data files into the page cache
    texts, intervals = [], []
    cpu = _cpu()
    for number in range(1, count + 1):
        start = time.perf_counter()
        texts.append(read(number))
        intervals.append(time.perf_counter() - start)
    return texts, intervals, _cpu() - cpu


def _log(message: str) -> None:
    print(f"[ocr_bench] {message}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        print(json.dumps(_worker(json.loads(argv[1]))))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    results = run(args)
    print(section(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
