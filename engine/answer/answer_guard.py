"""AnswerGuard: what of the model's stream a person gets to see, and when generation stops.

- The source fence's opening marker is removed: small models often open their answer by
  copying it, then quote a source, which is a fine answer without the marker.
- The fence's closing marker stops the answer: what follows is made up.
- A loop stops it: small models at temperature 0 repeat one sentence. A repetition penalty
  would also push them away from the sources' own words, so the loop is cut instead. A
  phrase said twice is not a loop; the same text twice in a row, over LOOP_WINDOW
  characters, is. The answer keeps one copy, up to the nearest sentence end.

Text that might be the start of a marker is held back until it is known not to be one, so
markers never reach the screen. Text shown before a loop is noticed may include part of its
second copy; the final answer (DoneEvent.answer) does not, and views show that at the end.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from engine.llm.local import CancelFlag

LOOP_WINDOW = 40
_SENTENCE_END = re.compile(r"[.!?:](?=\s)|\n")


class AnswerGuard:
    """Feed it each piece; show what feed() returns; use it as the generation's cancel flag
    (the caller's own flag still works through it)."""

    def __init__(self, cancel: CancelFlag | None, hidden: Sequence[str] = (), stop_strings: Sequence[str] = ()):
        self.cancel = cancel
        self.hidden = sorted(hidden, key=len, reverse=True)  # the longest match is removed first
        self.stop_strings = tuple(stop_strings)
        self.text = ""  # what has been let through (markers removed)
        self.reason = ""  # "stop string" or "repetition" once stopped
        self._pending = ""  # held back: it may be the start of a marker
        self._loop_cut: int | None = None

    def is_set(self) -> bool:
        return bool(self.reason) or (self.cancel is not None and self.cancel.is_set())

    def feed(self, piece: str) -> str:
        """The text that can be shown now."""
        if self.reason:
            return ""
        pending = self._pending + piece
        stops = [i for i in (pending.find(s) for s in self.stop_strings) if i >= 0]
        if stops:
            self.reason, self._pending = "stop string", ""
            return self._let_through(self._without_hidden(pending[:min(stops)]))
        held = self._held_back(pending)
        self._pending = pending[len(pending) - held:]
        shown = self._let_through(self._without_hidden(pending[:len(pending) - held]))
        self._check_loop()
        return shown

    def flush(self) -> str:
        """At the end of the stream: what was held back and turned out not to be a marker."""
        pending, self._pending = self._pending, ""
        return "" if self.reason else self._let_through(self._without_hidden(pending))

    def answer(self) -> str:
        if self._loop_cut is None:
            return self.text.strip()
        return self.text[:self._loop_cut].strip()

    def _let_through(self, text: str) -> str:
        self.text += text
        return text

    def _without_hidden(self, text: str) -> str:
        for marker in self.hidden:
            text = text.replace(marker, "")
        return text

    def _held_back(self, text: str) -> int:
        """How many characters at the end of `text` could begin a marker, or a longer one."""
        markers = [*self.hidden, *self.stop_strings]
        for size in range(min(len(text), max((len(m) for m in markers), default=0)), 0, -1):
            if any(len(m) > size and m.startswith(text[-size:]) for m in markers):
                return size
        return 0

    def _check_loop(self) -> None:
        text = self.text
        if len(text) < 2 * LOOP_WINDOW:
            return
        earlier = text.rfind(text[-LOOP_WINDOW:], 0, len(text) - 1)
        period = len(text) - LOOP_WINDOW - earlier
        if earlier < 0 or period > len(text) // 2 or text[-2 * period:-period] != text[-period:]:
            return
        start = len(text) - 2 * period  # back to where the repeating text begins
        while start > 0 and text[start - 1] == text[start - 1 + period]:
            start -= 1
        self.reason, self._loop_cut = "repetition", _nearest_sentence_end(text, start + period)


def _nearest_sentence_end(text: str, cut: int) -> int:
    """The sentence end nearest to `cut`: after a loop's first copy the text repeats it, so a
    sentence end of the loop lies on one side or the other."""
    ends = [m.end() for m in _SENTENCE_END.finditer(text)]
    if not ends:
        return cut
    return min(ends, key=lambda end: (abs(end - cut), end))
