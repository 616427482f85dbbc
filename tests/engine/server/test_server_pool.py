"""LLMPool: admission (QueueFull at once), leases in order, waiters that leave, time out or
are woken by close(), and a dead LLM child restarted on the next lease."""

from __future__ import annotations

import itertools
import os
import signal
import threading
import time

import pytest

from engine.llm.process import LLMClient
from engine.server.pool import Abandoned, LLMPool, PoolClosed, QueueFull, QueueTimeout

WAIT_S = 10
_LEASED = itertools.count()  # the order in which leases got their slot


class Process:
    """What the pool asks of an LLM client: load() and close(); counts them."""

    def __init__(self):
        self.loads = 0
        self.closed = False

    def load(self) -> Process:
        self.loads += 1
        return self

    def close(self) -> None:
        self.closed = True


def eventually(check, timeout: float = WAIT_S) -> None:
    """Waits (without sleeping the test's thread blindly) until check() is true."""
    deadline = time.monotonic() + timeout
    tick = threading.Event()
    while not check():
        assert time.monotonic() < deadline, "the condition never came true"
        tick.wait(0.005)


def lease_in_thread(ticket, cancel=None):
    """Leases `ticket` in a thread; returns (thread, outcome) where outcome gets the slot's
    index or the exception, and the thread holds the slot until `outcome["release"]` is set."""
    outcome = {"release": threading.Event()}

    def run() -> None:
        try:
            with ticket.lease(cancel) as slot:
                outcome["slot"], outcome["nth"] = slot.index, next(_LEASED)
                outcome["release"].wait(WAIT_S)
        except (Abandoned, PoolClosed, QueueTimeout) as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


@pytest.fixture
def pool():
    made = LLMPool(Process, workers=2, queue_size=1, queue_timeout_s=30).load()
    yield made
    made.close()


def test_admit_refuses_at_once_when_every_process_and_the_queue_are_taken(pool):
    tickets = [pool.admit() for _ in range(3)]  # 2 workers + 1 waiting
    with pytest.raises(QueueFull, match="2 model processes are busy and 1 requests"):
        pool.admit()
    tickets[0].release_unused()
    pool.admit()  # the place given back is free again


def test_leases_take_the_free_slots_then_a_waiter_gets_the_next_one_freed(pool):
    first, second, third = pool.admit(), pool.admit(), pool.admit()
    holders = [lease_in_thread(t) for t in (first, second)]
    eventually(lambda: pool.running == 2)
    waiter, outcome = lease_in_thread(third)
    eventually(lambda: pool.waiting == 1)
    assert "slot" not in outcome
    freed = holders[1][1]
    freed["release"].set()
    holders[1][0].join(WAIT_S)
    eventually(lambda: "slot" in outcome)
    assert outcome["slot"] == freed["slot"]
    assert pool.waiting == 0 and pool.running == 2
    for _, held in (holders[0], (waiter, outcome)):
        held["release"].set()
    eventually(lambda: pool.running == 0)


def test_with_two_streams_each_process_takes_two_requests_the_least_busy_first():
    pool = LLMPool(Process, workers=2, queue_size=1, streams=2).load()
    try:
        tickets = [pool.admit() for _ in range(5)]  # 2 processes x 2 streams + 1 waiting
        with pytest.raises(QueueFull):
            pool.admit()
        holders = [lease_in_thread(t) for t in tickets[:4]]
        eventually(lambda: pool.running == 4)
        assert sorted(held["slot"] for _, held in holders) == [0, 0, 1, 1]  # spread, not stacked
        waiter, outcome = lease_in_thread(tickets[4])
        eventually(lambda: pool.waiting == 1)
        holders[2][1]["release"].set()
        eventually(lambda: "slot" in outcome)
        assert outcome["slot"] == holders[2][1]["slot"]
        for _, held in [*holders, (waiter, outcome)]:
            held["release"].set()
        eventually(lambda: pool.running == 0)
    finally:
        pool.close()


