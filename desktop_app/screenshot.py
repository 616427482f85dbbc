"""Renders the main window after a real question over a real manual, to a PNG.

    python -m desktop_app.screenshot --data-dir DIR --out docs/screenshot.png

Offscreen (no display needed): starts the window, indexes the manual (tests/.manuals/R-intro.pdf
by default; --manual "" indexes nothing and asks the collection as it is), asks the question with
the built-in models, waits for the answer, opens its first citation in the source view and grabs
the window. --kiosk starts kiosk mode first, as the app does on a kiosk. Prints the resident
memory (VmRSS, and the peak, VmHWM) of the window's process and of the model's; with
--idle-memory again once indexing, idle, has closed the collection (steady state, issue 32).
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
    parser.add_argument("--manual", default=str(DEFAULT_MANUAL), help='the manual to index first ("": none)')
    parser.add_argument("--kiosk", action="store_true", help="kiosk mode, as `offline-assistant --kiosk` starts it")
    parser.add_argument("--question", default=DEFAULT_QUESTION)
    parser.add_argument("--size", default="1600x1000", help="window size, WIDTHxHEIGHT")
    parser.add_argument("--theme", choices=("light", "dark"), default=None)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds for indexing and the answer")
    parser.add_argument("--idle-memory", action="store_true",
                        help="then wait until indexing, idle, has closed the collection, and print the memory again")
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
    width, height = (int(v) for v in args.size.lower().split("x"))
    screen_file = None
    if "QT_QPA_PLATFORM" not in os.environ:
        # a kiosk is full screen: offscreen, the screen itself gets the size asked for
        screen_file = _offscreen_screen(width, height) if args.kiosk else None
        os.environ["QT_QPA_PLATFORM"] = f"offscreen:configfile={screen_file}" if screen_file else "offscreen"
    from dataclasses import replace

    from PySide6.QtWidgets import QApplication

    from desktop_app.main_window import MainWindow
    from engine.config import load_settings
    from engine.paths import AppPaths

    paths = AppPaths.from_arg(args.data_dir).ensure()
    app = QApplication.instance() or QApplication(sys.argv[:1])
    if screen_file:
        Path(screen_file).unlink(missing_ok=True)  # read as the application started
    app.setApplicationName("Offline Assistant")
    settings = load_settings(paths.settings_file)
    if args.theme:
        settings = replace(settings, theme=args.theme)
    window = MainWindow(paths, settings=settings)
    window.resize(width, height)
    ready = {"model": False, "listed": False}
    window.assistant.modelReady.connect(lambda _status: ready.update(model=True))
    # the collection's first listing: the app has opened it for indexing too, as after any start
    window.index.statsChanged.connect(lambda *_: ready.update(listed=True))
    window.show()
    kiosk = None
    if args.kiosk:
        from desktop_app.kiosk.lockdown import install

        kiosk = install(window, True)  # full screen, on a screen of --size when offscreen

    if args.manual:
        manual = Path(args.manual)
        if not manual.is_file():
            print(f"no manual at {manual}; run tests/fetch_manuals.sh or pass --manual", file=sys.stderr)
            return 2
        window.index.add_paths([str(manual)])
        wait_until(app, lambda: window.index.busy, 30, "indexing to start")
        wait_until(app, lambda: not window.index.busy, args.timeout, "indexing")
    wait_until(app, lambda: ready["model"] and ready["listed"], args.timeout, "the model and the collection")

    if kiosk is None:
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
    if args.idle_memory:
        wait_until(app, lambda: not window.index.holds_store, args.timeout, "indexing to close the collection")
        settled = time.monotonic() + 1.0
        wait_until(app, lambda: time.monotonic() > settled, 10, "a second")
        print(f"once indexing was idle and closed the collection: window process {_rss_mb('self')}, "
              f"model process {_rss_mb(getattr(window.assistant.worker.llm, 'pid', None))}")
    if kiosk is not None:
        kiosk.close_app()  # a kiosk refuses any other close
    else:
        window.close()
    return 0


def _offscreen_screen(width: int, height: int) -> str:
    """A configuration file for the offscreen platform: one screen of width x height."""
    import json
    import tempfile

    screen = {"name": "kiosk", "x": 0, "y": 0, "width": width, "height": height,
              "logicalDpi": 96, "logicalBaseDpi": 96, "dpr": 1}
    with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="offscreen-", delete=False) as file:
        json.dump({"screens": [screen]}, file)
    return file.name


def _rss_mb(pid) -> str:
    """'N MB (peak M MB)': VmRSS and VmHWM of process `pid` ("self": this one), Linux only."""
    found = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found[key] = int(value.split()[0]) / 1024
    except (OSError, ValueError):
        pass
    if "VmRSS" not in found:
        return "?"
    return f"{found['VmRSS']:.0f} MB (peak {found.get('VmHWM', found['VmRSS']):.0f} MB)"


if __name__ == "__main__":
    sys.exit(main())
