"""The memory estimates the config check uses, each against the measured peak of the code it
estimates, at two sizes: never below it, and not so far above that a feasible request would be
refused (at most ``SLACK`` times it plus a constant for the fixed working blocks).

numpy's arrays are traced by ``tracemalloc``, so the peak of a code path is measured in-process;
the encoder's (torch's) memory is not, so its batches are measured by a child process's peak
resident set size (reset before each pass through Linux's ``/proc/self/clear_refs``)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import tracemalloc
from collections.abc import Callable

import numpy as np
import pytest

from paraeval.correlation import resamples as resamples_module
from paraeval.correlation.paired import MeanScores, StatsScores
from paraeval.correlation.paired_blocks import (
    ar_block_nbytes,
    ar_blocks,
    bootstrap_block_nbytes,
    bootstrap_blocks,
)
from paraeval.correlation.resamples import draw_resamples, resamples_nbytes
from paraeval.correlation.significance import permutation_nbytes, permutation_test
from paraeval.correlation.spa import pairwise_p_values, sign_matrix, sign_matrix_nbytes
from paraeval.correlation.table import correlation_table, table_nbytes
from paraeval.pipeline.stages.compare import _by_blocks, _Column, compare_nbytes

SLACK = 4.0
FIXED = 64 * 2**20


def measured_peak(fn: Callable[[], object]) -> int:
    """Bytes ``fn`` allocates at its peak beyond what was allocated before it."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        fn()
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


def assert_bounds(estimate: int, measured: int) -> None:
    assert measured <= estimate, f"measured {measured / 1e6:.1f} MB > estimate {estimate / 1e6:.1f}"
    assert estimate <= SLACK * measured + FIXED, (
        f"estimate {estimate / 1e6:.1f} MB far above the measured {measured / 1e6:.1f} MB"
    )


def _columns(n: int, systems: str = "abc") -> list[_Column]:
    rng = np.random.default_rng(0)
    mean = MeanScores({s: rng.random(n) for s in systems})
    # NIST-like: a corpus score of summed non-integer rows (compiled loops over the masks)
    stats = {s: rng.integers(0, 3, size=(n, 6)) + 0.5 for s in systems}
    summed = StatsScores(stats, None, lambda st: float(st.sum()), sums=lambda x: x.sum(axis=1))
    return [_Column("mean", True, "m", mean), _Column("sums", True, "s", summed)]


@pytest.mark.parametrize(("n_items", "n_bootstrap"), [(3000, 4000), (30000, 1500)])
def test_compare_bootstrap_blocks(n_items: int, n_bootstrap: int) -> None:
    columns = _columns(n_items)
    systems = list("abc")

    def run_on(n: int) -> None:
        _by_blocks(
            n,
            columns,
            bootstrap_blocks(n_items, n, 1),
            lambda col, idx, counts: {s: col.scores.bootstrap(s, idx, counts) for s in systems},
        )

    def run() -> None:
        run_on(n_bootstrap)

    run_on(200)  # compiled loops loaded before measuring
    measured = measured_peak(run)
    held = 8 * len(columns) * len(systems) * n_bootstrap  # every resample's scores, kept
    assert_bounds(bootstrap_block_nbytes(n_items, n_bootstrap) + held, measured)
    assert_bounds(compare_nbytes(n_items, 3, len(columns), n_bootstrap, 0), measured)


@pytest.mark.parametrize(("n_items", "n_ar"), [(3000, 4000), (30000, 1500)])
def test_compare_randomization_blocks(n_items: int, n_ar: int) -> None:
    columns = _columns(n_items)

    def run_on(n: int) -> None:
        _by_blocks(
            n,
            columns,
            ar_blocks(n_items, n, 1),
            lambda col, masks: col.scores.ar_stats("a", ["b", "c"], masks),
        )

    def run() -> None:
        run_on(n_ar)

    run_on(200)  # compiled loops loaded before measuring
    measured = measured_peak(run)
    held = 8 * len(columns) * 2 * n_ar  # every trial's differences, kept
    assert_bounds(ar_block_nbytes(n_items, n_ar) + held, measured)
    assert_bounds(compare_nbytes(n_items, 3, len(columns), 0, n_ar), measured)


def test_compare_keeps_per_resample_scores_only() -> None:
    """Many resamples on few items: what grows is what each column keeps per resample."""
    columns = _columns(40)
    systems = list("abc")
    for n in (200_000, 800_000):

        def run(n: int = n) -> None:
            _by_blocks(
                n,
                columns,
                bootstrap_blocks(40, n, 1),
                lambda col, idx, counts: {s: col.scores.bootstrap(s, idx, counts) for s in systems},
            )

        run(200)
        assert_bounds(compare_nbytes(40, 3, len(columns), n, 0), measured_peak(run))


