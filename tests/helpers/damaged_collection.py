"""Damage a real collection's SQLite file the way a failing disk does: bytes changed inside
the stored rows (the keyword index's blobs, a chunk's text), the page structure left intact so
that SQLite's own quick_check still passes."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

from engine.paths import DB_NAME


def _checkpoint(db_path: Path) -> None:
    """Move the WAL's pages into the main file, where the bytes are then changed."""
    db = sqlite3.connect(db_path)
    try:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        db.close()


def _stored_values(db_path: Path, sql: str) -> list[bytes]:
    db = sqlite3.connect(db_path)
    try:
        return [bytes(row[0]) for row in db.execute(sql) if row[0]]
    finally:
        db.close()


def _flip_inside(data: bytearray, values: list[bytes], count: int, rng: random.Random, byte=None) -> int:
    """Change `count` bytes chosen inside the stored copies of `values`. Returns how many."""
    spans = []
    for value in values:
        at = data.find(value)
        if at >= 0:
            spans.append((at, len(value)))
    if not spans:
        raise AssertionError("none of the values was found in the file")
    for _ in range(count):
        start, length = rng.choice(spans)
        offset = start + rng.randrange(length)
        data[offset] = byte if byte is not None else data[offset] ^ rng.randrange(1, 256)
    return count


def damage_collection(folder: Path, *, seed: int = 14, fts_bytes: int = 248, text_bytes: int = 8) -> Path:
    """Flip fts_bytes + text_bytes bytes (seeded, so every run damages the same places): inside
    the FTS index's blobs, and inside chunk texts (as 0xFF, never valid UTF-8). Returns the file."""
    db_path = Path(folder) / DB_NAME
    _checkpoint(db_path)
    blobs = _stored_values(db_path, "SELECT block FROM chunks_fts_data WHERE length(block) > 8")
    texts = _stored_values(db_path, "SELECT CAST(text AS BLOB) FROM chunks ORDER BY id LIMIT 1")
    rng = random.Random(seed)
    data = bytearray(db_path.read_bytes())
    _flip_inside(data, blobs, fts_bytes, rng)
    _flip_inside(data, texts, text_bytes, rng, byte=0xFF)
    db_path.write_bytes(bytes(data))
    return db_path
