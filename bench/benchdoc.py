"""Writing one benchmark's section of docs/benchmarks.md, leaving the other sections alone."""

from __future__ import annotations

import os
from pathlib import Path


def update_section(doc: Path, heading: str, text: str) -> None:
    """Replaces the section that starts with the line `heading` (or appends it), atomically."""
    old = doc.read_text(encoding="utf-8") if doc.exists() else "# Benchmarks\n"
    lines = old.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.strip() == heading), None)
    if start is None:
        new = old.rstrip("\n") + "\n\n" + text
    else:
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
        rest = "".join(lines[end:])
        new = "".join(lines[:start]) + text + ("\n" + rest if rest else "")
    doc.parent.mkdir(parents=True, exist_ok=True)
    temporary = doc.with_suffix(".md.tmp")
    temporary.write_text(new, encoding="utf-8")
    os.replace(temporary, doc)
