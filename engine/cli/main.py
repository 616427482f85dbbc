"""offline-assistant-cli: the engine from a terminal, no GUI.

Heavy modules are imported inside the commands, so that `--help` answers at once.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import signal
import sys
import threading

from engine import __version__
from engine.errors import EngineError
from engine.llm.hardware import PROVIDER_CHOICES

# Small models follow a short plain instruction better than their own long default persona.
DEFAULT_SYSTEM = "You are a helpful assistant."
CANCELLED_EXIT = 130  # the shell's code for a command stopped by Ctrl-C


def main(argv: list[str] | None = None) -> int:
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
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\nCancelled.", file=sys.stderr)
        return CANCELLED_EXIT
    except BrokenPipeError:  # the reader went away (say, `| head`): nothing left to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--data-dir", metavar="DIR",
                        help="keep models and indexes here instead of the user data folder")
    common.add_argument("--provider", choices=PROVIDER_CHOICES, default="auto",
                        help="execution provider (default: the best one available)")

    parser = argparse.ArgumentParser(
        prog="offline-assistant-cli",
        description="Answers questions over your own manuals, fully offline.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")
    _add_models(commands, common)
    _add_generate(commands, common)
    from engine.cli import admin as cli_admin, ask as cli_ask, index as cli_index

    cli_index.add_commands(commands, common, _paths)
    cli_admin.add_commands(commands, common, _paths)
    cli_ask.add_commands(commands, common, _paths, _ctrl_c_sets, CANCELLED_EXIT)
    return parser


def _add_models(commands, common) -> None:
    models = commands.add_parser("models", help="list, prepare and import models")
    actions = models.add_subparsers(title="actions", metavar="ACTION")
    models.set_defaults(run=lambda args: _usage(models))

    listing = actions.add_parser("list", parents=[common], help="the models and their status")
    listing.add_argument("--json", action="store_true", help="one JSON object per model")
    listing.set_defaults(run=_models_list)

    prepare = actions.add_parser("prepare", parents=[common],
                                 help="convert the built-in models for use (once)")
    prepare.set_defaults(run=_models_prepare)

    importing = actions.add_parser("import", parents=[common],
                                   help="import a .gguf file or an ONNX model folder")
    importing.add_argument("path", metavar="PATH")
    importing.set_defaults(run=_models_import)


def _add_generate(commands, common) -> None:
    generate = commands.add_parser("generate", parents=[common],
                                   help="stream the model's answer to one prompt")
    generate.add_argument("prompt", metavar="PROMPT")
    generate.add_argument("--model", metavar="NAME",
                          help="an imported model's name (default: the built-in one)")
    generate.add_argument(
        "--system", metavar="TEXT", default=DEFAULT_SYSTEM,
        help=f"the system message (default: '{DEFAULT_SYSTEM}'; '' uses the model's own default)")
    generate.add_argument("--max-new-tokens", type=int, default=256)
    generate.add_argument("--temperature", type=float, default=0.0,
                          help="0 answers greedily: the same text every time (default)")
    generate.add_argument("--top-p", type=float, default=1.0)
    generate.add_argument("--top-k", type=int, default=50)
    generate.add_argument("--seed", type=int, default=None)
    generate.add_argument("--json", action="store_true",
                          help="after the text, print the statistics as one JSON line")
    generate.set_defaults(run=_generate)


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


# -- models -------------------------------------------------------------------------------
def _paths(args):
    from engine.paths import AppPaths

    return AppPaths.from_arg(args.data_dir)


def _models_list(args) -> int:
    from engine.models.registry import list_models

    infos = list_models(_paths(args), args.provider)
    if args.json:
        for info in infos:
            print(json.dumps(info.to_dict()))
        return 0
    header = ("NAME", "KIND", "SOURCE", "SIZE", "LICENCE", "STATUS", "PROVIDER")
    rows = [(i.name, i.kind, i.source, _size(i.size_bytes), i.licence, i.status, i.provider)
            for i in infos]
    print(_table([header, *rows]))
    return 0


def _models_prepare(args) -> int:
    from engine.models.registry import BUILTIN_EMBEDDER, BUILTIN_LLM, prepare_builtin_llm, resolve_embedder

    paths = _paths(args)
    with _progress_line(f"Preparing {BUILTIN_LLM.name}") as progress:
        folder = prepare_builtin_llm(paths, progress)
    print(f"{BUILTIN_LLM.name}: ready in {folder}")
    files = resolve_embedder(paths)
    print(f"{BUILTIN_EMBEDDER.name}: ready in {files.model.parent}")
    return 0


def _models_import(args) -> int:
    from engine.models.registry import import_model

    with _progress_line(f"Importing {args.path}") as progress:
        folder = import_model(args.path, _paths(args), progress)
    print(f"Imported '{folder.name}' into {folder}")
    return 0


def _size(size_bytes: int) -> str:
    size = float(size_bytes)
    for unit in ("B", "kB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} GB"


def _table(rows: list[tuple]) -> str:
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip()
        for row in rows
    )


@contextlib.contextmanager
def _progress_line(label: str):
    """A progress callback that redraws one line on stderr; ends it with a newline if used."""
    shown = {"text": "", "width": 0}

    def report(fraction: float, message: str) -> None:
        text = f"{label}: {fraction * 100:3.0f}% {message}"
        if text != shown["text"]:
            sys.stderr.write("\r" + text.ljust(shown["width"]))
            sys.stderr.flush()
            shown.update(text=text, width=max(shown["width"], len(text)))

    try:
        yield report
    finally:
        if shown["width"]:
            sys.stderr.write("\n")


# -- generate -----------------------------------------------------------------------------
def _generate(args) -> int:
    from engine.llm.process import LLMClient

    folder = llm_folder(_paths(args), args.model)
    messages = [{"role": "system", "content": args.system}] if args.system else []
    messages.append({"role": "user", "content": args.prompt})
    cancel = threading.Event()
    with LLMClient(folder, args.provider) as client:
        stream = client.stream(
            messages, max_new_tokens=args.max_new_tokens, temperature=args.temperature,
            top_p=args.top_p, top_k=args.top_k, seed=args.seed, cancel=cancel,
        )
        with _ctrl_c_sets(cancel):
            _write_stream(stream)
    _print_stats(stream.stats, folder.name, args.json)
    return CANCELLED_EXIT if cancel.is_set() else 0


def llm_folder(paths, name: str | None):
    from engine.models.registry import BUILTIN_LLM, prepare_builtin_llm, resolve_llm

    if name in (None, BUILTIN_LLM.name):
        with _progress_line(f"Preparing {BUILTIN_LLM.name} (first use)") as progress:
            return prepare_builtin_llm(paths, progress)
    return resolve_llm(paths, name)


def _write_stream(stream) -> None:
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(errors="replace")  # a console that cannot show every character
    for piece in stream:
        sys.stdout.write(piece)
        sys.stdout.flush()
    sys.stdout.write("\n")
    sys.stdout.flush()


def _print_stats(stats, model: str, as_json: bool) -> None:
    if as_json:
        print(json.dumps({"model": model, **stats.to_dict()}), flush=True)
        return
    print(
        f"[{stats.prompt_tokens} prompt tokens, {stats.new_tokens} new tokens, "
        f"first token after {stats.time_to_first_token_s:.2f} s, "
        f"{stats.tokens_per_s:.1f} tokens/s, finish: {stats.finish_reason}, "
        f"provider: {stats.provider}]",
        file=sys.stderr,
    )


@contextlib.contextmanager
def _ctrl_c_sets(cancel: threading.Event):
    """The first Ctrl-C cancels the answer cleanly; a second one interrupts at once."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_interrupt(signum, frame):
        if cancel.is_set():
            raise KeyboardInterrupt
        cancel.set()

    previous = signal.signal(signal.SIGINT, on_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
