"""Plots of the compare stage: the diversity–adequacy view and the system ranking with intervals."""

from __future__ import annotations

import functools
import logging
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from paraeval.pipeline.report.cells import Cell, CellGrid, Header, save_cells
from paraeval.pipeline.report.figure_files import PNG_DPI, _plt, render, save_figure
from paraeval.pipeline.report.plots import FigureStyle, set_title

if TYPE_CHECKING:
    from paraeval.pipeline.stages.compare import Comparison

log = logging.getLogger(__name__)


def paraphrase_scores(result: Comparison) -> pd.DataFrame:
    """Index system, one column per ``paraphrase``-group metric (ParaScore, BERT-iBLEU ...): the
    system's score as the comparison table has it."""
    t = result.table
    cols = [c for c in result.paraphrase_columns if not t.empty and (t["metric"] == c).any()]
    if not cols:
        return pd.DataFrame(index=result.systems.index)
    sub = t[t["metric"].isin(cols)]
    wide = sub.pivot_table(index="system", columns="metric", values="score", sort=False)
    return wide.reindex(index=result.systems.index, columns=cols)


def _paraphrase_table(ax: Any, combined: pd.DataFrame, cmap: Any) -> None:
    """The systems' scores that combine adequacy and diversity, one row per system in the color
    of its point."""
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
        bbox=(0.0, 0.0, 1.0, 1.0),  # fills its axes: the rows never run into the title
    )
    table.auto_set_font_size(False)
    table.set_fontsize(8)
    for i in range(len(combined)):
        table[i + 1, -1].get_text().set_color(cmap(i % cmap.N))
    ax.set_title("combined adequacy + diversity (paraphrase group, system scores)", fontsize=8)


def diversity_adequacy_plot(result: Comparison, path: Path) -> bool:
    """One point per system (its mean over items); the lines through it span the interquartile
    range of its items on each axis; the scores that combine both (``paraphrase`` group:
    ParaScore, BERT-iBLEU) are tabled under the plot, one row per system. Returns False when there
    is nothing to draw."""
    view = result.systems
    combined = paraphrase_scores(result)
    drawable = view[np.isfinite(view["diversity"]) & np.isfinite(view["adequacy"])]
    if drawable.empty:
        log.info("no system has both a diversity and an adequacy value: no diversity plot")
        return False
    plt = _plt()
    cmap = plt.get_cmap("tab10" if len(drawable) <= 10 else "tab20")
    if len(combined.columns):
        rows = len(drawable) + 1
        fig, (ax, ax_table) = plt.subplots(
            2,
            1,
            figsize=(6.5, 5.0 + 0.22 * rows),
            height_ratios=[5.0, 0.22 * rows + 0.3],
            layout="constrained",
        )
        _paraphrase_table(ax_table, combined.reindex(drawable.index), cmap)
    else:
        fig, ax = plt.subplots(figsize=(6.5, 5.0), layout="constrained")
    for i, (system, row) in enumerate(drawable.iterrows()):
        color = cmap(i % cmap.N)
        ax.plot(
            [row.diversity_q25, row.diversity_q75],
            [row.adequacy, row.adequacy],
            color=color,
            alpha=0.5,
            lw=1.5,
        )
        ax.plot(
            [row.diversity, row.diversity],
            [row.adequacy_q25, row.adequacy_q75],
            color=color,
            alpha=0.5,
            lw=1.5,
        )
        is_base = system == result.baseline
        ax.scatter(
            [row.diversity],
            [row.adequacy],
            s=70 if is_base else 45,
            marker="s" if is_base else "o",
            color=color,
            edgecolors="black",
            zorder=3,
        )
        label = f"{system}{' (baseline)' if is_base else ''}"
        if math.isfinite(row.copy_rate) and row.copy_rate > 0:
            label += f"  copy {row.copy_rate:.0%}"
        ax.annotate(
            label,
            (row.diversity, row.adequacy),
            fontsize=8,
            xytext=(4, 4),
            textcoords="offset points",
        )
    ax.set_xlabel("diversity (1 - normalized syntactic similarity to the source)")
    ax.set_ylabel("adequacy (normalized semantic similarity)")
    ax.set_title("Diversity vs adequacy (point = mean over items, lines = item IQR)", fontsize=10)
    ax.grid(alpha=0.3)
    save_figure(fig, path)
    plt.close(fig)
    return True


