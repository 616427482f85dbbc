"""What every command shares: the data folder of `--data-dir`, Ctrl-C, exit codes, progress."""

from __future__ import annotations

import argparse
import contextlib
import logging
import signal
import sys
import threading

from engine.llm.hardware import PROVIDER_CHOICES
from engine.paths import DEFAULT_COLLECTION
from engine.safe_text import visible

CANCELLED_EXIT = 130  # the shell's code for a command stopped by Ctrl-C


def common_options() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--data-dir", metavar="DIR",
                        help="keep models and indexes here instead of the user data folder")
    common.add_argument("--provider", choices=PROVIDER_CHOICES, default="auto",
                        help="execution provider (default: the best one available)")
    return common


def collection_option() -> argparse.ArgumentParser:
    option = argparse.ArgumentParser(add_help=False)
    option.add_argument("--collection", metavar="NAME", default=DEFAULT_COLLECTION,
                        help=f"the collection to use (default: {DEFAULT_COLLECTION})")
    return option


def paths_of(args):
    """The AppPaths of a command's --data-dir."""
    from engine.paths import AppPaths

    return AppPaths.from_arg(args.data_dir)


def usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


@contextlib.contextmanager
def ctrl_c_sets(cancel: threading.Event, notice: str = ""):
    """The first Ctrl-C sets `cancel` (and prints `notice`), so the work stops cleanly at its
    next check; a second one interrupts at once."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_interrupt(signum, frame):
        if cancel.is_set():
            raise KeyboardInterrupt
        cancel.set()
        if notice:
            sys.stderr.write(notice)

    previous = signal.signal(signal.SIGINT, on_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextlib.contextmanager
def progress_line(label: str):
    """A progress callback that redraws one line on stderr; ends it with a newline if used."""
    shown = {"text": "", "width": 0}

    def report(fraction: float, message: str) -> None:
        text = f"{label}: {fraction * 100:3.0f}% {visible(message)}"
        if text != shown["text"]:
            sys.stderr.write("\r" + text.ljust(shown["width"]))
            sys.stderr.flush()
            shown.update(text=text, width=max(shown["width"], len(text)))

    try:
        yield report
    finally:
        if shown["width"]:
            sys.stderr.write("\n")


def llm_folder(paths, name: str | None):
    """The folder of the model `name` (the built-in one when None), prepared on first use."""
    from engine.models.registry import BUILTIN_LLM, prepare_builtin_llm, resolve_llm

    if name in (None, BUILTIN_LLM.name):
        with progress_line(f"Preparing {BUILTIN_LLM.name} (first use)") as progress:
            return prepare_builtin_llm(paths, progress)
    return resolve_llm(paths, name)


@contextlib.contextmanager
def told_by_the_command():
    """Meanwhile, log records that say what the command prints itself (marked health.TOLD:
    the damaged collection's error, what was repaired) stay off stderr: said once, not twice."""
    from engine.store.health import TOLD

    handler = logging.lastResort

    def not_told(record: logging.LogRecord) -> bool:
        return not getattr(record, TOLD, False)

    if handler is not None:
        handler.addFilter(not_told)
    try:
        yield
    finally:
        if handler is not None:
            handler.removeFilter(not_told)


def print_repairs(repaired: list[str]) -> None:
    """What opening the collection repaired (its open_report["repaired"]), as one plain line
    on stderr: "repaired: ..."."""
    if repaired:
        print(visible("repaired: " + "; ".join(repaired)), file=sys.stderr)


@contextlib.contextmanager
def collection_told():
    """Around opening a collection: the log's words on a damaged one stay off stderr, and what
    was repaired is printed as one line also when the collection is refused after all."""
    from engine.errors import CollectionDamagedError

    with told_by_the_command():
        try:
            yield
        except CollectionDamagedError as exc:
            print_repairs(exc.repaired)
            raise
