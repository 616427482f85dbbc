"""engine.store.memory: freed memory goes back to the system on glibc, and the call is harmless elsewhere."""

from __future__ import annotations

import platform
import sys

import numpy as np
import pytest

from engine.store import memory


@pytest.mark.skipif(not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
                    reason="malloc_trim is glibc's")
def test_freed_memory_leaves_the_resident_set_on_glibc():
    def resident_kb() -> int:
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))

    # many blocks under glibc's mmap threshold, as a dense index's lists are: freed, they may stay in the heap
    blocks = [np.ones(8 * 1024) for _ in range(3000)]  # 64 KiB each, ~190 MB, written
    keep = np.ones(512)  # allocated last: the heap's top stays in use, so only a trim gives the rest back
    loaded = resident_kb()
    del blocks
    assert memory.give_back_freed_memory() is True
    assert resident_kb() < loaded - 150_000
    del keep


def test_elsewhere_it_does_nothing(monkeypatch):
    monkeypatch.setattr(memory, "_TRIM", None)
    assert memory.give_back_freed_memory() is False
    monkeypatch.setattr(memory.sys, "platform", "win32")
    assert memory._glibc_trim() is None
