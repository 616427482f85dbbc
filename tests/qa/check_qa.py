"""Checks a QA set against its manuals: every keyword must appear on the pages given for it.

    python tests/qa/check_qa.py tests/qa/r_manuals_dev.jsonl --manuals tests/.manuals

Matching ignores case and runs of whitespace, so a keyword split over two lines still counts.
Unanswerable questions ("answerable": false) need no doc, pages nor keywords.
"""

from __future__ import annotations

import argparse
import re
import sys
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from engine.evaluation.qa import QAItem, load_qa  # noqa: E402


def normalised(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().casefold()


@lru_cache(maxsize=None)
def page_texts(pdf: Path) -> dict[int, str]:
    """Physical page number (1-based) -> normalised text, as the indexer reads it."""
    from engine.ingest import parse_file

    return {page.number: normalised(page.text) for page in parse_file(pdf).pages}


def problems_of(item: QAItem, manuals: Path) -> list[str]:
    if not item.answerable:
        return []
    pdf = manuals / item.doc
    if not pdf.is_file():
        return [f"{item.id}: no manual '{item.doc}' in {manuals}"]
    pages = page_texts(pdf)
    text = " ".join(pages.get(n, "") for n in item.pages)
    missing_pages = [n for n in item.pages if n not in pages]
    found = [f"{item.id}: page {n} is not in {item.doc}" for n in missing_pages]
    found += [f"{item.id}: keyword {k!r} is not on pages {list(item.pages)} of {item.doc}"
              for k in item.keywords if normalised(k) not in text]
    return found


def check(path: Path, manuals: Path) -> list[str]:
    items = load_qa(path)
    problems = [p for item in items for p in problems_of(item, manuals)]
    ids = [item.id for item in items]
    problems += [f"duplicate id {i!r}" for i in sorted({i for i in ids if ids.count(i) > 1})]
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("qa", type=Path)
    parser.add_argument("--manuals", type=Path, default=ROOT / "tests" / ".manuals")
    args = parser.parse_args(argv)
    problems = check(args.qa, args.manuals)
    for problem in problems:
        print(problem)
    items = load_qa(args.qa)
    answerable = sum(item.answerable for item in items)
    print(f"{len(items)} questions ({answerable} answerable, {len(items) - answerable} not): "
          f"{len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
