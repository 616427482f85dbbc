"""What every command shares: the data folder of `--data-dir`, Ctrl-C, exit codes, progress."""

from __future__ import annotations

import argparse
import contextlib
import logging
import re
import shlex
import signal
import sys
import threading
import time

from engine.models.hardware import PROVIDER_CHOICES
from engine.paths import DEFAULT_COLLECTION
from engine.safe_text import visible

CANCELLED_EXIT = 130  # the shell's code for a command stopped by Ctrl-C
USAGE_EXIT = 2  # argparse's code for a usage error
NOT_COVERED_EXIT = 3  # `ask`: the manuals do not cover the question (the answer is the refusal)
SOME_FAILED_EXIT = 4  # `index`: some documents failed, the others were indexed (a script must not miss it)
EXIT_CODES = (f"Exit codes: 0 done; 1 an error (its message says what to do); {USAGE_EXIT} a usage "
              f"error; {NOT_COVERED_EXIT} `ask`: the manuals do not cover the question; "
              f"{SOME_FAILED_EXIT} `index`: some documents failed (each is named), the others were indexed; "
              f"{CANCELLED_EXIT} stopped with Ctrl-C.")
PLAIN_EVERY_S = 10.0  # off a terminal, a progress line at most this often within one stage
DATA_DIR_HELP = "keep models, indexes, settings and logs here instead of the user data folder"
PROVIDER_HELP = "where the model runs (default: auto, the best one available)"


def common_options(runs_model: bool = False) -> argparse.ArgumentParser:
    """--data-dir and --provider, for a command. Their defaults are SUPPRESS so that a value
    given before the command (main's own options) is not overwritten by the command's default;
    main fills in the defaults. --provider is offered (in --help) only by the commands that run
    a model; the others accept it and ignore it, as git's global options are taken by every
    command, so that one set of options serves index, docs and ask alike."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--data-dir", metavar="DIR", default=argparse.SUPPRESS, help=DATA_DIR_HELP)
    common.add_argument("--provider", choices=PROVIDER_CHOICES, default=argparse.SUPPRESS,
                        help=PROVIDER_HELP if runs_model else argparse.SUPPRESS)
    return common


def engine_options() -> argparse.ArgumentParser:
    """--engine-url and --engine-key, for the commands that run a model: generation on a remote
    OpenAI-compatible engine (retrieval and the checks stay here)."""
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument("--engine-url", metavar="URL", default=None,
                         help="generate on this OpenAI-compatible engine (our serve, llama.cpp's "
                              "server, vLLM), with or without /v1 (default: "
                              "$OFFLINE_ASSISTANT_ENGINE_URL, else engine_url in the settings; "
                              "else the local model)")
    options.add_argument("--engine-key", metavar="KEY", default=None,
                         help="the engine's API key (better: $OFFLINE_ASSISTANT_ENGINE_KEY, which "
                              "other users' process lists do not show)")
    return options


def engine_of(args, paths) -> tuple[str | None, str | None, str | None]:
    """(url, key, model) of the remote engine a command uses, or Nones for the local model:
    --engine-url/--engine-key, then the environment, then the settings file."""
    from engine.config import load_settings
    from engine.llm.remote import chosen_engine

    settings = load_settings(paths.settings_file)
    url, key = chosen_engine(getattr(args, "engine_url", None), getattr(args, "engine_key", None), settings)
    return url, key, settings.engine_model if url else None


def collection_option() -> argparse.ArgumentParser:
    option = argparse.ArgumentParser(add_help=False)
    option.add_argument("--collection", metavar="NAME", default=DEFAULT_COLLECTION,
                        help=f"the collection to use (default: {DEFAULT_COLLECTION})")
    return option


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """"1 document", "2 documents", "0 documents"."""
    return f"{count} {noun if count == 1 else nouns or noun + 's'}"


def nothing_indexed(args, paths) -> str:
    """What to say when a collection holds no documents, and the command that adds some."""
    options = "" if args.data_dir is None else f" --data-dir {shlex.quote(args.data_dir)}"
    if args.collection != DEFAULT_COLLECTION:
        options += f" --collection {shlex.quote(args.collection)}"
    return visible(f"The collection '{args.collection}' is empty: no documents are indexed yet "
                   f"(in {paths.collection(args.collection)}). Add some with: "
                   f"offline-assistant-cli index PATH{options}")


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


class Throttle:
    """Which progress lines a log gets (stderr is not a terminal): the first of each stage at
    once, then one at most every `every_s` seconds, so a service log shows the work is alive
    without a line per step ("layer 1 of 30", "layer 2 of 30"...). `now` is the caller's clock."""

    def __init__(self, every_s: float = PLAIN_EVERY_S):
        self.every_s = every_s
        self._stage: object = None
        self._at: float | None = None

    def due(self, now: float, stage: object = None) -> bool:
        if stage == self._stage and self._at is not None and now - self._at < self.every_s:
            return False
        self.wrote(now, stage)
        return True

    def wrote(self, now: float, stage: object = None) -> None:
        """A line was written at `now` (one that is always written: a document finished)."""
        self._stage, self._at = stage, now


@contextlib.contextmanager
def progress_line(label: str, stream=None, clock=time.monotonic):
    """A progress callback: on a terminal it redraws one line on stderr (ended with a newline
    if used); elsewhere (a log, a pipe) it writes a plain line for each stage (the message,
    its numbers aside) and at most one every PLAIN_EVERY_S seconds within it, so no carriage
    returns pile up in the file, nor a line per step."""
    stream = stream or sys.stderr
    live = stream.isatty()
    throttle = Throttle()
    shown = {"text": "", "width": 0}

    def report(fraction: float, message: str) -> None:
        text = f"{label}: {fraction * 100:3.0f}% {visible(message)}"
        if text == shown["text"]:
            return
        if live:
            stream.write("\r" + text.ljust(shown["width"]))
        elif throttle.due(clock(), re.sub(r"\d+", "#", message)):
            stream.write(text + "\n")
        else:
            return
        stream.flush()
        shown.update(text=text, width=max(shown["width"], len(text)))

    try:
        yield report
    finally:
        if live and shown["width"]:
            stream.write("\n")


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
