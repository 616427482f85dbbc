"""Indexing in the desktop app: the IndexController (a worker on its own thread owning the real
store and the built-in embedder) and the DocumentsPanel, with real documents: generated text
and Markdown files, a two-page PDF drawn with Qt's QPdfWriter, broken files, and (slow) R's FAQ.

To see a run while it is busy, a test holds the worker at one of the engine's events: a
DirectConnection slot runs on the worker's thread and waits until the test lets it go."""

from __future__ import annotations

import importlib
import shutil
import threading
import warnings
from pathlib import Path

import pytest
from PySide6.QtCore import QMimeData, QPointF, Qt, QThread, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent, QFont
from PySide6.QtWidgets import QApplication, QFileDialog

from desktop_app.controllers.indexing import IndexController
from desktop_app.panels.documents import DocumentsPanel, duration_text, progress_text, state_text
from engine.paths import AppPaths
from engine.store.indexer import IndexSettings, default_embedder, open_collection
from engine.types import IndexProgress, StoredDocument
from tests.helpers.pdf_factory import write_pdf

SETTINGS = IndexSettings(parse_time_limit_s=30, parse_memory_limit_mb=1024)
RUN_S = 60_000  # ms: a generous bound for a run of a few small documents (a few seconds here)


# -- documents ---------------------------------------------------------------------------------

@pytest.fixture
def docs(tmp_path, qapp) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "oil.txt").write_text("Check the oil level of the compressor every week. "
                                    "Use only the oil named on the type plate.\n" * 20, encoding="utf-8")
    (folder / "pump.md").write_text("# Pump\n\nPrime the pump with water before starting it the first time.\n\n"
                                    "## Faults\n\nError E-1234 means that the shaft seal leaks and must be "
                                    "replaced by a technician.\n", encoding="utf-8")
    write_pdf(folder / "manual.pdf", [
        "The hydraulic press must be switched off before cleaning. Wear gloves and glasses",
        "Replace the filter cartridge every 500 hours. The part number is F-778",
    ])
    return folder


@pytest.fixture
def broken(tmp_path) -> list[Path]:
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "empty.pdf").write_bytes(b"")
    (folder / "corrupt.pdf").write_bytes(b"%PDF-1.7\nthis is not really a pdf\n")
    return [folder / "empty.pdf", folder / "corrupt.pdf"]


# -- the controller ----------------------------------------------------------------------------

@pytest.fixture
def data_paths(tmp_path) -> AppPaths:
    return AppPaths(tmp_path / "data").ensure()


@pytest.fixture
def gates():
    opened: list[Gate] = []
    yield opened
    for gate in opened:  # a failing test must not leave the worker held
        gate.release()


@pytest.fixture
def controller(qtbot, data_paths, gates):
    controller = IndexController(data_paths, index_settings=SETTINGS)
    try:
        with qtbot.waitSignal(controller.statsChanged, timeout=RUN_S):
            pass  # the first refresh: the store is open (on the worker thread)
        yield controller
    finally:  # also when the setup failed: a running QThread must never be garbage-collected
        for gate in gates:
            gate.release()
        controller.shutdown()
    assert not controller._thread.isRunning() and not controller._scan_thread.isRunning()


class Gate:
    """Holds the worker thread at the first engine event for the file named `name`."""

    def __init__(self, controller: IndexController, name: str, gates: list):
        self.name = name
        self.reached = threading.Event()
        self._open = threading.Event()
        controller._worker.event.connect(self._hold, Qt.ConnectionType.DirectConnection)
        gates.append(self)

    def _hold(self, event) -> None:
        if not isinstance(event, IndexProgress):
            return  # the worker's other reports
        if Path(event.current_file).name == self.name and not self._open.is_set():
            self.reached.set()
            self._open.wait(60)

    def wait(self, qtbot) -> None:
        qtbot.waitUntil(self.reached.is_set, timeout=RUN_S)

    def release(self) -> None:
        self._open.set()


def by_name(documents: list[StoredDocument]) -> dict[str, StoredDocument]:
    return {d.name: d for d in documents}


def statuses(documents: list[StoredDocument]) -> dict[str, str]:
    return {d.name: d.status for d in documents}


def all_final(documents: list[StoredDocument]) -> bool:
    return all(d.status not in ("queued", "indexing") for d in documents)


