"""MLflow logging of a multirun's jobs in a helper process, each while the next job runs.

A cache-served job of an α sweep ends with its MLflow logging, a third of the job's time in the
run's process, while the helpers that draw its figures are done and a core is idle; the next job
begins with the run's own process alone as well (loading, scores from the cache). In a Hydra
multirun a job's logging therefore goes to a helper process of its own (the "lane") once the
job's files are complete (figures and ``report.html`` included, ``run_info.json`` written), and
the next job starts at once. The lane logs what a job hands over exactly as the job would have
(:func:`paraeval.pipeline.tracking.mlflow_store.log_output_dir`); it runs at a lower priority, in the time the
jobs leave idle.

At most one logging is in flight: a job waits for the one before it before it hands over its
own. The command waits for the last one before it exits (its exit status says whether every job
was logged) and, when interrupted, for the one in flight, which logs a finished job. What a
logging says when it is done (the run's id, or the warning that the directory was not logged
and how to log it later) goes to the console and to the log file of the job it logged, with
that job's summary.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import suppress
from pathlib import Path
from typing import Any

from paraeval.pipeline.tracking.mlflow_store import Logged, RunRecord, log_output_dir

ENABLED = False
"""Whether jobs hand their logging over: set for a Hydra multirun by ``pipeline.__main__``."""

# how much lower the lane runs than the jobs: it takes the processor time they leave idle
NICENESS = 10

_POOL: ProcessPoolExecutor | None = None
_IN_FLIGHT: threading.Event | None = None  # set when the last hand-over is done and reported


def _start_lane() -> None:
    # Ctrl-C reaches every process of the terminal's group: the command decides (it waits for
    # the logging in flight), the lane finishes what it was given
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with suppress(OSError):
        os.nice(NICENESS)
    import mlflow.tracking  # noqa: F401  (imported while the first job computes)

    from paraeval.blas import one_blas_thread_for_good

    one_blas_thread_for_good()


def _lane() -> ProcessPoolExecutor:
    global _POOL
    if _POOL is None:
        from paraeval.pipeline.report.figures import _plain_main

        # spawn, not fork, as the figure helpers: the run's process holds threads
        context = multiprocessing.get_context("spawn")
        pool = ProcessPoolExecutor(max_workers=1, mp_context=context, initializer=_start_lane)
        with _plain_main():
            pool.submit(int)  # the process starts now (and imports while the first job runs)
        _POOL = pool
    return _POOL


def prepare(settings: dict[str, Any]) -> None:
    """Start the lane at the first job of a multirun: its imports, and the store's creation
    where it is new, overlap that job's computation instead of delaying the next job."""
    if ENABLED and _POOL is None:
        with suppress(Exception):  # a lane that cannot start is reported by the hand-over
            _lane().submit(_warm, settings)


def _warm(settings: dict[str, Any]) -> None:
    from paraeval.pipeline.tracking.mlflow_store import warm_store

    with suppress(Exception):  # a store that fails here fails the job's logging, which says so
        warm_store(settings)


def _log(out_dir: Path, record: RunRecord, settings: dict[str, Any]) -> Logged:
    return log_output_dir(out_dir, record, settings)


def hand_over(
    out_dir: Path,
    record: RunRecord,
    settings: dict[str, Any],
    report: Callable[[Logged | None, Sequence[logging.Handler]], None],
) -> None:
    """Log the finished ``out_dir`` in the lane; ``report(logged, handlers)`` is called when it
    is done (``logged`` None: it failed), with the log handlers of the job that handed it over
    (Hydra gives each job a log file of its own)."""
    global _IN_FLIGHT
    wait()
    handlers = list(logging.getLogger().handlers)
    done = threading.Event()

    def finished(future: Future[Logged]) -> None:
        try:
            logged: Logged | None = future.result()
        except BaseException as exc:  # the lane died too: reported as a failed logging
            report_failure(out_dir, exc, handlers)
            logged = None
        try:
            report(logged, handlers)
        finally:
            close_replaced(handlers)
            done.set()

    _IN_FLIGHT = done
    try:
        future = _lane().submit(_log, out_dir, record, settings)
    except Exception as exc:  # no lane: reported as a failed logging, the files are kept
        failed: Future[Logged] = Future()
        failed.set_exception(exc)
        finished(failed)
        return
    future.add_done_callback(finished)


def wait(timeout: float | None = None) -> bool:
    """Wait until the last hand-over is logged and reported; False if ``timeout`` ran out."""
    return _IN_FLIGHT is None or _IN_FLIGHT.wait(timeout)


def report_failure(out_dir: Path, exc: BaseException, handlers: Sequence[logging.Handler]) -> None:
    from paraeval.pipeline.tracking.trackers import NOT_LOGGED, not_logged_warning

    NOT_LOGGED.append(Path(out_dir))
    emit(handlers, logging.WARNING, *not_logged_warning(out_dir, exc))


def emit(handlers: Sequence[logging.Handler], level: int, msg: str, *args: Any) -> None:
    """A record of the tracking logger, to ``handlers`` (a job's, which may have ended)."""
    from paraeval.pipeline.tracking.trackers import log

    record = log.makeRecord(log.name, level, __file__, 0, msg, args, None)
    for handler in handlers:
        if record.levelno >= handler.level:
            handler.handle(record)


def close_replaced(handlers: Sequence[logging.Handler]) -> None:
    """A job's file handler that the next job's logging configuration closed was opened again
    by :func:`emit`: closed again."""
    live = logging.getLogger().handlers
    for handler in handlers:
        if isinstance(handler, logging.FileHandler) and handler not in live:
            handler.close()


def abandon() -> None:
    """Kill the lane (an interrupted command, after its wait): a logging still in flight is
    reported as failed, with how to log its directory later."""
    global _POOL
    pool, _POOL = _POOL, None
    if pool is None:
        return
    for process in list(getattr(pool, "_processes", {}).values()):
        with suppress(Exception):
            process.kill()
    with suppress(Exception):
        pool.shutdown(wait=False, cancel_futures=True)
    wait(timeout=10)  # the failure's warning, from the future the killed lane breaks


def stop() -> None:
    """Shut the lane down after the last hand-over (the command's end)."""
    global _POOL
    pool, _POOL = _POOL, None
    if pool is not None:
        with suppress(Exception):
            pool.shutdown(wait=True)
