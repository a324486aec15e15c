"""Figures drawn in a helper process while the run goes on.

Drawing is single-threaded Python (matplotlib), and so are the stages that follow it (the system
comparison's tables, MLflow logging): a second process lets both proceed at once on a machine
with two cores or more. The helper is started once per process and kept for the next job of a
Hydra multirun, so what it keeps of the figures it drew (:func:`pipeline.figure_files.render`'s
files, the panels of ``pipeline.panels``, the bases of ``pipeline.layers``) serves later jobs.

With two cores or more there are two helpers ("lanes"). Each rating's scatter plots go to a lane
of their own, the heatmap to the first and the system ranking to the second; such a job always
goes to the same lane, so each lane keeps serving its own figures. The α curve (a kept base per
lane and a line drawn anew every job) goes to the lane with the fewest drawings pending.

The run waits for its figures before the output directory is hashed and uploaded, so what is on
disk and in MLflow is complete. A figure that fails is a warning, never a failed run; if the
helper cannot be started, figures are drawn in the run's own process.
"""

from __future__ import annotations

import gc
import logging
import multiprocessing
import os
import signal
import sys
import time
import types
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import contextmanager, suppress
from typing import Any

log = logging.getLogger(__name__)

_POOLS: dict[int, ProcessPoolExecutor] = {}


def lanes() -> int:
    """Helper processes for figures: two where two cores can draw at once, else one."""
    return 2 if (os.cpu_count() or 1) >= 2 else 1


# the ``lane`` of a figure job that either helper serves as well as the other: it goes to the
# helper with the fewest drawings pending
ANY_LANE = "any"


def lane_of(fn: Callable[..., Any]) -> int | None:
    """The helper a figure job goes to: its ``lane`` attribute (set on the job, a
    ``functools.partial``, or else on its function), folded onto the lanes there are; None for
    ``ANY_LANE``."""
    lane = getattr(fn, "lane", None)
    if lane is None:
        lane = getattr(getattr(fn, "func", fn), "lane", 0)
    if lane == ANY_LANE:
        return None
    return int(lane) % lanes()


def _pool(lane: int = 0) -> ProcessPoolExecutor:
    pool = _POOLS.get(lane)
    if pool is None:
        # spawn, not fork: the run's process holds threads (torch, thread pools) that a forked
        # child would inherit in an unknown state
        context = multiprocessing.get_context("spawn")
        pool = _POOLS[lane] = ProcessPoolExecutor(
            max_workers=1,
            mp_context=context,
            initializer=_start_helper,
            initargs=(_gate(context),),
        )
    return pool


# Drawing permits shared by the helpers: two, so both lanes draw at once, or one, when the run's
# process holds the other (:func:`_balance`) and the lanes take turns. Each lane keeps drawing
# its own figures either way, so what it keeps of them keeps serving it.
_GATE: Any = None
_HELPER_GATE: Any = None  # in a helper: the permits it was started with
# how long a helper waits for a permit before it draws anyway: a helper that died holding one
# (killed, crashed) must not stop the other one for good
GATE_TIMEOUT_S = 30.0
_THROTTLED = False  # this process holds one permit: one lane draws at a time
_JOBS_SEEN = 0


def _gate(context: Any) -> Any:
    global _GATE
    if _GATE is None:
        _GATE = context.Semaphore(2)
    return _GATE


def _start_helper(gate: Any) -> None:
    global _HELPER_GATE
    _HELPER_GATE = gate
    _ignore_interrupts()


def _balance(run_cpu: float, drawing_cpu: float) -> None:
    """After a job: whether its figures took less processor time than the run's own work since
    it began. Then one helper at a time keeps up with the run, and a second one drawing beside
    them would take a third of a core from the run's process, the critical path of the job (a
    ParaBank-Eval sweep's jobs: 1.23 s with both drawing at once, 1.09 s taking turns; its
    figures take two thirds of the run's time). Where the figures weigh more (the demo: one and a
    half times the run's), both draw at once. The first job is not counted: it scores and draws
    everything from scratch."""
    global _JOBS_SEEN, _THROTTLED
    _JOBS_SEEN += 1
    if _JOBS_SEEN == 1 or _GATE is None or lanes() < 2:
        return
    if not _THROTTLED and drawing_cpu <= run_cpu:
        # nothing is drawing now (the job's figures are done): the permit is free
        _THROTTLED = bool(_GATE.acquire(timeout=GATE_TIMEOUT_S))
    elif _THROTTLED and drawing_cpu > 1.25 * run_cpu:
        _GATE.release()
        _THROTTLED = False


@contextmanager
def _lend_permit(drawing: bool) -> Iterator[None]:
    """While the run waits for its figures, the drawing permit it holds (:func:`_balance`) goes
    to the helpers: the run's process takes no processor time then, so both lanes draw at once
    on the two cores instead of one after the other beside an idle core."""
    lent = drawing and _THROTTLED and _GATE is not None
    if lent:
        _GATE.release()
    try:
        yield
    except BaseException:
        # interrupted while waiting: the run stops at once, without waiting for a drawing to
        # give the permit back, and holds none from now on
        if lent:
            _no_permit()
        raise
    # every drawing is over (or failed): the permit is free again
    if lent and not _GATE.acquire(timeout=GATE_TIMEOUT_S):
        _no_permit()


