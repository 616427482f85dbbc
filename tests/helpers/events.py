"""Waiting on the assistant's one event signal (AssistantController.answerEvent, AssistantWorker.answerEvent)
for an event of one type:

    with wait_event(qtbot, controller.answerEvent, DoneEvent, timeout=ANSWER_MS) as done:
        controller.ask(question)
    done.args[0].answer
"""

from __future__ import annotations

from contextlib import contextmanager


def is_a(kind: type, check=None):
    """A check_params_cb for `qtbot.waitSignal(s)`: the event is a `kind` (and passes `check`)."""
    return lambda event: isinstance(event, kind) and (check is None or check(event))


def wait_event(qtbot, signal, kind: type, timeout: int, check=None):
    return qtbot.waitSignal(signal, timeout=timeout, check_params_cb=is_a(kind, check))


@contextmanager
def no_event(signal, *kinds: type):
    """Fails when `signal` emits an event of one of `kinds` inside the block."""
    seen = []

    def collect(event) -> None:
        seen.append(event)

    signal.connect(collect)
    try:
        yield seen
    finally:
        signal.disconnect(collect)
    unwanted = [e for e in seen if isinstance(e, kinds)]
    assert not unwanted, f"emitted after all: {unwanted}"
