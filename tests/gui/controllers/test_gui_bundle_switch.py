"""A kiosk's assistant follows a bundle switch without restarting (desktop_app/controllers/
assistant.py): an answer in flight when a new version is installed finishes on the old version's
store, and the next question reads the new one. Real parts: the pump manual indexed with the
built-in embedder, bundles built, signed and installed by engine.fleet, the tiny LLM."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.answer.assistant import DoneEvent, PassagesEvent
from engine.fleet.bundle import (
    build_bundle,
    generate_keys,
    install_bundle,
    public_key_text,
)
from engine.paths import AppPaths
from tests.helpers.events import wait_event
from tests.helpers.pump_chat import (
    ANSWER_MS,
    QUESTION,
    Hold,
    answer_of,
    index_into,
    start_controller,
)


@pytest.fixture
def fleet(tmp_path, indexed_copy):
    """(the administrator's data dir, its key, a kiosk with version 1 installed)."""
    key = generate_keys(tmp_path / "key.pem")
    kiosk = AppPaths(tmp_path / "kiosk").ensure()
    build_bundle(indexed_copy, "default", key, tmp_path / "v1.tar", version=1)
    install_bundle(kiosk, tmp_path / "v1.tar", [public_key_text(key)])
    return indexed_copy, key, kiosk


def install_v2(tmp_path: Path, admin: AppPaths, key, kiosk: AppPaths) -> None:
    manual = admin.root / "valve.txt"
    manual.write_text("Valve manual. Close the strainer valve before removing the basket.", encoding="utf-8")
    index_into(admin, [manual])
    build_bundle(admin, "default", key, tmp_path / "v2.tar", version=2)
    install_bundle(kiosk, tmp_path / "v2.tar", [public_key_text(key)])


def passages_of(events) -> list[str]:
    return [p.path for e in events if isinstance(e, PassagesEvent) for p in e.passages]


def test_the_answer_in_flight_ends_on_the_old_version_and_the_next_reads_the_new(
        qtbot, tmp_path, fleet, tiny_llm_dir, monkeypatch):
    admin, key, kiosk = fleet
    controller = start_controller(qtbot, kiosk, tiny_llm_dir)
    try:
        v1 = str(kiosk.fleet_version("default", 1))
        assert all(path.startswith(v1) for path in passages_of(answer_of(qtbot, controller)))

        hold = Hold(controller.worker, monkeypatch)
        events = []
        controller.answerEvent.connect(events.append)
        with wait_event(qtbot, controller.answerEvent, DoneEvent, timeout=ANSWER_MS):
            controller.ask(QUESTION)
            assert hold.reached.wait(60)  # the answer is streaming on version 1
            install_v2(tmp_path, admin, key, kiosk)
            assert kiosk.collection("default") == kiosk.fleet_version("default", 2)
            hold.release.set()
        controller.answerEvent.disconnect(events.append)
        in_flight = passages_of(events)
        assert in_flight and all(path.startswith(v1) for path in in_flight)

        v2 = str(kiosk.fleet_version("default", 2))
        after = answer_of(qtbot, controller, "How do I close the strainer valve before removing the basket?")
        paths = passages_of(after)
        assert paths and all(path.startswith(v2) for path in paths)
        assert any(path.endswith("valve.txt") for path in paths)
        assert isinstance(after[-1], DoneEvent)
    finally:
        controller.shutdown()


def test_a_kiosk_with_a_bundle_source_starts_the_watcher(qtbot, tmp_path, indexed_copy):
    """desktop_app/app.py starts it in kiosk mode only, from the settings."""
    from types import SimpleNamespace

    from desktop_app.app import _start_bundle_watcher
    from engine.config import Settings
    from engine.fleet.bundle import publish_bundle

    key = generate_keys(tmp_path / "key.pem")
    build_bundle(indexed_copy, "default", key, tmp_path / "v1.tar", version=1)
    publish_bundle(tmp_path / "v1.tar", tmp_path / "source")
    kiosk = AppPaths(tmp_path / "kiosk").ensure()
    settings = Settings(bundle_source=str(tmp_path / "source"), bundle_keys=(public_key_text(key),),
                        bundle_poll_s=2)
    window = SimpleNamespace(paths=kiosk, settings=settings)
    assert _start_bundle_watcher(window, kiosk=False) is None
    assert _start_bundle_watcher(SimpleNamespace(paths=kiosk, settings=Settings()), kiosk=True) is None
    watcher = _start_bundle_watcher(window, kiosk=True)
    try:
        qtbot.waitUntil(lambda: kiosk.fleet_current("default") == 1, timeout=30_000)
    finally:
        watcher.stop()


def test_the_bundle_controller_polls_on_its_own_thread_and_not_after_stop(qtbot, tmp_path, indexed_copy):
    """The window's threads are its controllers': polls run on the controller's thread, each
    result comes back as a signal, and after stop() the thread has ended and nothing polls."""
    import threading

    from desktop_app.controllers.bundles import BundleController
    from engine.fleet.bundle import publish_bundle
    from engine.fleet.source import open_source
    from engine.fleet.watcher import BundleWatcher

    key = generate_keys(tmp_path / "key.pem")
    build_bundle(indexed_copy, "default", key, tmp_path / "v1.tar", version=1)
    publish_bundle(tmp_path / "v1.tar", tmp_path / "source")
    kiosk = AppPaths(tmp_path / "kiosk").ensure()
    polls_on: list[int] = []

    class Watched(BundleWatcher):
        def poll_once(self):
            polls_on.append(threading.get_ident())
            return super().poll_once()

    watcher = Watched(kiosk, open_source(str(tmp_path / "source")), [public_key_text(key)], poll_s=0.5)
    controller = BundleController(watcher)
    try:
        with qtbot.waitSignal(controller.polled, timeout=30_000) as installed:
            pass
        assert installed.args[0].outcome == "installed" and kiosk.fleet_current("default") == 1
        assert polls_on and threading.get_ident() not in polls_on
    finally:
        controller.stop()
    assert not controller._thread.isRunning() and watcher.cancelled
    polls = len(polls_on)
    qtbot.wait(1500)  # three intervals: no poll after stop()
    assert len(polls_on) == polls
