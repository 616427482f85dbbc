"""The inbox's rules without Qt (engine/ingest/inbox.py): a file is ready once it is the same on
two polls in a row; hidden, temporary and unsupported files are never ready. The GUI's watcher
and its thread are tested in tests/gui/controllers/test_gui_inbox.py."""

from __future__ import annotations

import os

from engine.ingest.inbox import InboxState, is_ignored, scan_folder


def test_a_file_is_ready_once_it_is_the_same_on_two_polls(tmp_path):
    manual = tmp_path / "oil.txt"
    manual.write_text("Check the oil", encoding="utf-8")
    state = InboxState(tmp_path)
    assert state.poll() == ([], 1)
    with manual.open("a", encoding="utf-8") as out:
        out.write(" level every week.")  # still being copied
    assert state.poll() == ([], 1)
    assert state.poll() == ([str(manual)], 1)
    assert state.poll() == ([], 1)  # handed on once


def test_a_file_that_comes_back_is_ready_again(tmp_path):
    manual = tmp_path / "oil.txt"
    manual.write_text("Check the oil.", encoding="utf-8")
    state = InboxState(tmp_path)
    state.poll()
    assert state.poll()[0] == [str(manual)]
    data = manual.read_bytes()
    manual.unlink()
    assert state.poll() == ([], 0)
    manual.write_bytes(data)
    state.poll()
    assert state.poll()[0] == [str(manual)]


def test_hidden_temporary_and_unsupported_names_are_not_listed(tmp_path):
    for name in (".oil.txt", "~$oil.docx", "oil.txt.part", "oil.tmp", "oil.pdf.crdownload",
                 "parts.xlsx", "README"):
        (tmp_path / name).write_text("x", encoding="utf-8")
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "oil.txt").write_text("x", encoding="utf-8")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "OIL.TXT").write_text("x", encoding="utf-8")
    assert list(scan_folder(str(tmp_path))) == [os.path.join(str(tmp_path), "sub", "OIL.TXT")]
    assert is_ignored("PUMP.PDF.PART") and is_ignored("~$lock.pdf") and not is_ignored("pump.pdf")


def test_a_missing_folder_counts_minus_one_until_it_is_there(tmp_path):
    state = InboxState(tmp_path / "share")
    assert state.poll() == ([], -1) and state.available is False
    (tmp_path / "share").mkdir()
    assert state.poll() == ([], 0) and state.available is True
