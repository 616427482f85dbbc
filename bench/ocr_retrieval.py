"""Retrieval over scanned manuals vs their text versions (issue 18): hit@5 within 5 points?

Each chosen R manual is "scanned" whole (every page rendered to an image at 150 dpi, skewed
2.5 degrees, with noise, and written as an image-only PDF under the manual's own name), then
the text originals and the scans are indexed into two fresh data dirs with the CLI (OCR on,
the default), and the development QA set's questions about those manuals are measured with
`eval --retrieval-only` on each. Prints both figures and the time OCR took.

    python bench/ocr_retrieval.py [--manuals R-FAQ,R-data,R-intro] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.helpers.scanned import scanned_pdf  # noqa: E402

MANUALS = REPO / "tests" / ".manuals"
QA = REPO / "tests" / "qa" / "r_manuals_dev.jsonl"
CLI = [sys.executable, "-m", "engine"]


def page_count(path: Path) -> int:
    import pypdfium2

    document = pypdfium2.PdfDocument(str(path))
    try:
        return len(document)
    finally:
        document.close()


def make_folders(names: list[str], out: Path) -> dict[str, Path]:
    folders = {"text": out / "text", "scanned": out / "scanned"}
    for folder in folders.values():
        folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        source = MANUALS / f"{name}.pdf"
        shutil.copyfile(source, folders["text"] / source.name)
        scanned_pdf(source, list(range(1, page_count(source) + 1)), folders["scanned"] / source.name,
                    dpi=150, skew_deg=2.5, noise=12.0, seed=7)
    return folders


def qa_subset(names: list[str], out: Path) -> Path:
    wanted = {f"{name}.pdf" for name in names}
    lines = [line for line in QA.read_text(encoding="utf-8").splitlines()
             if line.strip() and json.loads(line).get("doc") in wanted]
    path = out / "qa.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def index_and_measure(folder: Path, data: Path, qa: Path) -> dict:
    started = time.perf_counter()
    done = subprocess.run([*CLI, "index", "--data-dir", str(data), str(folder)], cwd=REPO,
                          capture_output=True, text=True)
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"indexing {folder} failed:\n{done.stderr[-2000:]}")
    measured = subprocess.run([*CLI, "eval", "--data-dir", str(data), "--retrieval-only", "--json", str(qa)],
                              cwd=REPO, capture_output=True, text=True)
    if measured.returncode != 0:
        raise SystemExit(f"eval on {data} failed:\n{measured.stderr[-2000:]}")
    return {"index_s": took, "eval": json.loads(measured.stdout)}


def hit_at(report: dict, k: int = 5):
    """hit@k from eval's JSON, wherever this version keeps it."""
    for key in (f"hit@{k}", f"hit_at_{k}"):
        for place in (report, report.get("retrieval", {}), report.get("overall", {})):
            if isinstance(place, dict) and key in place:
                return place[key]
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--manuals", default="R-FAQ,R-data,R-intro")
    parser.add_argument("--out", type=Path, help="keep the scans, data dirs and reports here")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.manuals.split(",") if n.strip()]
    out = args.out or Path(tempfile.mkdtemp(prefix="ocr-retrieval-"))
    folders = make_folders(names, out)
    qa = qa_subset(names, out)
    pages = sum(page_count(MANUALS / f"{n}.pdf") for n in names)
    results = {variant: index_and_measure(folder, out / f"data-{variant}", qa) for variant, folder in folders.items()}
    (out / "results.json").write_text(json.dumps(results, indent=1), encoding="utf-8")
    questions = sum(1 for line in qa.read_text(encoding="utf-8").splitlines() if line.strip())
    print(f"{', '.join(names)}: {pages} pages, {questions} questions of {QA.name}; results in {out}")
    for variant, result in results.items():
        print(f"  {variant:8} hit@5 {hit_at(result['eval'])}  indexed in {result['index_s']:.0f} s "
              f"({pages / result['index_s']:.2f} pages/s end to end)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
