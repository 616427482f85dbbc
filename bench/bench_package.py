#!/usr/bin/env python
"""Installer benchmark: how big the installers are, what they install, and how long the program
takes to a usable window and to a loaded model; the installed (frozen) app and the app run from
source (.venv) side by side, started alternately in one run.

    make dist && python bench/bench_package.py [--runs 7]

Reads dist/*.deb, dist/*.tar.gz and the frozen folder build/dist/offline-assistant; writes the
"## Installers (issue 6)" section of docs/benchmarks.md. Data dirs go to bench/.cache/.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from benchdoc import update_section  # bench/ is on sys.path when run as a script

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "bench" / ".cache" / "package"
DOC = ROOT / "docs" / "benchmarks.md"
SECTION = "## Installers (issue 6)"
FROZEN = ROOT / "build" / "dist" / "offline-assistant"
LOG = Path("logs") / "offline-assistant.log"
PARTS = {  # what makes up the installed size, by folder under _internal
    "models": ("models",),
    "Qt (PySide6)": ("PySide6", "shiboken6"),
    "onnxruntime + genai": ("onnxruntime", "onnxruntime_genai"),
    "faiss + numpy": ("faiss", "faiss_cpu.libs", "numpy", "numpy.libs"),
    "Python runtime": ("libpython3", "python3", "base_library.zip", "lib-dynload"),
}
PEERS = ("Peers, as quoted in the issue: Foundry Local ships about 20 MB, desktop LLM apps "
         "(GPT4All, LM Studio, Jan, AnythingLLM) several hundred MB, in both cases before models.")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="starts per program (default 5)")
    args = parser.parse_args()
    if not (FROZEN / "offline-assistant").is_file():
        raise SystemExit("no frozen build: run `make dist` first")
    sizes = installer_sizes()
    parts = installed_parts()
    programs = {"installed (frozen)": frozen_command(), "from source (.venv)": source_command()}
    starts = {name: [] for name in programs}
    cold = {name: [] for name in programs}
    for _ in range(args.runs):
        for name, command in programs.items():  # alternate, so both see the same machine load
            starts[name].append(start_once(command, name))
            if drop_caches():  # then the same start again with nothing in the page cache
                cold[name].append(start_once(command, name))
    text = report(sizes, parts, {"warm": starts, "cold": cold}, args.runs)
    print(text)
    update_section(DOC, SECTION, text)
    return 0


def installer_sizes() -> dict[str, int]:
    return {p.name: p.stat().st_size for pattern in ("*.deb", "*.tar.gz", "*.exe", "*.dmg")
            for p in sorted((ROOT / "dist").glob(pattern))}


def installed_parts() -> dict[str, int]:
    internal = FROZEN / "_internal"
    sizes = dict.fromkeys(PARTS, 0)
    sizes["other libraries and packages"] = 0
    for entry in internal.iterdir():
        size = tree_size(entry)
        part = next((name for name, prefixes in PARTS.items()
                     if any(entry.name.startswith(p) for p in prefixes)), "other libraries and packages")
        sizes[part] += size
    sizes["the two programs"] = sum(p.stat().st_size for p in FROZEN.iterdir() if p.is_file())
    return sizes


def tree_size(path: Path) -> int:
    if path.is_symlink():
        return 0
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def frozen_command() -> list[str]:
    return [str(FROZEN / "offline-assistant"), "--data-dir", str(CACHE / "frozen")]


def source_command() -> list[str]:
    data = CACHE / "source"
    subprocess.run([sys.executable, "-m", "engine", "models", "prepare", "--data-dir", str(data)],
                   check=True, cwd=ROOT, stdout=subprocess.DEVNULL)  # convert once, not timed
    return [sys.executable, "-m", "desktop_app.app", "--data-dir", str(data)]


def drop_caches() -> bool:
    """Empties the page cache (root on Linux), so the next start reads every file from disk."""
    try:
        subprocess.run(["sync"], check=True)
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def start_once(command: list[str], name: str) -> dict[str, float]:
    """Starts the window with --smoke-test (it quits once the model is ready); reads the log."""
    data = Path(command[command.index("--data-dir") + 1])
    shutil.rmtree(data / "logs", ignore_errors=True)
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    done = subprocess.run([*command, "--provider", "cpu", "--smoke-test"], env=env, cwd=CACHE.parent,
                          capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise SystemExit(f"{name} failed to start: {done.stderr[-2000:]}")
    log = (data / LOG).read_text(encoding="utf-8")
    in_main, since_process = map(float, re.findall(
        r"window usable after ([\d.]+) s \(([\d.]+) s since the process started\)", log)[-1])
    ready = float(re.findall(r"ready on \w+ after ([\d.]+) s", log)[-1])
    before_main = since_process - in_main  # interpreter start, imports, the bootloader's unpacking
    return {"window": since_process, "model": before_main + ready}


def report(sizes: dict[str, int], parts: dict[str, int], starts: dict, runs: int) -> str:
    mb = 1e6
    lines = [SECTION, "", "Produced by `bench/bench_package.py` after `make dist` (the Linux build "
             "here; 2 shared cores: medians, compare the rows of one run).", "",
             "| file | size |", "|---|---|"]
    lines += [f"| `{name}` | {size / mb:.0f} MB |" for name, size in sizes.items()]
    total = sum(parts.values())
    lines += ["", f"Installed: {total / mb:.0f} MB ({(total - parts['models']) / mb:.0f} MB without "
              "the models).", "", "| part | MB | share |", "|---|---|---|"]
    lines += [f"| {name} | {size / mb:.0f} | {size / total:.0%} |" for name, size in parts.items()]
    lines += ["", f"Start to a usable window and to a loaded model (median of {runs} starts each, "
              "alternating; seconds from the process's start; cold: the page cache emptied just "
              "before):", "", "| program | start | window usable | model ready |", "|---|---|---|---|"]
    for kind, by_program in starts.items():
        for name, runs_of in by_program.items():
            if runs_of:
                window = statistics.median(r["window"] for r in runs_of)
                model = statistics.median(r["model"] for r in runs_of)
                lines.append(f"| {name} | {kind} | {window:.2f} | {model:.2f} |")
    lines += ["", PEERS, ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
