"""The C heap's free pages given back to the system (glibc's ``malloc_trim``): freed arrays stay in
the heap that allocated them, each thread having its own, and in the resident set. A run trims
between its stages, a Ray worker after each bundle (docs/scaling.md)."""

from __future__ import annotations

import ctypes
import functools
import sys
from collections.abc import Callable


def release_free_memory() -> None:
    """Every heap's free pages back to the system; nothing without ``malloc_trim``."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None).malloc_trim  # the running process's C library
    except (OSError, AttributeError):  # another C library (musl) has none
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return fn  # type: ignore[no-any-return]
