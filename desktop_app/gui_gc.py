"""Python's cyclic garbage collection, run on the GUI thread only.

The collector runs on whichever thread happens to allocate past its threshold. When that is a
worker thread and the garbage holds a QObject, the QObject's destructor takes Qt's connection
lock there and then waits for the GIL, while the GUI thread, holding the GIL, waits for that lock
in QObject::connect: both stop for good (seen in CI: py-spy showed the indexing worker in
gc_collect_main -> ~QObject -> GilState::acquire, the GUI thread in QMenu::actionEvent ->
QObject::connect -> QBasicMutex::lockInternal). So automatic collection is turned off and a
timer on the GUI thread collects what the collector itself would have: the generations whose
counts passed their thresholds.
"""

from __future__ import annotations

import gc

from PySide6.QtCore import QObject, QTimer


class GuiThreadGc(QObject):
    INTERVAL_MS = 500

    def __init__(self, interval_ms: int = INTERVAL_MS):
        super().__init__()
        self._timer = QTimer(self)
        self._timer.setInterval(interval_ms)
        self._timer.timeout.connect(self.collect_due)
        self._was_enabled = gc.isenabled()

    def start(self) -> None:
        gc.disable()
        self._timer.start()

    def stop(self) -> None:
        """Collection goes back to how it was (the caller is on the GUI thread)."""
        self._timer.stop()
        if self._was_enabled:
            gc.enable()

    def collect_due(self) -> int:
        """Collects the oldest generation past its threshold (and the younger ones); the
        number of objects found unreachable."""
        counts, thresholds = gc.get_count(), gc.get_threshold()
        due = [generation for generation in range(3) if counts[generation] > thresholds[generation]]
        return gc.collect(max(due)) if due else 0
