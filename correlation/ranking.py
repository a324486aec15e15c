"""The metrics ranked as the WMT findings rank them: per test by value with its significance
clusters, and over several tests as mt-metrics-eval's ``TaskSetResults.AverageCorrMatrix``."""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from paraeval.correlation.significance import significance_clusters

RANKING_COLUMNS: tuple[str, ...] = (
    *("aspect", "level", "coefficient", "metric", "value", "order", "cluster", "source"),
    "baseline",
)
# rates over pairs, in [0, 1]; every other coefficient is a correlation in [-1, 1]
RATES = frozenset({"pairwise_accuracy", "soft_pairwise_accuracy", "acc23"})


@dataclass(frozen=True)
class RankedTask:
    """One test's share of an overall ranking."""

    weight: float
    range: tuple[float, float]  # the bounds of its values, mapped to [0, 1]
    values: Mapping[str, float]  # each metric's direction-adjusted value
    draws: Mapping[tuple[str, str], np.ndarray]  # (a, b): the null differences a - b


def overall_ranking(tasks: Sequence[RankedTask], alpha: float) -> list[dict[str, Any]]:
    """Rows (metric, value, cluster), best first, for the metrics with a value in every task.

    The value is the weighted mean (weights normalised) of each task's value mapped to [0, 1] by
    its range. The p-value that a beats b sums each task's null differences so weighted and
    mapped, a task with fewer draws (early stopping) repeated to the longest list, and counts
    as the tests do: (1 + #{null >= observed}) / (1 + K) (mt-metrics-eval: #/K). Clusters as
    :func:`significance_clusters`; NaN p (a task without draws for the pair): not significant.
    """
    total = sum(t.weight for t in tasks)
    scale = [t.weight / total / (t.range[1] - t.range[0]) for t in tasks]
    sets = [{m for m, v in t.values.items() if math.isfinite(v)} for t in tasks]
    common = set.intersection(*sets) if sets else set()
    value = {
        m: sum(f * (t.values[m] - t.range[0]) for f, t in zip(scale, tasks, strict=True))
        for m in common
    }
    ranked = sorted(value, key=lambda m: (-value[m], m))
    pvalues: dict[tuple[str, str], float] = {}
    for i, a in enumerate(ranked):
        for b in ranked[i + 1 :]:
            null = [
                f * (t.draws[a, b] if (a, b) in t.draws else -t.draws.get((b, a), np.empty(0)))
                for f, t in zip(scale, tasks, strict=True)
            ]
            k = max(len(d) for d in null)
            summed = np.sum([np.resize(d, k) for d in null], axis=0)
            hits = int((summed >= value[a] - value[b] - 1e-12).sum())
            pvalues[a, b] = (1 + hits) / (1 + k) if min(map(len, null)) else math.nan
    clusters = significance_clusters({m: value[m] for m in ranked}, pvalues, alpha)
    return [{"metric": m, "value": value[m], "cluster": clusters.get(m)} for m in ranked]


def metric_ranking(
    correlations: Sequence[Mapping[str, Any]],
    significance: Sequence[Mapping[str, Any]],
    draws: Mapping[tuple[str, ...], np.ndarray],
    tasks: Sequence[tuple[str, str, float]],
    alpha: float,
    lower_is_better: Collection[str] = (),
    precomputed: Collection[str] = (),
    baselines: Collection[str] = (),
) -> list[dict[str, Any]]:
    """The rows (:data:`RANKING_COLUMNS`) of every (aspect, level, coefficient) of the
    correlation table's rows ``correlations``: each metric's value, its order by value (ties by
    name) and its cluster in the ``significance`` rows of that test. A ``lower_is_better``
    metric's value is that on its negated scores where a permutation test computed it (a rate
    over pairs is not odd in the scores), else the value with its sign turned. With more than one
    of the ``tasks`` ((level, coefficient, weight) of the significance tests, their null
    differences in ``draws``), an ``overall`` block per aspect (coefficient empty) from
    :func:`overall_ranking`."""

    source = dict.fromkeys(precomputed, "precomputed")
    blocks: dict[tuple[str, ...], dict[str, float]] = {}
    for row in correlations:
        sign = -1.0 if row["metric"] in lower_is_better else 1.0
        test = (row["aspect"], row["level"], row["coefficient"])
        blocks.setdefault(test, {})[row["metric"]] = sign * float(row["value"])
    clusters: dict[tuple[str, ...], Any] = {}
    for r in significance:
        for s in "ab":
            cell = (r["aspect"], r["level"], r["coefficient"], r[f"metric_{s}"])
            clusters[cell] = r[f"cluster_{s}"]
            if r[f"adjusted_{s}"] and r["method"] == "permutation":
                blocks.setdefault(cell[:3], {})[cell[3]] = -float(r[f"r_{s}"])
    ranked: list[tuple[Any, ...]] = []
    for key, values in blocks.items():
        order = sorted(
            values, key=lambda m: (-values[m] if math.isfinite(values[m]) else math.inf, m)
        )
        for i, m in enumerate(order):
            n = i + 1 if math.isfinite(values[m]) else None
            ranked.append((*key, m, values[m], n, clusters.get((*key, m))))
    for aspect in dict.fromkeys(k[0] for k in blocks) if len(tasks) > 1 else ():
        parts = []
        for level, coefficient, weight in tasks:
            test = (aspect, level, coefficient)
            pairs = {(k[3], k[4]): d for k, d in draws.items() if k[:3] == test}
            bounds = (0.0, 1.0) if coefficient in RATES else (-1.0, 1.0)
            parts.append(RankedTask(weight, bounds, blocks.get(test, {}), pairs))
        for i, r in enumerate(overall_ranking(parts, alpha), 1):
            ranked.append((aspect, "overall", "", r["metric"], r["value"], i, r["cluster"]))
    rows = [(*r, source.get(r[3], "paraeval"), r[3] in baselines) for r in ranked]
    return [dict(zip(RANKING_COLUMNS, row, strict=True)) for row in rows]
