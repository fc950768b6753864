"""Keep memory the runner frees in the process heap, for the next layers' outputs to reuse.

A plan step allocates its output and the runner frees each tensor after its last reader, so a run
allocates and frees tens of megabytes per layer at batch 8. With glibc's default settings most of
that memory goes back to the operating system as soon as it is freed: blocks above the ``mmap``
threshold (at most 32 MiB, raised as large blocks are freed) are unmapped, and the top of the heap
is trimmed whenever more than twice that threshold is free there. The next layer's output then
faults every page back in, zeroed by the kernel: on ResNet50 at batch 8 that was about 2,000 page
faults and 40-50 ms of system time per run, 5-6% of the wall time.

:func:`keep_freed_memory` raises both thresholds to ``KEEP_BYTES`` once, the first time a runner
runs: blocks up to that size come from the heap, and up to that much free memory stays mapped for
reuse. The peak is unchanged (the same tensors are alive at once); what changes is that freed
memory is kept for the process's later allocations rather than returned. Set
``MALLOC_TRIM_THRESHOLD_`` or ``MALLOC_MMAP_THRESHOLD_`` (glibc's own variables) or
``glibc.malloc`` tunables to keep your own settings; with another C library this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from functools import cache

# glibc's mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3

# Largest block served from the heap, and most free memory kept at its top.
KEEP_BYTES = 256 << 20

_USER_SETTINGS = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_")


def _glibc() -> ctypes.CDLL | None:
    """The process's C library when it is glibc (it has ``gnu_get_libc_version``), else None."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    if getattr(libc, "gnu_get_libc_version", None) is None or getattr(libc, "mallopt", None) is None:
        return None
    return libc


@cache
def keep_freed_memory() -> bool:
    """Have glibc's malloc keep freed blocks of up to ``KEEP_BYTES`` for reuse (see the module
    docstring); done once per process. True when it took effect, False when the user chose their
    own malloc settings or the C library is not glibc."""
    if any(name in os.environ for name in _USER_SETTINGS):
        return False
    if "glibc.malloc." in os.environ.get("GLIBC_TUNABLES", ""):
        return False
    libc = _glibc()
    if libc is None:
        return False
    libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    libc.mallopt.restype = ctypes.c_int
    # The mmap threshold first: setting either one also stops glibc adjusting them itself.
    return bool(libc.mallopt(_M_MMAP_THRESHOLD, KEEP_BYTES)) and bool(
        libc.mallopt(_M_TRIM_THRESHOLD, KEEP_BYTES)
    )