def index(qtbot, controller, paths, expected: dict[str, str]) -> dict[str, StoredDocument]:
    """Add `paths` and wait until the documents show the expected statuses and the run is over."""
    with qtbot.waitSignal(controller.busyChanged, timeout=RUN_S, check_params_cb=lambda busy: not busy):
        controller.add_paths([str(p) for p in paths])
    qtbot.waitUntil(lambda: {n: s for n, s in statuses(controller.documents()).items() if n in expected}
                    == expected, timeout=RUN_S)
    return by_name(controller.documents())


def test_added_files_are_indexed_and_reported_ready_with_page_counts(qtbot, controller, docs):
    stats = []
    controller.statsChanged.connect(lambda ready, chunks: stats.append((ready, chunks)))
    expected = {"oil.txt": "ready", "pump.md": "ready", "manual.pdf": "ready"}
    with qtbot.waitSignal(controller.documentsChanged, timeout=RUN_S,
                          check_params_cb=lambda documents: statuses(documents) == expected) as blocker:
        controller.add_paths([str(docs / "oil.txt"), str(docs / "pump.md"), str(docs / "manual.pdf")])
    documents = by_name(blocker.args[0])
    assert documents["manual.pdf"].page_count == 2 and documents["manual.pdf"].chunk_count >= 1
    assert documents["oil.txt"].page_count >= 1 and documents["pump.md"].chunk_count >= 1
    assert all(isinstance(d.id, int) for d in documents.values())
    assert documents["manual.pdf"].path == str(docs / "manual.pdf")
    qtbot.waitUntil(lambda: not controller.busy, timeout=RUN_S)
    assert stats[-1] == (3, sum(d.chunk_count for d in documents.values()))

    again = index(qtbot, controller, [docs], expected)  # unchanged files are not indexed again
    assert {n: d.id for n, d in again.items()} == {n: d.id for n, d in documents.items()}
    assert controller.stats == stats[-1]


def test_a_folder_is_searched_and_failures_keep_their_reason_while_the_rest_indexes(qtbot, controller, docs,
                                                                                    broken):
    for path in broken:
        path.rename(docs / path.name)
    documents = index(qtbot, controller, [docs], {"oil.txt": "ready", "pump.md": "ready", "manual.pdf": "ready",
                                                  "empty.pdf": "failed", "corrupt.pdf": "failed"})
    assert "empty.pdf" in documents["empty.pdf"].error and "empty" in documents["empty.pdf"].error
    assert "corrupt.pdf" in documents["corrupt.pdf"].error
    assert documents["corrupt.pdf"].id is not None and documents["corrupt.pdf"].chunk_count == 0
    assert controller.stats[0] == 3


def test_a_folder_without_documents_and_a_missing_file_are_reported(qtbot, controller, tmp_path):
    (tmp_path / "nothing").mkdir()
    with qtbot.waitSignal(controller.failed, timeout=RUN_S) as blocker:
        controller.add_paths([str(tmp_path / "nothing"), str(tmp_path / "gone.pdf")])
    messages = blocker.args[0].splitlines()
    assert any("No documents to index" in m and "nothing" in m for m in messages)
    assert any("gone.pdf" in m and "not found" in m for m in messages)
    qtbot.waitUntil(lambda: not controller.busy, timeout=RUN_S)
    assert controller.documents() == []


def test_a_dropped_folder_is_searched_once_and_its_files_go_to_the_indexer(qtbot, controller, docs, monkeypatch):
    discovering = importlib.import_module("engine.ingest.discover")  # engine.ingest.discover is the function
    looked_in = []
    files_of = discovering._files_of
    monkeypatch.setattr(discovering, "_files_of", lambda path: looked_in.append(path) or files_of(path))
    index(qtbot, controller, [docs], {"oil.txt": "ready", "pump.md": "ready", "manual.pdf": "ready"})
    assert looked_in == [docs]  # the scanner's look; the worker and the indexer take its list


def test_documents_added_during_a_run_show_as_queued_and_are_indexed_after_it(qtbot, controller, docs, gates):
    gate = Gate(controller, "oil.txt", gates)
    controller.add_paths([str(docs / "oil.txt")])
    gate.wait(qtbot)

    def oil_indexing_and_others_queued(documents):
        return statuses(documents) == {"oil.txt": "indexing", "pump.md": "queued", "manual.pdf": "queued"}

    with qtbot.waitSignal(controller.documentsChanged, timeout=RUN_S, check_params_cb=oil_indexing_and_others_queued):
        controller.add_paths([str(docs / "pump.md"), str(docs / "manual.pdf")])
    assert controller.busy
    with qtbot.waitSignal(controller.busyChanged, timeout=RUN_S, check_params_cb=lambda busy: not busy):
        gate.release()
    qtbot.waitUntil(lambda: statuses(controller.documents())
                    == {"oil.txt": "ready", "pump.md": "ready", "manual.pdf": "ready"}, timeout=RUN_S)


