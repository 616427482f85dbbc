"""What a server is started with: where, how many LLM processes, and the limits it keeps."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from pathlib import Path

from engine.errors import EngineError
from engine.llm.remote import engine_base
from engine.paths import DEFAULT_COLLECTION, AppPaths

API_KEY_ENV = "OFFLINE_ASSISTANT_API_KEY"


@dataclass(frozen=True)
class ServerConfig:
    paths: AppPaths
    host: str = "127.0.0.1"
    port: int = 8080
    llm_folder: Path | None = None  # None: the settings' model, else the built-in one
    model_name: str = ""  # what /v1/models calls it; "" names it after its folder
    provider: str = "auto"
    # a remote OpenAI-compatible engine generates instead of local LLM processes (None: local);
    # retrieval, the gate and the embedder stay here
    engine_url: str | None = None
    engine_key: str | None = field(default=None, repr=False)  # never in a log
    engine_model: str | None = None  # the engine's model; None: the first one it lists
    llm_workers: int = 1  # LLM child processes (or requests at once on the engine)
    llm_streams: int = 2  # requests each LLM process answers at once, taking turns a token or prompt piece
    threads: int | None = None  # cores the LLM processes share; None: the machine's physical cores
    prompt_cache_mib: int = 256  # recent greedy answers' KV caches the LLM processes keep, shared out
    queue_size: int = 64  # requests that may wait for a free LLM process; more get 429
    queue_timeout_s: float = 300.0  # a request that waited this long gets 503
    api_key: str | None = None
    collection: str = DEFAULT_COLLECTION  # /v1/ask's and /v1/documents' default
    max_new_tokens: int = 1024  # the most a request may ask for; more is cut to this
    max_prompt_chars: int = 32_000  # a prompt (or a chat's messages together) longer gets 413
    max_body_bytes: int = 1_000_000  # a request body larger gets 413
    max_embedding_inputs: int = 256  # texts in one /v1/embeddings request
    cors_origins: tuple[str, ...] = ()  # none: CORS is off
    use_reranker: bool = True
    extra: dict = field(default_factory=dict)  # room for tests: never read by the routes

    def __post_init__(self):
        if self.llm_workers < 1:
            raise EngineError(f"--llm-workers must be 1 or more, not {self.llm_workers}.")
        if self.llm_streams < 1:
            raise EngineError(f"--llm-streams must be 1 or more, not {self.llm_streams}.")
        if self.threads is not None and self.threads < 1:
            raise EngineError(f"--threads must be 1 or more, not {self.threads}.")
        if self.prompt_cache_mib < 0:
            raise EngineError(f"--prompt-cache-mib must be 0 or more, not {self.prompt_cache_mib}.")
        if self.queue_size < 0:
            raise EngineError(f"The queue size must be 0 or more, not {self.queue_size}.")
        if self.engine_url:
            engine_base(self.engine_url)  # a bad address is said before anything loads
        if not is_loopback(self.host) and not self.api_key:
            raise EngineError(
                f"Refusing to serve on {self.host} without an API key: anyone on the network could "
                f"use it. Give --api-key KEY (or set {API_KEY_ENV}), or serve on 127.0.0.1.")


def is_loopback(host: str) -> bool:
    if host in ("localhost", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything
