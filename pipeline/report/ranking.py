"""The ranking (a cluster is a fill and a number, never a place or colour) and the frontier."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.markers import MarkerStyle
from matplotlib.textpath import TextPath
from matplotlib.ticker import MaxNLocator

from paraeval.pipeline.report import plots
from paraeval.pipeline.report.plots import FigureStyle
from paraeval.pipeline.stages.compare import comparison_order, directions

if TYPE_CHECKING:
    from pathlib import Path

    from paraeval.pipeline.stages.compare import Comparison
    from paraeval.pipeline.stages.paraphrase_table import ParaphraseTable

MAX_WIDTH_IN = 12.5  # the page shows a figure at 104 px an inch: 1,300 px
MAX_HEIGHT_IN = 40.0  # past this the rows' pitch shrinks, down to MIN_ROW_IN
ROW_IN = 0.14  # a system's row: 10 pt, room for its 7 pt name
MIN_ROW_IN = 0.1
PANEL_IN = 1.45  # a panel's axes
GAP_IN = 0.3  # between panels: the cluster numbers right of a panel
NAME_CHAR_IN = 0.06  # a character of a 7 pt name
NAMES_IN = (0.5, 2.0)  # the names' column, left of a row of panels, at least and at most
TITLE_IN = 0.38  # above a panel: its two-line title
TICKS_IN = 0.32  # below a panel: its x tick labels
HEADER_IN = 0.85  # the figure's title and legend
FONT = 7  # the systems' names and the ticks: 10 px on the page
LEGEND_FONT = 7
# the artists' ids, by which a reader of the figure (a test) finds them in each panel
POINTS_GID, INTERVALS_GID, BASELINE_GID, CLUSTER_GID = "systems", "intervals", "baseline", "cluster"
CLUSTER_X = 1.07  # the cluster numbers' place, in the panel's widths
CLUSTER_PT = 5.0  # a cluster number's height, in points


@dataclass(frozen=True)
class Panel:
    """A compared column in the figure's system order, its clusters as the table numbers them."""

    metric: str
    title: str
    lower_is_better: bool  # as the panel reads: its x axis is reversed, better is to the right
    score: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    cluster: np.ndarray


@dataclass(frozen=True)
class RankingLayout:
    systems: tuple[str, ...]
    colors: dict[str, tuple[float, float, float, float]]
    baseline: str
    panels: tuple[Panel, ...]
    columns: int  # panels a row
    rows: int  # rows of panels
    row_in: float  # a system's row
    names_in: float  # the names' column left of each row of panels

    @property
    def panel_height_in(self) -> float:
        return TITLE_IN + TICKS_IN + self.row_in * (len(self.systems) + 0.5)

    @property
    def size(self) -> tuple[float, float]:
        width = self.names_in + self.columns * (PANEL_IN + GAP_IN)
        return width, HEADER_IN + self.rows * self.panel_height_in

    def y(self, system: str) -> int:
        """The row of ``system``, the same in every panel: the first is at the top."""
        return len(self.systems) - 1 - self.systems.index(system)


def system_colors(systems: list[str]) -> dict[str, tuple[float, float, float, float]]:
    """tab10 up to ten systems, else tab20, tab20b, tab20c dark halves first, repeated past 60."""
    names = ("tab10",) if len(systems) <= 10 else ("tab20", "tab20b", "tab20c")
    palette = []
    for name in names:
        cmap = matplotlib.colormaps[name]
        colors = [cmap(i) for i in range(cmap.N)]
        palette += colors if name == "tab10" else colors[0::2] + colors[1::2]
    return {s: palette[i % len(palette)] for i, s in enumerate(systems)}


