"""Plots of the compare stage: the diversity–adequacy view and the system ranking with intervals."""

from __future__ import annotations

import hashlib
import logging
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from paraeval.memo import Memo
from paraeval.pipeline.plots import _plt, render, save_figure

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
    save_figure(fig, path, dpi=110)
    plt.close(fig)
    return True


_DPI = 100
_PANEL_WIDTH = 5.2  # inches
# panels already drawn by this process (the figure helper of a multirun), by content: an α sweep
# redraws the iBLEU and syntactic panels and reuses the others
_PANELS: Memo[str, np.ndarray] = Memo("compare_plots.panels", max_entries=256)


def _panel(sub: pd.DataFrame, metric: str, baseline: str, height: float) -> np.ndarray:
    """One ranking panel as an RGBA image (rows, cols, 4)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    key = hashlib.blake2b(
        repr((metric, baseline, height, list(sub.columns))).encode()
        + pd.util.hash_pandas_object(sub, index=False).to_numpy().tobytes(),
        digest_size=20,
    ).hexdigest()
    hit = _PANELS.get(key)
    if hit is not None:
        return hit
    fig = Figure(figsize=(_PANEL_WIDTH, height), dpi=_DPI)
    canvas = FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    fig.subplots_adjust(left=0.2, right=0.96, bottom=0.3 / height, top=1 - 0.3 / height)
    cmap = _plt().get_cmap("tab10")
    y = np.arange(len(sub))[::-1]
    cluster = sub["cluster"].to_numpy(dtype=float)
    k = np.where(np.isfinite(cluster), np.nan_to_num(cluster) - 1, 9).astype(int)
    colors = [cmap(c % 10) for c in k]
    # one collection per panel, not one artist per system
    ax.hlines(y, sub["ci_low"], sub["ci_high"], colors=colors, lw=2)
    ax.scatter(sub["score"], y, c=colors, zorder=3, s=25)
    ax.set_yticks(y, list(sub["system"]), fontsize=8)
    ax.set_ylim(-0.7, len(sub) - 0.3)
    for label in ax.get_yticklabels():
        if label.get_text() == baseline:
            label.set_fontweight("bold")
    direction = "higher is better" if bool(sub["higher_is_better"].iloc[0]) else "lower is better"
    ax.set_title(f"{metric} ({direction})", fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    canvas.draw()
    return _PANELS.put(key, np.asarray(canvas.buffer_rgba()).copy())


def ranking_plot(result: Comparison, path: Path, max_panels: int = 8) -> bool:
    """Per column: systems sorted best first, the bootstrap interval as a bar, the cluster as
    the colour, the baseline in bold. Each panel is drawn on its own and the panels are tiled,
    so that a panel whose numbers did not change is not drawn again."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    t = result.table
    if t.empty:
        return False
    metrics = list(dict.fromkeys(t["metric"]))
    first = [m for m in ("syntactic", "semantic") if m in metrics]
    chosen = (first + [m for m in metrics if m not in first])[:max_panels]
    cols = min(2, len(chosen))
    rows = math.ceil(len(chosen) / cols)
    n_sys = t["system"].nunique()
    height = 0.6 + 0.28 * n_sys
    shown = ["system", "score", "ci_low", "ci_high", "cluster", "rank", "higher_is_better"]
    panels = [
        _panel(
            t.loc[t["metric"] == m, shown].sort_values("rank", na_position="last"),
            m,
            result.baseline,
            height,
        )
        for m in chosen
    ]
    title = Figure(figsize=(_PANEL_WIDTH * cols, 0.45), dpi=_DPI)
    title_canvas = FigureCanvasAgg(title)
    title.text(
        0.5,
        0.5,
        f"System ranking: {result.config.confidence:.0%} bootstrap intervals, colour = "
        f"significance cluster (alpha {result.config.alpha:g}), baseline in bold",
        ha="center",
        va="center",
        fontsize=9,
    )
    title_canvas.draw()
    head = np.asarray(title_canvas.buffer_rgba())
    ph, pw = panels[0].shape[:2]
    image = np.full((head.shape[0] + rows * ph, max(head.shape[1], cols * pw), 4), 255, np.uint8)
    image[: head.shape[0], : head.shape[1]] = head
    for i, panel in enumerate(panels):
        r, c = divmod(i, cols)
        top = head.shape[0] + r * ph
        image[top : top + ph, c * pw : (c + 1) * pw] = panel

    from matplotlib.image import imsave

    from paraeval.pipeline.files import atomic_write

    atomic_write(path, lambda p: imsave(p, image, format="png", dpi=_DPI))
    return True


def write_compare_plots(plots_dir: Path, result: Comparison) -> list[Path]:
    written: list[Path] = []
    try:
        cfg = (result.config.confidence, result.config.alpha)
        p = plots_dir / "diversity_adequacy.png"
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
        p = plots_dir / "system_ranking.png"
        render(
            p,
            "system_ranking",
            lambda q: ranking_plot(result, q),
            result.table,
            result.baseline,
            cfg,
        )
        if p.exists():
            written.append(p)
    except Exception as exc:  # a plot must never cost the numbers
        log.warning("comparison plotting failed (%s); the tables are written", exc)
    return written
