"""A full disk gives one clear message naming the folder and leaves no partial file (issue 14:
`ask` died with an ENOSPC traceback while preparing the model; `index` stopped with chained
tracebacks and left a 0-byte .faiss.tmp). The full disk is simulated: the writes raise
OSError(ENOSPC), as a full disk's do."""

from __future__ import annotations

import errno

import numpy as np
import pytest

from engine import atomic_file
from engine.cli.main import main
from engine.errors import DiskFullError, disk_full_as_error
from engine.models import gguf_import, registry
from engine.models.manifest import atomic_folder
from engine.paths import AppPaths
from engine.store import index_store
from engine.store.index_store import IndexStore
from engine.types import Chunk
from tests.helpers.full_disk import FullFile, no_space, opener_full_for
from tests.helpers.gguf_factory import write_tiny_gguf

DIM = 8


def leftovers(folder) -> list[str]:
    """Names under `folder` that a half-done write leaves: temporary files and folders."""
    return sorted(p.name for p in folder.rglob("*") if ".tmp" in p.name or p.name.endswith(".part"))


def test_a_full_disk_or_quota_becomes_one_message_naming_the_folder(tmp_path):
    for code in (errno.ENOSPC, errno.EDQUOT):
        with pytest.raises(DiskFullError) as caught, disk_full_as_error(tmp_path, 2_500_000):
            raise OSError(code, "No space left on device")
        assert str(caught.value) == f"The disk holding {tmp_path} is full: free 3 MB and try again."
        assert isinstance(caught.value, OSError) and caught.value.errno == errno.ENOSPC
    with pytest.raises(PermissionError), disk_full_as_error(tmp_path):
        raise PermissionError(errno.EACCES, "Permission denied")


def test_a_small_file_on_a_full_disk_keeps_its_old_content_and_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "settings.toml"
    atomic_file.write_atomic(target, "old = 1\n")
    real_fdopen = atomic_file.os.fdopen
    monkeypatch.setattr(atomic_file.os, "fdopen", lambda fd, mode: FullFile(real_fdopen(fd, mode)))
    with pytest.raises(DiskFullError, match=f"The disk holding {tmp_path} is full: free 1 MB"):
        atomic_file.write_atomic(target, "new = 2\n")
    assert target.read_text() == "old = 1\n"
    assert leftovers(tmp_path) == []


def test_saving_vectors_on_a_full_disk_names_the_folder_and_leaves_no_faiss_tmp(tmp_path, monkeypatch):
    folder = tmp_path / "collection"
    store = IndexStore.open(folder, embedder_id="test", dimension=DIM)
    vectors = np.eye(DIM, dtype=np.float32)[:2]
    store.add_document("/m.txt", "sha", size=10, mtime=1.0, title="m", page_count=1,
                       chunks=[Chunk(page=1, start=0, end=4, text="pump"),
                               Chunk(page=1, start=5, end=9, text="oil")], embeddings=vectors)
    monkeypatch.setattr(index_store, "open", opener_full_for(".faiss.tmp"), raising=False)
    with pytest.raises(DiskFullError, match=f"The disk holding {folder} is full: free 1 MB and try again"):
        store.flush()
    assert leftovers(folder) == []
    monkeypatch.undo()  # room made: the next flush saves them
    store.close()
    with IndexStore.open(folder, embedder_id="test", dimension=DIM, read_only=True) as again:
        assert again.stats()["vectors"] == 2


def test_a_model_folder_on_a_full_disk_is_removed_and_the_old_one_kept(tmp_path):
    final = tmp_path / "models" / "m"
    final.mkdir(parents=True)
    (final / "old.bin").write_bytes(b"old")
    with pytest.raises(DiskFullError) as caught, atomic_folder(final) as tmp:
        (tmp / "model.onnx.data").write_bytes(b"\0" * 2_200_000)
        no_space()
    assert str(caught.value) == (f"The disk holding {final.parent} is full: free at least 3 MB "
                                 "and try again.")
    assert sorted(p.name for p in final.parent.iterdir()) == ["m"]
    assert (final / "old.bin").read_bytes() == b"old"
    with pytest.raises(DiskFullError, match="free 150 MB and try again"), \
            atomic_folder(final, needed_bytes=150_000_000):
        no_space()


def test_preparing_the_model_on_a_full_disk_says_so_once_without_a_traceback(tmp_path, monkeypatch, capsys):
    """The first `ask` on a collection, or `models prepare`, prepares the built-in model (here
    `models prepare`: `ask` on an empty data folder now stops before it, at "no documents");
    its GGUF is a tiny one, and writing model.onnx hits a full disk half-way."""
    tiny = write_tiny_gguf(tmp_path / "tiny.gguf", weight_type="Q4_1")
    monkeypatch.setattr(registry, "find_package_file", lambda package: tiny)

    def half_written(model, path, **options):
        with open(path, "wb") as out:
            out.write(b"\0" * 1000)
        no_space()

    monkeypatch.setattr(gguf_import.onnx, "save_model", half_written)
    data = tmp_path / "data"
    assert main(["models", "prepare", "--data-dir", str(data)]) == 1
    err = capsys.readouterr().err
    models = AppPaths(data).models
    room = -(-gguf_import.folder_bytes(gguf_import.open_gguf(tiny)) // 1_000_000)  # what the converted folder needs
    assert f"error: The disk holding {models} is full: free {room} MB and try again." in err
    assert "Traceback" not in err and err.count("error:") == 1
    assert leftovers(data) == []


@pytest.mark.slow
def test_index_on_a_full_disk_says_so_once_and_leaves_no_faiss_tmp(tmp_path, monkeypatch, capsys):
    """The real CLI with the built-in embedder; saving the vectors hits the full disk."""
    manual = tmp_path / "pump.txt"
    manual.write_text("Prime the pump with water before the first start.\n" * 20, encoding="utf-8")
    data = tmp_path / "data"
    monkeypatch.setattr(index_store, "open", opener_full_for(".faiss.tmp"), raising=False)
    assert main(["index", str(manual), "--data-dir", str(data), "--provider", "cpu"]) == 1
    err = capsys.readouterr().err
    folder = AppPaths(data).collections / "default"
    assert f"error: The disk holding {folder} is full: free 1 MB and try again." in err
    assert "Traceback" not in err and err.count("error:") == 1
    assert leftovers(data) == []
