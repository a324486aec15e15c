"""The diversity–adequacy view of the comparison: per system (and per item) how far its
candidates move from the source, how much meaning they keep and how often they copy it (see
:mod:`.compare` for the definitions of ``diversity``, ``adequacy`` and ``copy_rate``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from paraeval.pipeline.stages.roles import copy_rates

if TYPE_CHECKING:
    from paraeval.pipeline.stages.aggregate import Aggregated
    from paraeval.pipeline.stages.score import Scores


def diversity_columns(scores: Scores) -> tuple[list[str], list[str]]:
    """(syntactic similarity-to-source columns, semantic similarity-to-source columns)."""
    syntactic: list[str] = []
    semantic: list[str] = []
    for name, info in scores.columns.items():
        if info.group != "diversity":
            continue
        own_group = getattr(scores.metrics.get(info.metric), "group", "syntactic")
        (semantic if own_group == "semantic" else syntactic).append(name)
    return syntactic, semantic


def _similarity_direction(scores: Scores, column: str) -> bool:
    """Whether a higher value of a similarity-to-source column means closer to the source: its
    direction, turned around for a metric that measures the distance instead (PINC)."""
    info = scores.columns[column]
    metric = scores.metrics.get(info.metric)
    return info.higher_is_better != bool(getattr(metric, "distance_to_source", False))


def _minmax(values: pd.Series, higher_is_better: bool) -> pd.Series:
    x = values.astype(float)
    lo, hi = x.min(), x.max()
    if not np.isfinite(lo) or hi == lo:
        return pd.Series(np.where(x.notna(), 1.0, np.nan), index=x.index)
    return (x - lo) / (hi - lo) if higher_is_better else (hi - x) / (hi - lo)


def diversity_adequacy(
    scores: Scores, agg: Aggregated
) -> tuple[pd.DataFrame, list[str], list[str]]:
    """Per (item, system) normalized similarity to the source and adequacy."""
    seg, norm = agg.segments, agg.normalized
    syn_src, sem_src = diversity_columns(scores)
    out = seg[["system", "item_id"]].copy()
    with np.errstate(all="ignore"):
        if syn_src:
            similarity = pd.DataFrame(
                {c: _minmax(seg[c], _similarity_direction(scores, c)) for c in syn_src}
            )
            out["diversity"] = 1.0 - similarity.mean(axis=1, skipna=True)
        else:
            out["diversity"] = np.nan
        adequacy = seg["semantic"] if "semantic" in seg else pd.Series(np.nan, index=seg.index)
        if sem_src:
            adequacy = adequacy.fillna(norm[sem_src].mean(axis=1, skipna=True))
    out["adequacy"] = adequacy
    return out, syn_src, (["semantic"] if "semantic" in seg else []) + sem_src


def system_view(items: pd.DataFrame, segments: pd.DataFrame) -> pd.DataFrame:
    g = items.groupby("system", sort=False)
    view = pd.DataFrame(index=pd.Index(list(g.groups), name="system"))
    for col in ("diversity", "adequacy"):
        view[col] = g[col].mean()
        view[f"{col}_q25"] = g[col].quantile(0.25)
        view[f"{col}_q75"] = g[col].quantile(0.75)
    view["copy_rate"] = copy_rates(segments)
    return view