def test_waiters_are_served_in_the_order_they_came():
    pool = LLMPool(Process, workers=1, queue_size=3).load()
    try:
        _holder, held = lease_in_thread(pool.admit())
        eventually(lambda: pool.running == 1)
        waiters = []
        for n in range(3):
            ticket = pool.admit()
            waiters.append(lease_in_thread(ticket))
            eventually(lambda n=n: pool.waiting == n + 1)
        held["release"].set()
        for thread, outcome in waiters:  # each one holds the slot until it is let go
            eventually(lambda: any("slot" in o and not o["release"].is_set() for _, o in waiters))
            current = next(o for _, o in waiters if "slot" in o and not o["release"].is_set())
            current["release"].set()
        for thread, _ in waiters:
            thread.join(WAIT_S)
        order = sorted(range(3), key=lambda n: waiters[n][1]["nth"])
        assert order == [0, 1, 2]
    finally:
        pool.close()


def test_a_cancelled_waiter_leaves_the_queue(pool):
    holders = [lease_in_thread(pool.admit()) for _ in range(2)]
    eventually(lambda: pool.running == 2)
    cancel = threading.Event()
    waiter, outcome = lease_in_thread(pool.admit(), cancel)
    eventually(lambda: pool.waiting == 1)
    cancel.set()
    waiter.join(WAIT_S)
    assert isinstance(outcome.get("error"), Abandoned)
    assert pool.waiting == 0
    pool.admit()  # its place is free again
    for thread, held in holders:
        held["release"].set()
        thread.join(WAIT_S)


def test_a_waiter_times_out_with_queue_timeout():
    pool = LLMPool(Process, workers=1, queue_size=1, queue_timeout_s=0.2).load()
    try:
        holder, held = lease_in_thread(pool.admit())
        eventually(lambda: pool.running == 1)
        started = time.monotonic()
        with pytest.raises(QueueTimeout, match="within 0 s"), pool.admit().lease():
            pass
        assert 0.2 <= time.monotonic() - started < 5
        assert pool.waiting == 0
        held["release"].set()
        holder.join(WAIT_S)
    finally:
        pool.close()


def test_close_wakes_the_waiters_with_pool_closed(pool):
    holders = [lease_in_thread(pool.admit()) for _ in range(2)]
    eventually(lambda: pool.running == 2)
    waiter, outcome = lease_in_thread(pool.admit())
    eventually(lambda: pool.waiting == 1)
    pool.close()
    waiter.join(WAIT_S)
    assert isinstance(outcome.get("error"), PoolClosed)
    with pytest.raises(PoolClosed):
        pool.admit()
    for thread, held in holders:
        held["release"].set()
        thread.join(WAIT_S)


def test_a_ticket_given_back_before_its_lease_cannot_lease_any_more(pool):
    ticket = pool.admit()
    ticket.release_unused()
    ticket.release_unused()  # once only: the count stays right
    with pytest.raises(Abandoned), ticket.lease():
        pass
    assert pool.waiting == 0 and pool.running == 0
    assert [pool.admit() for _ in range(3)]  # all three places are free


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_a_dead_child_is_restarted_on_the_next_lease(tiny_llm_dir):
    pool = LLMPool(lambda: LLMClient(tiny_llm_dir, "cpu"), workers=1, queue_size=0).load()
    try:
        with pool.admit().lease() as slot:
            first_pid = slot.llm.pid
            os.kill(first_pid, signal.SIGKILL)
            eventually(lambda: not slot.llm.alive())
        with pool.admit().lease() as slot:
            assert slot.llm.alive() and slot.llm.pid != first_pid
            result = slot.llm.generate([{"role": "user", "content": "Hello"}], max_new_tokens=3)
        assert result.stats.new_tokens > 0
    finally:
        pool.close()


@pytest.mark.parametrize("workers, threads", [(1, None), (2, None), (64, None), (1, 1), (2, 8)])
def test_the_model_processes_share_the_cores(tmp_path, tiny_llm_dir, workers, threads):
    """Each of N processes gets its share of the physical cores, or of --threads (at least one),
    so they do not fight over them; one process gets them all."""
    from engine.encoders.onnx_session import physical_cores
    from engine.paths import AppPaths
    from engine.server.config import ServerConfig
    from engine.server.state import ServerState

    config = ServerConfig(AppPaths(tmp_path).ensure(), provider="cpu", llm_workers=workers, threads=threads)
    llm = ServerState(config, tiny_llm_dir).pool._make_llm()
    assert isinstance(llm, LLMClient)
    assert llm.threads == max(1, (threads or physical_cores()) // workers)
    assert llm.streams == config.llm_streams == ServerState(config, tiny_llm_dir).pool.streams
