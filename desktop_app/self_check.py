"""`offline-assistant --self-check [QUESTION]`: the app starts as for a user, then checks itself.

Steps: the window is shown; the engine process is up (the model loaded in it, its process alive);
QUESTION is asked through the chat and its answer streams in. One JSON line on stdout (and in
the log) reports each step; the app then closes with exit code 0 when every step passed, 1 when
one failed or the time limit ran out. Installers and CI run it; so can support, on a kiosk.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time

from PySide6.QtCore import QObject, QTimer

from engine.answer.assistant import CitationsEvent, ErrorEvent, TextEvent

log = logging.getLogger(__name__)

DEFAULT_QUESTION = "What is this manual about?"


class SelfCheck(QObject):
    def __init__(self, window, question: str, started: float, timeout_s: float = 300.0, close=None):
        super().__init__(window)
        self.window = window
        self.close = close or window.close  # a kiosk closes only through its own close_app
        self.question = question or DEFAULT_QUESTION
        self.started = started
        self.passed = False
        self._chunks = 0
        self._citations = 0
        self._finished = False
        self.report: dict = {"question": self.question, "window_shown": False, "engine": None,
                             "answer": None, "error": None}
        assistant = window.assistant
        assistant.modelReady.connect(self._on_ready)
        assistant.modelFailed.connect(lambda message: self._fail(f"the model failed: {message}"))
        assistant.answerEvent.connect(self._on_event)
        window.chat.answerFinished.connect(self._on_done)
        QTimer.singleShot(int(timeout_s * 1000), lambda: self._fail(f"no answer within {timeout_s:.0f} s"))

    def _elapsed(self) -> float:
        return round(time.perf_counter() - self.started, 2)

    def _on_ready(self, status) -> None:
        self.report["window_shown"] = self.window.isVisible()
        self.report["engine"] = {"model": status.name, "provider": status.provider,
                                 "pid": status.pid, "alive": _alive(status.pid),
                                 "ready_after_s": self._elapsed()}
        if not self.window.chat.ask(self.question):
            self._fail("the chat did not take the question")

    def _on_event(self, event) -> None:
        if isinstance(event, TextEvent):
            self._chunks += 1
        elif isinstance(event, CitationsEvent):
            self._citations = len(event.citations)
        elif isinstance(event, ErrorEvent):
            self._fail(f"the answer failed: {event.message}")

    def _on_done(self, event) -> None:
        self.report["answer"] = {"text": event.answer, "streamed_chunks": self._chunks,
                                 "answerable": event.stats.answerable,
                                 "citations": self._citations,
                                 "done_after_s": self._elapsed()}
        engine = self.report["engine"] or {}
        self.passed = bool(self.report["window_shown"] and engine.get("alive")
                           and self._chunks > 0 and event.answer.strip())
        if not self.passed:
            self.report["error"] = "a step did not pass"
        self._finish()

    def _fail(self, message: str) -> None:
        if self._finished:
            return
        self.report["error"] = message
        self.passed = False
        self._finish()

    def _finish(self) -> None:
        if self._finished:
            return
        self._finished = True
        self.report["passed"] = self.passed
        line = json.dumps(self.report, ensure_ascii=False)
        log.info("self-check: %s", line)
        if sys.stdout is not None:  # none in a Windows GUI program
            print(line, flush=True)
        # after the signal that brought the answer has reached every receiver
        QTimer.singleShot(0, self.close)


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    if sys.platform == "win32":  # os.kill(pid, 0) would end the process there
        return _alive_on_windows(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # it exists; signalling it is not ours to do (or not possible here)
    return True


def _alive_on_windows(pid: int) -> bool:
    import ctypes

    kernel32 = ctypes.windll.kernel32
    handle = kernel32.OpenProcess(0x1000, False, pid)  # PROCESS_QUERY_LIMITED_INFORMATION
    if not handle:
        return False
    try:
        code = ctypes.c_ulong()
        return bool(kernel32.GetExitCodeProcess(handle, ctypes.byref(code))) and code.value == 259
    finally:
        kernel32.CloseHandle(handle)  # 259: STILL_ACTIVE
