"""LLMPool: N LLM child processes, each answering up to `streams` requests at once (taking
turns a piece at a time), and a bounded queue of requests waiting for a place on one.

    ticket = pool.admit()        # in the event loop: QueueFull at once when the queue is full
    with ticket.lease(cancel) as slot:   # in a worker thread: waits for a free process
        slot.llm.stream(...)

A slot's process is restarted by its LLMClient when it died (the next request on that slot
starts a fresh one), so one crash costs one request.

    llm = LeasedLLM(ticket, cancel, pool.counter())   # a model leased only when it generates

An answer leases its slot only when its text is generated (LeasedLLM): retrieval, the gate and the
lead run while the request is still queued, so the manual's words are shown at once under load.

With a remote engine a slot holds a RemoteLLM instead (one request at a time on the engine);
one that could not reach its engine at start is loaded again by each lease.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from engine.errors import EngineError

log = logging.getLogger(__name__)


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
    llm: object  # LLMClient, loaded (or RemoteLLM, perhaps not yet)


class LLMPool:
    def __init__(self, make_llm: Callable[[], object], workers: int = 1, queue_size: int = 64,
                 queue_timeout_s: float = 300.0, retried_at_lease: tuple[type[Exception], ...] = (),
                 streams: int = 1):
        self._make_llm = make_llm
        self._retried_at_lease = retried_at_lease  # load errors that leave the slot to its next lease
        self.workers = workers
        self.streams = streams  # requests a slot answers at once
        self.queue_size = queue_size
        self.queue_timeout_s = queue_timeout_s
        self._slots: list[Slot] = []
        self._leases: dict[int, int] = {}  # slot index -> requests it answers now
        self._admitted = 0  # running and waiting
        self._waiters: deque = deque()  # leases waiting for a slot, first come first served
        self._lock = threading.Condition()
        self._closed = False

    # -- lifetime -------------------------------------------------------------------------
    def load(self) -> LLMPool:
        """Starts the processes, one after the other (each loads the model once)."""
        for index in range(self.workers):
            llm = self._loaded(self._make_llm())
            with self._lock:
                if self._closed:
                    llm.close()
                    raise PoolClosed("The server is stopping.")
                slot = Slot(index, llm)
                self._slots.append(slot)
                self._leases[index] = 0
                self._lock.notify_all()  # the waiter first in line is the one that takes it
        return self

    def _loaded(self, llm):
        """`llm`, loaded; or still unloaded when its error is one of retried_at_lease (a remote
        engine not up yet), so that the server starts and each request tries again."""
        try:
            return llm.load()
        except self._retried_at_lease as exc:
            log.warning("%s The next request tries again.", exc)
            return llm

    def close(self) -> None:
        with self._lock:
            self._closed = True
            slots, self._slots, self._leases = self._slots, [], {}
            self._lock.notify_all()
        for slot in slots:
            slot.llm.close()

    def counter(self):
        """A slot's model when its tokens are counted in this process (an LLMClient with its
        folder's tokenizer), so an answer can wait for a slot only to generate; else None."""
        from engine.llm.process import LLMClient

        with self._lock:
            llm = self._slots[0].llm if self._slots else None
        return llm if isinstance(llm, LLMClient) and llm.token_counter is not None else None

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
        """Requests a process answers now."""
        with self._lock:
            return sum(self._leases.values())

    @property
    def waiting(self) -> int:
        """Requests admitted that have no process yet: the queue's length."""
        with self._lock:
            return max(0, self._admitted - sum(self._leases.values()))

    def admit(self) -> Ticket:
        """A place in the queue, or QueueFull at once. Never blocks."""
        with self._lock:
            if self._closed:
                raise PoolClosed("The server is stopping.")
            if self._admitted >= self.workers * self.streams + self.queue_size:
                raise QueueFull(f"All {self.workers} model processes are busy and {self.queue_size} "
                                "requests are waiting; try again in a moment.")
            self._admitted += 1
        return Ticket(self)

    def _take(self, cancel) -> Slot:
        """The least busy slot with room, in the order the leases asked (without that, a late
        request could overtake one that has waited long, and p95 waits would grow)."""
        deadline = time.monotonic() + self.queue_timeout_s
        me = object()
        with self._lock:
            self._waiters.append(me)
            try:
                while not (self._waiters[0] is me and (slot := self._least_busy()) is not None):
                    self._check_waiting(cancel, deadline)
                    self._lock.wait(min(max(deadline - time.monotonic(), 0.0), 0.05))
                self._leases[slot.index] += 1
                return slot
            finally:
                self._waiters.remove(me)
                self._lock.notify_all()  # the next in line may take the next place

    def _least_busy(self) -> Slot | None:
        room = [slot for slot in self._slots if self._leases[slot.index] < self.streams]
        return min(room, key=lambda slot: self._leases[slot.index]) if room else None

    def _check_waiting(self, cancel, deadline: float) -> None:
        if self._closed:
            raise PoolClosed("The server is stopping.")
        if cancel is not None and cancel.is_set():
            raise Abandoned("The client went away while its request waited.")
        if time.monotonic() >= deadline:
            raise QueueTimeout(f"No model process was free within {self.queue_timeout_s:.0f} s; "
                               "try again later.")  # short waits: a disconnected client leaves soon

    def _give_back(self, slot: Slot | None) -> None:
        with self._lock:
            self._admitted -= 1
            if slot is not None and not self._closed:
                self._leases[slot.index] -= 1
                self._lock.notify_all()  # the waiter first in line is the one that takes it


class LeasedLLM:
    """The LanguageModel an answer sees: tokens are counted here with `counter` (a slot's model,
    whose tokenizer is in this process), and stream() waits for a free slot when it is iterated
    and gives it back when the text ends."""

    def __init__(self, ticket: "Ticket", cancel, counter):
        self._ticket, self._cancel, self._counter = ticket, cancel, counter
        self.context_length = counter.context_length
        self.template_overhead = counter.template_overhead

    def count_tokens(self, text: str) -> int:
        return self._counter.count_tokens(text)

    def template_tokens(self, messages: int) -> int:
        return self._counter.template_tokens(messages)

    def stream(self, messages, **kwargs):
        from engine.types import GenerationStream

        return GenerationStream(self._leased(messages, kwargs))

    def _leased(self, messages, kwargs):
        with self._ticket.lease(self._cancel) as slot:
            inner = slot.llm.stream(messages, **kwargs)
            yield from inner
            if inner.stats is not None:  # the outer stream's stats
                yield inner.stats


class Ticket:
    """One admitted request; lease() once, from the thread that runs it. release_unused()
    may come from another thread (the event loop, when the client left first): whichever
    comes first gives the place back, once."""

    def __init__(self, pool: LLMPool):
        self._pool = pool
        self._used = False
        self._lock = threading.Lock()

    def _claim(self) -> bool:
        with self._lock:
            first, self._used = not self._used, True
            return first

    @contextmanager
    def lease(self, cancel=None) -> Iterator[Slot]:
        """A free slot for the request, waited for; the slot goes back when the block ends.
        Abandoned when the place was already given back (release_unused came first)."""
        if not self._claim():
            raise Abandoned("The request ended before it was given a model process.")
        slot = None
        try:
            slot = self._pool._take(cancel)
            slot.llm.load()  # restarts a process that died since its last request
            yield slot
        finally:
            self._pool._give_back(slot)

    def release_unused(self) -> None:
        """Gives the place back when the request ended before it leased (say, a bad body)."""
        if self._claim():
            self._pool._give_back(None)
