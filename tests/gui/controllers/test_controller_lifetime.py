"""A controller that is dropped is freed at once, by reference counting: one kept alive by a
reference cycle is left to Python's cyclic GC, which may run on any thread, and destroying a
QObject on a worker thread deadlocks against the GUI thread (Qt's connection lock vs the GIL;
seen as a hung test run)."""

from __future__ import annotations

import gc
import weakref

import pytest

from desktop_app.controllers.assistant import AssistantController
from desktop_app.controllers.indexing import IndexController
from desktop_app.controllers.models import ModelsController
from desktop_app.controllers.prepare import PrepareJob
from engine.paths import AppPaths


def freed_without_the_cyclic_gc(make, end: str) -> bool:
    gc.collect()
    was_enabled = gc.isenabled()  # off in the GUI tests: collection runs on the GUI thread
    gc.disable()
    try:
        controller = make()
        getattr(controller, end)()
        ref = weakref.ref(controller)
        del controller
        return ref() is None
    finally:
        if was_enabled:
            gc.enable()


@pytest.mark.parametrize("make, end", [
    (lambda paths: IndexController(paths), "shutdown"),
    (lambda paths: AssistantController(paths, start=False), "shutdown"),
    (lambda paths: PrepareJob(paths), "wait"),
    (lambda paths: ModelsController(paths), "shutdown"),
], ids=["indexing", "assistant", "prepare", "models"])
def test_a_dropped_controller_is_freed_at_once(qtbot, tmp_path, make, end):
    paths = AppPaths(tmp_path / "data").ensure()
    assert freed_without_the_cyclic_gc(lambda: make(paths), end)


def test_a_dropped_bundle_controller_is_freed_at_once(qtbot, tmp_path):
    from desktop_app.controllers.bundles import BundleController
    from engine.fleet.source import open_source
    from engine.fleet.watcher import BundleWatcher

    paths = AppPaths(tmp_path / "data").ensure()
    (tmp_path / "source").mkdir()
    watcher = BundleWatcher(paths, open_source(str(tmp_path / "source")), [], poll_s=3600)
    assert freed_without_the_cyclic_gc(lambda: BundleController(watcher), "stop")
