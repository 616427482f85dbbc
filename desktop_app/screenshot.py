"""Renders the main window after a real question over a real manual, to a PNG.

    python -m desktop_app.screenshot --data-dir DIR --out docs/screenshot.png

Offscreen (no display needed): starts the window, indexes the manual (tests/.manuals/R-intro.pdf
by default), asks the question with the built-in models, waits for the answer, opens its first
citation in the source view and grabs the window.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

DEFAULT_MANUAL = Path(__file__).resolve().parent.parent / "tests" / ".manuals" / "R-intro.pdf"
DEFAULT_QUESTION = "How do I get help on a function?"


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m desktop_app.screenshot", description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True, help="a data dir (the built-in model is prepared in it)")
    parser.add_argument("--out", default="docs/screenshot.png")
    parser.add_argument("--manual", default=str(DEFAULT_MANUAL))
    parser.add_argument("--question", default=DEFAULT_QUESTION)
    parser.add_argument("--size", default="1600x1000", help="window size, WIDTHxHEIGHT")
    parser.add_argument("--theme", choices=("light", "dark"), default=None)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds for indexing and the answer")
    return parser.parse_args(argv)


def wait_until(app, predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        app.processEvents()
        time.sleep(0.01)  # a script, not a test: polls the event loop


def main(argv=None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from dataclasses import replace

    from PySide6.QtWidgets import QApplication

    from desktop_app.main_window import MainWindow
    from engine.config import load_settings
    from engine.paths import AppPaths

    paths = AppPaths.from_arg(args.data_dir).ensure()
    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("Offline Assistant")
    settings = load_settings(paths.settings_file)
    if args.theme:
        settings = replace(settings, theme=args.theme)
    width, height = (int(v) for v in args.size.lower().split("x"))
    window = MainWindow(paths, settings=settings)
    window.resize(width, height)
    window.show()
    ready = {"model": False}
    window.assistant.modelReady.connect(lambda _status: ready.update(model=True))

    manual = Path(args.manual)
    if not manual.is_file():
        print(f"no manual at {manual}; run tests/fetch_manuals.sh or pass --manual", file=sys.stderr)
        return 2
    window.index.add_paths([str(manual)])
    wait_until(app, lambda: window.index.busy, 30, "indexing to start")
    wait_until(app, lambda: not window.index.busy, args.timeout, "indexing")
    wait_until(app, lambda: ready["model"], args.timeout, "the model")

    window.conversations.new_conversation()
    window.chat.input.setPlainText(args.question)
    finished = []
    window.chat.answerFinished.connect(finished.append)
    if not window.chat.send():
        print("the question could not be sent", file=sys.stderr)
        return 1
    wait_until(app, lambda: finished, args.timeout, "the answer")
    answer = window.chat.last_answer()
    if answer.state.citations:
        window.open_citation(answer.state.citations[0])
        # a text source's pages are read off the GUI thread: wait for them
        wait_until(app, lambda: window.source.mode() != "opening", 60, "the source")
    window.chat.input.setFocus()
    settled = time.monotonic() + 2.0  # the PDF page renders asynchronously
    wait_until(app, lambda: time.monotonic() > settled, 10, "the source view")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if not window.grab().save(str(out)):
        print(f"could not write {out}", file=sys.stderr)
        return 1
    stats = finished[0].stats
    print(f"wrote {out}: answerable={stats.answerable} tokens={stats.new_tokens} "
          f"citations={[c.number for c in answer.state.citations]}; resident memory: "
          f"window process {_rss_mb('self')}, model process {_rss_mb(getattr(window.assistant.worker.llm, 'pid', None))}")
    window.close()
    return 0


def _rss_mb(pid) -> str:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return f"{int(line.split()[1]) / 1024:.0f} MB"
    except OSError:
        pass
    return "?"


if __name__ == "__main__":
    sys.exit(main())
