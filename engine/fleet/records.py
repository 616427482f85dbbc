"""The bundle audit log: one JSON line per install, refusal, switch and rollback, appended to
DATA/audit/bundles.jsonl (beside the questions' audit.jsonl, whose records are answers).

    record(paths, "refused", collection="R", version=7, file="b.tar", reason="...")
"""

from __future__ import annotations

import json
import logging
import os

from engine.fleet.manifest import utc_now

log = logging.getLogger(__name__)


def record(paths, action: str, **fields) -> None:
    """Appends one line with a single O_APPEND write, fsynced. A failure to write is logged,
    never raised: it must not turn a refusal into another error, nor undo an install."""
    line = json.dumps({"time": utc_now(), "action": action, **fields}, sort_keys=True,
                      ensure_ascii=False, default=str) + "\n"
    file = paths.bundle_records_file
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, line.encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        log.warning("could not write the bundle audit line to %s: %s (%s)", file, exc, line.strip())


def read_records(paths) -> list[dict]:
    path = paths.bundle_records_file
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    found = []
    for line in lines:
        try:
            found.append(json.loads(line))
        except ValueError:
            continue  # a line cut by a crash
    return found
