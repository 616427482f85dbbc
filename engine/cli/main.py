"""offline-assistant-cli: the engine from a terminal, no GUI.

Heavy modules are imported inside the commands, so that `--help` answers at once.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from engine import __version__
from engine.cli import admin, ask, generate, index, models
from engine.cli.common import CANCELLED_EXIT, common_options
from engine.errors import EngineError
from engine.safe_text import SafeStderrHandler, visible


def main(argv: list[str] | None = None) -> int:
    if not isinstance(logging.lastResort, SafeStderrHandler):  # warnings name files and passages
        logging.lastResort = SafeStderrHandler()
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error argparse has already explained
        return exc.code if isinstance(exc.code, int) else 0
    if not hasattr(args, "run"):
        parser.print_help(sys.stderr)
        return 2
    try:
        return args.run(args)
    except EngineError as exc:
        print(f"error: {visible(str(exc))}", file=sys.stderr)  # file names may hold escapes
        return 1
    except KeyboardInterrupt:
        print("\nCancelled.", file=sys.stderr)
        return CANCELLED_EXIT
    except BrokenPipeError:  # the reader went away (say, `| head`): nothing left to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def build_parser() -> argparse.ArgumentParser:
    common = common_options()
    parser = argparse.ArgumentParser(
        prog="offline-assistant-cli",
        description="Answers questions over your own manuals, fully offline.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")
    for group in (models, generate, index, admin, ask):
        group.add_commands(commands, common)
    return parser
