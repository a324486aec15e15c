"""Helper processes ask Linux for a death signal, so they end with the run even after ``kill -9``;
glibc's ``malloc_trim`` returns the pages freed arrays leave in each thread's heap."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import signal
import subprocess
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


class Ended(Exception):
    pass


def _end(*_: object) -> None:
    raise Ended


def guard(argv: list[str], grace_s: float = 10.0) -> None:
    """Runs ``argv`` in a process group of its own until it exits or SIGTERM comes (the run's
    death signal), then SIGTERM to it and, after ``grace_s``, SIGKILL to the group: a command that
    swallows the signal, or what it leaves behind, ends all the same."""
    signal.signal(signal.SIGTERM, _end)
    with contextlib.suppress(Ended):
        if os.getpgrp() != os.getpid():
            os.setpgid(0, 0)
        child = subprocess.Popen(argv)
        try:
            child.wait()
        except Ended:
            child.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired, Ended):
                child.wait(grace_s)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    os.killpg(0, signal.SIGKILL)  # this process too


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


if __name__ == "__main__":  # ``python -m paraeval.pipeline.lifetime COMMAND...``: guard(COMMAND)
    guard(sys.argv[1:])
