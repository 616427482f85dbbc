"""The kiosk's admin PIN: a salted scrypt hash in one JSON file, with a lockout after wrong tries.

    path = paths.pin_file                  # AppPaths.root / "admin.json"
    set_pin(path, "4711")                  # PinPolicyError unless 4 to 12 digits
    has_pin(path) -> bool                  # False when missing or damaged
    clear_pin(path) -> bool                # False when there was none
    gate = PinGate(path, clock=time.time)
    result = gate.check("4711")            # PinResult: ok / wrong / locked / unavailable
    gate.state() -> PinResult              # ready / locked / unavailable, without trying a PIN

The file holds the scrypt parameters, a 16-byte random salt, the derived key (base64) and the
lockout state; never the PIN. 5 wrong tries in a row lock the PIN for 60 s; each further
lockout before a right PIN doubles that, up to 15 min. `locked_until` is wall-clock epoch
seconds, so restarting the app does not lift a lockout. While locked, no PIN is checked at all
(the right one is refused too) and the lock is not extended. A right PIN resets the counters.

Writes are atomic (temp file in the same folder, fsync, os.replace) with mode 0o600.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import math
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from engine.atomic_file import write_json_atomic
from engine.errors import EngineError

log = logging.getLogger(__name__)

SCRYPT = {"n": 2**14, "r": 8, "p": 1, "dklen": 32}
SALT_BYTES = 16
MAX_TRIES = 5
FIRST_LOCK_S = 60.0
MAX_LOCK_S = 15 * 60.0
_PIN = re.compile(r"[0-9]{4,12}")
_SET_PIN_HINT = "set a new one with `offline-assistant-cli admin set-pin`"


class PinPolicyError(EngineError, ValueError):
    """The PIN is not 4 to 12 digits."""


@dataclass(frozen=True)
class PinResult:
    status: Literal["ok", "wrong", "locked", "unavailable", "ready"]  # "ready": only from state()
    tries_left: int = 0  # for "wrong" and "ready": tries before the lockout
    locked_s: float = 0.0  # for "locked": seconds until a PIN is checked again
    reason: str = ""  # for "unavailable": why (no PIN set, damaged file), for people

    @property
    def ok(self) -> bool:
        return self.status == "ok"




def check_policy(pin: str) -> None:
    if not isinstance(pin, str) or not _PIN.fullmatch(pin):
        raise PinPolicyError("The admin PIN must be 4 to 12 digits (0-9), nothing else; "
                             "choose another and try again.")


def set_pin(path: Path, pin: str) -> None:
    """Store a new PIN (a fresh salt, counters reset), replacing any earlier one."""
    check_policy(pin)
    salt = os.urandom(SALT_BYTES)
    record = {"format": 1, "kdf": "scrypt", **SCRYPT, "salt": _b64(salt),
              "hash": _b64(_derive(pin, salt, SCRYPT)), "failures": 0, "lockouts": 0,
              "locked_until": 0.0}
    try:
        write_json_atomic(Path(path), record)
    except OSError as exc:
        raise EngineError(f"The admin PIN could not be saved in '{path}' ({exc}); check that "
                          "the data folder is writable and not full.") from exc


def has_pin(path: Path) -> bool:
    return _read(Path(path))[0] is not None


def clear_pin(path: Path) -> bool:
    try:
        Path(path).unlink()
        return True
    except FileNotFoundError:
        return False


class PinGate:
    """Checks PINs against the file at `path`, which it re-reads on every call so that two
    gates (or a restart) share one lockout. Safe to call from several threads."""

    def __init__(self, path: Path, clock: Callable[[], float] = time.time):
        self.path = Path(path)
        self.clock = clock
        self._lock = threading.Lock()
        self._unsaved: dict | None = None  # the state, when the disk refused it

    def state(self) -> PinResult:
        """"locked" with the seconds left, "unavailable" and why, or "ready" for a try."""
        with self._lock:
            record, refusal = self._open()
            return refusal or PinResult("ready", tries_left=MAX_TRIES - record["failures"])

    def check(self, pin: str) -> PinResult:
        with self._lock:
            record, refusal = self._open()
            if refusal:
                return refusal
            right = isinstance(pin, str) and hmac.compare_digest(_derive(pin, record["salt"], record),
                                                                 record["hash"])
            if not right:
                return self._wrong(record)
            if record["failures"] or record["lockouts"]:
                self._save({**record, "failures": 0, "lockouts": 0, "locked_until": 0.0})
            return PinResult("ok")

    def _open(self) -> tuple[dict, PinResult | None]:
        """The record, and the refusal when no PIN may be tried now."""
        record, reason = _read(self.path)
        if record is None:
            return {}, PinResult("unavailable", reason=reason)
        if self._unsaved is not None and self._unsaved["hash"] == record["hash"]:
            record.update(self._unsaved)
        locked = self._locked_s(record)
        return record, PinResult("locked", locked_s=locked) if locked else None

    def _wrong(self, record: dict) -> PinResult:
        failures = record["failures"] + 1
        if failures < MAX_TRIES:
            self._save({**record, "failures": failures})
            return PinResult("wrong", tries_left=MAX_TRIES - failures)
        lockouts = record["lockouts"] + 1
        lock_s = min(FIRST_LOCK_S * 2 ** min(lockouts - 1, 16), MAX_LOCK_S)
        self._save({**record, "failures": 0, "lockouts": lockouts,
                    "locked_until": self.clock() + lock_s})
        return PinResult("locked", locked_s=lock_s)

    def _locked_s(self, record: dict) -> float:
        left = record["locked_until"] - self.clock()
        if left > MAX_LOCK_S:  # the clock went back: never lock longer than the cap from now
            record["locked_until"] = self.clock() + MAX_LOCK_S
            self._save(record)
            left = MAX_LOCK_S
        return max(left, 0.0)

    def _save(self, record: dict) -> None:
        stored = {**record, "salt": _b64(record["salt"]), "hash": _b64(record["hash"])}
        try:
            write_json_atomic(self.path, stored)
            self._unsaved = None
        except OSError as exc:  # keep the lockout in memory at least; a read-only disk is no way in
            log.warning("could not save the admin PIN state in %s (%s)", self.path, exc)
            self._unsaved = {k: record[k] for k in ("hash", "failures", "lockouts", "locked_until")}


def _read(path: Path) -> tuple[dict | None, str]:
    """The record with salt and hash decoded, or None and why, for people."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None, f"No admin PIN is set ('{path}' does not exist); {_SET_PIN_HINT}."
    except (OSError, ValueError) as exc:
        return None, _damaged(path, exc)
    try:
        return _validated(raw), ""
    except (KeyError, TypeError, ValueError) as exc:
        return None, _damaged(path, exc)


