"""A server follows a bundle switch as the window does (engine/answer/session.py): once a new
version of its collection is installed, the next question reads it, with no restart. Real parts:
manuals stored with the tiny embedder, bundles built, signed and installed by engine.fleet, the
server's routes with an LLM process on the tiny model."""

from __future__ import annotations

from pathlib import Path

from engine.fleet import bundle as fleet
from engine.paths import AppPaths
from tests.helpers.tiny_collection import add_file, open_store
from tests.helpers.tiny_server import tiny_client


def add_manual(paths: AppPaths, embedder, file: Path, text: str) -> None:
    with open_store(paths.collection("default"), embedder) as store:
        add_file(store, embedder, file, text)


def install(admin: AppPaths, kiosk: AppPaths, key, tmp_path: Path, version: int, embedder) -> None:
    file = tmp_path / f"v{version}.tar"
    fleet.build_bundle(admin, "default", key, file, version=version)
    fleet.install_bundle(kiosk, file, [fleet.public_key_text(key)], expected_embedder=embedder.model_id)


def test_the_next_question_after_an_install_reads_the_new_version(tmp_path, tiny_llm_dir, tiny_embedder):
    admin, kiosk = AppPaths(tmp_path / "admin").ensure(), AppPaths(tmp_path / "kiosk").ensure()
    key = fleet.generate_keys(tmp_path / "key.pem")
    (tmp_path / "files").mkdir()
    add_manual(admin, tiny_embedder, tmp_path / "files" / "pump.md", "Prime pump with water before start.")
    install(admin, kiosk, key, tmp_path, 1, tiny_embedder)
    question = {"question": "How do I close the strainer valve?"}
    with tiny_client(kiosk, tiny_llm_dir, tiny_embedder) as client:
        before = client.post("/v1/ask", json=question).json()
        add_manual(admin, tiny_embedder, tmp_path / "files" / "valve.md",
                   "Close strainer valve before removing basket.")
        install(admin, kiosk, key, tmp_path, 2, tiny_embedder)
        after = client.post("/v1/ask", json=question).json()
    v1, v2 = str(kiosk.fleet_version("default", 1)), str(kiosk.fleet_version("default", 2))
    assert before["passages"] and all(p["path"].startswith(v1) for p in before["passages"])
    assert after["passages"] and all(p["path"].startswith(v2) for p in after["passages"])
    assert Path(after["passages"][0]["path"]).name == "valve.md"