def test_cancel_stops_the_run_drops_the_queue_and_leaves_a_consistent_state(qtbot, controller, docs, gates):
    gate = Gate(controller, "manual.pdf", gates)  # the first in the run's (sorted) order
    controller.add_paths([str(docs)])
    gate.wait(qtbot)
    qtbot.waitUntil(lambda: statuses(controller.documents())
                    == {"manual.pdf": "indexing", "oil.txt": "queued", "pump.md": "queued"}, timeout=RUN_S)
    with qtbot.waitSignal(controller.documentsChanged, timeout=RUN_S,
                          check_params_cb=lambda documents: statuses(documents) == {"manual.pdf": "indexing"}):
        controller.cancel()
    with qtbot.assertNotEmitted(controller.progressed):
        with qtbot.waitSignal(controller.busyChanged, timeout=RUN_S, check_params_cb=lambda busy: not busy):
            gate.release()
        qtbot.waitUntil(lambda: all_final(controller.documents()), timeout=RUN_S)
    assert controller.documents() == [] and controller.stats == (0, 0)
    # the cancel does not stick: the next request indexes everything
    index(qtbot, controller, [docs], {"manual.pdf": "ready", "oil.txt": "ready", "pump.md": "ready"})


def test_remove_and_reindex_change_the_store_and_the_stats(qtbot, controller, docs):
    documents = index(qtbot, controller, [docs], {"manual.pdf": "ready", "oil.txt": "ready", "pump.md": "ready"})
    chunks = sum(d.chunk_count for d in documents.values())
    with qtbot.waitSignals([controller.documentsChanged, controller.statsChanged], timeout=RUN_S,
                           check_params_cbs=[lambda d: "oil.txt" not in by_name(d),
                                             lambda ready, n: (ready, n) == (2, chunks - documents["oil.txt"].chunk_count)]):
        controller.remove(documents["oil.txt"].id)

    old_id = documents["manual.pdf"].id
    seen = []
    controller.documentsChanged.connect(lambda d: seen.append(by_name(d)["manual.pdf"].status))
    with qtbot.waitSignal(controller.documentsChanged, timeout=RUN_S,
                          check_params_cb=lambda d: by_name(d)["manual.pdf"].status == "ready"):
        controller.reindex(old_id)
    qtbot.waitUntil(lambda: not controller.busy, timeout=RUN_S)
    again = by_name(controller.documents())
    assert {"queued", "indexing"} & set(seen) and seen[-1] == "ready"
    assert again["manual.pdf"].id != old_id and again["manual.pdf"].page_count == 2
    assert set(again) == {"manual.pdf", "pump.md"} and controller.stats[0] == 2
    with open_collection(controller._worker._paths, "default", read_only=True) as store:
        assert {Path(d.path).name for d in store.list_documents()} == {"manual.pdf", "pump.md"}


def test_reindexing_a_document_whose_file_is_gone_says_so(qtbot, controller, docs):
    documents = index(qtbot, controller, [docs / "pump.md"], {"pump.md": "ready"})
    (docs / "pump.md").unlink()
    with qtbot.waitSignal(controller.failed, timeout=RUN_S,
                          check_params_cb=lambda message: "pump.md" in message and "not found" in message):
        controller.reindex(documents["pump.md"].id)
    qtbot.waitUntil(lambda: not controller.busy and controller.documents() == [], timeout=RUN_S)


