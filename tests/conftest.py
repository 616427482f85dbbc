"""Shared fixtures: a tiny random LLM (fast) and the real built-in one (slow, prepared once)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


@pytest.fixture(scope="session")
def tiny_llm_dir(tmp_path_factory) -> Path:
    """A tiny random llama (2 layers, 64 wide) with the tiny byte-level vocabulary."""
    from engine.models.gguf_import import import_gguf
    from tests.helpers.gguf_factory import write_tiny_gguf

    folder = tmp_path_factory.mktemp("tiny_llm")
    source = write_tiny_gguf(folder / "tiny.gguf", context_length=2048, weight_type="Q4_1")
    return import_gguf(source, folder / "model")


@pytest.fixture(scope="session")
def builtin_data_dir(tmp_path_factory) -> Path:
    """A data dir in which the built-in SmolLM2 has been prepared (about 10 s, once)."""
    from engine.models.registry import prepare_builtin_llm
    from engine.paths import AppPaths

    paths = AppPaths(tmp_path_factory.mktemp("builtin_data")).ensure()
    prepare_builtin_llm(paths)
    return paths.root


@pytest.fixture(scope="session")
def builtin_llm_dir(builtin_data_dir) -> Path:
    from engine.models.registry import resolve_llm
    from engine.paths import AppPaths

    return resolve_llm(AppPaths(builtin_data_dir))


MANUALS = Path(__file__).parent / ".manuals"


@pytest.fixture(scope="session")
def manuals_dir() -> Path:
    """Debian's R manuals (tests/fetch_manuals.sh). Skipped where they cannot be had, never in CI."""
    if not (MANUALS / "R-intro.pdf").is_file():
        if os.environ.get("CI"):
            pytest.fail("tests/.manuals is missing: run tests/fetch_manuals.sh (make test does)")
        pytest.skip("the R manuals are not here; run tests/fetch_manuals.sh")
    return MANUALS


@pytest.fixture(scope="session")
def tiny_embedder(tmp_path_factory):
    """A tiny random ONNX embedder with the tiny WordPiece vocabulary, loaded."""
    from engine.encoders.embedder import Embedder
    from tests.helpers.tiny_embedder import write_tiny_embedder

    files = write_tiny_embedder(tmp_path_factory.mktemp("tiny_embedder"), max_positions=128)
    with Embedder.from_files(files) as loaded:
        yield loaded


@pytest.fixture
def recorded_prompts(monkeypatch) -> list:
    """Every Prompt the assistant builds, in order: their fence markers, the passages they number."""
    import engine.answer.assistant

    built: list = []
    real = engine.answer.assistant.build_prompt

    def recording(*args, **kwargs):
        built.append(real(*args, **kwargs))
        return built[-1]

    monkeypatch.setattr(engine.answer.assistant, "build_prompt", recording)
    return built


# -- for the GUI test modules ------------------------------------------------------------------
@pytest.fixture(autouse=True)
def no_modal_message_boxes(monkeypatch):
    """A QMessageBox that a test did not expect would wait offscreen for a click that never
    comes, and hang the whole run: each one fails the test instead, naming its text. A test
    that expects one patches it itself (its monkeypatch comes after this one)."""
    from PySide6.QtWidgets import QMessageBox

    shown: list[str] = []

    def refuse(kind: str):
        def show(*args, **_kwargs):
            texts = [a for a in args if isinstance(a, str)]
            shown.append(f"QMessageBox.{kind}: {' / '.join(texts)}")
            return QMessageBox.StandardButton.NoButton
        return show

    for kind in ("warning", "critical", "information", "question", "about"):
        monkeypatch.setattr(QMessageBox, kind, refuse(kind))
    yield
    assert not shown, f"an unexpected modal dialog was opened: {shown}"


@pytest.fixture
def same_look_after(qapp):
    """The window (a kiosk: with a large font) applies its theme and font to the whole
    application: put them back. GUI modules use it with pytestmark = usefixtures(...)."""
    style, palette, font = qapp.style().name(), qapp.palette(), qapp.font()
    theme = qapp.property("theme")
    yield
    qapp.setStyle(style)
    qapp.setPalette(palette)
    qapp.setFont(font)
    qapp.setProperty("theme", theme)


@pytest.fixture(scope="module")
def pump_pdf(tmp_path_factory, qapp) -> Path:
    """The pump manual of tests/helpers/pump_chat.py as a PDF."""
    from tests.helpers.pdf_factory import write_pdf
    from tests.helpers.pump_chat import PUMP_PAGES

    return write_pdf(tmp_path_factory.mktemp("docs") / "pump.pdf", PUMP_PAGES)


@pytest.fixture(scope="module")
def indexed(tmp_path_factory, pump_pdf):
    """A data dir (AppPaths) whose collection holds the pump manual, three PDF pages; copy it
    before changing it."""
    from engine.paths import AppPaths
    from tests.helpers.pump_chat import index_into

    paths = AppPaths(tmp_path_factory.mktemp("indexed")).ensure()
    index_into(paths, [pump_pdf])
    return paths


@pytest.fixture
def indexed_copy(tmp_path, indexed):
    """A fresh data dir (AppPaths) whose collection already holds the pump manual: a copy of
    `indexed`, to change at will."""
    import shutil

    from engine.paths import AppPaths

    paths = AppPaths(tmp_path / "data").ensure()
    shutil.rmtree(paths.collections)
    shutil.copytree(indexed.collections, paths.collections)
    return paths


@pytest.fixture
def root_logging_restored():
    """Handlers a test adds to the root logger (the app's log file) are closed and removed after."""
    import logging

    root = logging.getLogger()
    before, level = list(root.handlers), root.level
    yield root
    for handler in root.handlers[:]:
        if handler not in before:
            root.removeHandler(handler)
            handler.close()
    root.setLevel(level)


def _background_builds() -> tuple:
    """Slow builds run beside the suite (tests/helpers/background.py), in the order their tests run last."""
    from tests.helpers import dev_index, installers

    return installers.BUILD, dev_index.BUILD


def pytest_collection_modifyitems(items):
    from tests.helpers import background

    background.order_last(items, _background_builds())


def pytest_collection_finish(session):
    from tests.helpers import background

    background.start_needed(session, _background_builds())


def pytest_unconfigure(config):
    from tests.helpers import background

    background.stop_all(config)


def pytest_terminal_summary(terminalreporter):
    """Where the run's time went, a line per test folder: CI has a time budget to keep."""
    spent: dict[str, float] = {}
    for reports in terminalreporter.stats.values():
        for report in reports:
            if hasattr(report, "duration") and getattr(report, "nodeid", ""):
                folder = report.nodeid.split("::")[0].rpartition("/")[0]
                spent[folder] = spent.get(folder, 0.0) + report.duration
    if spent:
        terminalreporter.write_sep("=", "time per test folder")
        for folder, seconds in sorted(spent.items(), key=lambda item: -item[1]):
            terminalreporter.write_line(f"{seconds:8.1f} s  {folder}")
