"""Engine work (blocking, in a thread) seen from the event loop.

The event loop only waits: retrieval, embedding and the LLM client's pipe reads run in a
thread of their own per request (admission to the pool bounds how many), and their items come
back through an asyncio queue. Leaving the async iteration early (a client that disconnected)
sets the request's cancel flag, which stops its generation before the next token.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TypeVar

T = TypeVar("T")
_ITEM, _ERROR, _END = "item", "error", "end"


async def iterate_in_thread(make: Callable[[], Iterator[T]], cancel: threading.Event) -> AsyncIterator[T]:
    """The items of make()'s iterator, which runs in a new thread; its exception is raised here."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue()

    def put(kind: str, value) -> None:
        try:
            loop.call_soon_threadsafe(queue.put_nowait, (kind, value))
        except RuntimeError:  # the loop has closed: nobody is listening any more
            cancel.set()

    def run() -> None:
        try:
            items = make()
            try:
                for item in items:
                    put(_ITEM, item)
                    if cancel.is_set():
                        break
            finally:
                close = getattr(items, "close", None)
                if close is not None:  # a generator's finally (a lease, a stream) runs now, here
                    close()
        except BaseException as exc:  # handed to the awaiting side, which raises it
            put(_ERROR, exc)
        else:
            put(_END, None)

    threading.Thread(target=run, name="offline-assistant-request", daemon=True).start()
    try:
        while True:
            kind, value = await queue.get()
            if kind == _ITEM:
                yield value
            elif kind == _ERROR:
                raise value
            else:
                return
    finally:
        cancel.set()  # done, failed or abandoned: a generation still running stops


async def call_in_thread(fn: Callable[[], T], cancel: threading.Event, disconnected=None) -> T:
    """fn() in a new thread. With `disconnected` (Request.is_disconnected), a client that goes
    away while it waits sets `cancel`, so a generation it asked for stops early."""

    def once() -> Iterator[T]:
        yield fn()

    results = iterate_in_thread(once, cancel)
    task = asyncio.ensure_future(anext(results))
    try:
        while disconnected is not None and not task.done():
            done, _ = await asyncio.wait({task}, timeout=0.1)
            if not done and await disconnected():
                cancel.set()
        return await task
    finally:
        cancel.set()
        await results.aclose()


async def with_pauses_said(items: AsyncIterator[T], every_s: float) -> AsyncIterator[T | None]:
    """`items`, with a None each time `every_s` passes without one (a stream's keep-alive while
    a question waits for a model process). Leaving early stops the iteration under way."""
    iterator = aiter(items)
    pending = asyncio.ensure_future(anext(iterator))
    try:
        while True:
            done, _ = await asyncio.wait({pending}, timeout=every_s)
            if not done:
                yield None
                continue
            try:
                item = pending.result()
            except StopAsyncIteration:
                return
            yield item
            pending = asyncio.ensure_future(anext(iterator))
    finally:
        pending.cancel()
