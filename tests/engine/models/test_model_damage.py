"""A same-size change to a prepared model's files (issue 14): `models list` says "ready" from
the sizes alone, `models list --verify` checks the manifest's SHA-256s and says "invalid", and
`models prepare` checks them always and prepares the model again, which repairs it. The tiny
GGUF stands in for the built-in one (the conversion is the same, in a second)."""

from __future__ import annotations

import pytest

from engine.cli.main import main
from engine.models import registry
from engine.models.manifest import verify_manifest
from engine.models.registry import BUILTIN_EMBEDDER, BUILTIN_LLM, list_models, prepare_builtin_llm
from engine.paths import AppPaths
from tests.helpers.gguf_factory import write_tiny_gguf


@pytest.fixture
def prepared(tmp_path, monkeypatch):
    gguf = write_tiny_gguf(tmp_path / "tiny.gguf", context_length=2048)
    real = registry.find_package_file
    monkeypatch.setattr(registry, "find_package_file",
                        lambda package: gguf if package == BUILTIN_LLM.files[0] else real(package))
    paths = AppPaths(tmp_path / "data").ensure()
    folder = prepare_builtin_llm(paths)
    assert verify_manifest(folder, hashes=True)
    return paths, folder


def _flip_one_byte(path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x20  # same size: only a hash can tell
    path.write_bytes(bytes(data))


def _status(paths, verify: bool) -> str:
    return {i.name: i.status for i in list_models(paths, "cpu", verify=verify)}[BUILTIN_LLM.name]


@pytest.mark.parametrize("name", ["genai_config.json", "model.onnx"])
def test_a_same_size_change_is_found_when_verified_and_prepare_repairs_it(prepared, name, capsys):
    paths, folder = prepared
    damaged = folder / name
    _flip_one_byte(damaged, damaged.stat().st_size // 2)
    assert _status(paths, verify=False) == "ready"  # the quick check: sizes only
    assert _status(paths, verify=True) == "invalid"

    assert main(["models", "list", "--verify", "--data-dir", str(paths.root)]) == 0
    listed = capsys.readouterr().out
    line = next(row for row in listed.splitlines() if row.startswith(BUILTIN_LLM.name))
    assert "invalid" in line and " ready " not in line

    assert main(["models", "prepare", "--data-dir", str(paths.root)]) == 0
    said = capsys.readouterr().out
    assert f"{BUILTIN_LLM.name}: ready" in said and "prepared again" in said
    assert f"{BUILTIN_EMBEDDER.name}: ready" in said
    assert verify_manifest(folder, hashes=True) and _status(paths, verify=True) == "ready"


def test_prepare_leaves_a_sound_folder_alone(prepared, capsys):
    paths, folder = prepared
    before = (folder / "model.onnx").stat().st_mtime_ns
    assert main(["models", "prepare", "--data-dir", str(paths.root)]) == 0
    assert "prepared again" not in capsys.readouterr().out
    assert (folder / "model.onnx").stat().st_mtime_ns == before


def test_the_embedder_package_files_match_their_record():
    assert registry.package_file_mismatch(BUILTIN_EMBEDDER) is None


def test_a_changed_embedder_package_file_is_named_with_how_to_reinstall(monkeypatch):
    monkeypatch.setattr(registry, "sha256_file", lambda path: "00" * 32)  # as if its bytes changed
    problem = registry.package_file_mismatch(BUILTIN_EMBEDDER)
    assert problem and "model.onnx has been changed" in problem and "--force-reinstall" in problem
