"""Preparing the built-in model (converting its GGUF once) in a child process of its own.

    if needs_preparation(paths, settings):
        folder = prepare_builtin_llm_in_child(paths, lambda fraction, message: ...)

The conversion runs in a child: numpy and onnx hold the GIL for long stretches, which would
stall a window or any other thread of the caller. The child and its parent speak JSON over a
pipe (engine.child_process.JsonChild): one {"op": "prepare", "root": ...} request in; then
{"type": "progress", "fraction", "message"} messages, and one {"type": "done", "folder"} or
{"type": "error", "message"} out.
"""

from __future__ import annotations

import logging
from pathlib import Path

from engine.config import Settings
from engine.errors import EngineError, ModelError
from engine.models.registry import BUILTIN_LLM, Progress, list_models, prepare_builtin_llm
from engine.paths import AppPaths

log = logging.getLogger(__name__)


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


def _relay(child, progress: Progress) -> Path:
    while True:
        message = child.poll(0.2)
        if message is None:
            continue
        if message["type"] == "progress":
            progress(float(message["fraction"]), str(message["message"]))
        elif message["type"] == "done":
            return Path(message["folder"])
        else:
            log.error("preparing the built-in model failed: %s", message["message"])
            raise ModelError(str(message["message"]))


def prepare_in_child(conn) -> None:
    """The preparation's child process: one request, progress messages, then done or error."""
    import json
    import traceback

    from engine.child_process import quiet_child

    def send(message: dict) -> None:
        conn.send_bytes(json.dumps(message).encode("utf-8"))

    quiet_child()
    try:
        request = json.loads(conn.recv_bytes())
        paths = AppPaths(request["root"])
        folder = prepare_builtin_llm(paths, lambda fraction, message: send(
            {"type": "progress", "fraction": fraction, "message": message}))
        send({"type": "done", "folder": str(folder)})
    except EngineError as exc:
        send({"type": "error", "message": str(exc)})
    except Exception as exc:  # a bug: the details go to stderr, the person gets a sentence
        traceback.print_exc()
        send({"type": "error", "message": f"Preparing the built-in model failed unexpectedly "
                                          f"({type(exc).__name__}: {exc})."})
    finally:
        conn.close()