def _validated(raw: dict) -> dict:
    record = {key: int(raw[key]) for key in ("n", "r", "p", "dklen", "failures", "lockouts")}
    # Bounds (at most 64 MiB) keep a tampered file from making scrypt take all memory or time.
    n, r = record["n"], record["r"]
    if raw["kdf"] != "scrypt" or n < 2**10 or n & (n - 1) or not 1 <= r <= 32 or 128 * n * r > 1 << 26 \
            or not (1 <= record["p"] <= 4 and 16 <= record["dklen"] <= 64):
        raise ValueError("unsupported key derivation parameters")
    record.update(kdf="scrypt", format=1, locked_until=float(raw["locked_until"]),
                  salt=base64.b64decode(raw["salt"], validate=True),
                  hash=base64.b64decode(raw["hash"], validate=True))
    if len(record["salt"]) < 8 or len(record["hash"]) != record["dklen"] or record["failures"] < 0 \
            or not math.isfinite(record["locked_until"]):
        raise ValueError("salt, hash or counters out of range")
    return record


def _damaged(path: Path, exc: Exception) -> str:
    log.warning("the admin PIN file %s is damaged (%s)", path, exc)
    return f"The admin PIN file '{path}' is damaged; {_SET_PIN_HINT}."


def _derive(pin: str, salt: bytes, params: dict) -> bytes:
    n, r = params["n"], params["r"]
    return hashlib.scrypt(pin.encode("utf-8"), salt=salt, n=n, r=r, p=params["p"],
                          dklen=params["dklen"], maxmem=256 * n * r + (1 << 20))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
