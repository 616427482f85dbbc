"""offline-assistant-cli admin: set-pin (hidden prompt or stdin), clear-pin, audit --tail."""

from __future__ import annotations

import io
import stat

import pytest

from engine.cli.main import main
from engine.kiosk.admin_pin import PinGate, has_pin
from engine.kiosk.audit import AuditEntry, AuditLog

PIN = "2468"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def typed(monkeypatch):
    """The answers to getpass prompts, in order; stdin is a terminal."""
    answers: list[str] = []
    monkeypatch.setattr("sys.stdin", Terminal())
    monkeypatch.setattr("getpass.getpass", lambda prompt="": answers.pop(0))
    return answers


def test_set_pin_from_a_pipe_reads_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO(PIN + "\n" + "ignored\n"))
    assert main(["admin", "set-pin", "--data-dir", str(tmp_path)]) == 0
    path = tmp_path / "admin.json"
    assert str(path) in capsys.readouterr().out
    assert PinGate(path).check(PIN).ok
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and PIN.encode() not in path.read_bytes()


def test_set_pin_at_a_terminal_asks_twice(tmp_path, typed):
    typed += [PIN, PIN]
    assert main(["admin", "set-pin", "--data-dir", str(tmp_path)]) == 0
    assert PinGate(tmp_path / "admin.json").check(PIN).ok and typed == []


def test_two_different_pins_change_nothing(tmp_path, typed, capsys):
    typed += [PIN, "1357"]
    assert main(["admin", "set-pin", "--data-dir", str(tmp_path)]) == 1
    assert "differ" in capsys.readouterr().err and not has_pin(tmp_path / "admin.json")


@pytest.mark.parametrize("pin", ["12", "12ab", ""])
def test_a_pin_against_the_policy_is_refused(tmp_path, monkeypatch, capsys, pin):
    monkeypatch.setattr("sys.stdin", io.StringIO(pin + "\n"))
    assert main(["admin", "set-pin", "--data-dir", str(tmp_path)]) == 1
    assert "4 to 12 digits" in capsys.readouterr().err and not has_pin(tmp_path / "admin.json")


def test_a_bad_pin_at_a_terminal_is_refused_before_asking_again(tmp_path, typed, capsys):
    typed += ["12"]
    assert main(["admin", "set-pin", "--data-dir", str(tmp_path)]) == 1
    assert "4 to 12 digits" in capsys.readouterr().err


def test_clear_pin(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO(PIN))
    main(["admin", "set-pin", "--data-dir", str(tmp_path)])
    assert main(["admin", "clear-pin", "--data-dir", str(tmp_path)]) == 0
    assert not has_pin(tmp_path / "admin.json") and "removed" in capsys.readouterr().out
    assert main(["admin", "clear-pin", "--data-dir", str(tmp_path)]) == 0
    assert "No admin PIN was set" in capsys.readouterr().out


def test_audit_prints_the_last_records(tmp_path, capsys):
    log = AuditLog(tmp_path / "audit")
    entries = [AuditEntry("2025-03-01T12:00:00.000Z", f"question {n}", True) for n in range(30)]
    for entry in entries:
        log.record(entry)
    assert main(["admin", "audit", "--tail", "3", "--data-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines() == [e.to_json() for e in entries[-3:]]
    assert main(["admin", "audit", "--data-dir", str(tmp_path)]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 20


def test_audit_of_an_empty_log_says_so(tmp_path, capsys):
    assert main(["admin", "audit", "--data-dir", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and "empty" in captured.err


def test_admin_alone_shows_its_actions(capsys):
    assert main(["admin"]) == 2
    err = capsys.readouterr().err
    assert "set-pin" in err and "clear-pin" in err and "audit" in err