@pytest.mark.parametrize(("n_items", "n_resamples"), [(20000, 1000), (5000, 20000)])
def test_draw_resamples(monkeypatch: pytest.MonkeyPatch, n_items: int, n_resamples: int) -> None:
    held = measured_peak(
        lambda: draw_resamples(np.random.default_rng(1), 5, n_items, n_resamples, "both")
    )
    assert_bounds(resamples_nbytes(n_resamples, 5, n_items, "both"), held)
    # over the limit, the set keeps generator states and draws rows again where read
    monkeypatch.setattr(resamples_module, "HELD_INDEX_BYTES", 0)

    def read() -> None:
        res = draw_resamples(np.random.default_rng(1), 5, n_items, n_resamples, "items")
        assert isinstance(res.item_idx, resamples_module.DrawnRows)
        for start in range(0, n_resamples, 500):
            res.item_idx[start : start + 500]

    measured = measured_peak(read)
    assert measured < 64 * 2**20  # bounded, whatever n_resamples


@pytest.mark.parametrize(("n_sys", "n_items"), [(5, 4000), (10, 20000)])
def test_correlation_table(n_sys: int, n_items: int) -> None:
    rng = np.random.default_rng(0)
    metric = rng.normal(size=(n_sys, n_items))
    human = metric + rng.normal(size=(n_sys, n_items))
    levels, coefficients = ("segment", "item", "system"), ("pearson",)
    measured = measured_peak(
        lambda: correlation_table(
            {"m": metric},
            {"h": human},
            levels=levels,
            coefficients=coefficients,
            n_resamples=1000,
            rng=np.random.default_rng(1),
        )
    )
    assert_bounds(table_nbytes(1, levels, coefficients, n_sys, n_items, 1000, workers=1), measured)


@pytest.mark.slow
@pytest.mark.parametrize("unit", ["items", "cells", "both"])
@pytest.mark.parametrize(("n_sys", "n_items"), [(5, 2000), (10, 8000)])
def test_permutation_test(unit: str, n_sys: int, n_items: int) -> None:
    rng = np.random.default_rng(0)
    a = rng.normal(size=(n_sys, n_items))
    b = a + rng.normal(size=a.shape)
    h = a + rng.normal(size=a.shape)
    measured = measured_peak(
        lambda: permutation_test(
            a, b, h, "segment", "pearson", rng=np.random.default_rng(1), n_resamples=1000, unit=unit
        )
    )
    assert_bounds(permutation_nbytes(1000, n_sys, n_items, unit), measured)


@pytest.mark.parametrize(("n_sys", "n_items"), [(5, 20000), (10, 80000)])
def test_sign_matrix(n_sys: int, n_items: int) -> None:
    human = np.random.default_rng(0).normal(size=(n_sys, n_items))
    measured = measured_peak(lambda: pairwise_p_values(human, sign_matrix(n_items, 1000)))
    assert_bounds(sign_matrix_nbytes(n_items, 1000, n_sys), measured)


_ENCODE = textwrap.dedent(
    """
    import sys
    from paraeval.metrics.encoder import Encoder
    n = int(sys.argv[1])
    words = "the a of market city report price house children country world time".split()
    texts = [
        " ".join(words[(i * 7 + j) % len(words)] for j in range(12 + i % 20)) for i in range(n)
    ]
    enc = Encoder("default", device="cpu", use_cache=False)
    enc.encode(texts[:1], enc.tokenize(texts[:1]), [])  # the model loaded and warm
    ids = enc.tokenize(texts)

    def status(key):
        for line in open("/proc/self/status"):
            if line.startswith(key):
                return int(line.split()[1]) * 1024

    for batch in sys.argv[2:]:
        # reset the peak resident set (Linux clear_refs): each batch's own peak above the start
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        before = status("VmRSS:")
        enc.batch_size = int(batch)
        enc.encode(texts, ids, [])
        print(status("VmHWM:") - before)
    """
)


@pytest.mark.slow
def test_encoder_batch() -> None:
    """Two batch sizes in one process (the model loaded once): the peak resident set of each
    pass above the resident set before it."""
    from paraeval.metrics.encoder_model import batch_nbytes

    n, sizes = 160, (8, 128)
    proc = subprocess.run(
        [sys.executable, "-c", _ENCODE, str(n), *map(str, sizes)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if proc.returncode != 0:
        pytest.fail(proc.stderr[-3000:])
    measured = [int(v) for v in proc.stdout.split()[-len(sizes) :]]
    for batch_size, peak in zip(sizes, measured, strict=True):
        # an upper bound for a large encoder: the packaged small one takes less, never more
        assert peak <= batch_nbytes(batch_size, n), (batch_size, peak)
    assert measured[1] > measured[0]  # a larger batch takes more
