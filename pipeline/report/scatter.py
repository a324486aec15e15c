"""Metric-vs-human scatter plots: one figure per (metric, human aspect), segments on the left
and systems on the right."""

from __future__ import annotations

from typing import TYPE_CHECKING

import matplotlib
import numpy as np
import pandas as pd

from paraeval.pipeline.data.load import in_order
from paraeval.pipeline.report.plots import (
    FigureStyle,
    marks_note,
    new_figure,
    plain_y,
    save_figure,
    set_title,
)

if TYPE_CHECKING:
    from pathlib import Path

# systems up to which the segments are drawn one collection per system, with a legend
LEGEND_MAX_SYSTEMS = 12
# the group averages first, then the metrics in their order
MAX_SCATTER = 4


def scatter_columns(
    segments: pd.DataFrame, metric_cols: list[str], max_scatter: int = MAX_SCATTER
) -> list[str]:
    """The columns that get a metric-vs-human scatter plot: the group averages first."""
    chosen = [c for c in ("syntactic", "semantic") if c in segments] + [
        c for c in metric_cols if c not in ("syntactic", "semantic") and c in segments
    ]
    return chosen[:max_scatter]


def _xy(frame: pd.DataFrame, metric: str, aspect: str) -> tuple[np.ndarray, np.ndarray]:
    return frame[metric].to_numpy(dtype=float), frame[aspect].to_numpy(dtype=float)


def _agreement(x: np.ndarray, y: np.ndarray) -> str:
    """``r``, ``τ`` and ``n`` of the finite pairs, for the title of a scatter plot."""
    from scipy import stats

    keep = np.isfinite(x) & np.isfinite(y)
    n = int(keep.sum())
    if n < 2 or np.ptp(x[keep]) == 0 or np.ptp(y[keep]) == 0:
        return f"n = {n}"
    r = float(stats.pearsonr(x[keep], y[keep])[0])
    tau = float(stats.kendalltau(x[keep], y[keep])[0])
    return f"r = {r:+.3f}   τ = {tau:+.3f}   n = {n}"


def _colour_picks(segments: pd.DataFrame, order: list[object]) -> list[tuple[np.ndarray, str]]:
    """The rows of each colour of the default cycle (systems coloured in order of appearance),
    for the colours that have rows."""
    cycle = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    code = segments["system"].map({s: i for i, s in enumerate(order)}).to_numpy()
    picks = [(code % len(cycle) == k, color) for k, color in enumerate(cycle)]
    return [(pick, color) for pick, color in picks if pick.any()]


def metric_vs_human(
    segments: pd.DataFrame,
    systems: pd.DataFrame,
    metric: str,
    aspect: str,
    path: Path,
    style: FigureStyle | None = None,
) -> bool:
    """Segment-level points coloured by system, system means as large markers with their
    names; Pearson r, Kendall τ and n in each panel's title."""
    style = style or FigureStyle()
    fig = new_figure((10, 4.2))
    seg_ax, sys_ax = fig.subplots(1, 2)
    fig.subplots_adjust(wspace=0.25)
    order = in_order(segments["system"])
    legend = len(order) <= LEGEND_MAX_SYSTEMS
    if legend:
        for system, sub in segments.groupby("system", sort=False):
            seg_ax.scatter(sub[metric], sub[aspect], s=10, alpha=0.6, label=str(system))
    else:
        # many systems: one marker line per colour of the cycle, the colours one scatter call
        # per system would give, at a fraction of a collection's drawing time
        x, y = _xy(segments, metric, aspect)
        for pick, color in _colour_picks(segments, order):
            seg_ax.plot(x[pick], y[pick], "o", ms=10**0.5, mew=0, alpha=0.6, color=color)
    human = aspect.removeprefix("human_")
    for ax in (seg_ax, sys_ax):
        plain_y(ax)
    seg_ax.set_xlabel(style.label(metric))
    seg_ax.set_ylabel(f"human {human}")
    # the agreement in the title: a box inside the axes would hide points
    set_title(seg_ax, f"segments: {_agreement(*_xy(segments, metric, aspect))}", fontsize=9)
    if legend:
        seg_ax.legend(
            fontsize=7, markerscale=1.5, title="system", title_fontsize=7, loc="lower right"
        )
    if metric in systems and aspect in systems:
        sys_ax.scatter(systems[metric], systems[aspect], s=40)
        for name, row in systems.iterrows():
            sys_ax.annotate(
                str(name),
                (row[metric], row[aspect]),
                fontsize=7,
                xytext=(3, 3),
                textcoords="offset points",
            )
        set_title(sys_ax, f"systems: {_agreement(*_xy(systems, metric, aspect))}", fontsize=9)
    sys_ax.set_xlabel(f"{style.label(metric)} (corpus level)")
    sys_ax.set_ylabel(f"mean human {human}")
    if style.marked([metric]):
        marks_note(fig)
    save_figure(fig, path)
    return True
