"""QA sets for measuring answers: one JSON object per line.

    {"id": "intro-01", "question": "...", "doc": "R-intro.pdf", "pages": [12],
     "keywords": ["attach("], "answerable": true}

`doc` is a file name (matched against the indexed documents' file names), `pages` physical
1-based pages, `keywords` substrings that a correct answer contains. An optional `family` names
the kind of manual (eval reports each family apart); other keys are ignored.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from engine.errors import EngineError


@dataclass(frozen=True)
class QAItem:
    id: str
    question: str
    doc: str | None
    pages: tuple[int, ...]
    keywords: tuple[str, ...]
    answerable: bool
    family: str | None = None  # the kind of manual, for per-family figures


def load_qa(path: str | Path) -> list[QAItem]:
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise EngineError(f"The QA file '{path}' could not be read ({exc}).") from exc
    items = [_item(path, number, line) for number, line in enumerate(lines, 1) if line.strip()]
    if not items:
        raise EngineError(f"The QA file '{path}' has no questions; write one JSON object per line.")
    return items


def _item(path: Path, number: int, line: str) -> QAItem:
    where = f"'{path}' line {number}"
    try:
        raw = json.loads(line)
    except json.JSONDecodeError as exc:
        raise EngineError(f"{where} is not JSON ({exc.msg}); write one JSON object per line.") from exc
    if not isinstance(raw, dict) or not isinstance(raw.get("question"), str) or not raw["question"].strip():
        raise EngineError(f"{where} needs a 'question' string.")
    answerable = raw.get("answerable", True)
    if not isinstance(answerable, bool):  # "false" would otherwise count as true
        raise EngineError(f"{where}: 'answerable' must be true or false (without quotes).")
    doc, pages = raw.get("doc"), raw.get("pages") or []
    if answerable and (not isinstance(doc, str) or not doc):
        raise EngineError(f"{where}: an answerable question needs 'doc', the manual's file name.")
    if not isinstance(pages, list) or not all(type(p) is int and p >= 1 for p in pages) \
            or (answerable and not pages):
        raise EngineError(f"{where}: 'pages' must list physical page numbers (1-based).")
    keywords = raw.get("keywords") or []
    if not isinstance(keywords, list) or not all(isinstance(k, str) and k for k in keywords):
        raise EngineError(f"{where}: 'keywords' must be a list of non-empty strings.")
    family = raw.get("family")
    if family is not None and (not isinstance(family, str) or not family):
        raise EngineError(f"{where}: 'family' must be a non-empty string, or left out.")
    return QAItem(str(raw.get("id", number)), raw["question"].strip(), doc if answerable else doc or None,
                  tuple(pages), tuple(keywords), answerable, family)
