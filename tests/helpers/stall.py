"""How long the GUI thread's event loop was kept from running, measured by a 10 ms timer."""

from __future__ import annotations

import gc
import time

from PySide6.QtCore import QElapsedTimer, Qt, QTimer


class Heartbeat:
    """A 10 ms QTimer on the GUI thread; `longest` is the longest gap between two of its ticks,
    which is how long the event loop was kept from running. Python's garbage collector pauses
    are timed too, to tell them apart when a stall is long."""

    def __init__(self):
        self.longest_ms = 0
        self.ticks = 0
        self.longest_gc_ms = 0.0
        self._gc_started = 0.0
        self._clock = QElapsedTimer()
        self._timer = QTimer()
        self._timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._timer.setInterval(10)
        self._timer.timeout.connect(self._tick)

    def start(self) -> None:
        gc.callbacks.append(self._gc)
        self._clock.start()
        self._timer.start()

    def stop(self) -> None:
        self._timer.stop()
        gc.callbacks.remove(self._gc)

    def _gc(self, phase: str, _info: dict) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
        else:
            self.longest_gc_ms = max(self.longest_gc_ms, (time.perf_counter() - self._gc_started) * 1000)

    def _tick(self) -> None:
        self.longest_ms = max(self.longest_ms, self._clock.restart())
        self.ticks += 1
