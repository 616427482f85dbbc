"""Crash-loop detection: 5 crashes within 10 minutes start the app in safe mode, once."""

from __future__ import annotations

import json

import pytest

from engine.kiosk.crash_loop import (
    ERROR_CHARS,
    HISTORY,
    begin_start,
    mark_clean_exit,
    record_error,
)
from engine.paths import AppPaths
from tests.helpers.fake_clock import Clock


@pytest.fixture
def path(tmp_path):
    return AppPaths(tmp_path).starts_file


def crash(path, clock, times: int, every_s: float = 60.0) -> list:
    """`times` starts that never exit cleanly, `every_s` apart; their StartInfos."""
    infos = []
    for _ in range(times):
        infos.append(begin_start(path, clock))
        clock.now += every_s
    return infos


def test_the_file_lives_in_the_logs_folder(tmp_path):
    assert AppPaths(tmp_path).starts_file == tmp_path / "logs" / "starts.json"


def test_the_first_start_is_normal_and_creates_the_file(path):
    info = begin_start(path, Clock())
    assert not info.safe_mode and info.crashes == 0 and info.last_error is None
    assert len(json.loads(path.read_text())["starts"]) == 1


def test_five_crashes_in_ten_minutes_start_in_safe_mode(path):
    clock = Clock()
    infos = crash(path, clock, 5, every_s=100)
    assert [i.safe_mode for i in infos] == [False] * 5
    assert [i.crashes for i in infos] == [0, 1, 2, 3, 4]
    info = begin_start(path, clock)  # 500 s after the first crashed start
    assert info.safe_mode and info.crashes == 5


def test_five_crashes_spread_over_thirty_minutes_do_not(path):
    clock = Clock()
    crash(path, clock, 5, every_s=450)
    info = begin_start(path, clock)
    assert not info.safe_mode and info.crashes == 5


def test_a_loop_that_ended_long_ago_does_not(path):
    clock = Clock()
    crash(path, clock, 5, every_s=10)
    clock.now += 3600  # systemd gave up; someone restarts it an hour later
    assert not begin_start(path, clock).safe_mode


@pytest.mark.parametrize("crashes,window_s,safe", [(2, 300, True), (2, 200, False), (3, 300, False)])
def test_the_numbers_are_parameters(path, crashes, window_s, safe):
    clock = Clock()
    crash(path, clock, 2, every_s=100)  # the second start 200 s ago
    assert begin_start(path, clock, crashes=crashes, window_s=window_s).safe_mode is safe


def test_a_clean_exit_breaks_the_chain(path):
    clock = Clock()
    crash(path, clock, 3, every_s=10)
    info = begin_start(path, clock)
    mark_clean_exit(path, info.start_id)
    crash(path, clock, 4, every_s=10)
    info = begin_start(path, clock)
    assert not info.safe_mode and info.crashes == 4


def test_a_safe_mode_run_that_exits_cleanly_makes_the_next_start_normal(path):
    clock = Clock()
    crash(path, clock, 5, every_s=10)
    safe = begin_start(path, clock)
    assert safe.safe_mode
    clock.now += 5
    mark_clean_exit(path, safe.start_id)
    assert not begin_start(path, clock).safe_mode


def test_a_safe_mode_run_that_crashes_keeps_safe_mode_while_the_loop_is_recent(path):
    clock = Clock()
    crash(path, clock, 5, every_s=10)
    assert begin_start(path, clock).safe_mode
    clock.now += 10
    assert begin_start(path, clock).safe_mode
    clock.now += 600
    assert not begin_start(path, clock).safe_mode


def test_mark_clean_exit_without_an_id_marks_the_latest_start(path):
    clock = Clock()
    crash(path, clock, 4, every_s=10)
    mark_clean_exit(path)
    starts = json.loads(path.read_text())["starts"]
    assert [s["clean"] for s in starts] == [False, False, False, True]


def test_the_last_error_is_kept_truncated_to_its_end(path):
    clock = Clock()
    begin_start(path, clock)
    text = "Traceback ...\n" + "x" * 10_000 + "\nRuntimeError: the model file is gone"
    record_error(path, text, clock)
    info = begin_start(path, clock)
    assert len(info.last_error) == ERROR_CHARS
    assert info.last_error.endswith("RuntimeError: the model file is gone")
    assert info.last_error_at == clock.now
    assert info.crashes == 1  # recording an error is not a clean exit


def test_record_error_never_raises(tmp_path):
    blocker = tmp_path / "logs"
    blocker.write_text("a file where the folder should be")
    record_error(blocker / "starts.json", "boom")  # logged, not raised


def test_history_is_bounded(path):
    clock = Clock()
    crash(path, clock, HISTORY + 20, every_s=1000)
    assert len(json.loads(path.read_text())["starts"]) == HISTORY


@pytest.mark.parametrize("content", ["", "{not json", "[]", '{"starts": [{"at": "x"}]}', '{"starts": 5}'])
def test_a_damaged_file_means_a_normal_start_and_is_rewritten(path, content):
    path.parent.mkdir(parents=True)
    path.write_text(content)
    info = begin_start(path, Clock())
    assert not info.safe_mode and info.crashes == 0
    assert len(json.loads(path.read_text())["starts"]) == 1


def test_an_unwritable_data_dir_still_starts(tmp_path):
    blocker = tmp_path / "logs"
    blocker.write_text("a file where the folder should be")
    info = begin_start(blocker / "starts.json", Clock())
    assert not info.safe_mode
    mark_clean_exit(blocker / "starts.json", info.start_id)
