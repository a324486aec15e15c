"""The diversity–adequacy view of the compared systems (the ranking is :mod:`.ranking`)."""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.transforms import Bbox

from paraeval.pipeline.report.plots import new_figure, save_figure
from paraeval.pipeline.report.ranking_layout import comparison_colors

if TYPE_CHECKING:
    from pathlib import Path

    from paraeval.pipeline.stages.compare import Comparison

log = logging.getLogger(__name__)
Color = str | tuple[float, float, float, float]


def paraphrase_scores(result: Comparison) -> pd.DataFrame:
    """The comparison's system scores of the ``paraphrase``-group metrics (ParaScore, BERT-iBLEU),
    a column per metric."""
    t = result.table
    cols = [c for c in result.paraphrase_columns if not t.empty and (t["metric"] == c).any()]
    if not cols:
        return pd.DataFrame(index=result.systems.index)
    sub = t[t["metric"].isin(cols)]
    wide = sub.pivot_table(index="system", columns="metric", values="score", sort=False)
    return wide.reindex(index=result.systems.index, columns=cols)


def _paraphrase_table(ax: Axes, combined: pd.DataFrame, colors: list[Color]) -> None:
    """The combined adequacy + diversity scores, a row per system in the color of its point."""
    ax.axis("off")
    cells = [
        [f"{float(v):.3f}" if math.isfinite(float(v)) else "" for v in row]
        for row in combined.to_numpy()
    ]
    table = ax.table(
        cellText=cells,
        rowLabels=[str(s) for s in combined.index],
        colLabels=list(combined.columns),
        cellLoc="center",
        bbox=Bbox.from_bounds(0.0, 0.0, 1.0, 1.0),  # fills its axes: no row runs into the title
    )
    table.auto_set_font_size(False)
    table.set_fontsize(8)
    for i in range(len(combined)):
        table[i + 1, -1].get_text().set_color(colors[i])
    ax.set_title("combined adequacy + diversity (paraphrase group, system scores)", fontsize=8)


def diversity_adequacy_plot(result: Comparison, path: Path) -> bool:
    """A point per system (its mean over items) with lines over its items' interquartile range
    on each axis, the ``paraphrase``-group scores tabled below; False when nothing is drawn."""
    view = result.systems
    combined = paraphrase_scores(result)
    drawable = view[np.isfinite(view["diversity"]) & np.isfinite(view["adequacy"])]
    if drawable.empty:
        log.info("no system has both a diversity and an adequacy value: no diversity plot")
        return False
    # each system in its colour of the ranking
    known = comparison_colors(result.table)
    colors: list[Color] = [known.get(str(s), "0.4") for s in drawable.index]
    if len(combined.columns):
        rows = len(drawable) + 1
        fig = new_figure((6.5, 5.0 + 0.22 * rows), layout="constrained")
        ax, ax_table = fig.subplots(2, 1, height_ratios=[5.0, 0.22 * rows + 0.3])
        _paraphrase_table(ax_table, combined.reindex(drawable.index), colors)
    else:
        fig = new_figure((6.5, 5.0), layout="constrained")
        ax = fig.subplots()
    for i, (system, row) in enumerate(drawable.iterrows()):
        color = colors[i]
        iqr: dict[str, Any] = {"color": color, "alpha": 0.5, "lw": 1.5}
        ax.plot([row.diversity_q25, row.diversity_q75], [row.adequacy] * 2, **iqr)
        ax.plot([row.diversity] * 2, [row.adequacy_q25, row.adequacy_q75], **iqr)
        is_base = system == result.baseline
        marker, size = ("s", 70) if is_base else ("o", 45)
        point = (row.diversity, row.adequacy)
        ax.scatter(*point, s=size, marker=marker, color=color, edgecolors="black", zorder=3)
        label = f"{system}{' (baseline)' if is_base else ''}"
        if math.isfinite(row.copy_rate) and row.copy_rate > 0:
            label += f"  copy {row.copy_rate:.0%}"
        ax.annotate(label, point, fontsize=8, xytext=(4, 4), textcoords="offset points")
    ax.set_xlabel("diversity (1 - normalized syntactic similarity to the source)")
    ax.set_ylabel("adequacy (normalized semantic similarity)")
    ax.set_title("Diversity vs adequacy (point = mean over items, lines = item IQR)", fontsize=10)
    ax.grid(alpha=0.3)
    save_figure(fig, path)
    return True
