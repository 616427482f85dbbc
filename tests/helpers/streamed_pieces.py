"""Text cut into pieces as a model streams it, and fed through an AnswerGuard as the Assistant does."""

from __future__ import annotations

import re

from engine.answer.answer_guard import AnswerGuard

SIZES = [1, 2, 3, 4, 5]
PIECES = ["tokens", "characters", 2, 3, 4, 5]


def pieces_of(text: str, pieces: str | int = "tokens") -> list[str]:
    """The text as a model streams it: word-sized tokens with their leading space, one
    character at a time, or pieces of so many characters."""
    if pieces == "tokens":
        return re.findall(r"\s*\S+\s*$|\s*\S+", text)
    size = 1 if pieces == "characters" else int(pieces)
    return [text[i:i + size] for i in range(0, len(text), size)]


def feed(guard: AnswerGuard, text: str, pieces: str | int = "tokens") -> list[str]:
    """Feeds the text until the guard stops it, then flushes it, as the Assistant does; what
    each call let through, in order."""
    shown = []
    for piece in pieces_of(text, pieces):
        shown.append(guard.feed(piece))
        if guard.is_set():
            break
    shown.append(guard.flush())
    return shown
