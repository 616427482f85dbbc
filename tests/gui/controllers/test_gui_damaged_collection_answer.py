"""The window's assistant on a damaged collection (issue 14): a question gets what happened and
what to do, not "No manuals are indexed yet", after the repair emptied the collection or after
its files were moved aside."""

from __future__ import annotations

import pytest

from engine.answer.assistant import ErrorEvent
from engine.paths import DB_NAME, AppPaths
from engine.store import health
from tests.helpers.damaged_collection import damage_collection
from tests.helpers.events import wait_event
from tests.helpers.pump_chat import ANSWER_MS, start_controller


@pytest.fixture
def data(indexed_copy) -> AppPaths:
    """A fresh data dir whose collection already holds the pump manual."""
    return indexed_copy


def error_of(qtbot, controller) -> str:
    with wait_event(qtbot, controller.answerEvent, ErrorEvent, timeout=ANSWER_MS) as error:
        controller.ask("How do I prime the pump?", [])
    return error.args[0].message


def test_a_collection_emptied_by_repair_says_which_manual_to_index_again(qtbot, data, tiny_llm_dir):
    damage_collection(data.collection("default"))  # the pump manual's one document
    controller = start_controller(qtbot, data, tiny_llm_dir)
    try:
        for _ in range(2):
            message = error_of(qtbot, controller)
            assert "nothing to answer from" in message and "pump.pdf" in message
            assert "Index the manuals again" in message and "No manuals" not in message
    finally:
        controller.shutdown()


def test_a_collection_set_aside_says_where_its_files_went(qtbot, data, tiny_llm_dir):
    folder = data.collection("default")
    (folder / DB_NAME).write_bytes(b"")
    controller = start_controller(qtbot, data, tiny_llm_dir)
    try:
        first = error_of(qtbot, controller)
        [aside] = health.set_aside_folders(folder)
        assert "is damaged" in first and str(aside) in first
        second = error_of(qtbot, controller)
        assert second.startswith("The collection 'default' was damaged") and str(aside) in second
    finally:
        controller.shutdown()
