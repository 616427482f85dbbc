"""Preparing a model on a full disk (issue 14): the message says how much room the folder needs,
and the source stamp leaves no .part file behind. The full disk is simulated: the writes raise
OSError(ENOSPC), as a full disk's do."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from engine import atomic_file
from engine.errors import DiskFullError
from engine.models import gguf_import, registry
from engine.paths import AppPaths
from tests.helpers.full_disk import FullFile, no_space
from tests.helpers.gguf_factory import write_tiny_gguf


def test_a_gguf_converted_on_a_full_disk_asks_for_the_room_its_folder_needs(tmp_path, monkeypatch):
    tiny = write_tiny_gguf(tmp_path / "tiny.gguf", weight_type="Q4_1")
    monkeypatch.setattr(gguf_import.onnx, "save_model", lambda *args, **kwargs: no_space())
    out = tmp_path / "models" / "tiny"
    with pytest.raises(DiskFullError) as caught:
        gguf_import.import_gguf(tiny, out)
    megabytes = -(-gguf_import.folder_bytes(gguf_import.open_gguf(tiny)) // 1_000_000)
    assert str(caught.value) == f"The disk holding {out.parent} is full: free {megabytes} MB and try again."
    assert sorted(p.name for p in out.parent.iterdir()) == []  # no temporary folder left


@pytest.mark.parametrize("weight_type", ["Q4_1", "Q8_0", "F16"])
def test_the_folder_estimate_covers_a_tiny_model(tmp_path, weight_type):
    """Tiny models are mostly alignment and tokenizer: the parts besides the weights count."""
    gguf = write_tiny_gguf(tmp_path / "tiny.gguf", weight_type=weight_type)
    out = gguf_import.import_gguf(gguf, tmp_path / "model")
    folder = sum(p.stat().st_size for p in out.iterdir() if p.is_file())
    assert folder <= gguf_import.folder_bytes(gguf_import.open_gguf(gguf)) <= 2 * folder


@pytest.mark.slow
def test_the_folder_estimate_covers_the_built_in_model(builtin_llm_dir):
    gguf = registry.find_package_file(registry.BUILTIN_LLM.files[0])
    folder = sum(p.stat().st_size for p in builtin_llm_dir.iterdir() if p.is_file())
    assert folder <= gguf_import.folder_bytes(gguf_import.open_gguf(gguf)) <= 1.1 * folder


def test_a_source_stamp_on_a_full_disk_leaves_no_part_file_and_the_model_stays_ready(tmp_path, monkeypatch,
                                                                                    caplog):
    paths = AppPaths(tmp_path).ensure()
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF" + b"\0" * 100)
    real_fdopen = atomic_file.os.fdopen
    monkeypatch.setattr(atomic_file.os, "fdopen", lambda fd, mode: FullFile(real_fdopen(fd, mode)))
    monkeypatch.setattr(Path, "write_text", lambda self, *args, **kwargs: (self.touch(), no_space()))
    with caplog.at_level(logging.WARNING, logger=registry.__name__):
        registry._write_stamp(paths, gguf, "abc")
    assert [p.name for p in paths.models.iterdir()] == []
    assert f"The disk holding {paths.models} is full" in caplog.text
    monkeypatch.undo()
    registry._write_stamp(paths, gguf, "abc")
    assert registry._read_stamp(paths)["sha256"] == "abc"
