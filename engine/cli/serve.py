"""The `serve` command: the HTTP server (engine.server) on uvicorn, until Ctrl-C or SIGTERM. It
generates with local model processes, or on a remote engine (--engine-url, the environment or
the settings, as `ask` and `generate`), and then starts no model process of its own."""

from __future__ import annotations

import os
import socket
import sys

from engine.cli.common import (
    collection_option,
    common_options,
    engine_of,
    engine_options,
    llm_folder,
    paths_of,
)
from engine.errors import EngineError
from engine.safe_text import visible

DEFAULT_PORT = 8080
# Two model processes served 2 cores best: 2.3-2.9x the tokens/s of one at 4-64 clients
# (docs/benchmarks.md, "The server under load"); one where there is a single core.
DEFAULT_WORKERS = min(2, os.cpu_count() or 1)


def add_commands(commands) -> None:
    serve = commands.add_parser(
        "serve", parents=[common_options(runs_model=True), collection_option(), engine_options()],
        help="serve the model and the manuals over HTTP (OpenAI-compatible; docs at /docs)")
    serve.add_argument("--host", default="127.0.0.1",
                       help="the address to listen on (default: 127.0.0.1, this machine only; any "
                            "other needs an API key)")
    serve.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"the port (default: {DEFAULT_PORT})")
    serve.add_argument("--model", metavar="NAME", help="an imported model's name (default: the built-in one)")
    serve.add_argument("--llm-workers", type=int, default=DEFAULT_WORKERS, metavar="N",
                       help=f"model processes answering at once (default: {DEFAULT_WORKERS}; each takes the "
                            "model's memory, about 310 MiB for the built-in one); with an engine, "
                            "the requests sent to it at once")
    serve.add_argument("--llm-streams", type=int, default=2, metavar="N",
                       help="requests each model process answers at once, taking turns a token (or a prompt's "
                            "piece) at a time, so that a request starts without waiting for another to end "
                            "(default: 2)")
    serve.add_argument("--threads", type=int, default=None, metavar="N",
                       help="cores the model processes share (default: the machine's physical cores); "
                            "give each of several servers on one machine its part")
    serve.add_argument("--prompt-cache-mib", type=int, default=256, metavar="MIB",
                       help="memory the model processes share to keep recent answers' prompts, so that a "
                            "prompt that begins the same way (a conversation going on, the same question "
                            "again) computes only the rest; answers are the same (default: 256; 0: none)")
    serve.add_argument("--queue-size", type=int, default=64, metavar="N",
                       help="requests that may wait for a model process; more get 429 (default: 64)")
    serve.add_argument("--api-key", metavar="KEY", default=None,
                       help="clients send 'Authorization: Bearer KEY' (default: $OFFLINE_ASSISTANT_API_KEY)")
    serve.add_argument("--cors-origin", metavar="URL", action="append", default=[],
                       help="let web pages from this origin call the server (repeat for more; default: none)")
    serve.add_argument("--max-new-tokens", type=int, default=1024, metavar="N",
                       help="the most tokens one request may ask for (default: 1024)")
    serve.add_argument("--log-level", default="info", choices=("critical", "error", "warning", "info", "debug"),
                       help="uvicorn's log level (default: info)")
    serve.set_defaults(run=_serve)


def server_config(args):
    """The ServerConfig of serve's arguments (EngineError for a bad combination)."""
    from engine.server.config import API_KEY_ENV, ServerConfig

    paths = paths_of(args).ensure()
    url, key, model = engine_of(args, paths)  # --engine-url, the environment, the settings
    return ServerConfig(
        paths, host=args.host, port=args.port, provider=args.provider,
        engine_url=url, engine_key=key, engine_model=model,
        llm_workers=args.llm_workers, llm_streams=args.llm_streams, threads=args.threads,
        queue_size=args.queue_size,
        prompt_cache_mib=args.prompt_cache_mib,
        api_key=args.api_key or os.environ.get(API_KEY_ENV) or None, collection=args.collection,
        max_new_tokens=args.max_new_tokens, cors_origins=tuple(args.cors_origin), model_name=args.model or "")


def _serve(args) -> int:
    import uvicorn

    from engine.server.app import create_app

    config = server_config(args)
    check_port_free(config.host, config.port)  # before the model loads: said plainly, exit 1
    folder = None if config.engine_url else llm_folder(config.paths, args.model)  # an engine needs none
    app = create_app(config, folder)
    engine = f"; generating on the engine at {visible(config.engine_url)}" if config.engine_url else ""
    print(f"Serving on http://{_shown_host(config.host)}:{config.port} (API docs at /docs){engine}; "
          f"Ctrl-C stops.", file=sys.stderr, flush=True)
    uvicorn.run(app, host=config.host, port=config.port, log_level=args.log_level,
                timeout_graceful_shutdown=5)
    return 0


def check_port_free(host: str, port: int) -> None:
    """EngineError when the address cannot be listened on (uvicorn would exit with code 3,
    which is `ask`'s "not covered", after loading the model)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise EngineError(f"Cannot listen on '{visible(host)}': {exc.strerror}. Give an address of this "
                          "machine with --host (127.0.0.1 for this machine only).") from exc
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind(address)
        except OSError as exc:
            raise EngineError(f"Cannot listen on {_shown_host(host)}:{port}: {exc.strerror}. "
                              "Choose another port with --port.") from exc


def _shown_host(host: str) -> str:
    return f"[{visible(host)}]" if ":" in host else visible(host)
