"""Benchmark: bootstrap intervals at the segment level, vectorised vs. scipy in a loop.

1,000 resamples (unit = items) over 10 systems x 1,000 items (10k segments) x 20 metrics, Pearson
and Kendall tau-b, through ``correlation_table`` (the call the pipeline makes). The scipy
reference (the resampled vectors built explicitly, scipy.stats.pearsonr + kendalltau per resample)
runs on a subset of resamples and metrics and is extrapolated to the same workload.

The statistics of mt-metrics-eval (Kendall-like, pairwise accuracy, acc23 with tie calibration,
tau_23, soft pairwise accuracy) are timed under the same bootstrap (one metric, their own levels)
against the explicit loop: every resampled matrix built and passed to ``correlate``.

    .venv/bin/python benchmarks/bench_correlation.py [--resamples 1000] [--metrics 20] [--json PATH]
"""

from __future__ import annotations

import argparse
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from results import row, write_rows
from scipy import stats
from threadpoolctl import threadpool_limits

from paraeval.correlation import correlate, correlation_table, draw_resamples, resampled_values


def make_data(
    n_systems: int, n_items: int, n_metrics: int, seed: int
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    rng = np.random.default_rng(seed)
    quality = np.linspace(0.0, 1.0, n_systems)[:, None]
    human = np.round(quality * 50 + rng.normal(scale=15, size=(n_systems, n_items)))
    metrics = {
        f"m{k:02d}": human + rng.normal(scale=5 + 3 * k, size=(n_systems, n_items))
        for k in range(n_metrics)
    }
    # a few missing cells, as real data has
    for m in metrics.values():
        m[rng.random(m.shape) < 0.01] = np.nan
    return metrics, human


def scipy_loop(metric: np.ndarray, human: np.ndarray, item_idx: np.ndarray) -> tuple[float, float]:
    """(wall, cpu) seconds per resample: scipy Pearson + Kendall tau-b on explicit resamples."""
    start, cpu = time.perf_counter(), time.process_time()
    for idx in item_idx:
        m = metric[:, idx].ravel()
        h = human[:, idx].ravel()
        ok = np.isfinite(m) & np.isfinite(h)
        stats.pearsonr(m[ok], h[ok])
        stats.kendalltau(m[ok], h[ok])
    n = len(item_idx)
    return (time.perf_counter() - start) / n, (time.process_time() - cpu) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--metrics", type=int, default=20)
    parser.add_argument("--systems", type=int, default=10)
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--scipy-resamples", type=int, default=30)
    parser.add_argument("--workers", type=int, default=min(4, os.cpu_count() or 1), help="threads")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args()

    metrics, human = make_data(args.systems, args.items, args.metrics, seed=0)
    n_seg = args.systems * args.items
    print(
        f"workload: {args.resamples} resamples x {n_seg} segments x {args.metrics} metrics, "
        f"segment level, pearson + kendall_b, unit=items; cpus={os.cpu_count()}"
    )

    # warm up BLAS threads and imports outside the timed region
    correlation_table(
        {"w": metrics["m00"][:, :50]},
        {"h": human[:, :50]},
        levels=("segment",),
        coefficients=("pearson", "kendall_b"),
        n_resamples=10,
        rng=np.random.default_rng(0),
    )

    # as the pipeline runs it: the jobs on threads, BLAS on one thread
    wall, cpu = time.perf_counter(), time.process_time()
    with ThreadPoolExecutor(args.workers) as pool, threadpool_limits(1, user_api="blas"):
        rows = correlation_table(
            metrics,
            {"human": human},
            levels=("segment",),
            coefficients=("pearson", "kendall_b"),
            n_resamples=args.resamples,
            rng=np.random.default_rng(1),
            map=pool.map,
        )
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert len(rows) == 2 * args.metrics
    print(f"correlation_table (values + intervals): wall {wall:.2f} s, cpu {cpu:.2f} s")

    res = draw_resamples(
        np.random.default_rng(2), args.systems, args.items, args.resamples, "items"
    )
    per_coef = {}
    for coefficient in ("pearson", "kendall_b"):
        t = time.perf_counter()
        resampled_values(metrics["m00"], human, "segment", coefficient, res)
        per_coef[coefficient] = time.perf_counter() - t
    print(
        "one metric, resampled values only: "
        + ", ".join(f"{k} {v:.3f} s" for k, v in per_coef.items())
    )

    assert res.item_idx is not None
    sub = res.item_idx[: args.scipy_resamples]
    per_wall, per_cpu = scipy_loop(metrics["m00"], human, sub)
    scale = args.resamples * args.metrics
    print(
        f"scipy loop: {per_wall * 1e3:.2f} ms wall, {per_cpu * 1e3:.2f} ms cpu per resample per "
        f"metric (measured on {len(sub)} resamples) -> {per_wall * scale:.1f} s wall, "
        f"{per_cpu * scale:.1f} s cpu extrapolated"
    )
    print(
        f"speed-up over the scipy loop: wall {per_wall * scale / wall:.1f}x, "
        f"cpu {per_cpu * scale / cpu:.1f}x"
    )

    workload = f"{args.resamples:,} item resamples x {n_seg:,} segments x {args.metrics} metrics"
    what = f"`correlation_table`, segment level, Pearson + Kendall tau-b with intervals, {workload}"
    anchor = f"scipy per resample (extrapolated from {len(sub)})"
    rows = [
        row("bench_correlation", f"{what}, wall", wall, "s", anchor, per_wall * scale),
        row("bench_correlation", f"{what}, CPU", cpu, "CPU-s", anchor, per_cpu * scale),
    ]
    rows += field_statistics(metrics["m00"], human, res, args.scipy_resamples)
    write_rows(args.json, rows)


FIELD = (
    ("segment", "kendall_like"),
    ("item", "kendall_like"),
    ("item", "acc23"),
    ("item", "tau_23"),
    ("system", "acc23"),
    ("system", "pairwise_accuracy"),
    ("system", "soft_pairwise_accuracy"),
)


def field_statistics(  # type: ignore[no-untyped-def]
    metric: np.ndarray, human: np.ndarray, res, n_explicit: int
) -> list[dict[str, Any]]:
    """The field's statistics under the same resamples: vectorised vs the explicit loop."""
    assert res.item_idx is not None
    print(f"field statistics, one metric, {res.n_resamples} resamples (unit=items):")
    rows = []
    for level, coefficient in FIELD:
        t = time.perf_counter()
        resampled_values(metric, human, level, coefficient, res)
        fast = time.perf_counter() - t
        t = time.perf_counter()
        for idx in res.item_idx[:n_explicit]:
            correlate(metric[:, idx], human[:, idx], level, coefficient)
        slow = (time.perf_counter() - t) / n_explicit * res.n_resamples
        print(
            f"  {level:>7} {coefficient:<22} {fast:7.2f} s  explicit loop {slow:7.1f} s "
            f"(extrapolated from {n_explicit})  speed-up {slow / fast:5.1f}x"
        )
        what = f"{coefficient} at the {level} level, {res.n_resamples:,} resamples, one metric"
        anchor = f"`correlate` on each resampled matrix (extrapolated from {n_explicit})"
        rows.append(row("bench_correlation", what, fast, "s", anchor, slow))
    return rows


if __name__ == "__main__":
    main()
