"""Metric-vs-human scatter plots: one figure per (metric, human aspect), segments on the left
and systems on the right."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from paraeval.pipeline.report import plots
from paraeval.pipeline.report.plots import FigureStyle

if TYPE_CHECKING:
    from pathlib import Path

    from matplotlib.figure import Figure

# systems up to which the segments are drawn one collection per system, with a legend
LEGEND_MAX_SYSTEMS = 12
MAX_SCATTER = 4


def scatter_columns(
    segments: pd.DataFrame, metric_cols: list[str], max_scatter: int = MAX_SCATTER
) -> list[str]:
    """The columns that get a metric-vs-human scatter plot: the group averages first."""
    present = [c for c in [*plots.AVERAGES, *metric_cols] if c in segments]
    return plots.averages_first(present)[:max_scatter]


def _agreement(frame: pd.DataFrame, metric: str, aspect: str) -> str:
    """``r``, ``τ`` and ``n`` of the finite pairs, for the title of a scatter plot."""
    from scipy import stats

    x, y = frame[metric].to_numpy(dtype=float), frame[aspect].to_numpy(dtype=float)
    keep = np.isfinite(x) & np.isfinite(y)
    n = int(keep.sum())
    if n < 2 or np.ptp(x[keep]) == 0 or np.ptp(y[keep]) == 0:
        return f"n = {n}"
    r = float(stats.pearsonr(x[keep], y[keep])[0])
    tau = float(stats.kendalltau(x[keep], y[keep])[0])
    return f"r = {r:+.3f}   τ = {tau:+.3f}   n = {n}"


def scatter_title(metric: str, aspect: str, style: FigureStyle) -> str:
    """The figure's title: the metric (with its direction mark) and the human aspect."""
    return f"{style.label(metric)} vs human {aspect.removeprefix('human_')}"


def scatter_figure(
    segments: pd.DataFrame,
    systems: pd.DataFrame,
    metric: str,
    aspect: str,
    style: FigureStyle | None = None,
) -> Figure:
    """Segment-level points coloured by system, system means as large markers with their
    names; the metric and the aspect in the figure's title, the level and Pearson r, Kendall τ
    and n in each panel's."""
    style = style or FigureStyle()
    fig = plots.new_figure((10, 4.2))
    fig.suptitle(scatter_title(metric, aspect, style), fontsize=10)
    seg_ax, sys_ax = fig.subplots(1, 2)
    fig.subplots_adjust(wspace=0.25)
    # markers of a line per system: Agg stamps one rendered marker, where a scatter
    # collection draws every point as a path (most of the figure's time on 14,000 points)
    codes, names = pd.factorize(segments["system"], sort=False)
    x, y = segments[metric].to_numpy(), segments[aspect].to_numpy()
    for code, name in enumerate(names):
        at = codes == code
        seg_ax.plot(x[at], y[at], ls="", marker="o", ms=3.2, mew=0, alpha=0.6, label=str(name))
    human = aspect.removeprefix("human_")
    for ax in (seg_ax, sys_ax):
        plots.plain_y(ax)
    seg_ax.set_xlabel(style.label(metric))
    seg_ax.set_ylabel(f"human {human}")
    # the agreement in the title: a box inside the axes would hide points
    plots.set_title(seg_ax, f"segments: {_agreement(segments, metric, aspect)}", fontsize=9)
    if len(names) <= LEGEND_MAX_SYSTEMS:
        seg_ax.legend(
            fontsize=7, markerscale=1.5, title="system", title_fontsize=7, loc="lower right"
        )
    if metric in systems and aspect in systems:
        sys_ax.scatter(systems[metric], systems[aspect], s=40)
        for name, row in systems.iterrows():
            point = (row[metric], row[aspect])
            sys_ax.annotate(str(name), point, fontsize=7, xytext=(3, 3), textcoords="offset points")
        plots.set_title(sys_ax, f"systems: {_agreement(systems, metric, aspect)}", fontsize=9)
    sys_ax.set_xlabel(f"{style.label(metric)} (corpus level)")
    sys_ax.set_ylabel(f"mean human {human}")
    if style.marked([metric]):
        plots.marks_note(fig)
    return fig


def metric_vs_human(
    segments: pd.DataFrame,
    systems: pd.DataFrame,
    metric: str,
    aspect: str,
    path: Path,
    style: FigureStyle | None = None,
) -> bool:
    """:func:`scatter_figure` to ``path``."""
    plots.save_figure(scatter_figure(segments, systems, metric, aspect, style), path)
    return True
