"""Garbage that holds a QObject is freed on the GUI thread, never on the worker that allocates."""

from __future__ import annotations

import gc
import threading

from PySide6.QtCore import QObject, Qt

from desktop_app.gui_gc import GuiThreadGc


def _garbage_cycle(freed_on: list[int]) -> None:
    """A QObject kept alive only by a reference cycle through its own wrapper."""
    holder = QObject()
    holder.cycle = holder
    holder.destroyed.connect(lambda *_: freed_on.append(threading.get_ident()),
                             Qt.ConnectionType.DirectConnection)


def _garbage_past_the_first_threshold() -> None:
    """Cycles, which only the collector frees: its count of new objects stays up."""
    for _ in range(2 * gc.get_threshold()[0]):
        cycle = []
        cycle.append(cycle)


def test_a_cycle_holding_a_qobject_is_freed_on_the_gui_thread(qtbot, garbage_collected_on_the_gui_thread):
    assert not gc.isenabled()
    freed_on: list[int] = []
    _garbage_cycle(freed_on)
    worker = threading.Thread(target=_garbage_past_the_first_threshold)
    worker.start()
    worker.join()
    assert freed_on == []  # the worker's allocations collected nothing
    qtbot.waitUntil(lambda: bool(freed_on), timeout=5000)
    assert freed_on == [threading.get_ident()]


def test_without_it_the_allocating_worker_frees_it(qapp):
    """What the collector prevents, shown: Python, left to collect, does it on the worker."""
    gc.enable()
    try:
        gc.collect()
        freed_on: list[int] = []
        _garbage_cycle(freed_on)
        worker = threading.Thread(target=_garbage_past_the_first_threshold)
        worker.start()
        worker.join()
        assert freed_on and freed_on[0] != threading.get_ident()
    finally:
        gc.disable()


def test_collect_due_collects_only_past_a_threshold(qapp):
    collector = GuiThreadGc()
    gc.collect()
    assert collector.collect_due() == 0
    freed_on: list[int] = []
    _garbage_cycle(freed_on)
    _garbage_past_the_first_threshold()
    collector.collect_due()
    assert freed_on == [threading.get_ident()]
