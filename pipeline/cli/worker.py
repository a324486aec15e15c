"""The worker processes of a parallel sweep (``hydra/launcher=parallel``: joblib's loky workers),
set up by their ``initializer``."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

from paraeval.pipeline.lifetime import RUN_PID_ENV, die_with_parent


def sweep_worker() -> None:
    """Each worker dies with the command that started it, ``kill -9`` included. Ctrl-C reaches
    the whole process group: the command stops the sweep and ends its workers, so a worker
    leaves SIGINT to it. (SIGTERM sent to one worker while it runs a job stops that job, and the
    sweep goes on: the job's own code sees to it.)"""
    parent = os.environ.get(RUN_PID_ENV)
    die_with_parent(int(parent) if parent and parent.isdigit() else os.getppid())
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def initializer() -> Callable[[], None]:
    """For ``conf/hydra/launcher/parallel.yaml``: Hydra builds ``initializer`` by calling this."""
    return sweep_worker
