"""The WMT presets on ParaBank-Eval: whole runs, and their costly steps against the explicit
computation.

1. ``paraeval data=parabank correlation=<preset>`` for wmt23, wmt24 and wmt25, each in a fresh
   process with an empty score cache (cold) and the default metric set, timed from the start of
   the process to its end. Target: each within 12 minutes on this machine.
2. On the wmt23 run's segment scores, the two steps the presets add, each against the explicit
   computation measured on a subset and extrapolated to the same workload:

   - the significance table (acc23 averaged over items, tie calibration on every pair, every
     pair of columns, each human aspect, 1,000 permutations, pairwise permutation test) without
     early stopping, against the explicit test that draws a coin for every system pair of every
     item in every permutation and recomputes both hybrid item means (mt-metrics-eval's
     ``PairwisePermutationSigDiff`` loop);
   - the bootstrap interval of calibrated acc23 (1,000 item resamples, each calibrating its own
     threshold) for one column, against calibrating each resampled matrix with ``correlate``.

    .venv/bin/python benchmarks/bench_presets.py [--presets wmt23 wmt24 wmt25] [--json PATH]
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from bench_run import paraeval_cli
from results import row, write_rows

from paraeval.correlation import (
    calibrated_epsilon,
    configure,
    correlate,
    draw_resamples,
    resampled_values,
    significance_table,
)
from paraeval.correlation.calibration import WEIGHTS, item_pairs, pair_kinds

TARGET_SECONDS = 12 * 60.0
REPO = Path(__file__).resolve().parents[1]


def matrices(out: Path) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], set[str]]:
    """The run's metric and human matrices (systems x items) and its lower-is-better columns."""
    seg = pd.read_parquet(out / "segment_scores.parquet")
    sig = pd.read_csv(out / "signatures.csv")
    systems = sorted(seg["system"].unique())
    items = list(dict.fromkeys(seg["item_id"]))

    def matrix(col: str) -> np.ndarray:
        wide = seg.pivot(index="system", columns="item_id", values=col)
        return wide.reindex(index=systems, columns=items).to_numpy(dtype=float)

    humans = {c: matrix(c) for c in seg.columns if c.startswith("human_")}
    named = [c for c in sig["column"] if c in seg.columns]
    metrics = {c: matrix(c) for c in named}
    lower = set(sig.loc[~sig["higher_is_better"].astype(bool), "column"])
    return metrics, humans, lower


def explicit_pairs_test(
    a: np.ndarray, b: np.ndarray, h: np.ndarray, k: int, rng: np.random.Generator
) -> float:
    """One-sided p of the pairwise permutation test, a coin per pair per permutation."""
    acc23 = WEIGHTS["acc23"]
    values = []
    for m in (a, b):
        pairs = item_pairs(m, h)
        threshold = calibrated_epsilon(m, h)[1]
        values.append(np.asarray(acc23)[pair_kinds(pairs.dm, pairs.dh, threshold)])
    pairs = item_pairs(a, h)
    share = 1.0 / (pairs.per_item[pairs.item] * int((pairs.per_item > 0).sum()))
    va, vb = values
    observed = float((share * (va - vb)).sum())
    hits = 0
    for _ in range(k):
        swap = rng.random(va.size) < 0.5
        d = float((share * (np.where(swap, vb, va) - np.where(swap, va, vb))).sum())
        hits += d >= observed - 1e-12
    return (1 + hits) / (1 + k)


