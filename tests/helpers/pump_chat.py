"""The pump manual's chat, as the GUI tests drive it: the manual's pages, a gate forced open or
shut, indexing with the engine itself, a started AssistantController, the events of one answer,
and a way to hold an answer midway."""

from __future__ import annotations

import threading
from pathlib import Path

from desktop_app.chat.view import ChatView
from desktop_app.controllers.assistant import AssistantController
from engine.answer.assistant import AssistantSettings, DoneEvent, TextEvent
from engine.config import Settings
from engine.conversations import ConversationStore
from engine.paths import AppPaths
from engine.store.indexer import Indexer, IndexSettings, default_embedder, open_collection
from tests.helpers.events import wait_event

ANSWER = AssistantSettings(relevance_threshold=-10.0, max_new_tokens=40)  # every question passes the gate
REFUSE = AssistantSettings(relevance_threshold=10.0)  # no question passes it
QUESTION = "How do I prime the pump before the first start?"
PUMP_PAGES = [
    "Pump manual. Safety: wear gloves when handling the pump housing. Keep children away",
    "Priming the pump: fill the pump casing with clean water before the first start. "
    "Then open the bleed valve until water flows without air bubbles",
    "Error E-12 means the motor overheated. Switch the pump off and let the motor cool for thirty minutes",
]
LOAD_MS = 60_000  # the model's child process starts in about a second; generous for slow CI
ANSWER_MS = 60_000


def index_into(paths: AppPaths, files: list[Path]) -> None:
    """Indexes `files` with the engine itself (the GUI's indexing is tested on its own)."""
    embedder = default_embedder(paths)
    try:
        with open_collection(paths, "default", embedder) as store:
            settings = IndexSettings(parse_time_limit_s=60, parse_memory_limit_mb=1024)
            outcomes = [e.outcome for e in Indexer(store, embedder, settings).run(files) if e.outcome]
    finally:
        embedder.close()
    assert [o.status for o in outcomes] == ["ready"] * len(files), outcomes


def pump_data_dir(tmp_path_factory) -> AppPaths:
    """A data dir whose collection holds the pump manual as a real PDF."""
    from tests.helpers.pdf_factory import write_pdf

    pdf = write_pdf(tmp_path_factory.mktemp("docs") / "pump.pdf", PUMP_PAGES)
    paths = AppPaths(tmp_path_factory.mktemp("data")).ensure()
    index_into(paths, [pdf])
    return paths


def start_controller(qtbot, paths, llm_dir, answer=ANSWER, **settings) -> AssistantController:
    controller = AssistantController(paths, provider="cpu", settings=Settings(**settings),
                                     llm_folder=llm_dir, assistant_settings=answer, start=False)
    with qtbot.waitSignal(controller.modelReady, timeout=LOAD_MS) as ready:
        controller.start()
    assert ready.args[0].pid is not None
    return controller


def answer_of(qtbot, controller, question=QUESTION, history=()) -> list:
    """All events of one answer, in order."""
    events = []

    def collect(event) -> None:
        events.append(event)

    controller.answerEvent.connect(collect)
    try:
        with wait_event(qtbot, controller.answerEvent, DoneEvent, timeout=ANSWER_MS):
            controller.ask(question, list(history))
    finally:
        controller.answerEvent.disconnect(collect)
    return events


class Hold:
    """Pauses the worker's thread right after it has relayed the first piece of an answer, until
    released: the tiny model writes a whole answer in milliseconds, so a test that stops or
    breaks an answer midway holds it there first. Nothing else of the worker changes."""

    def __init__(self, worker, monkeypatch):
        self.reached = threading.Event()
        self.release = threading.Event()
        relay = worker._relay

        def holding_relay(request_id, event):
            live = relay(request_id, event)
            if isinstance(event, TextEvent) and not self.reached.is_set():
                self.reached.set()
                self.release.wait(60)
            return live

        monkeypatch.setattr(worker, "_relay", holding_relay)


def saved_and_reopened(qtbot, folder: Path, messages: list[dict], title: str) -> ChatView:
    """`messages` saved as a conversation in `folder` and shown again in a new ChatView, as the
    window does when a conversation is reopened."""
    store = ConversationStore(folder)
    conversation = store.create(title)
    conversation.messages = messages
    store.save(conversation)
    view = ChatView()
    qtbot.addWidget(view)
    view.set_messages(store.get(conversation.id).messages)
    return view
