"""``paraphrase.csv`` (docs/paraphrase.md); scores and intervals are the comparison's if it runs."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from paraeval.metrics.base import SourceDistance
from paraeval.pipeline.data.validate import human_columns
from paraeval.pipeline.stages.roles import Roles, copy_rates

if TYPE_CHECKING:
    from paraeval.metrics.base import Metric
    from paraeval.pipeline.stages.aggregate import Aggregated
    from paraeval.pipeline.stages.compare import Comparison

# the first computed of each is the measure; similarity to the source when reference-free
ADEQUACY = ("bertscore_f1", "cosine", "bleurt", "semantic")
PARASCORES = ("parascore", "parascore_free")


@dataclass
class ParaphraseTable:
    """``table``: one row per system, the ranked ones by rank, then the controls."""

    table: pd.DataFrame
    adequacy: str = ""
    diversity: str = ""  # "pinc" or "100 - self_bleu"
    paraphrase: str = ""
    reference_free: bool = False
    gamma: float | None = None  # ParaScore's threshold on the edit distance
    x_axis: str = "diversity"  # the frontier figure's horizontal axis: edit_distance or diversity

    @property
    def best(self) -> str:
        """One sentence on the paraphrase score's first cluster; "" without clusters."""
        t = self.table[~self.table["control"]]
        if t.empty or "cluster" not in t or not t["cluster"].notna().any():
            return ""
        first = t[t["cluster"] == t["cluster"].min()]
        names = ", ".join(map(str, first["system"]))
        if len(first) == 1:
            return f"Best system: {names}, alone in the first cluster of {self.paraphrase}."
        return (
            f"No single best system: {len(first)} systems share the first cluster of "
            f"{self.paraphrase} ({names})."
        )


def _pick(present: Sequence[str], choices: Sequence[str]) -> str:
    return next((c for c in choices if c in present), "")


def _measure(
    compared: Comparison | None, systems: pd.DataFrame, column: str, flip: float | None = None
) -> pd.DataFrame:
    """Per system: score, low, high, cluster, rank; ``flip``: the measure is ``flip − column``."""
    out = pd.DataFrame(index=systems.index, columns=["score", "low", "high", "cluster", "rank"])
    t = compared.table if compared is not None else pd.DataFrame()
    if not t.empty and (t["metric"] == column).any():
        sub = t[t["metric"] == column].set_index("system").reindex(systems.index)
        out["score"], out["low"], out["high"] = sub["score"], sub["ci_low"], sub["ci_high"]
        out["cluster"], out["rank"] = sub["cluster"], sub["rank"]
    elif column in systems:
        out["score"] = systems[column]
    out = out.astype(float)
    if flip is not None:
        score, low, high = out["score"], out["low"], out["high"]
        out["score"], out["low"], out["high"] = flip - score, flip - high, flip - low
    return out


def mean_intervals(
    values: pd.Series,
    segments: pd.DataFrame,
    rng: np.random.Generator,
    n_bootstrap: int,
    confidence: float,
) -> pd.DataFrame:
    """Percentile bootstrap; systems with as many items share the item draws."""
    rows: dict[str, tuple[float, float, float]] = {}
    lo_q, hi_q = (1 - confidence) / 2, 1 - (1 - confidence) / 2
    draws: dict[int, np.ndarray] = {}
    for system, v in values.groupby(segments["system"], sort=False):
        x = v.to_numpy(dtype=float)
        n = len(x)
        if n < 2:
            rows[str(system)] = (float(x.mean()) if n else math.nan, math.nan, math.nan)
            continue
        if n not in draws:
            draws[n] = rng.integers(0, n, size=(n_bootstrap, n))
        means = x[draws[n]].mean(axis=1)
        lo, hi = np.quantile(means, [lo_q, hi_q])
        rows[str(system)] = (float(x.mean()), float(lo), float(hi))
    return pd.DataFrame.from_dict(rows, orient="index", columns=["score", "low", "high"])