def step_figures(out: Path, n_pairs: int, n_perm: int, n_resamples_explicit: int) -> list[dict]:
    metrics, humans, lower = matrices(out)
    names = list(metrics)
    n_all_pairs = len(names) * (len(names) - 1) // 2
    print(
        f"\nsteps on the wmt23 run's scores: {len(names)} columns ({n_all_pairs} pairs), "
        f"{len(humans)} aspects, {next(iter(humans.values())).shape} systems x items"
    )
    coef = configure("acc23", {})
    t = time.perf_counter()
    significance_table(
        metrics,
        humans,
        level="item",
        coefficient=coef,
        method="permutation",
        rng=np.random.default_rng(0),
        n_resamples=1000,
        unit="pairs",
        alternative="greater",
        lower_is_better=lower,
    )
    fast = time.perf_counter() - t
    rng = np.random.default_rng(1)
    h = next(iter(humans.values()))
    t = time.perf_counter()
    for first, second in list(itertools.pairwise(names))[:n_pairs]:
        explicit_pairs_test(metrics[first], metrics[second], h, n_perm, rng)
    slow = (time.perf_counter() - t) / (n_pairs * n_perm) * 1000 * n_all_pairs * len(humans)
    print(
        f"  significance, pairwise permutation test, 1,000 permutations, no early stopping: "
        f"{fast:.1f} s; explicit {slow:.0f} s (extrapolated from {n_pairs} pairs x {n_perm} "
        f"permutations) -> {slow / fast:.0f}x"
    )
    what = (
        f"significance of acc23 (items, calibrated), {n_all_pairs} column pairs x "
        f"{len(humans)} aspects x 1,000 permutations, pairwise test, ParaBank-Eval"
    )
    rows = [
        row(
            "bench_presets",
            what,
            fast,
            "s",
            f"a coin per pair per permutation (extrapolated from {n_pairs} x {n_perm})",
            slow,
        )
    ]
    first = names[0]
    n_sys, n_items = h.shape
    res = draw_resamples(np.random.default_rng(2), n_sys, n_items, 1000, "items")
    t = time.perf_counter()
    resampled_values(metrics[first], h, "item", coef, res)
    fast = time.perf_counter() - t
    assert res.item_idx is not None
    t = time.perf_counter()
    for idx in res.item_idx[:n_resamples_explicit]:
        correlate(metrics[first][:, idx], h[:, idx], "item", coef)
    slow = (time.perf_counter() - t) / n_resamples_explicit * 1000
    print(
        f"  acc23 interval, 1,000 item resamples, one column: {fast:.2f} s; each resampled "
        f"matrix calibrated {slow:.1f} s (extrapolated from {n_resamples_explicit}) -> "
        f"{slow / fast:.0f}x"
    )
    rows.append(
        row(
            "bench_presets",
            "calibrated acc23 interval (items), 1,000 resamples, one column, ParaBank-Eval",
            fast,
            "s",
            f"`correlate` on each resampled matrix (extrapolated from {n_resamples_explicit})",
            slow,
        )
    )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--presets", nargs="+", default=["wmt23", "wmt24", "wmt25"])
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--explicit-pairs", type=int, default=2)
    parser.add_argument("--explicit-permutations", type=int, default=20)
    parser.add_argument("--explicit-resamples", type=int, default=20)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    data = Path(os.environ.get("PARAEVAL_SHARED_DATA", args.data)).resolve()
    if not (data / "parabank_eval").is_dir():
        sys.exit(f"ParaBank-Eval not found under {data}")
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="paraeval-bench-presets-") as tmp:
        work = Path(tmp)
        print(
            "whole runs, ParaBank-Eval, default metric set, cold score cache "
            f"({os.cpu_count()} CPUs)"
        )
        for preset in args.presets:
            run = paraeval_cli(
                sys.executable,
                work,
                data,
                preset,
                work / f"cache-{preset}",
                (f"correlation={preset}",),
            )
            stages = ", ".join(
                f"{k} {v:.0f} s"
                for k, v in sorted(run["stages"].items(), key=lambda kv: -kv[1])[:4]
            )
            verdict = "within" if run["wall"] <= TARGET_SECONDS else "OVER"
            print(
                f"  correlation={preset}: {run['wall']:.0f} s wall, {run['cpu']:.0f} CPU-s "
                f"({stages}); {verdict} the 12-minute target"
            )
            rows.append(
                row(
                    "bench_presets",
                    f"whole run `correlation={preset}`, ParaBank-Eval, cold score cache",
                    run["wall"],
                    "s",
                )
            )
        if "wmt23" in args.presets:
            rows += step_figures(
                work / "out-wmt23",
                args.explicit_pairs,
                args.explicit_permutations,
                args.explicit_resamples,
            )
    write_rows(args.json, rows)


if __name__ == "__main__":
    main()
