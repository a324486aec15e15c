"""A second process that draws part of a run's figures while the run's own process draws the
rest: on ParaBank-Eval the figures are about a third of a warm run, and a machine with two cores
draws them in half the time (``benchmarks/bench_run.py``, ``docs/performance.md``).

The worker's lifetime is the run's: it is started by the command line at the start of the run
(its imports overlap the scoring), it asks the kernel to kill it when the run's process dies
(Linux's ``PR_SET_PDEATHSIG``: ``kill -9`` and the out-of-memory killer included), it exits when
its input ends, and where that kernel feature is missing no worker is started. Jobs are pickled
``(path, draw)`` pairs; the worker answers with the files it wrote and the warnings of the
figures that failed, which the run logs as its own.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import pickle
import signal
import subprocess
import sys
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

from paraeval.pipeline.report.plots import drawn

log = logging.getLogger("paraeval.pipeline.report")

Job = tuple[Path, Callable[[Path], bool]]
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def supported() -> bool:
    """Whether a worker can be bound to the run's lifetime here."""
    return sys.platform.startswith("linux")


class FigureWorker:
    """The run's side: start, hand over jobs, collect what was drawn, stop."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.proc: subprocess.Popen[bytes] | None = None
        self.pending = False

    def start(self) -> FigureWorker:
        if self.enabled and supported() and self.proc is None:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "paraeval.pipeline.report.worker", str(os.getpid())],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                # a process group of its own: Ctrl-C goes to the run, which stops the worker
                # (a signal during the worker's start-up would print Python's traceback)
                process_group=0,
            )
        return self

    def submit(self, jobs: Sequence[Job]) -> bool:
        """Hands ``jobs`` over; False (nothing handed over) when there is no live worker."""
        if self.proc is None or self.proc.poll() is not None or self.pending:
            return False
        assert self.proc.stdin is not None
        try:
            pickle.dump(list(jobs), self.proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
            self.proc.stdin.flush()
        except (OSError, pickle.PicklingError):
            self.stop()
            return False
        self.pending = True
        return True

    def collect(self) -> tuple[list[Path], list[str]] | None:
        """The files the worker wrote and its warnings; None when it died on the way."""
        if self.proc is None or not self.pending:
            return None
        self.pending = False
        assert self.proc.stdout is not None
        try:
            written, problems = pickle.load(self.proc.stdout)
        except (EOFError, OSError, pickle.UnpicklingError):
            self.stop()
            return None
        return [Path(p) for p in written], list(problems)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        with contextlib.suppress(OSError):
            if proc.stdin is not None:
                proc.stdin.close()  # the worker's input ends: it exits
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def __enter__(self) -> FigureWorker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def split(jobs: Sequence[Job], weight: Callable[[Job], float]) -> tuple[list[Job], list[Job]]:
    """(the worker's, the run's): heaviest first, each to the side with less work so far."""
    load = [0.0, 0.0]
    sides: tuple[list[Job], list[Job]] = ([], [])
    for job in sorted(jobs, key=weight, reverse=True):
        side = 0 if load[0] <= load[1] else 1
        sides[side].append(job)
        load[side] += weight(job)
    return sides


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _bind_to_parent(parent: int) -> bool:
    """Dies with the run's process from now on; False when that process is gone already."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    return os.getppid() == parent


def _serve(stdin: IO[bytes], stdout: IO[bytes]) -> None:
    collect = _Collect()
    logging.getLogger("paraeval").addHandler(collect)
    while True:
        try:
            jobs: list[Job] = pickle.load(stdin)
        except EOFError:
            return
        collect.messages.clear()
        with warnings.catch_warnings():
            # as in the run: singular axis limits of a degenerate figure are not news
            warnings.simplefilter("ignore", UserWarning)
            written = [str(path) for path, draw in jobs if drawn(path, draw)]
        pickle.dump((written, list(collect.messages)), stdout)
        stdout.flush()


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    # a SIGINT sent to the worker itself ends it quietly; the run reports interrupts
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    if not _bind_to_parent(int(args[0])):
        return
    # what every drawing needs, imported while the run scores
    import matplotlib.backends.backend_agg  # noqa: F401

    import paraeval.pipeline.report.alpha_plot
    import paraeval.pipeline.report.compare_plots
    import paraeval.pipeline.report.heatmap
    import paraeval.pipeline.report.ranking
    import paraeval.pipeline.report.scatter  # noqa: F401

    _serve(sys.stdin.buffer, sys.stdout.buffer)


def run_jobs(
    jobs: Sequence[Job], worker: FigureWorker | None, weight: Callable[[Job], float]
) -> list[Path]:
    """Draws ``jobs``, part of them in ``worker`` when there is one; returns the files written."""
    theirs, ours = split(jobs, weight) if worker is not None else ([], list(jobs))
    handed = bool(theirs) and worker is not None and worker.submit(theirs)
    if not handed:
        ours, theirs = list(jobs), []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        written = [path for path, draw in ours if drawn(path, draw)]
    if handed and worker is not None:
        result = worker.collect()
        if result is None:
            # the worker died: its share is drawn here
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                written += [path for path, draw in theirs if drawn(path, draw)]
        else:
            done, problems = result
            for message in problems:
                log.warning("%s", message)
            written += done
    return written


if __name__ == "__main__":
    main()
