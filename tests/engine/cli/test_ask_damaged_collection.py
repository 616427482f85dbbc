"""`ask` on a collection that damage emptied or that was set aside (issue 14): it said "No manuals
are indexed yet" (or "There is no collection") after the repair or the move; now it says what
happened and what to do, and prints what was repaired as one plain line on stderr."""

from __future__ import annotations

import pytest

from engine.cli import ask as ask_command
from engine.cli.main import main
from engine.errors import CollectionDamagedError
from engine.paths import DB_NAME, AppPaths
from engine.store import health, indexer
from tests.helpers.damaged_collection import damage_collection
from tests.helpers.tiny_collection import fill, open_store

DOOR = {"/manuals/door.md": ["Door code: 7731. Press the key twice."]}
QUESTION = "What is the door code?"


@pytest.fixture
def data(tmp_path, tiny_embedder, tiny_llm_dir, monkeypatch) -> AppPaths:
    """A data folder whose collection holds one manual, and `ask` on the tiny models."""
    paths = AppPaths(tmp_path / "data").ensure()
    with open_store(paths.collection("default"), tiny_embedder) as store:
        fill(store, tiny_embedder, DOOR)
    monkeypatch.setattr(indexer, "default_embedder", lambda _paths: tiny_embedder)
    monkeypatch.setattr(ask_command, "llm_folder", lambda _paths, _name: tiny_llm_dir)
    return paths


def ask(paths: AppPaths, capsys) -> str:
    assert main(["ask", QUESTION, "--data-dir", str(paths.root), "--provider", "cpu"]) == 1
    return capsys.readouterr().err


def test_ask_on_a_collection_whose_only_manual_damage_removed_says_so(data, capsys):
    damage_collection(data.collection("default"))
    first = ask(data, capsys)
    lines = first.splitlines()
    [repaired] = [line for line in lines if "repaired" in line]
    assert repaired.startswith("repaired: the keyword index was damaged") and "door.md" in repaired
    assert lines[-1] == ("error: The collection 'default' has nothing to answer from: the stored text of 1 "
                         "document(s) was damaged and removed (door.md). Index the manuals again to read "
                         "them from their files.")
    assert "No manuals are indexed yet" not in first and len(lines) == 2
    second = ask(data, capsys)  # repaired once: the same advice, nothing more to repair
    assert second.splitlines() == lines[-1:]


def test_ask_after_the_collection_was_set_aside_says_where_each_time(data, capsys):
    (data.collection("default") / DB_NAME).write_bytes(b"")
    first = ask(data, capsys)
    [aside] = health.set_aside_folders(data.collection("default"))
    assert first.count(str(aside)) == 1 and first.startswith("error: ")  # said once, not also by the log
    assert "moved to" in first and "Index the manuals again" in first
    second = ask(data, capsys)
    assert second == (f"error: The collection 'default' was damaged: its files were moved to '{aside}' "
                      "(nothing was deleted). Index the manuals again to rebuild the collection, or "
                      "restore the folder from a backup.\n")


def test_a_new_collection_after_the_damage_says_so_until_a_manual_is_indexed(data, tiny_embedder):
    folder = data.collection("default")
    (folder / DB_NAME).write_bytes(b"")
    with pytest.raises(CollectionDamagedError):
        open_store(folder, tiny_embedder)
    with open_store(folder, tiny_embedder) as store:  # what the window's indexing opens next
        with pytest.raises(CollectionDamagedError, match="was damaged: its files were moved to"):
            store.refuse_if_emptied()
        fill(store, tiny_embedder, DOOR)
        store.refuse_if_emptied()  # a manual indexed again: answers as usual


def test_an_empty_collection_nothing_damaged_is_not_called_damaged(tmp_path, tiny_embedder):
    with open_store(tmp_path / "collections" / "default", tiny_embedder) as store:
        store.refuse_if_emptied()


def test_index_on_a_damaged_collection_prints_what_it_repaired_then_reads_the_manual_again(
        data, capsys, tmp_path):
    damage_collection(data.collection("default"))
    manual = tmp_path / "door.md"
    manual.write_text("Door code: 7731. Press the key twice.\n")
    assert main(["index", str(manual), "--data-dir", str(data.root), "--provider", "cpu"]) == 0
    err = capsys.readouterr().err
    [repaired] = [line for line in err.splitlines() if line.startswith("repaired: ")]
    assert "door.md" in repaired and "Traceback" not in err
    assert "The collection holds 2 documents, 1 chunk." in err  # the damaged one stays, failed
