"""Errors the engine raises. Each message tells a person what went wrong and what to do."""

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


class DocumentError(EngineError):
    """A document could not be read. `kind` says why, for programs; the message, for people.

    Kinds: encrypted, no_text, invalid, empty, too_large, timed_out, unsupported, unreadable,
    crashed. Build one with `DocumentError.of(kind, path, detail)` so the wording stays uniform.
    """

    status = "failed"
    _MESSAGES = {
        "encrypted": "'{name}' is password-protected{detail}. Save a copy without the password "
                     "and add that instead.",
        "no_text": "'{name}' has no text layer{detail}, and OCR is not available, so it "
                   "cannot be searched. Add a version with text (exported from the original, "
                   "or after OCR).",
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

