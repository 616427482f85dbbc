"""The `serve` command: the HTTP server (engine.server) on uvicorn, until Ctrl-C or SIGTERM."""

from __future__ import annotations

import os
import sys

from engine.cli.common import collection_option, common_options, llm_folder, paths_of
from engine.safe_text import visible

DEFAULT_PORT = 8080


def add_commands(commands) -> None:
    serve = commands.add_parser(
        "serve", parents=[common_options(runs_model=True), collection_option()],
        help="serve the model and the manuals over HTTP (OpenAI-compatible; docs at /docs)")
    serve.add_argument("--host", default="127.0.0.1",
                       help="the address to listen on (default: 127.0.0.1, this machine only; any "
                            "other needs an API key)")
    serve.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"the port (default: {DEFAULT_PORT})")
    serve.add_argument("--model", metavar="NAME", help="an imported model's name (default: the built-in one)")
    serve.add_argument("--llm-workers", type=int, default=1, metavar="N",
                       help="model processes answering at once (default: 1; each takes the model's memory)")
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

    return ServerConfig(
        paths_of(args).ensure(), host=args.host, port=args.port, provider=args.provider,
        llm_workers=args.llm_workers, queue_size=args.queue_size,
        api_key=args.api_key or os.environ.get(API_KEY_ENV) or None, collection=args.collection,
        max_new_tokens=args.max_new_tokens, cors_origins=tuple(args.cors_origin), model_name=args.model or "")


def _serve(args) -> int:
    import uvicorn

    from engine.server.app import create_app

    config = server_config(args)
    folder = llm_folder(config.paths, args.model)
    app = create_app(config, folder)
    print(f"Serving on http://{_shown_host(config.host)}:{config.port} (API docs at /docs); "
          f"Ctrl-C stops.", file=sys.stderr, flush=True)
    uvicorn.run(app, host=config.host, port=config.port, log_level=args.log_level,
                timeout_graceful_shutdown=5)
    return 0


def _shown_host(host: str) -> str:
    return f"[{visible(host)}]" if ":" in host else visible(host)
