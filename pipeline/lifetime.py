"""Helper processes ask Linux for a death signal, so they end with the run even after ``kill -9``;
glibc's ``malloc_trim`` returns the pages freed arrays leave in each thread's heap."""

from __future__ import annotations

import ctypes
import functools
import os
import signal
import sys
from collections.abc import Callable

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
RUN_PID_ENV = "PARAEVAL_RUN_PID"  # the paraeval command's, inherited by its workers


def die_with_parent(parent: int, sig: int = signal.SIGKILL) -> None:
    """``sig`` when ``parent`` ends (an exit now if it has); it outlives ``exec`` (preexec_fn)."""
    if sys.platform != "linux":
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0) != 0 or os.getppid() != parent:
        # no death signal, or the run ended before it was set: the orphan is not wanted
        os._exit(1)


def in_sweep_worker() -> bool:
    parent = os.environ.get(RUN_PID_ENV)
    return bool(parent) and parent != str(os.getpid())


def sweep_worker() -> None:
    """SIGINT is left to the command (Ctrl-C reaches the whole group): it stops the sweep."""
    parent = os.environ.get(RUN_PID_ENV)
    die_with_parent(int(parent) if parent and parent.isdigit() else os.getppid())
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def initializer() -> Callable[[], None]:
    """Hydra builds ``initializer`` (conf/hydra/launcher/parallel.yaml) by calling this."""
    return sweep_worker


def release_free_memory() -> None:
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
