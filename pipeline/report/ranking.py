"""The system ranking: one figure, a panel per compared column, systems best first with their
bootstrap intervals and significance clusters."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from paraeval.pipeline.report import plots
from paraeval.pipeline.report.plots import FigureStyle

if TYPE_CHECKING:
    from pathlib import Path

    from paraeval.pipeline.stages.compare import Comparison

# the frame, in inches: a panel's cell is CELL_IN wide, CELL_BASE_IN + ROW_IN per system high;
# the header strip above the cells holds the figure's title and the clusters' legend
CELL_IN = 4.3
ROW_IN = 0.22
CELL_BASE_IN = 1.0
AXES_IN = (1.45, 0.3, 2.55)  # left, bottom, width; the height is what is left
TITLE_IN = 0.45  # above the axes: the panel's title
HEADER_IN = 0.55  # and LEGEND_ROW_IN per row of the legend
LEGEND_ROW_IN = 0.2
LEGEND_COLUMNS = 6
COLUMNS = 3


def ranking_figure(result: Comparison, style: FigureStyle | None = None) -> Figure | None:
    """The ranking figure: a panel per column (COLUMNS panels a row), the title and the
    clusters' legend above them; None where there is nothing to rank."""
    style = style or FigureStyle()
    t = result.table
    if t.empty:
        return None
    chosen = plots.averages_first(t["metric"])
    cols = min(COLUMNS, len(chosen))
    rows = math.ceil(len(chosen) / cols)
    clusters = sorted({int(c) for c in t["cluster"] if math.isfinite(c)})
    # the clusters and the baseline's entry
    legend_rows = math.ceil((len(clusters) + 1) / LEGEND_COLUMNS)
    cell_h = CELL_BASE_IN + ROW_IN * t["system"].nunique()
    header = HEADER_IN + LEGEND_ROW_IN * legend_rows
    width, height = cols * CELL_IN, header + rows * cell_h
    fig = plots.new_figure((width, height))
    left, bottom, ax_w = AXES_IN
    ax_h = max(cell_h - bottom - TITLE_IN, 0.01)
    kept = ["system", "score", "ci_low", "ci_high", "rank", "cluster", "higher_is_better"]
    by_metric = dict(list(t[kept].groupby(t["metric"], sort=False)))
    for index, metric in enumerate(chosen):
        row, col = divmod(index, cols)
        x0, y0 = col * CELL_IN + left, (rows - 1 - row) * cell_h + bottom
        ax = fig.add_axes((x0 / width, y0 / height, ax_w / width, ax_h / height))
        sub = by_metric[metric].sort_values("rank", na_position="last").reset_index(drop=True)
        hib = bool(sub["higher_is_better"].iloc[0])
        _panel(ax, sub, result.baseline, f"{style.label(metric)}\n({style.direction(metric, hib)})")
    caption = (
        f"System ranking: {result.config.confidence:.0%} bootstrap intervals; systems in the same "
        f"cluster do not differ significantly (paired bootstrap, alpha {result.config.alpha:g})"
    )
    _header(fig, 1 - header / height, 1 / height, clusters, result.baseline, caption)
    return fig


def _panel(ax: Axes, sub: pd.DataFrame, baseline: str, title: str) -> None:
    cmap = matplotlib.colormaps["tab10"]
    y = np.arange(len(sub))[::-1]
    cluster = sub["cluster"].to_numpy(dtype=float)
    k = np.where(np.isfinite(cluster), np.nan_to_num(cluster) - 1, 9).astype(int)
    colors = [cmap(c % 10) for c in k]
    ax.hlines(y, sub["ci_low"], sub["ci_high"], colors=colors, lw=2)
    base = (sub["system"] == baseline).to_numpy()
    rgba, score = np.array(colors), sub["score"]
    ax.scatter(score[~base], y[~base], c=rgba[~base], zorder=3, s=22)
    if base.any():
        ax.scatter(
            score[base], y[base], c=rgba[base], marker="s", edgecolors="black", zorder=3, s=34
        )
    # the systems' names where y tick labels go, as plain texts: a tick is several artists
    # (marks, labels, grid line), and ticks were most of a panel's building time
    ax.set_yticks([])
    ax.set_ylim(-0.7, len(sub) - 0.3)
    place, va, ha = ax.get_yaxis_text1_transform(matplotlib.rcParams["ytick.major.pad"] + 3.5)
    for row, system in zip(y, sub["system"], strict=True):
        weight = "bold" if system == baseline else "normal"
        ax.text(0, row, str(system), transform=place, va=va, ha=ha, fontsize=7, fontweight=weight)
    plots.set_title(ax, title, fontsize=8)  # fixed tick labels: nothing above the axes
    ax.tick_params(axis="x", labelsize=7)
    # four or five values say where the intervals lie
    ax.xaxis.set_major_locator(MaxNLocator(nbins=4))
    ax.grid(axis="x", alpha=0.3)


def _header(
    fig: Figure, bottom: float, inch: float, clusters: list[int], baseline: str, caption: str
) -> None:
    """The title and the clusters' legend in the header strip that starts at ``bottom`` of the
    figure's height (``inch``: an inch as a fraction of it)."""
    cmap = matplotlib.colormaps["tab10"]
    handles = [
        Line2D([], [], color=cmap((c - 1) % 10), lw=2, marker="o", ms=4, label=f"cluster {c}")
        for c in clusters
    ]
    label = f"baseline ({baseline})"
    handles.append(Line2D([], [], color="0.4", lw=0, marker="s", mec="black", ms=5, label=label))
    # the legend's rows below the figure's title, both above the panels' titles
    legend = fig.legend(
        handles=handles,
        loc="lower center",
        bbox_to_anchor=(0.5, bottom + 0.1 * inch),
        ncol=LEGEND_COLUMNS,
        fontsize=7,
        frameon=False,
    )
    # the title clear of the legend's top, however many rows the clusters take
    canvas = fig.canvas
    assert hasattr(canvas, "get_renderer")  # new_figure's Agg canvas measures text
    top = legend.get_window_extent(canvas.get_renderer()).y1 / fig.bbox.height
    fig.suptitle(caption, fontsize=9, y=top + 0.06 * inch, va="bottom")


def ranking_plot(result: Comparison, path: Path, style: FigureStyle | None = None) -> bool:
    """:func:`ranking_figure` to ``path``; False when there is nothing to rank."""
    fig = ranking_figure(result, style)
    if fig is None:
        return False
    plots.save_figure(fig, path)
    return True
