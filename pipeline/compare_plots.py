"""Plots of the compare stage: the diversity–adequacy view and the system ranking with intervals."""

from __future__ import annotations

import functools
import logging
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from paraeval.pipeline.figure_files import _plt, render, save_figure
from paraeval.pipeline.panels import Panel, PanelGrid, save_panels
from paraeval.pipeline.plots import FigureStyle, set_title

if TYPE_CHECKING:
    from paraeval.pipeline.compare import Comparison

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
    save_panels(path, *parts)
    return True


def ranking_panels(
    result: Comparison, style: FigureStyle | None = None, columns: int = 3
) -> tuple[PanelGrid, list[Panel], Panel] | None:
    """The ranking figure's frame, its panels (one per column) and its header (the title and
    the clusters' legend); None where there is nothing to rank."""
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
    panel_h = 0.9 + 0.22 * n_sys
    height = panel_h * rows + 1.1  # the panels, then the title and the legend above them
    top = 1 - 0.95 / height
    grid = PanelGrid(
        size=(4.6 * cols, height),
        rows=rows,
        cols=cols,
        spacing=(("wspace", 0.55), ("hspace", 0.55 if n_sys < 12 else 0.3), ("top", top)),
    )
    kept = ["system", "score", "ci_low", "ci_high", "rank", "cluster", "higher_is_better"]
    # one grouping, not a mask per metric: a fifth of the time on a sweep's every job
    by_metric = dict(list(t[kept].groupby(t["metric"], sort=False)))
    panels = []
    for metric in chosen:
        sub = by_metric[metric].sort_values("rank", na_position="last").reset_index(drop=True)
        hib = bool(sub["higher_is_better"].iloc[0])
        title = f"{style.label(metric)}\n({style.direction(metric, hib)})"
        panels.append(
            Panel(
                functools.partial(_ranking_panel, sub=sub, baseline=result.baseline, title=title),
                (sub, result.baseline, title),
            )
        )
    clusters = sorted({int(c) for c in t["cluster"] if math.isfinite(c)})
    caption = (
        f"System ranking: {result.config.confidence:.0%} bootstrap intervals; systems in the same "
        f"cluster do not differ significantly (paired bootstrap, alpha {result.config.alpha:g})"
    )
    header = Panel(
        functools.partial(
            _ranking_header,
            clusters=clusters,
            baseline=result.baseline,
            caption=caption,
            height=height,
            top=top,
        ),
        (clusters, result.baseline, caption, height, top),
    )
    return grid, panels, header


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
    ax.set_yticks(y, [str(s) for s in sub["system"]], fontsize=7)
    ax.set_ylim(-0.7, len(sub) - 0.3)
    for label in ax.get_yticklabels():
        if label.get_text() == baseline:
            label.set_fontweight("bold")
    set_title(ax, title, fontsize=8)  # fixed tick labels
    ax.tick_params(axis="x", labelsize=7)
    # four or five values say where the intervals lie; every further tick is drawn per panel
    ax.xaxis.set_major_locator(MaxNLocator(nbins=4))
    ax.grid(axis="x", alpha=0.3)


def _ranking_header(
    fig: Any, clusters: list[int], baseline: str, caption: str, height: float, top: float
) -> None:
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
    # the legend's row sits between the panels' titles and the figure's title, apart from both
    fig.legend(
        handles=handles,
        loc="lower center",
        bbox_to_anchor=(0.5, top + 0.3 / height),
        ncol=min(len(handles), 6),
        fontsize=7,
        frameon=False,
    )
    fig.suptitle(caption, fontsize=9, y=top + 0.62 / height, va="bottom")


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
