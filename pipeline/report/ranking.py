"""The system ranking: one figure, a panel per compared column, every system in one row and one
colour across all panels (:mod:`.ranking_layout` places them), its bootstrap interval, and its
significance cluster as the marker's fill and a number, never as its place or colour."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.markers import MarkerStyle
from matplotlib.textpath import TextPath
from matplotlib.ticker import MaxNLocator

from paraeval.pipeline.report import plots
from paraeval.pipeline.report.plots import FigureStyle
from paraeval.pipeline.report.ranking_layout import (
    GAP_IN,
    HEADER_IN,
    PANEL_IN,
    TICKS_IN,
    Panel,
    RankingLayout,
    ranking_layout,
)

if TYPE_CHECKING:
    from pathlib import Path

    from paraeval.pipeline.stages.compare import Comparison

FONT = 6  # the systems' names and the cluster numbers, at the rows' 8.6 pt pitch
LEGEND_FONT = 7
# the artists' ids, by which a reader of the figure (a test) finds them in each panel
POINTS_GID, INTERVALS_GID, BASELINE_GID, CLUSTER_GID = "systems", "intervals", "baseline", "cluster"
CLUSTER_X = 1.07  # the cluster numbers' place, in the panel's widths
CLUSTER_PT = 4.5  # a cluster number's height, in points


def ranking_figure(result: Comparison, style: FigureStyle | None = None) -> Figure | None:
    """The ranking figure of ``result``; None where there is nothing to rank."""
    layout = ranking_layout(result.table, result.baseline, style)
    if layout is None:
        return None
    caption = (
        f"System ranking: {result.config.confidence:.0%} bootstrap intervals; systems in the same "
        f"cluster do not differ significantly (paired bootstrap, alpha {result.config.alpha:g})\n"
        "better is to the right in every panel"
    )
    return draw_ranking(layout, caption)


def draw_ranking(layout: RankingLayout, caption: str) -> Figure:
    """The figure of ``layout``: its panels in rows, the caption and the legend above them."""
    width, height = layout.size
    fig = plots.new_figure((width, height))
    panel_h = layout.panel_height_in
    ax_h = layout.row_in * (len(layout.systems) + 0.5)
    for index, panel in enumerate(layout.panels):
        row, col = divmod(index, layout.columns)
        x0 = layout.names_in + col * (PANEL_IN + GAP_IN)
        y0 = (layout.rows - 1 - row) * panel_h + TICKS_IN
        ax = fig.add_axes((x0 / width, y0 / height, PANEL_IN / width, ax_h / height))
        _panel(ax, layout, panel, names=col == 0)
    _header(fig, 1 - HEADER_IN / height, 1 / height, layout.baseline, caption)
    return fig


def _panel(ax: Axes, layout: RankingLayout, panel: Panel, names: bool) -> None:
    n = len(layout.systems)
    y = np.arange(n)[::-1]  # the first system at the top
    colors = [layout.colors[s] for s in layout.systems]
    # a faint line along every row: the eye follows a system from panel to panel
    ax.hlines(y, 0, 1, transform=ax.get_yaxis_transform(), colors="0.92", lw=0.5, zorder=0)
    ax.hlines(y, panel.ci_low, panel.ci_high, colors=colors, lw=1.6, gid=INTERVALS_GID)
    # the best cluster in the panel's direction filled, the others hollow in the same colour
    top = panel.cluster == 1
    faces = np.where(top[:, None], np.array(colors), np.ones((n, 4)))
    ax.scatter(
        panel.score, y, s=16, c=faces, edgecolors=colors, linewidths=1.0, zorder=3, gid=POINTS_GID
    )
    if layout.baseline in layout.systems:
        at = layout.systems.index(layout.baseline)
        ax.scatter(
            panel.score[at : at + 1],
            y[at : at + 1],
            s=34,
            marker="s",
            facecolors="none",
            edgecolors="black",
            linewidths=0.8,
            zorder=4,
            gid=BASELINE_GID,
        )
    ax.set_yticks([])
    ax.set_ylim(-0.75, n - 0.25)
    if panel.lower_is_better:
        ax.invert_xaxis()  # better to the right, as in every other panel
    rows = ax.get_yaxis_transform()
    # the cluster numbers right of the panel, drawn as the markers of a line per number: a
    # text per system and panel would be most of the figure's drawing time at 40 systems
    for cluster in np.unique(panel.cluster[np.isfinite(panel.cluster)]):
        at = panel.cluster == cluster
        marker, size = _number(float(cluster))
        ax.plot(
            np.full(int(at.sum()), CLUSTER_X),
            y[at],
            ls="",
            marker=marker,
            ms=size,
            color="0.25",
            mew=0,
            transform=rows,
            clip_on=False,
            gid=f"{CLUSTER_GID} {cluster:g}",
        )
    # the names as texts rather than tick labels: a tick is several artists
    if names:
        for row, system in zip(y, layout.systems, strict=True):
            weight = "bold" if system == layout.baseline else "normal"
            ax.text(
                -0.04,
                row,
                str(system),
                transform=rows,
                fontsize=FONT,
                fontweight=weight,
                va="center",
                ha="right",
            )
    plots.set_title(ax, panel.title, fontsize=7)  # fixed tick labels: nothing above the axes
    ax.tick_params(axis="x", labelsize=FONT)
    ax.xaxis.set_major_locator(MaxNLocator(nbins=3))  # a panel is narrow: three values
    ax.grid(axis="x", alpha=0.3)


@cache
def _number(value: float) -> tuple[MarkerStyle, float]:
    """A number as a marker and the marker's size that makes it CLUSTER_PT tall, made once: its
    outline is laid out by mathtext, slowly. A marker is scaled to fit its larger side, its
    width where the number has several digits."""
    text = f"${value:g}$"
    box = TextPath((0, 0), text).get_extents()
    return MarkerStyle(text), CLUSTER_PT * max(box.width, box.height) / box.height


def _header(fig: Figure, bottom: float, inch: float, baseline: str, caption: str) -> None:
    """The title and the legend in the header strip that starts at ``bottom`` of the figure's
    height (``inch``: an inch as a fraction of it)."""
    grey = "0.35"
    handles = [
        Line2D([], [], color=grey, lw=1.6, marker="o", ms=4, label="best cluster in the panel"),
        Line2D([], [], color=grey, lw=1.6, marker="o", ms=4, mfc="white", label="other clusters"),
        Line2D([], [], lw=0, label="number right of a row: its cluster (1 = best)"),
        Line2D(
            [], [], lw=0, marker="s", mfc="none", mec="black", ms=5, label=f"baseline ({baseline})"
        ),
    ]
    legend = fig.legend(
        handles=handles,
        loc="lower center",
        bbox_to_anchor=(0.5, bottom + 0.1 * inch),
        ncol=len(handles),
        fontsize=LEGEND_FONT,
        frameon=False,
    )
    # the title clear of the legend's top
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
