"""A run's helper processes (figure drawers, a parallel sweep's workers, the Ray instance of
``engine=ray``) end with the run, however it ends (``kill -9`` and the out-of-memory killer leave
no chance to clean up): each asks the Linux kernel for a signal when its parent ends."""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
# the pid of the paraeval command, inherited by the workers it starts
RUN_PID_ENV = "PARAEVAL_RUN_PID"


def die_with_parent(parent: int, sig: int = signal.SIGKILL) -> None:
    """``sig`` when ``parent`` (this process's parent) ends, or an exit now if it has. It outlives
    ``exec``: a program started with it as ``preexec_fn`` gets it too (SIGTERM lets it clean up)."""
    if sys.platform != "linux":
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0) != 0 or os.getppid() != parent:
        # no death signal, or the run ended before it was set: the orphan is not wanted
        os._exit(1)


def in_sweep_worker() -> bool:
    """Whether this process is a worker of a parallel sweep, not the command that started it."""
    parent = os.environ.get(RUN_PID_ENV)
    return bool(parent) and parent != str(os.getpid())


def sweep_worker() -> None:
    """The set-up of a parallel sweep's worker (``hydra/launcher=parallel``: joblib's loky
    workers): it dies with the command that started it, ``kill -9`` included. Ctrl-C reaches the
    whole process group: the command stops the sweep and ends its workers, so a worker leaves
    SIGINT to it. (SIGTERM sent to one worker while it runs a job stops that job, and the sweep
    goes on: the job's own code sees to it.)"""
    parent = os.environ.get(RUN_PID_ENV)
    die_with_parent(int(parent) if parent and parent.isdigit() else os.getppid())
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def initializer() -> Callable[[], None]:
    """For ``conf/hydra/launcher/parallel.yaml``: Hydra builds ``initializer`` by calling this."""
    return sweep_worker
