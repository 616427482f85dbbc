"""A server on the tiny models for fast tests of its routes: a data dir whose "default" collection
holds the three tiny manuals (tests/helpers/tiny_collection.py), embedded with the tiny embedder.

    paths = tiny_data_dir(tmp_path, tiny_embedder)
    with tiny_client(paths, tiny_llm_dir, tiny_embedder, api_key="k") as client:
        client.post("/v1/ask", json={...})
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from fastapi.testclient import TestClient

from engine.paths import AppPaths
from engine.server.app import create_app
from engine.server.config import ServerConfig
from tests.helpers.tiny_collection import fill, open_store

LOAD_TIMEOUT_S = 60


def tiny_data_dir(root: Path, embedder) -> AppPaths:
    paths = AppPaths(root).ensure()
    with open_store(paths.collection("default"), embedder) as store:
        fill(store, embedder)
    return paths


@contextlib.contextmanager
def tiny_client(paths: AppPaths, llm_dir: Path, embedder, load: bool = True, make_llm=None,
                **config) -> Iterator[TestClient]:
    """A TestClient on the app; with load=True, once its models are loaded (an LLM process on
    the tiny model); with load=False, never loaded (the routes answer as while loading)."""
    app = create_app(ServerConfig(paths, **config), llm_dir, embedder=embedder, make_llm=make_llm, load=load)
    with TestClient(app) as client:
        if load:
            app.state.server.wait_loaded(LOAD_TIMEOUT_S)
        yield client
