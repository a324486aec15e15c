"""numpy's and scipy's BLAS on one thread while paraeval computes.

OpenBLAS splits a dot product longer than 10,000 elements (a segment-level Pearson r over every
row) across its threads and adds the partial sums in another order, so the last bits of such a
value depended on the machine's core count; with one thread they are the same everywhere. The
work that matters is parallel already (the correlation's worker threads, the figure helper
processes), and OpenBLAS's threads spin after each call, taking the cores those need. torch's
own thread pool (the encoder) is not touched.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ParamSpec, TypeVar

from threadpoolctl import threadpool_limits

_P = ParamSpec("_P")
_R = TypeVar("_R")

_lock = threading.Lock()
_depth = 0  # blocks open, on any thread: only the outermost sets and restores the limit


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """numpy's and scipy's BLAS libraries on one thread inside the block, their setting restored
    after it; blocks inside it (nested calls, its worker threads) cost nothing. The outermost
    block restores the setting, on the thread that opened it: OpenBLAS (0.3.31) ignores a raise
    of its thread count asked from another thread."""
    global _depth
    with _lock:
        outer = _depth == 0
        _depth += 1
    try:
        if outer:
            with threadpool_limits(limits=1, user_api="blas"):
                yield
        else:
            yield
    finally:
        with _lock:
            _depth -= 1


def on_one_blas_thread(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """Decorator: ``fn`` runs inside :func:`one_blas_thread`."""

    @functools.wraps(fn)
    def inner(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with one_blas_thread():
            return fn(*args, **kwargs)

    return inner


def one_blas_thread_for_good() -> None:
    """numpy's and scipy's BLAS on one thread for the rest of this process, for the libraries
    loaded already and those loaded later (OpenBLAS reads ``OPENBLAS_NUM_THREADS`` when it
    loads): for a helper process that only draws."""
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    threadpool_limits(limits=1, user_api="blas")