def test_a_copy_is_said_and_not_listed_and_a_moved_file_keeps_its_row(qtbot, controller, docs, tmp_path):
    documents = index(qtbot, controller, [docs / "pump.md"], {"pump.md": "ready"})
    copy = tmp_path / "copies" / "pump.md"
    copy.parent.mkdir()
    shutil.copy2(docs / "pump.md", copy)
    with qtbot.waitSignal(controller.failed, timeout=RUN_S,
                          check_params_cb=lambda message: message == "'pump.md' is indexed already (the same "
                                                                    "file in 'docs'): it is searched once."):
        controller.add_paths([str(copy)])
    qtbot.waitUntil(lambda: not controller.busy, timeout=RUN_S)
    qtbot.waitUntil(lambda: [d.path for d in controller.documents()] == [str(docs / "pump.md")], timeout=RUN_S)
    (docs / "pump.md").unlink()
    index(qtbot, controller, [copy], {"pump.md": "ready"})
    qtbot.waitUntil(lambda: [(d.path, d.id) for d in controller.documents()] == [(str(copy), documents["pump.md"].id)],
                    timeout=RUN_S)


def test_a_queued_document_can_be_removed_before_its_turn(qtbot, controller, docs, gates):
    gate = Gate(controller, "oil.txt", gates)
    controller.add_paths([str(docs / "oil.txt")])
    gate.wait(qtbot)
    with qtbot.waitSignal(controller.documentsChanged, timeout=RUN_S,
                          check_params_cb=lambda d: statuses(d).get("pump.md") == "queued"):
        controller.add_paths([str(docs / "pump.md")])
    with qtbot.waitSignal(controller.documentsChanged, timeout=RUN_S,
                          check_params_cb=lambda d: "pump.md" not in by_name(d)):
        controller.remove_path(str(docs / "pump.md"))
    gate.release()
    qtbot.waitUntil(lambda: not controller.busy, timeout=RUN_S)
    assert statuses(controller.documents()) == {"oil.txt": "ready"}


def test_the_worker_runs_on_its_own_thread_and_shutdown_stops_it(qtbot, data_paths, docs, qapp):
    controller = IndexController(data_paths, index_settings=SETTINGS)
    threads = []
    controller._worker.event.connect(lambda event: threads.append(QThread.currentThread()),
                                     Qt.ConnectionType.DirectConnection)
    try:
        index(qtbot, controller, [docs / "pump.md"], {"pump.md": "ready"})
        assert threads and all(t is controller._thread for t in threads)
        assert controller._thread is not qapp.thread() and controller._thread.isRunning()
        assert controller._worker.opened_on_thread not in (None, threading.get_ident())
    finally:
        controller.shutdown()
    assert not controller._thread.isRunning() and not controller._scan_thread.isRunning()
    with open_collection(data_paths, "default", default_embedder(data_paths)) as store:  # the lock is free
        assert [Path(d.path).name for d in store.list_documents()] == ["pump.md"]
    controller.shutdown()  # twice is harmless


def test_idle_indexing_closes_the_collection_and_the_next_request_opens_it_again(qtbot, data_paths, docs, gates):
    """Listing the documents opens no writer and loads no embedder; idle for release_after_s
    after indexing, the worker closes its writer store and the embedder (the window then holds
    one dense index, the answering store's: issue 32); never during a run."""
    controller = IndexController(data_paths, index_settings=SETTINGS, release_after_s=0.2)
    try:
        with qtbot.waitSignal(controller.statsChanged, timeout=RUN_S):
            pass  # the first listing
        assert not controller.holds_store and controller._worker._embedder is None  # listing opens neither

        gate = Gate(controller, "pump.md", gates)
        controller.add_paths([str(docs / "pump.md")])
        gate.wait(qtbot)
        qtbot.wait(600)  # three times release_after_s, with the run held
        assert controller.holds_store and controller.busy
        gate.release()
        qtbot.waitUntil(lambda: statuses(controller.documents()) == {"pump.md": "ready"}, timeout=RUN_S)
        qtbot.waitUntil(lambda: not controller.holds_store, timeout=RUN_S)
        index(qtbot, controller, [docs / "oil.txt"], {"oil.txt": "ready", "pump.md": "ready"})
    finally:
        controller.shutdown()
    with open_collection(data_paths, "default", default_embedder(data_paths)) as store:
        assert sorted(Path(d.path).name for d in store.list_documents()) == ["oil.txt", "pump.md"]
    listing = IndexController(data_paths, index_settings=SETTINGS)  # a kiosk's start: a listing, no writer
    try:
        qtbot.waitUntil(lambda: len(listing.documents()) == 2, timeout=RUN_S)
        assert not listing.holds_store
        with open_collection(data_paths, "default", default_embedder(data_paths)):
            pass  # the writer's lock is free while the window lists the collection
    finally:
        listing.shutdown()


