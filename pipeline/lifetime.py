"""A run's helper processes end with the run, however it ends (``kill -9`` and the out-of-memory
killer included, which leave no chance to clean up): each helper asks the Linux kernel for a
SIGKILL when its parent ends (``PR_SET_PDEATHSIG``).

Three kinds of helpers call it: the processes that draw figures (forked by the run), the worker
processes of a parallel sweep (``hydra/launcher=parallel``: joblib's loky workers, started by the
run, whose ``initializer`` is :func:`paraeval.pipeline.cli.worker.sweep_worker`), and the Ray
instance that ``engine=ray`` starts for a run (:mod:`paraeval.pipeline.engine.local_ray`)."""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
# the pid of the paraeval command, inherited by the workers it starts (set by the command line)
RUN_PID_ENV = "PARAEVAL_RUN_PID"


def die_with_parent(parent: int, sig: int = signal.SIGKILL) -> None:
    """``sig`` from the kernel when ``parent`` (this process's parent) ends, however it ends;
    ends this process at once if ``parent`` has ended already. The setting outlives ``exec``:
    a program started with it as ``preexec_fn`` gets the signal too (SIGTERM lets it clean up)."""
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