def frontier(
    x: np.ndarray,
    x_low: np.ndarray,
    x_high: np.ndarray,
    y: np.ndarray,
    y_low: np.ndarray,
    y_high: np.ndarray,
) -> np.ndarray:
    """Not beaten on both axes beyond the intervals; a missing interval is the point itself."""
    x_low, x_high = np.where(np.isfinite(x_low), x_low, x), np.where(np.isfinite(x_high), x_high, x)
    y_low, y_high = np.where(np.isfinite(y_low), y_low, y), np.where(np.isfinite(y_high), y_high, y)
    ok = np.isfinite(x) & np.isfinite(y)
    beats = (x_low[:, None] > x_high[None, :]) & (y_low[:, None] > y_high[None, :])
    beats &= ok[:, None]
    return ok & ~beats.any(axis=0)


def paraphrase_table(
    agg: Aggregated,
    compared: Comparison | None,
    roles: Roles,
    metrics: Mapping[str, Metric],
    rng: np.random.Generator,
) -> ParaphraseTable | None:
    """None without an adequacy or diversity measure; without a comparison, no intervals."""
    systems, seg = agg.systems, agg.segments
    present = [c for c in systems.columns if systems[c].notna().any()]
    adequacy = _pick(present, ADEQUACY)
    diversity = _pick(present, ("pinc", "self_bleu"))
    if not adequacy or not diversity:
        return None
    order = PARASCORES[::-1] if roles.reference_free or "parascore" not in present else PARASCORES
    paraphrase = _pick(present, (*order, "bert_ibleu"))
    out = pd.DataFrame({"system": systems.index.astype(str)}, index=systems.index)
    out["control"] = out["system"].isin(roles.controls)
    flip = 100.0 if diversity == "self_bleu" else None
    measures: dict[str, pd.DataFrame] = {
        "adequacy": _measure(compared, systems, adequacy),
        "diversity": _measure(compared, systems, diversity, flip),
    }
    gamma = None
    if paraphrase in PARASCORES:
        metric = metrics[paraphrase]
        assert isinstance(metric, SourceDistance)
        gamma = metric.gamma
        pairs = zip(seg["candidate"].astype(str), seg["source"].astype(str), strict=True)
        distances = pd.Series(metric.distances(list(pairs)), index=seg.index, dtype=float)
        if compared is not None:
            config = compared.config
            edit = mean_intervals(distances, seg, rng, config.n_bootstrap, config.confidence)
            edit = edit.reindex(systems.index.astype(str)).set_axis(systems.index)
        else:
            by_system = distances.groupby(seg["system"], sort=False).mean()
            edit = pd.DataFrame({"score": by_system.reindex(systems.index)})
            edit["low"] = edit["high"] = np.nan
        measures["edit_distance"] = edit
    if paraphrase:
        measures["paraphrase"] = _measure(compared, systems, paraphrase)
    for name, m in measures.items():
        out[name], out[f"{name}_low"], out[f"{name}_high"] = m["score"], m["low"], m["high"]
    if paraphrase:
        para = measures["paraphrase"]
        out["cluster"], out["rank"] = para["cluster"], para["rank"]
    out["copy_rate"] = copy_rates(seg).reindex(systems.index)
    x_axis = "edit_distance" if "edit_distance" in measures else "diversity"
    xs = out[[x_axis, f"{x_axis}_low", f"{x_axis}_high"]].to_numpy(dtype=float)
    xs[out["control"].to_numpy(dtype=bool)] = np.nan  # the controls are never on the frontier
    ys = out[["adequacy", "adequacy_low", "adequacy_high"]].to_numpy(dtype=float)
    out["frontier"] = frontier(*xs.T, *ys.T)
    for col in human_columns(systems):
        out[col] = systems[col]
    # the ranked systems by rank (by score without a comparison), then the controls
    by = ["control", "rank", "paraphrase"] if paraphrase else ["control", "adequacy"]
    ascending = [True, True, False] if paraphrase else [True, False]
    out = out.sort_values(by, ascending=ascending, na_position="last", kind="stable")
    out = out.reset_index(drop=True)
    shown = "pinc" if diversity == "pinc" else "100 - self_bleu"
    return ParaphraseTable(out, adequacy, shown, paraphrase, roles.reference_free, gamma, x_axis)