def test_shutdown_during_a_run_cancels_it_and_frees_the_collection(qtbot, data_paths, docs, gates):
    controller = IndexController(data_paths, index_settings=SETTINGS)
    gate = Gate(controller, "manual.pdf", gates)
    controller.add_paths([str(docs)])
    try:
        gate.wait(qtbot)
    finally:
        gate.release()
        controller.shutdown()
    assert not controller._thread.isRunning() and not controller._scan_thread.isRunning()
    with open_collection(data_paths, "default", default_embedder(data_paths)) as store:
        assert len(store.list_documents()) < 3 and store.quick_check() == "ok"


# -- the panel ---------------------------------------------------------------------------------

@pytest.fixture
def panel(qtbot, controller):
    panel = DocumentsPanel(controller)
    qtbot.addWidget(panel)
    panel.resize(700, 500)
    panel.show()
    qtbot.waitExposed(panel)
    return panel


def rows(panel) -> dict[str, str]:
    items = (panel.list.topLevelItem(i) for i in range(panel.list.topLevelItemCount()))
    return {item.text(0): item.text(1) for item in items}


def tab_order(start, count: int) -> list:
    """The widgets Tab visits from `start` (those that take focus by Tab, enabled or not)."""
    order, widget = [start], start
    while len(order) < count:
        widget = widget.nextInFocusChain()
        if widget is start:
            break
        if widget.focusPolicy() & Qt.FocusPolicy.TabFocus and widget.isVisibleTo(start.window()):
            order.append(widget)
    return order


def item(panel, name):
    return next(panel.list.topLevelItem(i) for i in range(panel.list.topLevelItemCount())
                if panel.list.topLevelItem(i).text(0) == name)


def test_the_panel_adds_files_from_the_dialog_and_shows_states_and_progress(qtbot, panel, controller, docs, broken,
                                                                            gates, monkeypatch):
    chosen = [str(docs / "manual.pdf"), str(docs / "oil.txt"), str(broken[1])]
    asked = []
    monkeypatch.setattr(QFileDialog, "getOpenFileNames",
                        lambda *args: (asked.append(args), (chosen, "Documents"))[1])
    gate = Gate(controller, "corrupt.pdf", gates)  # the first in the run's order (by path)
    assert not panel.cancel_button.isEnabled() and not panel.progress_bar.isVisible()
    assert "No documents yet" in panel.progress_label.text()

    qtbot.mouseClick(panel.add_button, Qt.MouseButton.LeftButton)
    gate.wait(qtbot)
    assert "*.pdf" in asked[0][3] and "*.docx" in asked[0][3]
    qtbot.waitUntil(lambda: rows(panel) == {"corrupt.pdf": "indexing…", "manual.pdf": "queued",
                                            "oil.txt": "queued"}, timeout=RUN_S)
    qtbot.waitUntil(lambda: panel.progress_label.text().startswith("0/3 documents"), timeout=RUN_S)
    assert panel.cancel_button.isEnabled() and panel.progress_bar.isVisible()
    assert str(broken[1]) in item(panel, "corrupt.pdf").toolTip(0)

    labels = []
    controller.progressed.connect(lambda event: labels.append(panel.progress_label.text()))
    gate.release()
    qtbot.waitUntil(lambda: not controller.busy, timeout=RUN_S)
    qtbot.waitUntil(lambda: rows(panel).get("manual.pdf") == "ready · 2 pages", timeout=RUN_S)
    assert rows(panel)["corrupt.pdf"].startswith("failed: ") and "corrupt.pdf" in rows(panel)["corrupt.pdf"]
    assert "damaged" in item(panel, "corrupt.pdf").toolTip(1)
    assert any(" documents · " in text and "pages/s" in text for text in labels)
    assert not panel.cancel_button.isEnabled() and not panel.progress_bar.isVisible()
    assert panel.progress_label.text().startswith("2 documents ready · ") and "1 failed" in panel.progress_label.text()


