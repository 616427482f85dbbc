"""offline-assistant-cli: the engine from a terminal, no GUI.

Heavy modules are imported inside the commands, so that `--help` answers at once. The
global options (--data-dir, --provider) work before the command as after it; a mistyped
command or option gets a "did you mean" hint; `help COMMAND` is `COMMAND --help`.
"""

from __future__ import annotations

import argparse
import difflib
import logging
import os
import re
import sys

from engine import __version__
from engine.cli import admin, ask, generate, index, models, serve
from engine.cli.common import (
    CANCELLED_EXIT,
    DATA_DIR_HELP,
    EXIT_CODES,
    PROVIDER_HELP,
    USAGE_EXIT,
)
from engine.errors import EngineError
from engine.models.hardware import PROVIDER_CHOICES
from engine.safe_text import SafeStderrHandler, visible

PROG = "offline-assistant-cli"


def main(argv: list[str] | None = None) -> int:
    if not isinstance(logging.lastResort, SafeStderrHandler):  # warnings name files and passages
        logging.lastResort = SafeStderrHandler()
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        _settle_global_options(args)
    except SystemExit as exc:  # --help, or a usage error argparse has already explained
        return exc.code if isinstance(exc.code, int) else 0
    if not hasattr(args, "run"):
        parser.print_help(sys.stderr)
        return USAGE_EXIT
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


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors end with a "did you mean" hint where one fits."""

    def error(self, message: str):
        super().error(message + _did_you_mean(message, self))


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog=PROG,
        description=_wrapped("Answers questions over your own manuals, fully offline: index PDF, "
                             "Word, HTML, Markdown and text files, then ask; every answer names "
                             "the pages it comes from."),
        epilog="\n".join(_wrapped(text) for text in (
            "The options above go before or after the command.",
            f"Run '{PROG} help COMMAND' (or '{PROG} COMMAND --help') for a command's options.",
            EXIT_CODES)),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-V", "--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--data-dir", metavar="DIR", default=argparse.SUPPRESS, help=DATA_DIR_HELP)
    parser.add_argument("--provider", choices=PROVIDER_CHOICES, default=argparse.SUPPRESS,
                        help=PROVIDER_HELP + "; used by the commands that run a model")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")
    for group in (index, ask, models, generate, serve, admin):  # the everyday commands first
        group.add_commands(commands)
    _add_help_command(commands, parser)
    for sub in _parsers(parser):
        _describe_commands(sub)
    return parser


def _describe_commands(parser: argparse.ArgumentParser) -> None:
    """Each command's --help starts with the line the list of commands gives it."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for line in action._choices_actions:
                command = action.choices[line.dest]
                if command.description is None and line.help:
                    command.description = line.help[0].upper() + line.help[1:] + "."


def _settle_global_options(args: argparse.Namespace) -> None:
    """The defaults of the global options given neither before nor after the command."""
    args.data_dir = getattr(args, "data_dir", None)
    args.provider = getattr(args, "provider", "auto")


def _add_help_command(commands, parser: argparse.ArgumentParser) -> None:
    shown = commands.add_parser("help", help="show a command's options: help COMMAND [ACTION]")
    shown.add_argument("topic", nargs="*", metavar="COMMAND", help="a command, and its action if it has some")
    shown.set_defaults(run=lambda args: _help(parser, args.topic))


def _help(parser: argparse.ArgumentParser, topic: list[str]) -> int:
    """`help docs list` prints what `docs list --help` prints."""
    for word in topic:
        choices = _commands_of(parser)
        if word not in choices:
            if not choices:
                print(f"{parser.prog} has no actions: see '{parser.prog} --help'", file=sys.stderr)
                return USAGE_EXIT
            print(f"{parser.prog}: there is no command '{visible(word)}'{_hint(word, list(choices))} "
                  f"(choose from {', '.join(choices)})", file=sys.stderr)
            return USAGE_EXIT
        parser = choices[word]
    parser.print_help()
    return 0


def _commands_of(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _parsers(parser: argparse.ArgumentParser):
    """`parser` and every command and action parser under it."""
    yield parser
    for sub in dict.fromkeys(_commands_of(parser).values()):  # an alias would repeat one
        yield from _parsers(sub)


INVALID_CHOICE = re.compile(r"invalid choice: '([^']*)' \(choose from (.*)\)")
UNRECOGNIZED = re.compile(r"unrecognized arguments: (.*)")


def _did_you_mean(message: str, parser: argparse.ArgumentParser) -> str:
    """"; did you mean 'ask'?" for a mistyped command, action, choice or option; else ""."""
    wrong = INVALID_CHOICE.search(message)
    if wrong:
        return _hint(wrong.group(1), re.findall(r"[\w.-]+", wrong.group(2)))
    unknown = UNRECOGNIZED.search(message)
    if unknown:  # said by the top parser, for options of any command: look in them all
        options = [o for sub in _parsers(parser) for a in sub._actions for o in a.option_strings]
        for word in unknown.group(1).split():
            if word.startswith("--"):
                hint = _hint(word.split("=", 1)[0], list(dict.fromkeys(options)))
                if hint:
                    return hint
    return ""


def _hint(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word, [c for c in choices if c != word], n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


def _wrapped(text: str, width: int = 78) -> str:
    import textwrap

    return textwrap.fill(text, width)
