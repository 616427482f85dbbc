"""The `generate` command: the model's answer to one prompt, streamed, with no manuals."""

from __future__ import annotations

import io
import json
import sys
import threading

from engine.cli.common import (
    CANCELLED_EXIT,
    common_options,
    ctrl_c_sets,
    engine_of,
    engine_options,
    llm_folder,
    paths_of,
    plural,
)
from engine.llm import DEFAULT_SYSTEM
from engine.safe_text import visible


def add_commands(commands) -> None:
    generate = commands.add_parser("generate", parents=[common_options(runs_model=True), engine_options()],
                                   help="stream the model's answer to one prompt")
    generate.add_argument("prompt", metavar="PROMPT", help="the text to answer, in quotes (no manuals are used)")
    generate.add_argument("--model", metavar="NAME",
                          help="an imported model's name (default: the built-in one)")
    generate.add_argument(
        "--system", metavar="TEXT", default=DEFAULT_SYSTEM,
        help=f"the system message (default: '{DEFAULT_SYSTEM}'; '' uses the model's own default)")
    generate.add_argument("--max-new-tokens", type=int, default=256, metavar="N",
                          help="stop after N tokens (default: 256)")
    generate.add_argument("--temperature", type=float, default=0.0, metavar="T",
                          help="0 answers greedily: the same text every time (default)")
    generate.add_argument("--top-p", type=float, default=1.0, metavar="P",
                          help="with a temperature: sample from the likeliest tokens "
                               "that make up P of the chance (default: 1.0)")
    generate.add_argument("--top-k", type=int, default=50, metavar="K",
                          help="with a temperature: sample from the K likeliest tokens (default: 50)")
    generate.add_argument("--seed", type=int, default=None, metavar="N",
                          help="with a temperature: the same seed gives the same text")
    generate.add_argument("--json", action="store_true",
                          help="after the text, print the statistics as one JSON line")
    generate.set_defaults(run=_generate)


def _generate(args) -> int:
    name, llm = _chosen_llm(args, paths_of(args))
    messages = [{"role": "system", "content": args.system}] if args.system else []
    messages.append({"role": "user", "content": args.prompt})
    cancel = threading.Event()
    with llm as client:
        stream = client.stream(
            messages, max_new_tokens=args.max_new_tokens, temperature=args.temperature,
            top_p=args.top_p, top_k=args.top_k, seed=args.seed, cancel=cancel,
        )
        with ctrl_c_sets(cancel):
            _write_stream(stream)
    _print_stats(stream.stats, _model_name(name, client), args.json)
    return CANCELLED_EXIT if cancel.is_set() else 0


def _chosen_llm(args, paths):
    """(a name for the stats, the LLM): the remote engine of --engine-url (or the settings),
    else the local model in its own process."""
    url, key, model = engine_of(args, paths)
    if url:
        from engine.llm.remote import remote_llm

        return None, remote_llm(paths, url, key, model)
    from engine.llm.process import LLMClient

    folder = llm_folder(paths, args.model)
    return folder.name, LLMClient(folder, args.provider)


def _model_name(name: str | None, llm) -> str:
    """The local model's folder name, or the engine's model (known once it is loaded)."""
    return name or getattr(llm, "model", None) or "remote"


def _write_stream(stream) -> None:
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(errors="replace")  # a console that cannot show every character
    for piece in stream:
        sys.stdout.write(visible(piece))
        sys.stdout.flush()
    sys.stdout.write("\n")
    sys.stdout.flush()


def _print_stats(stats, model: str, as_json: bool) -> None:
    if as_json:
        print(json.dumps({"model": model, **stats.to_dict()}), flush=True)
        return
    print(
        f"[{plural(stats.prompt_tokens, 'prompt token')}, {plural(stats.new_tokens, 'new token')}, "
        f"first token after {stats.time_to_first_token_s:.2f} s, "
        f"{stats.tokens_per_s:.1f} tokens/s, finish: {stats.finish_reason}, "
        f"provider: {stats.provider}]",
        file=sys.stderr,
    )
