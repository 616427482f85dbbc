"""What the Models page reads from the engine: the installed language models with their shape,
their measured speed, an import in a child process that can be cancelled, and removal."""

from __future__ import annotations

import os
import shutil
import threading

import pytest

from engine.errors import ModelError
from engine.llm.speed import measure_speed
from engine.models.catalog import MIN_TOKENS, llm_entries, record_speed
from engine.models.prepare import import_model_in_child
from engine.models.registry import BUILTIN_LLM, import_model, remove_model
from engine.paths import AppPaths
from tests.helpers.gguf_factory import write_tiny_gguf


@pytest.fixture
def paths(tmp_path) -> AppPaths:
    return AppPaths(tmp_path / "data").ensure()


def test_the_builtin_and_an_imported_model_are_listed_with_their_shape(paths, tmp_path):
    import_model(write_tiny_gguf(tmp_path / "tiny-chat.Q4_0.gguf", context_length=512), paths)
    builtin, imported = llm_entries(paths)
    assert (builtin.name, builtin.built_in) == (BUILTIN_LLM.name, True)
    assert (builtin.architecture, builtin.quantization, builtin.context) == ("llama", "Q4_1", 8192)
    assert (imported.name, imported.built_in, imported.status) == ("tiny-chat.Q4_0", False, "ready")
    assert (imported.architecture, imported.quantization, imported.context) == ("llama", "Q4_0", 512)
    assert imported.size_bytes > 0
    assert imported.quantization_detail.startswith("Q4_0, ") and "kept exactly" in imported.quantization_detail
    assert imported.tokens_per_s is None  # never estimated: measured by an answer, or not shown


def test_a_speed_is_kept_from_a_long_enough_answer_until_the_model_is_replaced(paths, tmp_path):
    folder = import_model(write_tiny_gguf(tmp_path / "tiny.gguf"), paths)
    assert not record_speed(paths, folder, 50.0, MIN_TOKENS - 1, "cpu")  # too short to say
    assert record_speed(paths, folder, 123.456, MIN_TOKENS, "cpu")
    entry = llm_entries(paths)[-1]
    assert (entry.tokens_per_s, entry.speed_provider) == (123.46, "cpu")
    os.utime(folder / "manifest.json", ns=(1, 1))  # as when it is imported again
    assert llm_entries(paths)[-1].tokens_per_s is None


def test_a_measure_records_the_speed_of_a_model(paths, tiny_llm_dir):
    shutil.copytree(tiny_llm_dir, paths.models / "tiny")
    speed = measure_speed(paths, "tiny", "cpu")
    assert speed is not None and speed > 0
    assert llm_entries(paths)[-1].tokens_per_s == pytest.approx(speed, abs=0.01)
    cancelled = threading.Event()
    cancelled.set()
    assert measure_speed(paths, "tiny", "cpu", cancelled) is None


def test_a_cancelled_import_leaves_nothing_behind(paths, tmp_path):
    cancel = threading.Event()
    seen = []

    def progress(fraction, message):
        seen.append(fraction)
        cancel.set()  # at the first report: the child is reading the file

    gguf = write_tiny_gguf(tmp_path / "tiny.gguf", layers=4)
    assert import_model_in_child(gguf, paths, progress, cancel) is None
    assert seen == [0.0]
    assert list(paths.models.iterdir()) == []


def test_a_file_that_is_no_model_says_so(paths, tmp_path):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"not a gguf file")
    with pytest.raises(ModelError, match="not a readable GGUF"):
        import_model_in_child(bad, paths, lambda f, m: None, threading.Event())


def test_removing_a_model_deletes_it_and_the_builtin_cannot_be_removed(paths, tmp_path):
    import_model(write_tiny_gguf(tmp_path / "tiny.gguf"), paths)
    remove_model(paths, "tiny")
    assert list(paths.models.iterdir()) == []
    with pytest.raises(ModelError, match="built-in"):
        remove_model(paths, BUILTIN_LLM.name)
    with pytest.raises(ModelError, match="No model named"):
        remove_model(paths, "../data")


def test_the_cli_removes_an_imported_model_and_refuses_the_builtin(paths, tiny_llm_dir, capsys):
    from engine.cli.main import main

    shutil.copytree(tiny_llm_dir, paths.models / "tiny")
    assert main(["models", "remove", "tiny", "--data-dir", str(paths.root)]) == 0
    assert "Removed 'tiny'" in capsys.readouterr().out and list(paths.models.iterdir()) == []
    assert main(["models", "remove", BUILTIN_LLM.name, "--data-dir", str(paths.root)]) != 0
    assert "cannot be removed" in capsys.readouterr().err