def test_the_panel_works_from_the_keyboard(qtbot, panel, controller, docs, monkeypatch):
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", lambda *args: str(docs))
    panel.add_folder_button.click()
    qtbot.waitUntil(lambda: set(rows(panel)) == {"manual.pdf", "oil.txt", "pump.md"} and not controller.busy
                    and all(text.startswith("ready · ") for text in rows(panel).values()), timeout=RUN_S)
    assert rows(panel)["manual.pdf"] == "ready · 2 pages"

    controls = [panel.add_button, panel.add_folder_button, panel.list, panel.reindex_button, panel.remove_button,
                panel.cancel_button]
    assert all(control.accessibleName() for control in controls)
    assert tab_order(panel.add_button, len(controls)) == controls
    assert not panel.remove_button.isEnabled() and not panel.reindex_button.isEnabled()

    panel.list.setFocus()
    panel.list.setCurrentItem(item(panel, "oil.txt"))
    assert panel.remove_button.isEnabled() and panel.reindex_button.isEnabled()
    with qtbot.waitSignal(controller.documentsChanged, timeout=RUN_S,
                          check_params_cb=lambda d: "oil.txt" not in by_name(d)):
        qtbot.keyClick(panel.list, Qt.Key.Key_Delete)
    qtbot.waitUntil(lambda: set(rows(panel)) == {"manual.pdf", "pump.md"}, timeout=RUN_S)
    assert [i.text(0) for i in panel.list.selectedItems()] == ["pump.md"]  # the next row, ready for Delete

    old_id = by_name(controller.documents())["pump.md"].id
    with qtbot.waitSignal(controller.busyChanged, timeout=RUN_S, check_params_cb=lambda busy: not busy):
        qtbot.keyClick(panel.reindex_button, Qt.Key.Key_Space)
    qtbot.waitUntil(lambda: rows(panel).get("pump.md", "").startswith("ready"), timeout=RUN_S)
    assert by_name(controller.documents())["pump.md"].id != old_id


