"""The engine never imports Qt: everything it does works from a script or the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

IMPORT_EVERYTHING = """
import importlib, json, pkgutil, sys
import engine, engine.cli.main
names = [m.name for m in pkgutil.walk_packages(engine.__path__, "engine.")]
for name in names:
    importlib.import_module(name)
qt = sorted(m for m in sys.modules if m.startswith(("PySide6", "shiboken")))
print(json.dumps({"imported": names, "qt": qt}))
"""


def test_no_engine_module_imports_qt():
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_EVERYTHING], capture_output=True, text=True,
        cwd=REPO, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert "engine.llm.process" in report["imported"]
    assert "engine.models.registry" in report["imported"]
    assert report["qt"] == []
