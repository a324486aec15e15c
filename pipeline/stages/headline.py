"""The headline coefficient and level: the one correlation every summary leads with (the
terminal, report.html, the heatmap), chosen from the ``correlation`` settings in one place."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

import pandas as pd

# the metric groups whose columns compete for "best metric" (diversity columns measure
# distance from the source, not agreement with a rating)
RANKED_GROUPS = ("syntactic", "semantic")


def headline_coefficient(cfg: Mapping[str, Any], present: Iterable[str]) -> str:
    """The coefficient the metric-vs-metric significance test uses when it runs (its clusters
    then go with the values shown), else the first configured one that was computed; ``""`` when
    none was."""
    present = list(dict.fromkeys(str(c) for c in present))
    if not present:
        return ""
    sig = cfg.get("significance") or {}
    if sig.get("enabled", False):
        name = str(sig.get("coefficient", "pearson"))
        if name in present:
            return name
    coefficients = cfg.get("coefficients", present)
    configured = [coefficients] if isinstance(coefficients, str) else list(coefficients)
    return next((str(c) for c in configured if str(c) in present), present[0])


def headline_level(cfg: Mapping[str, Any], present: Iterable[str]) -> str:
    """The level of the significance test when it runs, else the first configured level that
    was computed (``present``: the headline coefficient's levels); ``""`` when none was."""
    present = list(dict.fromkeys(str(v) for v in present))
    if not present:
        return ""
    sig = cfg.get("significance") or {}
    if sig.get("enabled", False) and str(sig.get("level", "segment")) in present:
        return str(sig.get("level", "segment"))
    levels = cfg.get("levels", present)
    configured = [levels] if isinstance(levels, str) else list(levels)
    return next((str(v) for v in configured if str(v) in present), present[0])


def best_agreeing(
    correlations: pd.DataFrame, coefficient: str, lower: Collection[str], ranked: Collection[str]
) -> pd.DataFrame:
    """Per (aspect, level), in order of first appearance, the ``correlations`` row of the
    ``ranked`` column whose ``coefficient`` agrees best with the ratings: a lower-is-better
    column's (``lower``: TER, WMD) correlation counts with its sign turned."""
    sub = correlations[
        (correlations["coefficient"] == coefficient) & correlations["metric"].isin(list(ranked))
    ].copy()
    values = pd.to_numeric(sub["value"], errors="coerce")
    sub["agreement"] = values.where(~sub["metric"].isin(list(lower)), -values)
    sub = sub.dropna(subset=["agreement"])
    if sub.empty:
        return sub
    best = sub.loc[sub.groupby(["aspect", "level"], sort=False)["agreement"].idxmax()]
    return best.reset_index(drop=True)