def test_files_dropped_on_the_panel_are_added(qtbot, panel, controller, docs):
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(docs / "pump.md")), QUrl("https://example.com/x.pdf")])
    where = panel.list.geometry().center()
    with warnings.catch_warnings():  # PySide marks QDragEnterEvent's only constructor deprecated
        warnings.simplefilter("ignore", DeprecationWarning)
        enter = QDragEnterEvent(where, Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                                Qt.KeyboardModifier.NoModifier)
    drop = QDropEvent(QPointF(where), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                      Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(panel, enter)
    assert enter.isAccepted()
    with qtbot.waitSignal(controller.busyChanged, timeout=RUN_S, check_params_cb=lambda busy: not busy):
        QApplication.sendEvent(panel, drop)
        assert drop.isAccepted()
    qtbot.waitUntil(lambda: rows(panel).get("pump.md", "").startswith("ready"), timeout=RUN_S)


def test_the_list_scales_with_the_font(qtbot, panel):
    width = panel.list.columnWidth(0)
    font = QFont(panel.font())
    font.setPointSizeF(font.pointSizeF() * 2)
    panel.setFont(font)
    assert panel.list.columnWidth(0) > width * 1.5


def test_state_and_progress_texts():
    def row(status, **fields):
        return StoredDocument("/x/a.pdf", status, **fields)

    assert state_text(row("queued", page_count=0)) == "queued"
    assert state_text(row("indexing", page_count=85, pages_done=12)) == "indexing 12/85 pages"
    assert state_text(row("indexing", page_count=0, pages_done=None)) == "indexing…"
    assert state_text(row("ready", page_count=85)) == "ready · 85 pages"
    assert state_text(row("ready", page_count=1)) == "ready · 1 page"
    assert state_text(row("ready_with_warnings", page_count=3, error="x")) == "ready with warnings · 3 pages"
    assert state_text(row("failed", page_count=0, error="'a.pdf' is empty")) == "failed: 'a.pdf' is empty"
    event = IndexProgress(3, 10, 52, "/x/a.pdf", 10.0, None, 300, 1500)
    assert progress_text(event) == "3/10 documents · 5.2 pages/s · ETA 40 s"
    assert progress_text(IndexProgress(0, 4, 0, "/x/a.pdf", 0.5)) == "0/4 documents"
    assert duration_text(200) == "3 min 20 s" and duration_text(3 * 3600 + 120) == "3 h 2 min"


@pytest.mark.slow
def test_a_real_manual_is_indexed_with_its_pages(qtbot, panel, controller, manuals_dir):
    with qtbot.waitSignal(controller.busyChanged, timeout=300_000, check_params_cb=lambda busy: not busy):
        controller.add_paths([str(manuals_dir / "R-FAQ.pdf")])
    qtbot.waitUntil(lambda: rows(panel).get("R-FAQ.pdf") == "ready · 52 pages", timeout=RUN_S)
    ready, chunks = controller.stats
    assert ready == 1 and chunks > 52


def test_a_folder_inside_a_drop_that_could_not_be_read_is_named(tmp_path):
    from desktop_app.controllers.indexing import _problems
    from engine.ingest.discover import Found

    dropped, locked = str(tmp_path / "manuals"), str(tmp_path / "manuals" / "locked")
    found = Found(files=(str(tmp_path / "manuals" / "a.pdf"),), unreadable=((locked, "permission denied"),))
    assert _problems([dropped], found) == [
        f"Could not look in the folder '{locked}' (permission denied); its documents were left out."]
    only_locked = Found(files=(), empty=(dropped,), unreadable=((locked, "permission denied"),))
    assert _problems([dropped], only_locked) == [
        f"No documents could be read in '{dropped}': the folder '{locked}' could not be opened "
        "(permission denied). Check that you may read it."]
    alone = Found(files=(), unreadable=((dropped, "permission denied"),))
    assert _problems([dropped], alone) == [f"Could not look for documents in '{dropped}' (permission denied)."]


def test_the_bar_moves_with_the_pages_of_a_long_document_not_only_between_documents(qtbot, panel, controller,
                                                                                     tmp_path):
    """One long PDF: the engine reports its pages as they are embedded (a step of 64 chunks);
    the bar follows them instead of sitting at 0 until the document is done (issue 15)."""
    long_pdf = write_pdf(tmp_path / "long.pdf", [f"Page {n} of the long manual. Check valve V-{n} weekly"
                                                 for n in range(1, 151)])
    seen = []  # (pages embedded, bar value) while the document is not finished
    controller.progressed.connect(lambda event: event.outcome is None and event.document_pages
                                  and seen.append((event.document_pages_done, panel.progress_bar.value())))
    with qtbot.waitSignal(controller.busyChanged, timeout=RUN_S, check_params_cb=lambda busy: not busy):
        controller.add_paths([str(long_pdf)])
    assert len(seen) >= 2, seen  # more than one step inside the document
    middle = [value for pages, value in seen if 0 < pages < 150]
    assert middle and all(0 < value < panel.progress_bar.maximum() for value in middle), seen
    values = [value for _, value in seen]
    assert values == sorted(values)


def test_the_run_fraction_counts_the_pages_of_the_current_document():
    from desktop_app.controllers.indexing import done_fraction

    # 2 of 10 documents done (400 of 1400 bytes); the current one (500 bytes) is at 18/113 pages
    event = IndexProgress(2, 10, 30, "/x/big.pdf", 10.0, None, 400, 1400, 113, 18)
    assert done_fraction(event, 500) == pytest.approx((400 + 500 * 18 / 113) / 1400)
    assert done_fraction(IndexProgress(0, 1, 0, "/x/a.pdf", 1.0), 0) is None  # no total yet
    finished = IndexProgress(1, 1, 113, "/x/big.pdf", 20.0, object(), 500, 500, 0, 0)
    assert done_fraction(finished, 500) == 1.0
    assert "ETA 30 s" in progress_text(IndexProgress(0, 2, 0, "/x/a.pdf", 10.0, None, 0, 100, 4, 1), 0.25)


def test_documents_an_earlier_version_read_are_read_again_at_start_and_said_once(qtbot, data_paths, docs):
    """A collection whose PDF text came from pypdf and whose Markdown kept its table pipes (no
    text version): the window reads those again in the background, once, and says so; a plain
    text file, read as before, stays as it is."""
    with open_collection(data_paths, "default", default_embedder(data_paths)) as store:
        from engine.store.indexer import Indexer

        list(Indexer(store, default_embedder(data_paths), SETTINGS).run([docs]))
        store._db.execute("DELETE FROM text_versions")  # as an earlier version left it
        store._db.commit()
    controller = IndexController(data_paths, index_settings=SETTINGS)
    try:
        with qtbot.waitSignal(controller.rereading, timeout=RUN_S) as told:
            pass
        assert told.args == [2]
        qtbot.waitUntil(lambda: not controller.busy and all_final(controller.documents()), timeout=RUN_S)
        with qtbot.assertNotEmitted(controller.rereading, wait=200):
            controller.refresh()
    finally:
        controller.shutdown()
    with open_collection(data_paths, "default", default_embedder(data_paths)) as store:
        versions = {Path(d.path).name: d.text_version for d in store.list_documents()}
    assert versions == {"manual.pdf": 3, "oil.txt": None, "pump.md": 2}
