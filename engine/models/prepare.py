"""Preparing the built-in model (converting its GGUF once), and importing a model, in a child
process of its own.

    if needs_preparation(paths, settings):
        folder = prepare_builtin_llm_in_child(paths, lambda fraction, message: ...)
    folder = import_model_in_child("qwen.gguf", paths, progress, cancel)  # None: cancelled

The conversion runs in a child: numpy and onnx hold the GIL for long stretches, which would
stall a window or any other thread of the caller. The child and its parent speak JSON over a
pipe (engine.child_process.JsonChild): one {"op": "prepare", "root": ...} or {"op": "import",
"root", "path"} request in; then {"type": "progress", "fraction", "message"} messages, and one
{"type": "done", "folder"}, {"type": "cancelled"} or {"type": "error", "message"} out. An
{"op": "cancel"} sent meanwhile is read at the child's next progress report, which then raises:
the import's temporary folder is removed and nothing is left behind.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from engine.config import Settings
from engine.errors import EngineError, ModelError
from engine.models.manifest import remove_stale_temporaries
from engine.models.registry import BUILTIN_LLM, Progress, import_model, list_models, prepare_builtin_llm
from engine.paths import AppPaths

log = logging.getLogger(__name__)
CANCEL_GRACE_S = 10.0  # a child that reports no progress this long after a cancel is killed


class ImportCancelled(EngineError):
    """The person cancelled the import (raised in the child, at a progress report)."""


def needs_preparation(paths: AppPaths, settings: Settings, llm_folder: Path | None = None) -> bool:
    """True when the app will answer with the built-in model and it is not prepared yet."""
    if llm_folder is not None or settings.model not in (None, BUILTIN_LLM.name):
        return False
    builtin = next(m for m in list_models(paths, "cpu") if m.name == BUILTIN_LLM.name)
    return builtin.status in ("needs preparation", "invalid")


def prepare_builtin_llm_in_child(paths: AppPaths, progress: Progress) -> Path:
    """prepare_builtin_llm, run in a child process; `progress` is called in the caller's thread.
    Raises ModelError with a sentence a person can act on."""
    from engine.child_process import ChildDied, JsonChild

    try:
        child = JsonChild.start(prepare_in_child, "offline-assistant-prepare")
    except OSError as exc:
        raise ModelError(f"The model could not be prepared: no process could be started ({exc}).") from exc
    try:
        child.send({"op": "prepare", "root": str(paths.root)})
        return _relay(child, progress)
    except ChildDied as died:
        raise ModelError(f"Preparing the built-in model stopped unexpectedly ({died}); it may have "
                         "run out of memory or disk space. Start the app again to retry.") from died
    finally:
        child.stop(polite=False)


def import_model_in_child(path: str | Path, paths: AppPaths, progress: Progress,
                          cancel: threading.Event) -> Path | None:
    """registry.import_model, run in a child process; `progress` is called in the caller's
    thread. Returns the model's folder, or None when `cancel` was set before the import ended
    (then nothing of it is left). Raises ModelError with a sentence a person can act on."""
    from engine.child_process import ChildDied, JsonChild

    try:
        child = JsonChild.start(prepare_in_child, "offline-assistant-import")
    except OSError as exc:
        raise ModelError(f"The model could not be imported: no process could be started ({exc}).") from exc
    try:
        child.send({"op": "import", "root": str(paths.root), "path": str(path)})
        return _relay(child, progress, cancel)
    except ChildDied as died:
        raise ModelError(f"Importing '{Path(path).name}' stopped unexpectedly ({died}); it may have "
                         "run out of memory or disk space.") from died
    finally:
        child.stop(polite=False)
        remove_stale_temporaries(paths.models)  # what a killed child left, if it was killed


def _relay(child, progress: Progress, cancel: threading.Event | None = None) -> Path | None:
    asked_at = None
    while True:
        if cancel is not None and cancel.is_set() and asked_at is None:
            child.send({"op": "cancel"})
            asked_at = time.monotonic()
        if asked_at is not None and time.monotonic() - asked_at > CANCEL_GRACE_S:
            log.warning("the import did not stop within %.0f s of the cancel; ending it", CANCEL_GRACE_S)
            return None  # the caller kills the child and removes its temporary folder
        message = child.poll(0.2)
        if message is None:
            continue
        if message["type"] == "progress":
            progress(float(message["fraction"]), str(message["message"]))
        elif message["type"] == "done":
            return Path(message["folder"])
        elif message["type"] == "cancelled":
            return None
        else:
            log.error("preparing or importing a model failed: %s", message["message"])
            raise ModelError(str(message["message"]))


def prepare_in_child(conn) -> None:
    """The child process: one request (prepare or import), progress messages, then done,
    cancelled or error."""
    import json
    import traceback

    from engine.child_process import quiet_child

    def send(message: dict) -> None:
        conn.send_bytes(json.dumps(message).encode("utf-8"))

    def report(fraction: float, message: str) -> None:
        if fraction < 1.0 and _cancel_asked(conn):  # at 1.0 the model is in place: too late
            raise ImportCancelled("The import was cancelled.")
        send({"type": "progress", "fraction": fraction, "message": message})

    quiet_child()
    what = "Preparing the built-in model"
    try:
        request = json.loads(conn.recv_bytes())
        paths = AppPaths(request["root"])
        if request["op"] == "import":
            what = f"Importing '{Path(request['path']).name}'"
            folder = import_model(request["path"], paths, report)
        else:
            folder = prepare_builtin_llm(paths, report)
        send({"type": "done", "folder": str(folder)})
    except ImportCancelled:
        send({"type": "cancelled"})
    except EngineError as exc:
        send({"type": "error", "message": str(exc)})
    except Exception as exc:  # a bug: the details go to stderr, the person gets a sentence
        traceback.print_exc()
        send({"type": "error", "message": f"{what} failed unexpectedly ({type(exc).__name__}: {exc})."})
    finally:
        conn.close()


def _cancel_asked(conn) -> bool:
    import json

    while conn.poll():
        if json.loads(conn.recv_bytes()).get("op") in ("cancel", "close"):
            return True
    return False