def ranking_plot(
    result: Comparison, path: Path, style: FigureStyle | None = None, columns: int = 3
) -> bool:
    """One figure, a panel per column: systems sorted best first, the bootstrap interval as a
    bar, the significance cluster as the colour (legend at the top), the baseline in bold and
    marked with a square, each panel's direction in its title."""
    parts = ranking_panels(result, style, columns)
    if parts is None:
        return False
    save_cells(path, *parts)
    return True


# the ranking's frame, in inches: a panel's cell is RANKING_CELL_IN wide and RANKING_ROW_IN
# high per system plus RANKING_CELL_BASE_IN; in it, the axes leave room for the system names on
# the left, the x tick labels below and the two-line title above; the header strip above the
# cells holds the figure's title and the clusters' legend
RANKING_CELL_IN = 4.3
RANKING_ROW_IN = 0.22
RANKING_CELL_BASE_IN = 1.0
RANKING_AXES_IN = (1.45, 0.3, 2.55)  # left, bottom, width; the height is what is left
RANKING_TITLE_IN = 0.45  # above the axes: the panel's title
RANKING_HEADER_IN = 0.55  # and RANKING_LEGEND_ROW_IN per row of the legend
RANKING_LEGEND_ROW_IN = 0.2
RANKING_LEGEND_COLUMNS = 6


def ranking_panels(
    result: Comparison, style: FigureStyle | None = None, columns: int = 3
) -> tuple[CellGrid, list[Cell], Header] | None:
    """The ranking figure's frame, its panels (one cell per column) and its header (the title
    and the clusters' legend); None where there is nothing to rank."""
    style = style or FigureStyle()
    t = result.table
    if t.empty:
        return None
    metrics = list(dict.fromkeys(t["metric"]))
    first = [m for m in ("syntactic", "semantic") if m in metrics]
    chosen = first + [m for m in metrics if m not in first]
    cols = min(columns, len(chosen))
    rows = math.ceil(len(chosen) / cols)
    n_sys = t["system"].nunique()
    clusters = sorted({int(c) for c in t["cluster"] if math.isfinite(c)})
    # the clusters and the baseline's entry
    legend_rows = math.ceil((len(clusters) + 1) / RANKING_LEGEND_COLUMNS)

    def px(inches: float) -> int:
        return round(inches * PNG_DPI)

    cell_h = px(RANKING_CELL_BASE_IN + RANKING_ROW_IN * n_sys)
    left, bottom, width = (px(v) for v in RANKING_AXES_IN)
    grid = CellGrid(
        cell=(px(RANKING_CELL_IN), cell_h),
        rows=rows,
        cols=cols,
        header=px(RANKING_HEADER_IN + RANKING_LEGEND_ROW_IN * legend_rows),
        axes=(left, bottom, width, max(cell_h - bottom - px(RANKING_TITLE_IN), 1)),
    )
    kept = ["system", "score", "ci_low", "ci_high", "rank", "cluster", "higher_is_better"]
    # one grouping, not a mask per metric: a fifth of the time on a sweep's every job
    by_metric = dict(list(t[kept].groupby(t["metric"], sort=False)))
    cells = []
    for metric in chosen:
        sub = by_metric[metric].sort_values("rank", na_position="last").reset_index(drop=True)
        hib = bool(sub["higher_is_better"].iloc[0])
        title = f"{style.label(metric)}\n({style.direction(metric, hib)})"
        cells.append(
            Cell(
                functools.partial(_ranking_panel, sub=sub, baseline=result.baseline, title=title),
                (sub, result.baseline, title),
            )
        )
    caption = (
        f"System ranking: {result.config.confidence:.0%} bootstrap intervals; systems in the same "
        f"cluster do not differ significantly (paired bootstrap, alpha {result.config.alpha:g})"
    )
    header = Header(
        functools.partial(
            _ranking_header, clusters=clusters, baseline=result.baseline, caption=caption
        ),
        (clusters, result.baseline, caption),
    )
    return grid, cells, header


