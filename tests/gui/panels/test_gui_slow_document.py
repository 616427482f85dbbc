"""A document that takes long shows its time in the documents panel, updating while nothing
else arrives from the engine (issue 14: files took 68 and 89 s with no sign of which).

The worker is held at the document's first engine event (a Gate); the controller's clock is
the test's own, and the panel's timer is fired by hand: no sleeps."""

from __future__ import annotations

import pytest

from desktop_app.controllers.indexing import IndexController
from desktop_app.panels.documents import DocumentsPanel, slow_document_text
from engine.paths import AppPaths
from tests.gui.panels.test_gui_documents import RUN_S, SETTINGS, Gate, statuses
from tests.helpers.pdf_factory import write_pdf


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def held(qtbot, tmp_path, clock):
    """A panel whose controller runs on `clock`, and the list its gates go in."""
    gates: list[Gate] = []
    controller = IndexController(AppPaths(tmp_path / "data").ensure(), index_settings=SETTINGS, clock=clock)
    try:
        with qtbot.waitSignal(controller.statsChanged, timeout=RUN_S):
            pass
        panel = DocumentsPanel(controller)
        qtbot.addWidget(panel)
        panel.show()
        yield panel, controller, gates
    finally:
        for gate in gates:
            gate.release()
        controller.shutdown()


def test_slow_document_text():
    assert slow_document_text("/docs/big.pdf", 4.9) == ""
    assert slow_document_text("/docs/big.pdf", 40.2) == "Indexing big.pdf — 40 s"
    assert slow_document_text("/docs/big.pdf", 89) == "Indexing big.pdf — 1 min 29 s"


def test_a_slow_document_shows_its_time_while_it_is_indexed(qtbot, held, clock, tmp_path):
    panel, controller, gates = held
    write_pdf(tmp_path / "big.pdf", ["The pump must be primed with water before it is started"])
    gate = Gate(controller, "big.pdf", gates)
    assert not panel.slow_timer.isActive()
    controller.add_paths([str(tmp_path / "big.pdf")])
    gate.wait(qtbot)
    qtbot.waitUntil(lambda: statuses(controller.documents()) == {"big.pdf": "indexing"}, timeout=RUN_S)
    assert panel.slow_timer.isActive()

    clock.now += 2
    panel.slow_timer.timeout.emit()
    assert "Indexing big.pdf" not in panel.progress_label.text()  # not slow yet
    for seconds in (40, 41):
        clock.now = 1000.0 + seconds
        panel.slow_timer.timeout.emit()
        assert panel.progress_label.text().endswith(f"\nIndexing big.pdf — {seconds} s")
    assert controller.indexing_now()[0].endswith("big.pdf")

    with qtbot.waitSignal(controller.busyChanged, timeout=RUN_S, check_params_cb=lambda busy: not busy):
        gate.release()
    assert not panel.slow_timer.isActive() and controller.indexing_now() is None
    assert "Indexing big.pdf" not in panel.progress_label.text()
    assert panel.progress_label.text().startswith("1 document ready")
