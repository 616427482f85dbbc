"""Text from documents, file names and the model, made safe for a person's terminal or log.

    visible("CLICK\\x1b]8;;http://evil.example\\x1b\\\\ ME")   # 'CLICK\\\\x1b]8;;http://evil...'
    clip(text, 160)                                          # visible(), then cut at 160, "…"
    SafeFormatter("%(levelname)s %(message)s")               # a logging.Formatter that does the same
    logging.lastResort = SafeStderrHandler()                 # the CLI's warnings on stderr, made visible

A terminal acts on some characters instead of showing them: ESC starts CSI/OSC sequences (colours,
cursor moves, the window title, OSC 8 hyperlinks whose target is hidden), the other C0 and C1
controls move the cursor or ring the bell, bidi overrides and isolates reorder what follows
("exe.txt" shown for "txt.exe"), and zero-width characters hide inside words. Each one is
replaced by a visible stand-in (\\x1b, <U+202E>), so the person sees that it was there and
nothing acts on it; newline and tab stay. Neutralising every ESC is enough to make any escape
sequence plain text, so no sequence is parsed and a cut can never leave half of one live.
JSON output needs none of this: json.dumps escapes what it must.
"""

from __future__ import annotations

import logging
import re
import sys

# C0 controls but tab and newline, DEL, C1 controls; then the bidi embeddings, overrides,
# isolates and marks, and the zero-width space, joiners, word joiner and BOM.
_CONTROLS = "\x00-\x08\x0b-\x1f\x7f-\x9f"
_FORMATS = "\u061c\u200b-\u200f\u202a-\u202e\u2060\u2066-\u2069\ufeff"
UNSAFE = re.compile(f"[{_CONTROLS}{_FORMATS}]")
_STAND_IN = re.compile(r"\\x[0-9a-f]{2}|<U\+[0-9A-F]{4}>")


def stand_in(char: str) -> str:
    """What is shown for one unsafe character: \\x1b for a control, <U+202E> for the others."""
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0x9f else f"<U+{code:04X}>"


def visible(text: str) -> str:
    """`text` with every control character and invisible formatting character shown as its
    stand-in; newline and tab kept."""
    return UNSAFE.sub(lambda m: stand_in(m.group()), text)


def has_unsafe(text: str) -> bool:
    return UNSAFE.search(text) is not None


def clip(text: str, width: int, ellipsis: str = "…") -> str:
    """visible(text), cut to at most `width` characters with `ellipsis`: the cut falls between
    stand-ins, never inside one."""
    shown = visible(text)
    if len(shown) <= width:
        return shown
    cut = width - len(ellipsis)
    for match in _STAND_IN.finditer(shown):
        if match.start() < cut < match.end():
            cut = match.start()
            break
    return shown[:max(cut, 0)] + ellipsis


class SafeFormatter(logging.Formatter):
    """A logging.Formatter whose lines (message, arguments, traceback) are visible(): a file
    name or a passage logged can neither drive the terminal nor hide in the log."""

    def format(self, record: logging.LogRecord) -> str:
        return visible(super().format(record))


class SafeStderrHandler(logging.StreamHandler):
    """What logging.lastResort does (WARNING and up, the message alone, to whatever sys.stderr
    is at the time) with SafeFormatter."""

    def __init__(self, level: int = logging.WARNING):
        super().__init__()
        self.setLevel(level)
        self.setFormatter(SafeFormatter())

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:
        pass  # always the current sys.stderr
