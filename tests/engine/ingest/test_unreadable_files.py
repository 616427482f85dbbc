"""A file that cannot be read is one failed document with its reason, and the run goes on; a
folder that cannot be read is named (issue 14: one unreadable file aborted a whole `index` run
with a traceback, indexing 0 of 2 files; an unreadable subfolder gave "Nothing to index").

Tests may run as root, whom chmod 000 does not stop: those with a real chmod skip then, and the
others refuse the reads by monkeypatching os.open, open and os.scandir for the locked paths."""

from __future__ import annotations

import builtins
import errno
import logging
import os
from pathlib import Path

import pytest

from engine.cli.common import SOME_FAILED_EXIT
from engine.cli.main import main
from engine.ingest.discover import discover, find_documents, normal_path
from engine.ingest.parse_pool import ParsePool, readable_sha256
from engine.paths import AppPaths
from engine.store.indexer import open_collection

AS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
needs_permissions = pytest.mark.skipif(AS_ROOT or os.name == "nt",
                                       reason="chmod 000 does not stop root (nor apply on Windows)")


def denied(path) -> PermissionError:
    return PermissionError(errno.EACCES, "Permission denied", str(path))


@pytest.fixture
def lock(monkeypatch):
    """lock(path): reading that file or listing that folder is refused, as chmod 000 does."""
    locked: set[str] = set()
    real_open, real_os_open, real_scandir = builtins.open, os.open, os.scandir

    def guarded(real):
        def call(path, *args, **kwargs):
            if isinstance(path, (str, os.PathLike)) and normal_path(path) in locked:
                raise denied(path)
            return real(path, *args, **kwargs)
        return call

    monkeypatch.setattr(builtins, "open", guarded(real_open))
    monkeypatch.setattr(os, "open", guarded(real_os_open))
    monkeypatch.setattr(os, "scandir", guarded(real_scandir))
    return lambda path: locked.add(normal_path(path))


@pytest.fixture
def docs(tmp_path) -> Path:
    folder = tmp_path / "docs"
    (folder / "locked").mkdir(parents=True)
    (folder / "locked" / "hidden.txt").write_text("Inside the locked folder.\n", encoding="utf-8")
    (folder / "pump.txt").write_text("Prime the pump with water before the first start.\n" * 20,
                                     encoding="utf-8")
    (folder / "secret.txt").write_text("Nobody may read this file.\n" * 20, encoding="utf-8")
    return folder


def test_an_unreadable_subfolder_is_named_and_the_rest_is_found(docs, lock, caplog):
    lock(docs / "locked")
    found = find_documents([docs])
    assert found.files == (normal_path(docs / "pump.txt"), normal_path(docs / "secret.txt"))
    assert found.unreadable == ((str(docs / "locked"), "permission denied"),)
    with caplog.at_level(logging.WARNING, logger="engine.ingest.discover"):
        assert [p.name for p in discover([docs])] == ["pump.txt", "secret.txt"]
    assert [r.getMessage() for r in caplog.records] == [
        f"could not read folder {docs / 'locked'}: permission denied"]


def test_an_unreadable_folder_given_is_unreadable_not_empty(docs, lock):
    lock(docs / "locked")
    found = find_documents([docs / "locked"])
    assert (found.files, found.empty) == ((), ())
    assert found.unreadable == ((str(docs / "locked"), "permission denied"),)


def test_an_unreadable_file_is_one_failed_document_with_its_reason(docs, lock):
    lock(docs / "secret.txt")
    assert readable_sha256(docs / "secret.txt") == ""
    with ParsePool(time_limit_s=60) as pool:
        results = dict(pool.imap([docs / "secret.txt", docs / "pump.txt"]))
    error = results[docs / "secret.txt"]
    assert error.kind == "unreadable"
    assert f"permission denied: {docs / 'secret.txt'}" in str(error)
    assert results[docs / "pump.txt"].pages  # the next one is read as usual


@needs_permissions
def test_chmod_000_file_and_folder(docs):
    os.chmod(docs / "secret.txt", 0)
    os.chmod(docs / "locked", 0)
    try:
        found = find_documents([docs])
        assert found.unreadable == ((str(docs / "locked"), "permission denied"),)
        with ParsePool(time_limit_s=60) as pool:
            error = dict(pool.imap([docs / "secret.txt"]))[docs / "secret.txt"]
        assert f"permission denied: {docs / 'secret.txt'}" in str(error)
    finally:
        os.chmod(docs / "locked", 0o755)
        os.chmod(docs / "secret.txt", 0o644)


@pytest.mark.slow
def test_index_goes_on_past_an_unreadable_file_and_names_an_unreadable_folder(docs, tmp_path, lock, capsys):
    """The real CLI with the built-in embedder: 1 of 2 files indexed, the other failed with
    its reason, the locked folder named on stderr; the exit code says some failed, so a script
    that prepares manuals sees it."""
    lock(docs / "secret.txt")
    lock(docs / "locked")
    data = tmp_path / "data"
    assert main(["index", str(docs), "--data-dir", str(data), "--provider", "cpu"]) == SOME_FAILED_EXIT
    err = capsys.readouterr().err
    assert f"could not read {docs / 'locked'}: permission denied" in err
    assert f"failed: 'secret.txt' could not be opened (permission denied: {docs / 'secret.txt'})" in err
    assert "Traceback" not in err and "Indexed 1 document, " in err and "; 1 failed." in err
    with open_collection(AppPaths(data), read_only=True) as store:
        statuses = {Path(d.path).name: d.status for d in store.list_documents()}
    assert statuses == {"pump.txt": "ready", "secret.txt": "failed"}
