"""LLMPool: N LLM child processes, and a bounded queue of requests waiting for one.

    ticket = pool.admit()        # in the event loop: QueueFull at once when the queue is full
    with ticket.lease(cancel) as slot:   # in a worker thread: waits for a free process
        slot.llm.stream(...)

A slot's process is restarted by its LLMClient when it died (the next request on that slot
starts a fresh one), so one crash costs one request. Each slot also has a number, so that
whatever must not be shared between two requests at once (a collection's SQLite handle) can be
kept per slot.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from engine.errors import EngineError


class QueueFull(EngineError):
    """Every LLM process is busy and the queue is full: the client should retry later."""


class QueueTimeout(EngineError):
    """A request waited for an LLM process longer than the server allows."""


class Abandoned(EngineError):
    """The client went away while its request waited."""


class PoolClosed(EngineError):
    """The server is stopping."""


@dataclass
class Slot:
    index: int
    llm: object  # LLMClient, loaded


class LLMPool:
    def __init__(self, make_llm: Callable[[], object], workers: int = 1, queue_size: int = 64,
                 queue_timeout_s: float = 300.0):
        self._make_llm = make_llm
        self.workers = workers
        self.queue_size = queue_size
        self.queue_timeout_s = queue_timeout_s
        self._slots: list[Slot] = []
        self._free: list[Slot] = []
        self._admitted = 0  # running and waiting
        self._lock = threading.Condition()
        self._closed = False

    # -- lifetime -------------------------------------------------------------------------
    def load(self) -> "LLMPool":
        """Starts the processes, one after the other (each loads the model once)."""
        for index in range(self.workers):
            llm = self._make_llm().load()
            with self._lock:
                if self._closed:
                    llm.close()
                    raise PoolClosed("The server is stopping.")
                slot = Slot(index, llm)
                self._slots.append(slot)
                self._free.append(slot)
                self._lock.notify()
        return self

    def close(self) -> None:
        with self._lock:
            self._closed = True
            slots, self._slots, self._free = self._slots, [], []
            self._lock.notify_all()
        for slot in slots:
            slot.llm.close()

    @property
    def ready(self) -> bool:
        with self._lock:
            return len(self._slots) == self.workers and not self._closed

    @property
    def any_llm(self):
        """One loaded LLMClient, for what every process shares: its name, context, tokenizer."""
        with self._lock:
            return self._slots[0].llm if self._slots else None

    # -- the queue ------------------------------------------------------------------------
    @property
    def running(self) -> int:
        with self._lock:
            return len(self._slots) - len(self._free)

    @property
    def waiting(self) -> int:
        """Requests admitted that have no process yet: the queue's length."""
        with self._lock:
            return max(0, self._admitted - (len(self._slots) - len(self._free)))

    def admit(self) -> "Ticket":
        """A place in the queue, or QueueFull at once. Never blocks."""
        with self._lock:
            if self._closed:
                raise PoolClosed("The server is stopping.")
            if self._admitted >= self.workers + self.queue_size:
                raise QueueFull(f"All {self.workers} model processes are busy and {self.queue_size} "
                                "requests are waiting; try again in a moment.")
            self._admitted += 1
        return Ticket(self)

    def _take(self, cancel) -> Slot:
        deadline = time.monotonic() + self.queue_timeout_s
        with self._lock:
            while not self._free:
                if self._closed:
                    raise PoolClosed("The server is stopping.")
                if cancel is not None and cancel.is_set():
                    raise Abandoned()
                left = deadline - time.monotonic()
                if left <= 0:
                    raise QueueTimeout(f"No model process was free within {self.queue_timeout_s:.0f} s; "
                                       "try again later.")
                self._lock.wait(min(left, 0.05))  # short: a disconnected client leaves the queue soon
            return self._free.pop(0)

    def _give_back(self, slot: Slot | None) -> None:
        with self._lock:
            self._admitted -= 1
            if slot is not None and not self._closed:
                self._free.append(slot)
                self._lock.notify()


class Ticket:
    """One admitted request; lease() once, from the thread that runs it."""

    def __init__(self, pool: LLMPool):
        self._pool = pool
        self._used = False

    @contextmanager
    def lease(self, cancel=None) -> Iterator[Slot]:
        """A free slot for the request, waited for; the slot goes back when the block ends."""
        assert not self._used, "a ticket is leased once"
        self._used = True
        slot = None
        try:
            slot = self._pool._take(cancel)
            slot.llm.load()  # restarts a process that died since its last request
            yield slot
        finally:
            self._pool._give_back(slot)

    def release_unused(self) -> None:
        """Gives the place back when the request ended before it leased (say, a bad body)."""
        if not self._used:
            self._used = True
            self._pool._give_back(None)

