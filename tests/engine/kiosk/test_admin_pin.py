"""The admin PIN: scrypt hash on disk, 5 wrong tries lock it, lockouts double and survive restarts."""

from __future__ import annotations

import base64
import json
import stat

import pytest

from engine.errors import EngineError
from engine.kiosk.admin_pin import (
    MAX_LOCK_S,
    PinGate,
    PinPolicyError,
    PinResult,
    clear_pin,
    has_pin,
    set_pin,
)
from engine.paths import AppPaths
from tests.helpers.fake_clock import Clock

PIN = "482913"


@pytest.fixture
def path(tmp_path):
    path = AppPaths(tmp_path / "data").pin_file
    set_pin(path, PIN)
    return path


def fail(gate: PinGate, times: int) -> list[PinResult]:
    return [gate.check("0000") for _ in range(times)]


def test_the_file_lives_in_the_data_dir(tmp_path):
    assert AppPaths(tmp_path).pin_file == tmp_path / "admin.json"


def test_the_right_pin_is_accepted(path):
    assert PinGate(path, Clock()).check(PIN) == PinResult("ok")
    assert PinGate(path, Clock()).check(PIN).ok


def test_a_wrong_pin_says_how_many_tries_are_left(path):
    gate = PinGate(path, Clock())
    assert [r.tries_left for r in fail(gate, 4)] == [4, 3, 2, 1]
    assert gate.check(PIN[:-1]).status == "locked"  # the fifth wrong try


def test_five_wrong_tries_lock_for_a_minute_and_even_the_right_pin_is_refused(path):
    clock = Clock()
    gate = PinGate(path, clock)
    assert fail(gate, 5)[-1] == PinResult("locked", locked_s=60.0)
    clock.now += 59
    assert gate.check(PIN) == PinResult("locked", locked_s=1.0)
    assert gate.state() == PinResult("locked", locked_s=1.0)  # refusing did not extend the lock
    clock.now += 1
    assert gate.state() == PinResult("ready", tries_left=5)
    assert gate.check(PIN).ok


def test_a_lockout_survives_a_restart(path):
    clock = Clock()
    fail(PinGate(path, clock), 5)
    clock.now += 30
    assert PinGate(path, clock).check(PIN) == PinResult("locked", locked_s=30.0)


def test_failures_count_across_gates_on_the_same_file(path):
    clock = Clock()
    fail(PinGate(path, clock), 3)
    assert PinGate(path, clock).check("1111") == PinResult("wrong", tries_left=1)


def test_each_further_lockout_doubles_up_to_fifteen_minutes(path):
    clock = Clock()
    gate = PinGate(path, clock)
    locks = []
    for _ in range(6):
        locks.append(fail(gate, 5)[-1].locked_s)
        clock.now += locks[-1]
    assert locks == [60, 120, 240, 480, 900, 900]
    assert MAX_LOCK_S == 900


def test_the_right_pin_resets_the_counters(path):
    clock = Clock()
    gate = PinGate(path, clock)
    fail(gate, 5)
    clock.now += 60
    fail(gate, 4)
    assert gate.check(PIN).ok
    assert gate.check("0000") == PinResult("wrong", tries_left=4)
    fail(gate, 4)
    assert gate.state().locked_s == 60  # the first lockout again, not the doubled one


def test_a_clock_set_back_never_locks_longer_than_the_cap(path):
    clock = Clock()
    gate = PinGate(path, clock)
    fail(gate, 5)
    clock.now -= 86_400
    assert gate.state().locked_s == MAX_LOCK_S
    clock.now += MAX_LOCK_S
    assert gate.check(PIN).ok


def test_a_missing_file_refuses_with_a_reason(tmp_path):
    missing = tmp_path / "admin.json"
    assert not has_pin(missing)
    result = PinGate(missing, Clock()).check(PIN)
    assert result.status == "unavailable" and not result.ok
    assert "No admin PIN is set" in result.reason and "admin set-pin" in result.reason


@pytest.mark.parametrize("damage", [
    lambda text: text[: len(text) // 2],
    lambda text: "",
    lambda text: "[1, 2]",
    lambda text: text.replace('"hash": "', '"hash": "!!'),
    lambda text: json.dumps({**json.loads(text), "n": 2**30}),
    lambda text: json.dumps({**json.loads(text), "failures": "many"}),
    lambda text: json.dumps({**json.loads(text), "locked_until": float("nan")}),
], ids=["cut", "empty", "list", "bad-base64", "huge-n", "bad-counter", "nan-lock"])
def test_a_damaged_file_refuses_with_a_reason_and_never_crashes(path, damage):
    path.write_text(damage(path.read_text(encoding="utf-8")), encoding="utf-8")
    assert not has_pin(path)
    result = PinGate(path, Clock()).check(PIN)
    assert result.status == "unavailable"
    assert str(path) in result.reason and "damaged" in result.reason
    set_pin(path, PIN)  # the way out the reason names
    assert PinGate(path, Clock()).check(PIN).ok


def test_the_file_is_private_and_holds_no_pin(path):
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    data = path.read_bytes()
    assert PIN.encode() not in data
    record = json.loads(data)
    assert record["kdf"] == "scrypt" and (record["n"], record["r"], record["p"]) == (2**14, 8, 1)
    assert len(base64.b64decode(record["salt"])) == 16
    assert len(base64.b64decode(record["hash"])) == 32
    fail(PinGate(path, Clock()), 5)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # rewritten with the lockout, still private
    assert json.loads(path.read_bytes())["locked_until"] > 0
    assert [p.name for p in path.parent.iterdir()] == ["admin.json"]  # no temp file left


def test_the_same_pin_twice_gets_a_different_salt_and_hash(path):
    first = json.loads(path.read_text())
    set_pin(path, PIN)
    second = json.loads(path.read_text())
    assert first["salt"] != second["salt"] and first["hash"] != second["hash"]


def test_setting_a_pin_lifts_a_lockout(path):
    gate = PinGate(path, Clock())
    fail(gate, 5)
    set_pin(path, "1234")
    assert gate.check("1234").ok and not gate.check(PIN).ok


@pytest.mark.parametrize("pin", ["123", "1234567890123", "12a4", " 1234", "1234\n", "١٢٣٤", "", None])
def test_a_pin_must_be_4_to_12_digits(tmp_path, pin):
    with pytest.raises(PinPolicyError, match="4 to 12 digits") as raised:
        set_pin(tmp_path / "admin.json", pin)
    assert isinstance(raised.value, ValueError) and isinstance(raised.value, EngineError)
    assert not (tmp_path / "admin.json").exists()


@pytest.mark.parametrize("pin", ["1234", "000000000000"])
def test_4_and_12_digits_are_allowed(tmp_path, pin):
    set_pin(tmp_path / "admin.json", pin)
    assert PinGate(tmp_path / "admin.json", Clock()).check(pin).ok


def test_clear_pin_removes_it(path):
    assert clear_pin(path) and not has_pin(path)
    assert not clear_pin(path)


def test_a_lockout_holds_in_memory_when_the_disk_refuses_it(path, monkeypatch):
    import engine.kiosk.admin_pin

    def refuse(*args, **kwargs):
        raise OSError(30, "Read-only file system")

    before = path.read_bytes()
    monkeypatch.setattr(engine.kiosk.admin_pin, "write_json_atomic", refuse)
    gate = PinGate(path, Clock())
    fail(gate, 5)
    assert path.read_bytes() == before
    assert gate.check(PIN).status == "locked"
