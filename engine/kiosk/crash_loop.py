"""Crash-loop detection: after 5 crashes within 10 minutes, start in safe mode.

    path = paths.starts_file                   # AppPaths.logs / "starts.json"
    info = begin_start(path)                   # first thing at start-up
    if info.safe_mode: show the safe-mode screen with info.last_error
    record_error(path, traceback_text)         # from the crash hook (never raises)
    mark_clean_exit(path, info.start_id)       # last thing on a normal quit

A start that has no clean exit recorded by the next start counts as a crash (a kill, a
freeze ended by the watchdog, a power cut all count). A start is in safe mode when the
`crashes` (5) starts before it all crashed and the oldest of them began less than `window_s`
(600 s) ago: so the loop must be happening now, not last week. A safe-mode run that exits
cleanly breaks the chain, and the next start is normal again.

The file is JSON, written atomically, and holds the last 50 starts plus the last error (its
last 4000 characters, where a traceback says what failed). A damaged file means a normal
start and is rewritten; a data dir that cannot be written never stops the app from starting.
One app instance per data dir.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from engine.atomic_file import write_json_atomic

log = logging.getLogger(__name__)

HISTORY = 50
ERROR_CHARS = 4000
CRASHES = 5
WINDOW_S = 600.0

Clock = Callable[[], float]


@dataclass(frozen=True)
class StartInfo:
    safe_mode: bool
    start_id: str  # pass to mark_clean_exit
    crashes: int  # crashed starts in a row just before this one (a clean exit ends the row)
    last_error: str | None = None  # the last error recorded, whenever it was
    last_error_at: float | None = None  # epoch seconds




def begin_start(path: Path, clock: Clock = time.time, crashes: int = CRASHES,
                window_s: float = WINDOW_S) -> StartInfo:
    """Record a start, and say whether it should be in safe mode."""
    path = Path(path)
    state = _read(path)
    now = clock()
    starts = state["starts"]
    row = _crashed_in_a_row(starts)
    recent = starts[-crashes:] if crashes > 0 else []
    safe = len(recent) == crashes and row >= crashes and now - recent[0]["at"] < window_s
    start_id = f"{now:.6f}-{os.getpid()}"
    starts.append({"id": start_id, "at": now, "clean": False, "safe": safe})
    state["starts"] = starts[-HISTORY:]
    _write(path, state)
    if safe:
        log.warning("%d crashes in a row within %.0f s: starting in safe mode", row, window_s)
    return StartInfo(safe, start_id, row, state.get("last_error"), state.get("last_error_at"))


def mark_clean_exit(path: Path, start_id: str | None = None) -> None:
    """Record that the start `start_id` (default: the latest) ended normally."""
    path = Path(path)
    state = _read(path)
    for start in reversed(state["starts"]):
        if start_id is None or start["id"] == start_id:
            start["clean"] = True
            _write(path, state)
            return
    log.warning("start %s is not in %s; its clean exit is not recorded", start_id, path)


def record_error(path: Path, text: str, clock: Clock = time.time) -> None:
    """Keep `text` (its last ERROR_CHARS characters) as the last error. Never raises: it is
    called from crash hooks."""
    try:
        path = Path(path)
        text = str(text)
        if len(text) > ERROR_CHARS:
            text = "…" + text[-(ERROR_CHARS - 1):]
        state = _read(path)
        state.update(last_error=text, last_error_at=clock())
        _write(path, state)
    except Exception:  # a crash hook that crashes hides the first error
        log.exception("could not record the last error in %s", path)


def _crashed_in_a_row(starts: list[dict]) -> int:
    row = 0
    for start in reversed(starts):
        if start["clean"]:
            break
        row += 1
    return row


def _read(path: Path) -> dict:
    empty = {"format": 1, "starts": [], "last_error": None, "last_error_at": None}
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return empty
    except (OSError, ValueError) as exc:
        log.warning("the start history %s is damaged (%s); starting afresh", path, exc)
        return empty
    try:
        starts = [{"id": str(s["id"]), "at": float(s["at"]), "clean": bool(s["clean"]),
                   "safe": bool(s.get("safe", False))} for s in raw["starts"]]
        error = raw.get("last_error")
        error_at = raw.get("last_error_at")
        return {"format": 1, "starts": starts[-HISTORY:],
                "last_error": None if error is None else str(error),
                "last_error_at": None if error_at is None else float(error_at)}
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        log.warning("the start history %s is damaged (%s); starting afresh", path, exc)
        return empty


def _write(path: Path, state: dict) -> None:
    try:
        write_json_atomic(path, state)
    except OSError as exc:  # a read-only or full disk must not keep the app from starting
        log.warning("could not write the start history %s (%s)", path, exc)
