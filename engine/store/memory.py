"""Giving freed memory back to the operating system.

glibc's malloc keeps what a program frees in its heaps for later, and a dense index is built of
many allocations below its mmap threshold: closing a store of a million chunks frees ~0.4 GB
that the process keeps resident. malloc_trim(0) returns the free pages at the top of the heap
and the whole free pages inside it (measured in docs/benchmarks.md, issue 32).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys


def _glibc_trim():
    """glibc's malloc_trim, or None where there is none (Windows, macOS, musl)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


_TRIM = _glibc_trim()


def give_back_freed_memory() -> bool:
    """Return what was freed to the operating system (glibc on Linux; elsewhere nothing is done).
    True when some memory was given back. Call it after freeing something large, not per call
    of anything: it walks the heap (milliseconds)."""
    return _TRIM is not None and bool(_TRIM(0))