def _no_permit() -> None:
    """The run holds no permit (interrupted while lending it, or a helper died holding one):
    the lanes are not throttled any more."""
    global _THROTTLED
    _THROTTLED = False


def _ignore_interrupts() -> None:
    # Ctrl-C reaches every process of the terminal's group: the run decides and stops the
    # helper (stop_helper), which must not print a traceback of its own
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from paraeval.blas import one_blas_thread_for_good
    from paraeval.pipeline.names import escape_warnings

    # drawing calls BLAS on small arrays only, and OpenBLAS's idle threads spin on the cores
    # that the run's own process needs
    one_blas_thread_for_good()

    escape_warnings()


def stop_helper() -> None:
    """Kill the helper process now (the run was interrupted): no figure process is left behind,
    and the interpreter's exit does not wait for a drawing to finish."""
    pools = list(_POOLS.values())
    _POOLS.clear()
    processes = [p for pool in pools for p in getattr(pool, "_processes", {}).values()]
    for process in processes:
        with suppress(Exception):
            process.kill()
    for pool in pools:
        with suppress(Exception):
            pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        with suppress(Exception):
            process.join(timeout=5)


@contextmanager
def _plain_main() -> Iterator[None]:
    """A spawned process imports the parent's ``__main__`` first. The helper needs none of it
    (it draws with functions of this package), and a caller's script without an
    ``if __name__ == "__main__"`` guard would run again there; the helper is therefore started
    while ``__main__`` is an empty module."""
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _draw(fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[list[str], float]:
    """Runs ``fn(*args)`` (in the helper) and returns its warnings, which the run then logs,
    and the processor time it took."""
    capture = _Capture()
    root = logging.getLogger("paraeval.pipeline")
    root.addHandler(capture)
    gate = _HELPER_GATE
    held = gate is not None and bool(gate.acquire(timeout=GATE_TIMEOUT_S))
    start = time.process_time()
    try:
        fn(*args)
    except Exception as exc:  # a figure must never cost the numbers
        capture.messages.append(f"plotting failed ({exc}); the tables are written")
    finally:
        if held:
            gate.release()
        root.removeHandler(capture)
        _settle()
    return capture.messages, time.process_time() - start


_SETTLED = False


def _settle() -> None:
    """After a helper's first drawing, what it holds (modules, fonts, matplotlib's caches, a
    quarter of a million objects) lives as long as the helper: collected once and frozen, the
    collector stops rescanning it. Unfrozen, each full collection took 0.18 s, one and a half
    of them per α-sweep job in each helper."""
    global _SETTLED
    if not _SETTLED:
        _SETTLED = True
        gc.collect()
        gc.freeze()


class Figures:
    """Figures of one run: ``submit`` queues a drawing, ``wait`` returns when all are on disk."""

    def __init__(self, background: bool = True) -> None:
        self.background = background
        self._pending: list[tuple[int, Future[tuple[list[str], float]]]] = []
        self._started_cpu = time.process_time()
        self._drawing_cpu = 0.0
        self._drawn = False

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        if self.background:
            lane = lane_of(fn)
            if lane is None:
                lane = self._least_busy()
            try:
                with _plain_main():
                    self._pending.append((lane, _pool(lane).submit(_draw, fn, args)))
                return
            except Exception as exc:  # no helper process here: draw in this one
                log.info("figures drawn in the run's process (%s)", exc)
                self.background = False
        # in this process the figure's own warnings reach the run's log directly
        try:
            fn(*args)
        except Exception as exc:  # a figure must never cost the numbers
            log.warning("plotting failed (%s); the tables are written", exc)

    def _least_busy(self) -> int:
        busy = [0] * lanes()
        for lane, future in self._pending:
            if not future.done() and lane < len(busy):
                busy[lane] += 1
        return busy.index(min(busy))

    def cancel(self) -> None:
        """Forget the pending figures without waiting for them."""
        for _, future in self._pending:
            future.cancel()
        self._pending = []

    def wait(self) -> None:
        pending, self._pending = self._pending, []
        with _lend_permit(any(not future.done() for _, future in pending)):
            self._collect(pending)
        if pending and self._drawn:
            _balance(time.process_time() - self._started_cpu, self._drawing_cpu)

    def _collect(self, pending: list[tuple[int, Future[tuple[list[str], float]]]]) -> None:
        for lane, future in pending:
            try:
                messages, cpu = future.result()
            except Exception as exc:  # the helper died: the figures are missing, not the run
                log.warning("figures not drawn (%s); the tables are written", exc)
                _POOLS.pop(lane, None)
                continue
            self._drawing_cpu += cpu
            self._drawn = True
            for message in messages:
                log.warning("%s", message)
