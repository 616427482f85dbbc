"""Conversations kept in the data dir: one JSON file each, written atomically.

    store = ConversationStore(paths.conversations)
    chat = store.create("Pump questions")
    chat.messages.append(user_message("How do I prime the pump?"))
    store.save(chat)

What a saved message is, said here only:
    user_message(question)            {"role": "user", "content": question}
    SavedAnswer(...).to_message()     {"role": "assistant", "content": answer, "citations":
                                      [Citation.to_dict()...], "answerable", "well_supported",
                                      "stopped", "meta", "lead": [Quote.to_dict()...]}, or
                                      {"role": "error", "content": message}
    SavedAnswer.from_message(message) the answer back (citations as Citation, spans kept; the
                                      lead sentences as Quote)
    history(messages)                 the turns that go to the prompt as history

A damaged file is set aside (renamed *.damaged) with a log line, never crashes the listing, and
never overwrites others.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from engine.atomic_file import move_aside, write_atomic
from engine.errors import DiskFullError, EngineError
from engine.types import CheckedSentence, Citation, Quote

log = logging.getLogger(__name__)

SUFFIX = ".json"
FORMAT_VERSION = 1


@dataclass
class Conversation:
    id: str
    title: str
    created_at: float
    updated_at: float
    messages: list[dict] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"version": FORMAT_VERSION, "id": self.id, "title": self.title,
                "created_at": self.created_at, "updated_at": self.updated_at, "messages": self.messages}


def user_message(question: str) -> dict:
    return {"role": "user", "content": question}


@dataclass(frozen=True)
class SavedAnswer:
    """An answer as a conversation keeps it; with `error`, an answer that failed."""

    text: str = ""
    citations: tuple[Citation, ...] = ()
    answerable: bool = True  # False: the gate refused, the citations are the nearest passages
    well_supported: bool = True
    stopped: bool = False
    meta: str = ""  # the line under the answer (tokens, speed), as it was shown
    error: str = ""
    lead: tuple[Quote, ...] = ()  # the manual's sentences shown before the answer
    sentences: tuple[CheckedSentence, ...] = ()  # the answer's sentences as checked (DoneEvent.sentences)
    unknown_names: tuple[str, ...] = ()  # a refusal's words that no manual contains

    def to_message(self) -> dict:
        if self.error:
            return {"role": "error", "content": self.error}
        return {"role": "assistant", "content": self.text,
                "citations": [c.to_dict() for c in self.citations],
                "answerable": self.answerable, "well_supported": self.well_supported,
                "stopped": self.stopped, "meta": self.meta, "lead": [q.to_dict() for q in self.lead],
                "sentences": [c.to_dict() for c in self.sentences], "unknown_names": list(self.unknown_names)}

    @classmethod
    def from_message(cls, message: dict) -> "SavedAnswer":
        """An "assistant" or "error" message back; older messages lack some fields."""
        if message.get("role") == "error":
            return cls(error=str(message.get("content") or ""))
        answerable = message.get("answerable", True)
        return cls(str(message.get("content") or ""),
                   tuple(Citation.from_dict(c) for c in message.get("citations") or []),
                   answerable, message.get("well_supported", True) or not answerable,
                   bool(message.get("stopped")), str(message.get("meta") or ""),
                   lead=tuple(Quote.from_dict(q) for q in message.get("lead") or []),
                   sentences=tuple(CheckedSentence.from_dict(c) for c in message.get("sentences") or []),
                   unknown_names=tuple(str(n) for n in message.get("unknown_names") or []))


def history(messages: list[dict]) -> list[dict]:
    """The turns the assistant takes as history: answered ones; not refusals, errors or stops."""
    turns = []
    for message in messages:
        role = message.get("role")
        if role == "user":
            turns.append({"role": "user", "content": message["content"]})
        elif role == "assistant" and message.get("answerable", True) and not message.get("stopped"):
            turns.append({"role": "assistant", "content": message["content"]})
    return turns


class ConversationStore:
    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        self.set_aside: list[Path] = []  # damaged files renamed *.damaged, for take_notices()

    def take_notices(self) -> list[str]:
        """What was set aside since the last call, as one sentence (each file told once)."""
        files, self.set_aside = self.set_aside, []
        if not files:
            return []
        names = ", ".join(f"'{p.name}'" for p in files)
        return [f"{len(files)} saved conversation(s) could not be read and were set aside in "
                f"'{self.folder}': {names}. The other conversations are unchanged."]

    def create(self, title: str = "New conversation") -> Conversation:
        now = time.time()
        conversation = Conversation(uuid.uuid4().hex, title.strip() or "New conversation", now, now)
        self.save(conversation)
        return conversation

    def list(self) -> list[Conversation]:
        """Every readable conversation, the most recently updated first."""
        if not self.folder.is_dir():
            return []
        found = [c for c in (self._read(p) for p in self.folder.glob("*" + SUFFIX)) if c is not None]
        return sorted(found, key=lambda c: c.updated_at, reverse=True)

    def get(self, conversation_id: str) -> Conversation:
        conversation = self._read(self._path(conversation_id))
        if conversation is None:
            raise EngineError(f"The conversation '{conversation_id}' is not there any more.")
        return conversation

    def save(self, conversation: Conversation) -> None:
        conversation.updated_at = time.time()
        try:
            write_atomic(self._path(conversation.id), json.dumps(conversation.to_json(), ensure_ascii=False))
        except DiskFullError:
            raise  # its message names the folder and the room to make: shown as it is
        except OSError as exc:
            raise EngineError(f"The conversation could not be saved in '{self.folder}' ({exc}); "
                              "check that the data folder is writable and not full.") from exc

    def rename(self, conversation_id: str, title: str) -> Conversation:
        conversation = self.get(conversation_id)
        conversation.title = title.strip() or conversation.title
        self.save(conversation)
        return conversation

    def delete(self, conversation_id: str) -> None:
        try:
            self._path(conversation_id).unlink()
        except FileNotFoundError:
            pass

    def _path(self, conversation_id: str) -> Path:
        if not conversation_id or not all(ch.isalnum() for ch in conversation_id):
            raise EngineError(f"'{conversation_id}' is not a conversation id.")
        return self.folder / (conversation_id + SUFFIX)

    def _read(self, path: Path) -> Conversation | None:
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            return Conversation(str(raw["id"]), str(raw["title"]), float(raw["created_at"]),
                                float(raw["updated_at"]), [dict(m) for m in raw["messages"]])
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("conversation file %s is damaged (%s); set aside", path, exc)
            aside = move_aside(path, path.with_suffix(".damaged"))
            if aside is not None:
                self.set_aside.append(aside)
            return None
