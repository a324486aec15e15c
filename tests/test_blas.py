"""paraeval.correlation.blas: numpy's and scipy's BLAS on one thread while paraeval computes, so
that a long dot product (OpenBLAS splits one of more than 10,000 elements across its threads)
gives the same bits on every machine."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from paraeval.correlation import correlate
from paraeval.correlation.blas import on_one_blas_thread, one_blas_thread


def _blas_threads() -> set[int]:
    return {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}


def test_one_thread_inside_and_restored_after() -> None:
    with threadpool_limits(limits=2, user_api="blas"):
        assert _blas_threads() == {2}
        with one_blas_thread():
            assert _blas_threads() == {1}
            with one_blas_thread():  # nested: still one, and the outer end restores
                assert _blas_threads() == {1}
            assert _blas_threads() == {1}
        assert _blas_threads() == {2}


def test_worker_threads_inside_a_block_run_on_one_thread() -> None:
    seen: list[set[int]] = []

    def worker() -> None:
        with one_blas_thread():
            seen.append(_blas_threads())
        seen.append(_blas_threads())  # its block was inner: the limit stays

    with threadpool_limits(limits=2, user_api="blas"):
        with one_blas_thread():
            thread = threading.Thread(target=worker)
            thread.start()
            thread.join(10)
        assert seen == [{1}, {1}]
        assert _blas_threads() == {2}


def test_decorator_passes_arguments_and_result() -> None:
    @on_one_blas_thread
    def f(a: int, *, b: int) -> tuple[int, set[int]]:
        return a + b, _blas_threads()

    with threadpool_limits(limits=2, user_api="blas"):
        assert f(1, b=2) == (3, {1})


def _dot_differs_between_thread_counts(x: np.ndarray, y: np.ndarray) -> bool:
    with threadpool_limits(limits=1, user_api="blas"):
        one = float(np.dot(x, y))
    with threadpool_limits(limits=2, user_api="blas"):
        two = float(np.dot(x, y))
    return one != two


@pytest.mark.parametrize("seed", range(3))
def test_segment_pearson_does_not_depend_on_blas_threads(seed: int) -> None:
    rng = np.random.default_rng(seed)
    # 40 systems x 600 items: 24,000 cells, past OpenBLAS's 10,000-element threading threshold
    metric = rng.normal(size=(40, 600))
    human = metric + rng.normal(size=(40, 600))
    values = []
    for threads in (1, 2):
        with threadpool_limits(limits=threads, user_api="blas"):
            values.append(correlate(metric, human, "segment", "pearson").value)
    assert values[0] == values[1]


def test_the_check_above_can_fail() -> None:
    # on one core OpenBLAS never splits a dot product; elsewhere the test above would be moot
    # if two threads gave the same bits on such data anyway
    if max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas") < 2:
        pytest.skip("BLAS runs on one thread on this machine: nothing to split")
    rng = np.random.default_rng(0)
    pairs = [(rng.normal(size=24_000), rng.normal(size=24_000)) for _ in range(20)]
    assert any(_dot_differs_between_thread_counts(x, y) for x, y in pairs)


def test_a_helper_process_keeps_one_thread() -> None:
    import subprocess
    import sys

    # the figure helpers' initializer, in a fresh process: the libraries loaded before the call
    # and those loaded after it both run on one thread
    code = (
        "import numpy\n"
        "from paraeval.correlation.blas import one_blas_thread_for_good\n"
        "one_blas_thread_for_good()\n"
        "import scipy.linalg\n"
        "from threadpoolctl import threadpool_info\n"
        "print(sorted({i['num_threads'] for i in threadpool_info() if i['user_api'] == 'blas'}),"
        " len([i for i in threadpool_info() if i['user_api'] == 'blas']))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out[0] == "[1]" and int(out[1]) >= 2  # numpy's and scipy's OpenBLAS
