"""Errors the engine raises. Each message tells a person what went wrong and what to do."""

import contextlib
import errno
import sqlite3
from collections.abc import Callable
from pathlib import Path

from engine.types import DocumentOutcome


class EngineError(Exception):
    """Base class: the message is shown to the user as it is."""


class ModelError(EngineError):
    """A model is missing, invalid, unsupported or refused."""


class GenerationError(EngineError):
    """Generation failed or was refused (for example, a prompt longer than the context)."""


class EngineProcessError(EngineError):
    """The separate engine process died or could not be started."""


class CentralServerError(EngineError):
    """A thin kiosk's central server (settings.server_url) could not be reached or used: the
    message names it and what happens instead."""


class RemoteEngineError(EngineError):
    """A remote OpenAI-compatible engine could not be reached or did not answer properly
    (refused, timed out, a wrong key, busy, a server error, a broken stream). `url` is the
    engine's; the message names it and what to do."""

    def __init__(self, message: str, url: str = ""):
        super().__init__(message)
        self.url = url


class DocumentError(EngineError):
    """A document could not be read. `kind` says why, for programs; the message, for people.

    Kinds: encrypted, no_text, invalid, empty, too_large, timed_out, unsupported, unreadable,
    crashed. Build one with `DocumentError.of(kind, path, detail)` so the wording stays uniform.
    """

    status = "failed"
    _MESSAGES = {
        "encrypted": "'{name}' is password-protected{detail}. Save a copy without the password "
                     "and add that instead.",
        "no_text": "'{name}' has no text layer{detail}, and OCR is turned off, so it cannot "
                   "be searched. Turn on \"Recognise text in scanned pages (OCR)\" in Settings "
                   "(or index without --no-ocr) and add it again, or add a version with text.",
        "invalid": "'{name}' is damaged or not a valid {format} file{detail}. Open it in its "
                   "own application and save a repaired copy, or remove it.",
        "empty": "'{name}' is empty{detail}; there is nothing to index. Replace it with the "
                 "real file or remove it.",
        "too_large": "'{name}' is too large to read{detail}. Split it into smaller files or "
                     "remove it.",
        "timed_out": "Reading '{name}' took too long and was stopped{detail}. The file may be "
                     "damaged: try a repaired copy, or raise the time limit.",
        "unsupported": "'{name}' is not a supported format{detail}. Supported: PDF, TXT, "
                       "Markdown, HTML and DOCX.",
        "unreadable": "'{name}' could not be opened{detail}. Check that it exists and that "
                      "you may read it.",
        "crashed": "The reader failed on '{name}'{detail}; the file is probably damaged. Open "
                   "it in its own application and save a repaired copy, or remove it.",
    }

    _FORMATS = {".pdf": "PDF", ".txt": "text", ".md": "Markdown", ".markdown": "Markdown",
                ".html": "HTML", ".htm": "HTML", ".docx": "DOCX"}

    def __init__(self, message: str, kind: str = "invalid", path: str = ""):
        super().__init__(message)
        self.kind = kind
        self.path = path

    @classmethod
    def of(cls, kind: str, path, detail: str = "") -> "DocumentError":
        """The standard message for `kind`; `detail` (a short reason) goes in brackets."""
        file = Path(path)
        text = cls._MESSAGES[kind].format(
            name=file.name,
            format=cls._FORMATS.get(file.suffix.lower(), "document"),
            detail=f" ({detail})" if detail else "",
        )
        return cls(text, kind, str(path))

    @property
    def outcome(self) -> DocumentOutcome:
        """This failure as a DocumentOutcome (status "failed", the message as the reason)."""
        return DocumentOutcome(path=self.path, status="failed", reason=str(self))



# -- a full disk ---------------------------------------------------------------------------------
DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)})


class DiskFullError(EngineError, OSError):
    """A write failed because the disk holding `folder` (or the person's quota there) is full.

    Still an OSError with errno ENOSPC, so code that already survives a failed write (by
    catching OSError) keeps doing so; the message names the folder and the room to make.
    `needed_bytes` is what the write needed, or, with `at_least`, the least it needed."""

    def __init__(self, folder, needed_bytes: int = 0, *, at_least: bool = False):
        megabytes = max(1, -(-int(needed_bytes) // 1_000_000))
        message = (f"The disk holding {folder} is full: free {'at least ' if at_least else ''}"
                   f"{megabytes} MB and try again.")
        super().__init__(errno.ENOSPC, message)
        self.folder = str(folder)
        self.needed_bytes = int(needed_bytes)

    def __str__(self) -> str:
        return self.strerror


def is_disk_full(exc: BaseException) -> bool:
    """True for an OSError that says the disk or the quota is full, and for SQLite's
    "database or disk is full" (SQLITE_FULL: SQLite reports a failed write's ENOSPC so)."""
    if isinstance(exc, sqlite3.Error):
        return (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF == sqlite3.SQLITE_FULL
    return isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS


@contextlib.contextmanager
def disk_full_as_error(folder, needed_bytes: int | Callable[[], int] = 0, *, at_least: bool = False):
    """Inside the block, an OSError or SQLite error for a full disk becomes DiskFullError naming
    `folder`; any other error passes unchanged. `needed_bytes` may be a function, called only
    on failure."""
    try:
        yield
    except DiskFullError:
        raise
    except (OSError, sqlite3.Error) as exc:
        if not is_disk_full(exc):
            raise
        needed = needed_bytes() if callable(needed_bytes) else needed_bytes
        raise DiskFullError(folder, needed, at_least=at_least) from exc


# -- a damaged collection ------------------------------------------------------------------------
class CollectionDamagedError(EngineError):
    """A collection's database is damaged beyond what can be rebuilt from what is left of it.

    `moved_to` is the folder its files were set aside in (never deleted), or "" when they
    could not be moved (another process was writing the collection). `repaired` says what
    opening it repaired before the error, in words (IndexStore.open_report["repaired"])."""

    def __init__(self, message: str, folder="", moved_to="", repaired: list[str] | None = None):
        super().__init__(message)
        self.folder = str(folder)
        self.moved_to = str(moved_to)
        self.repaired = list(repaired or [])


# -- index bundles -------------------------------------------------------------------------------
class BundleError(EngineError):
    """An index bundle was refused or could not be built, installed or switched to: unsigned,
    signed by a key this kiosk does not trust, a wrong signature, damaged or tampered with, not
    newer than the installed version, or made for another embedder. The message names the file
    and what is wrong; the running version is left as it was."""
