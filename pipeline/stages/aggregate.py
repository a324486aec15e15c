"""Group averages are means of segment averages: corpus scores over few systems degenerate."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from paraeval.metrics.base import AVERAGED_GROUPS
from paraeval.pipeline.data.validate import human_columns
from paraeval.pipeline.stages.score import ColumnInfo, Scores


@dataclass
class Normalizer:
    """``bounds``: column -> [low, high] (``{bleu: [0, 100]}``); others fall back to minmax."""

    method: str = "minmax"
    bounds: Mapping[str, list[float]] | None = None

    def __post_init__(self) -> None:
        self.bounds = dict(self.bounds or {})

    def fit_transform(
        self, values: np.ndarray, column: str, higher_is_better: bool
    ) -> tuple[np.ndarray, dict[str, float | str | bool]]:
        x = np.asarray(values, dtype=float)
        sign = 1.0 if higher_is_better else -1.0
        finite = x[np.isfinite(x)]
        lo = hi = mean = sd = float("nan")
        if finite.size:
            lo, hi = float(finite.min()), float(finite.max())
            mean, sd = float(finite.mean()), float(finite.std(ddof=0))
        params: dict[str, float | str | bool] = dict(column=column, method=self.method)
        params.update(flipped=not higher_is_better, min=lo, max=hi, mean=mean, sd=sd)
        if finite.size == 0:
            return np.full_like(x, np.nan), params
        assert self.bounds is not None
        method = "minmax" if self.method == "bounds" and column not in self.bounds else self.method
        if method == "minmax":
            span = hi - lo
            if span == 0:
                out = np.where(np.isfinite(x), 0.5, np.nan)
            else:
                out = (x - lo) / span if higher_is_better else (hi - x) / span
        elif method == "bounds":
            lo_b, hi_b = (float(v) for v in self.bounds[column])
            params["low"], params["high"] = lo_b, hi_b
            scaled = np.clip((x - lo_b) / (hi_b - lo_b), 0.0, 1.0)
            out = scaled if higher_is_better else 1.0 - scaled
        elif method == "zscore":
            out = sign * (x - mean) / sd if sd > 0 else np.where(np.isfinite(x), 0.0, np.nan)
        else:  # rank: percentile of each value in the pool, ties get their mean rank
            out = pd.Series(sign * x).rank(method="average", pct=True).to_numpy()
        params["method"] = method
        return out, params


@dataclass
class Aggregated:
    segments: pd.DataFrame  # tidy + raw metric columns + syntactic/semantic averages
    normalized: pd.DataFrame  # the normalized metric columns (same index as segments)
    systems: pd.DataFrame  # one row per system
    normalization: pd.DataFrame  # fitted parameters, one row per column
    columns: dict[str, ColumnInfo]
    # columns and aspects whose system score is given (``system_<column>``), not computed
    given: frozenset[str] = frozenset()


def aggregate(scores: Scores, normalizer: Normalizer | None = None) -> Aggregated:
    normalizer = normalizer or Normalizer()
    seg = scores.segments.copy()
    norm = pd.DataFrame(index=seg.index)
    params = []
    for col, info in scores.columns.items():
        norm[col], p = normalizer.fit_transform(seg[col].to_numpy(), col, info.higher_is_better)
        params.append({**p, "group": info.group})
    columns = dict(scores.columns)
    for group in AVERAGED_GROUPS:
        members = [c for c, info in scores.columns.items() if info.group == group]
        if not members:
            continue
        with np.errstate(all="ignore"):
            seg[group] = norm[members].mean(axis=1, skipna=True)
        signature = f"{group}|norm:{normalizer.method}|of:{'+'.join(members)}"
        columns[group] = ColumnInfo(group, "average", True, signature)

    systems = scores.corpus.copy()
    by_system = seg.groupby("system", sort=False)
    systems.insert(0, "n_items", by_system.size())
    for col in [*(group for group in AVERAGED_GROUPS if group in seg), *human_columns(seg)]:
        systems[col] = by_system[col].mean()
    for col in [c for c in seg.columns if c.startswith("metric_")]:
        systems[col] = by_system[col].mean()
        columns.setdefault(col, ColumnInfo(col, "precomputed", True, f"{col}|precomputed"))
    # mt-metrics-eval's .sys.score: NaN for a system is no score, as a segment NaN is no score
    prefixes = ("system_metric_", "system_human_")
    given = [str(c).removeprefix("system_") for c in seg.columns if str(c).startswith(prefixes)]
    for col in given:
        systems[col] = by_system[f"system_{col}"].first()
    return Aggregated(seg, norm, systems, pd.DataFrame(params), columns, frozenset(given))


def without_systems(agg: Aggregated, systems: Collection[str]) -> Aggregated:
    """Keeps the whole pool's normalization: a group average has one value in every table."""
    if not systems:
        return agg
    keep = ~agg.segments["system"].isin(list(systems))
    rest = agg.systems[~agg.systems.index.isin(list(systems))]
    return replace(agg, segments=agg.segments[keep], normalized=agg.normalized[keep], systems=rest)
