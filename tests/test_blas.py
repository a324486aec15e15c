"""numpy's and scipy's BLAS on one thread while a run computes: the caller's choice (the pipeline's
``compute``), not the correlation library's. A long dot product (OpenBLAS splits one of more than
10,000 elements across its threads) then gives the same bits on every machine."""

from __future__ import annotations

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from paraeval.correlation import correlate
from paraeval.pipeline.stages import evaluation

# what the pipeline's compute is wrapped in
one_blas_thread = threadpool_limits.wrap(limits=1, user_api="blas")


def _blas_threads() -> set[int]:
    return {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}


def test_one_thread_inside_and_restored_after() -> None:
    @one_blas_thread
    def f(a: int, *, b: int) -> tuple[int, set[int]]:
        return a + b, _blas_threads()

    with threadpool_limits(limits=2, user_api="blas"):
        assert f(1, b=2) == (3, {1})
        assert _blas_threads() == {2}


def test_the_pipeline_computes_under_the_limit() -> None:
    # the decorator leaves the function it wraps reachable: compute is wrapped, not rewritten
    assert evaluation.compute.__wrapped__.__name__ == "compute"  # type: ignore[attr-defined]


def _dot_differs_between_thread_counts(x: np.ndarray, y: np.ndarray) -> bool:
    with threadpool_limits(limits=1, user_api="blas"):
        one = float(np.dot(x, y))
    with threadpool_limits(limits=2, user_api="blas"):
        two = float(np.dot(x, y))
    return one != two


@pytest.mark.parametrize("seed", range(3))
def test_segment_pearson_under_the_limit_does_not_depend_on_the_machine(seed: int) -> None:
    rng = np.random.default_rng(seed)
    # 40 systems x 600 items: 24,000 cells, past OpenBLAS's 10,000-element threading threshold
    metric = rng.normal(size=(40, 600))
    human = metric + rng.normal(size=(40, 600))
    values = []
    for threads in (1, 2):
        with threadpool_limits(limits=threads, user_api="blas"):
            values.append(one_blas_thread(correlate)(metric, human, "segment", "pearson").value)
    assert values[0] == values[1]


def test_the_check_above_can_fail() -> None:
    # on one core OpenBLAS never splits a dot product; elsewhere the test above would be moot
    # if two threads gave the same bits on such data anyway
    if max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas") < 2:
        pytest.skip("BLAS runs on one thread on this machine: nothing to split")
    rng = np.random.default_rng(0)
    pairs = [(rng.normal(size=24_000), rng.normal(size=24_000)) for _ in range(20)]
    assert any(_dot_differs_between_thread_counts(x, y) for x, y in pairs)