def _ranking_panel(ax: Any, sub: pd.DataFrame, baseline: str, title: str) -> None:
    from matplotlib.ticker import MaxNLocator

    cmap = _plt().get_cmap("tab10")
    y = np.arange(len(sub))[::-1]
    cluster = sub["cluster"].to_numpy(dtype=float)
    k = np.where(np.isfinite(cluster), np.nan_to_num(cluster) - 1, 9).astype(int)
    colors = [cmap(c % 10) for c in k]
    ax.hlines(y, sub["ci_low"], sub["ci_high"], colors=colors, lw=2)
    base = (sub["system"] == baseline).to_numpy()
    ax.scatter(sub["score"][~base], y[~base], c=np.array(colors)[~base], zorder=3, s=22)
    if base.any():
        ax.scatter(
            sub["score"][base],
            y[base],
            c=np.array(colors)[base],
            marker="s",
            edgecolors="black",
            zorder=3,
            s=34,
        )
    # the systems' names where y tick labels go, as plain texts: a tick is five artists (its
    # marks and labels), and a panel of 36 systems spent most of its building time making them
    ax.set_yticks([])
    ax.set_ylim(-0.7, len(sub) - 0.3)
    place, va, ha = ax.get_yaxis_text1_transform(_plt().rcParams["ytick.major.pad"] + 3.5)
    for row, system in zip(y, sub["system"], strict=True):
        ax.text(
            0,
            row,
            str(system),
            transform=place,
            va=va,
            ha=ha,
            fontsize=7,
            fontweight="bold" if system == baseline else "normal",
        )
    set_title(ax, title, fontsize=8)  # fixed tick labels
    ax.tick_params(axis="x", labelsize=7)
    # four or five values say where the intervals lie; every further tick is drawn per panel
    ax.xaxis.set_major_locator(MaxNLocator(nbins=4))
    ax.grid(axis="x", alpha=0.3)


def _ranking_header(
    fig: Any, bottom: float, inch: float, clusters: list[int], baseline: str, caption: str
) -> None:
    """The title and the clusters' legend in the header strip that starts at ``bottom`` of the
    figure's height (``inch``: an inch as a fraction of it)."""
    from matplotlib.lines import Line2D

    cmap = _plt().get_cmap("tab10")
    handles = [
        Line2D([], [], color=cmap((c - 1) % 10), lw=2, marker="o", ms=4, label=f"cluster {c}")
        for c in clusters
    ]
    handles.append(
        Line2D(
            [], [], color="0.4", lw=0, marker="s", mec="black", ms=5, label=f"baseline ({baseline})"
        )
    )
    # the legend's row below the figure's title, both above the panels' titles
    legend = fig.legend(
        handles=handles,
        loc="lower center",
        bbox_to_anchor=(0.5, bottom + 0.1 * inch),
        ncol=RANKING_LEGEND_COLUMNS,
        fontsize=7,
        frameon=False,
    )
    # the title clear of the legend's top, however many rows the clusters take
    top = legend.get_window_extent(fig.canvas.get_renderer()).y1 / fig.bbox.height
    fig.suptitle(caption, fontsize=9, y=top + 0.06 * inch, va="bottom")


def write_compare_plots(
    plots_dir: Path, result: Comparison, style: FigureStyle | None = None
) -> list[Path]:
    style = style or FigureStyle()
    written: list[Path] = []
    try:
        cfg = (result.config.confidence, result.config.alpha)
        p = style.path(plots_dir, "diversity_adequacy")
        render(
            p,
            "diversity_adequacy",
            lambda q: diversity_adequacy_plot(result, q),
            result.systems,
            result.baseline,
            paraphrase_scores(result),
        )
        if p.exists():
            written.append(p)
        p = style.path(plots_dir, "system_ranking")
        render(
            p,
            "system_ranking",
            lambda q: ranking_plot(result, q, style),
            result.table,
            result.baseline,
            cfg,
            style,
        )
        if p.exists():
            written.append(p)
    except Exception as exc:  # a plot must never cost the numbers
        log.warning("comparison plotting failed (%s); the tables are written", exc)
    return written
