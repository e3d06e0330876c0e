"""Allocator tuning for the processes that train: temporaries kept on the heap (``keep_temporaries_on_heap``).
"""
from __future__ import annotations


MMAP_THRESHOLD = 32 * 2 ** 20
"""``keep_temporaries_on_heap``: arrays below this many bytes come from the heap (glibc's own ceiling for the
threshold it adapts by itself)."""
TRIM_THRESHOLD = 2 * MMAP_THRESHOLD
"""``keep_temporaries_on_heap``: free memory at the top of the heap up to this many bytes stays with the process
(the ratio glibc keeps when it adapts the thresholds by itself)."""


def keep_temporaries_on_heap() -> bool:
    """Have glibc's malloc serve arrays below ``MMAP_THRESHOLD`` from the heap in this process and keep up to
    ``TRIM_THRESHOLD`` of freed memory for reuse (mallopt); False where there is no glibc.  Table 1's rows
    and the sweep's units call it in the process that trains them, and the engine benchmark in its own.  A
    step on an exact population allocates temporaries of a few MB (8 runs on OR's population at d = 50:
    22,513 classes, 1-3 MB an array); in a fresh process glibc maps each afresh and unmaps it when freed, so
    every step pays thousands of page faults for them, most of the step's time.  Values are unchanged:
    where memory comes from does not enter the arithmetic."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        mallopt = libc.mallopt if libc is not None else None
    except (OSError, AttributeError):
        return False
    if mallopt is None or not hasattr(libc, "gnu_get_libc_version"):
        return False
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
