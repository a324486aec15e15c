"""The headline coefficient and level: the one correlation every summary leads with."""

from __future__ import annotations

from collections.abc import Collection, Iterable

import pandas as pd

from paraeval.pipeline.config.settings import CorrelationSettings

# the metric groups whose columns compete for "best metric" (not diversity: distance from source)
RANKED_GROUPS = ("syntactic", "semantic")


def _headline(tested: str | None, configured: Iterable[str], present: Iterable[str]) -> str:
    """The significance test's choice when computed (its clusters go with the values shown),
    else the first configured one computed, else the first computed, else ``""``."""
    present = list(dict.fromkeys(str(c) for c in present))
    if not present:
        return ""
    if tested in present:
        return str(tested)
    return next((c for c in configured if c in present), present[0])


def headline_coefficient(cfg: CorrelationSettings, present: Iterable[str]) -> str:
    """The coefficient every summary leads with; ``""`` when none was computed."""
    sig = cfg.significance
    return _headline(sig.coefficient.name if sig else None, cfg.coefficient_names, present)


def headline_level(cfg: CorrelationSettings, present: Iterable[str]) -> str:
    """The level every summary leads with (``present``: the headline coefficient's levels)."""
    sig = cfg.significance
    return _headline(sig.level if sig else None, cfg.levels, present)


def best_agreeing(
    correlations: pd.DataFrame, coefficient: str, lower: Collection[str], ranked: Collection[str]
) -> pd.DataFrame:
    """Per (aspect, level), the row of the ``ranked`` column that agrees best with the ratings: a
    lower-is-better column's (``lower``: TER, WMD) correlation counts with its sign turned."""
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