def _grid(n_systems: int, n_panels: int, names_in: float) -> tuple[int, int, float]:
    """As many columns as MAX_WIDTH_IN holds; a smaller pitch where the rows would not fit."""
    columns = max(1, min(n_panels, int((MAX_WIDTH_IN - names_in) // (PANEL_IN + GAP_IN))))
    rows = math.ceil(n_panels / columns)
    pitch = ((MAX_HEIGHT_IN - HEADER_IN) / rows - TITLE_IN - TICKS_IN) / (n_systems + 0.5)
    return columns, rows, max(min(pitch, ROW_IN), MIN_ROW_IN)


def ranking_layout(
    table: pd.DataFrame, baseline: str, style: FigureStyle | None = None
) -> RankingLayout | None:
    """The layout of ``system_comparison.csv``; None where it is empty."""
    style = style or FigureStyle()
    if table.empty:
        return None
    chosen = plots.averages_first(table["metric"])
    lower = directions(table, style.source)
    systems = comparison_order(table, style.source)
    panels = []
    for metric in chosen:
        sub = table[table["metric"] == metric]
        sub = sub.drop_duplicates("system").set_index("system", drop=False).reindex(systems)
        lower_better = metric in style.lower or lower[metric]
        way = "lower is better" if lower_better else "higher is better"
        if metric in style.source:  # the short form: the long one is wider than a panel
            way = "lower = more diverse"
        title = f"{style.label(metric)}\n({way})"
        # the clusters as the table numbers them (1 = first the way it ranks): one set of numbers
        arrays = [sub[c].to_numpy(dtype=float) for c in ("score", "ci_low", "ci_high", "cluster")]
        panels.append(Panel(metric, title, lower[metric], *arrays))
    longest = max(len(str(s)) for s in systems) + 1
    names = min(max(longest * NAME_CHAR_IN, NAMES_IN[0]), NAMES_IN[1])
    grid = _grid(len(systems), len(panels), names)  # columns, rows, pitch
    colors = system_colors(systems)
    return RankingLayout(tuple(systems), colors, baseline, tuple(panels), *grid, names)


def ranking_figure(result: Comparison, style: FigureStyle | None = None) -> Figure | None:
    """None where there is nothing to rank."""
    layout = ranking_layout(result.table, result.baseline, style)
    if layout is None:
        return None
    caption = (
        f"System ranking: {result.config.confidence:.0%} bootstrap intervals; systems in the same "
        f"cluster do not differ significantly (paired bootstrap, alpha {result.config.alpha:g})\n"
        "better is to the right in every panel"
    )
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
    # cluster 1 filled, the others hollow in the same colour
    top = panel.cluster == 1
    faces = np.where(top[:, None], np.array(colors), np.ones((n, 4)))
    ax.scatter(
        panel.score, y, s=16, c=faces, edgecolors=colors, linewidths=1.0, zorder=3, gid=POINTS_GID
    )
    if layout.baseline in layout.systems:
        at = [layout.systems.index(layout.baseline)]
        box: dict[str, Any] = {"marker": "s", "facecolors": "none", "edgecolors": "black"}
        ax.scatter(panel.score[at], y[at], s=34, linewidths=0.8, zorder=4, gid=BASELINE_GID, **box)
    ax.set_yticks([])
    ax.set_ylim(-0.75, n - 0.25)
    if panel.lower_is_better:
        ax.invert_xaxis()  # better to the right, as in every other panel
    rows = ax.get_yaxis_transform()
    # the cluster numbers as a line's markers: a text per system and panel would be slow
    mark: dict[str, Any] = {"ls": "", "color": "0.25", "transform": rows, "clip_on": False}
    for cluster in np.unique(panel.cluster[np.isfinite(panel.cluster)]):
        at = panel.cluster == cluster
        marker, size = _number(float(cluster))
        x = np.full(int(at.sum()), CLUSTER_X)
        ax.plot(x, y[at], marker=marker, ms=size, mew=0, gid=f"{CLUSTER_GID} {cluster:g}", **mark)
    # the names as texts rather than tick labels: a tick is several artists
    if names:
        text: dict[str, Any] = {"transform": rows, "fontsize": FONT, "va": "center", "ha": "right"}
        for row, system in zip(y, layout.systems, strict=True):
            weight = "bold" if system == layout.baseline else "normal"
            ax.text(-0.04, row, str(system), fontweight=weight, **text)
    plots.set_title(ax, panel.title, fontsize=7)  # fixed tick labels: nothing above the axes
    ax.tick_params(axis="x", labelsize=FONT)
    ax.xaxis.set_major_locator(MaxNLocator(nbins=3))  # a panel is narrow: three values
    ax.grid(axis="x", alpha=0.3)


@cache
def _number(value: float) -> tuple[MarkerStyle, float]:
    """A number as a marker CLUSTER_PT tall (larger side fitted), made once: mathtext is slow."""
    text = f"${value:g}$"
    box = TextPath((0, 0), text).get_extents()
    return MarkerStyle(text), CLUSTER_PT * max(box.width, box.height) / box.height


def _header(fig: Figure, bottom: float, inch: float, baseline: str, caption: str) -> None:
    """The title and the legend above ``bottom`` (``inch``: an inch as a fraction of the height)."""
    dot: dict[str, Any] = {"color": "0.35", "lw": 1.6, "marker": "o", "ms": 4}
    handles = [
        Line2D([], [], label="cluster 1", **dot),
        Line2D([], [], mfc="white", label="other clusters", **dot),
        Line2D([], [], lw=0, label="number right of a row: its cluster, as in the table"),
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
    canvas = fig.canvas
    assert hasattr(canvas, "get_renderer")  # new_figure's Agg canvas measures text
    top = legend.get_window_extent(canvas.get_renderer()).y1 / fig.bbox.height
    fig.suptitle(caption, fontsize=9, y=top + 0.06 * inch, va="bottom")


def ranking_plot(result: Comparison, path: Path, style: FigureStyle | None = None) -> bool:
    """False when there is nothing to rank."""
    fig = ranking_figure(result, style)
    if fig is None:
        return False
    plots.save_figure(fig, path)
    return True


AXIS_LABELS = {
    "edit_distance": "edit distance to the source (ParaScore's diversity: characters, 0 = copy)",
    "diversity": "diversity from the source ({measure}, 0 = copy)",
}
FRONTIER_COLOR, SYSTEM_COLOR, CONTROL_COLOR = "tab:red", "tab:blue", "0.45"


def _errors(low: np.ndarray, value: np.ndarray, high: np.ndarray) -> np.ndarray:
    below = np.where(np.isfinite(low), value - low, 0.0)
    above = np.where(np.isfinite(high), high - value, 0.0)
    return np.vstack([np.maximum(below, 0.0), np.maximum(above, 0.0)])


def frontier_plot(view: ParaphraseTable, path: Path) -> bool:
    """Draws the figure into ``path``; False when no system has both values."""
    t = view.table
    x_col = view.x_axis
    x = t[x_col].to_numpy(dtype=float)
    y = t["adequacy"].to_numpy(dtype=float)
    shown = np.isfinite(x) & np.isfinite(y)
    if not shown.any():
        return False
    # room for a label per point: the figure grows with the number of systems
    side = min(12.0, 6.0 + 0.12 * int(shown.sum()))
    fig = plots.new_figure((side + 1.5, side * 0.75), layout="constrained")
    ax = fig.subplots()
    controls = t["control"].to_numpy(dtype=bool)
    on = t["frontier"].to_numpy(dtype=bool)
    frontier = "frontier (no system better on both axes beyond the intervals)"
    groups = (
        (frontier, on & ~controls, FRONTIER_COLOR, "D", 46),
        ("other systems", ~on & ~controls, SYSTEM_COLOR, "o", 30),
        ("controls (never ranked)", controls, CONTROL_COLOR, "X", 60),
    )
    xl, xh = t[f"{x_col}_low"].to_numpy(dtype=float), t[f"{x_col}_high"].to_numpy(dtype=float)
    yl, yh = t["adequacy_low"].to_numpy(dtype=float), t["adequacy_high"].to_numpy(dtype=float)
    gamma = view.gamma if view.gamma is not None and x_col == "edit_distance" else None
    limits = _limits((x, xl, xh), (y, yl, yh), shown & ~controls, gamma)
    # a far control (a copy) would squeeze the systems into a corner: on the edge, values labelled
    off = np.zeros(len(t), dtype=bool)
    if limits is not None:
        (x0, x1), (y0, y1) = limits
        off = controls & shown & ((x < x0) | (x > x1) | (y < y0) | (y > y1))
        x, y = np.where(off, np.clip(x, x0, x1), x), np.where(off, np.clip(y, y0, y1), y)
        xl, xh, yl, yh = (np.where(off, np.nan, a) for a in (xl, xh, yl, yh))
        ax.set_xlim(x0, x1)
        ax.set_ylim(y0, y1)
    for label, mask, color, marker, size in groups:
        m = mask & shown
        if not m.any():
            continue
        err = {"xerr": _errors(xl[m], x[m], xh[m]), "yerr": _errors(yl[m], y[m], yh[m])}
        ax.errorbar(x[m], y[m], **err, fmt="none", ecolor=color, alpha=0.5, lw=1.0, zorder=2)
        # clip_on off: a control on the edge is drawn whole
        edge = {"edgecolors": "black", "linewidths": 0.5, "zorder": 3, "clip_on": False}
        ax.scatter(x[m], y[m], s=size, marker=marker, color=color, label=label, **edge)
    for i in np.flatnonzero(shown):
        name = str(t["system"].iloc[i]) + (" (control)" if controls[i] else "")
        if off[i]:
            true_x, true_y = float(t[x_col].iloc[i]), float(t["adequacy"].iloc[i])
            name += f": {true_x:.3f}, {true_y:.3f}, off the axes"
        offset = (6, -10) if off[i] else (4, 3)
        color = CONTROL_COLOR if controls[i] else "black"
        ax.annotate(name, (x[i], y[i]), offset, textcoords="offset points", fontsize=7, color=color)
    if gamma is not None:
        label = f"ParaScore's threshold γ = {gamma:g}: no more diversity reward beyond"
        ax.axvline(gamma, color="0.3", ls="--", lw=1.0, zorder=1, label=label)
    measure = "PINC" if view.diversity == "pinc" else "100 − self-BLEU"
    ax.set_xlabel(AXIS_LABELS[x_col].format(measure=measure))
    against = "the source" if view.reference_free else "the references"
    ax.set_ylabel(f"adequacy: {view.adequacy} (similarity to {against})")
    ranks = f" ({view.paraphrase} ranks the systems)" if view.paraphrase else ""
    ax.set_title(f"Meaning kept against wording changed{ranks}", fontsize=11)
    ax.grid(alpha=0.3)
    if limits is None:
        ax.margins(x=0.08, y=0.08)
    # outside the axes (inside, it would hide points); constrained layout makes room for it
    fig.legend(loc="outside lower center", ncol=2, fontsize=8, frameon=False)
    plots.save_figure(fig, path)
    return True


def _limits(
    xs: tuple[np.ndarray, ...], ys: tuple[np.ndarray, ...], ranked: np.ndarray, gamma: float | None
) -> tuple[tuple[float, float], tuple[float, float]] | None:
    if not ranked.any():
        return None
    shown_x = [v[ranked] for v in xs] + ([np.array([gamma])] if gamma is not None else [])
    out = []
    for values in (np.concatenate(shown_x), np.concatenate([v[ranked] for v in ys])):
        lo, hi = float(np.nanmin(values)), float(np.nanmax(values))
        pad = 0.08 * (hi - lo) if hi > lo else 0.05 * max(abs(hi), 1.0)
        out.append((lo - pad, hi + pad))
    return out[0], out[1]
