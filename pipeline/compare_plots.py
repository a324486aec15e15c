"""Plots of the compare stage: the diversity–adequacy view and the system ranking with intervals."""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from pipeline.plots import _plt, render, save_figure

if TYPE_CHECKING:
    from pipeline.compare import Comparison

log = logging.getLogger(__name__)


def diversity_adequacy_plot(result: Comparison, path: Path) -> bool:
    """One point per system (its mean over items); the lines through it span the interquartile
    range of its items on each axis. Returns False when there is nothing to draw."""
    view = result.systems
    drawable = view[np.isfinite(view["diversity"]) & np.isfinite(view["adequacy"])]
    if drawable.empty:
        log.info("no system has both a diversity and an adequacy value: no diversity plot")
        return False
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.5, 5.0), layout="constrained")
    cmap = plt.get_cmap("tab10" if len(drawable) <= 10 else "tab20")
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


def ranking_plot(result: Comparison, path: Path, max_panels: int = 8) -> bool:
    """Per column: systems sorted best first, the bootstrap interval as a bar, the cluster as
    the colour, the baseline in bold."""
    t = result.table
    if t.empty:
        return False
    metrics = list(dict.fromkeys(t["metric"]))
    first = [m for m in ("syntactic", "semantic") if m in metrics]
    chosen = (first + [m for m in metrics if m not in first])[:max_panels]
    cols = min(2, len(chosen))
    rows = math.ceil(len(chosen) / cols)
    n_sys = t["system"].nunique()
    plt = _plt()
    height = 0.9 + rows * (0.6 + 0.28 * n_sys)
    # fixed margins instead of a layout engine: constrained layout measured every tick label of
    # every panel and cost more than the drawing
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, height), squeeze=False)
    fig.subplots_adjust(
        left=0.1,
        right=0.98,
        bottom=0.35 / height,
        top=1 - 0.55 / height,
        wspace=0.35,
        hspace=0.5 / (0.6 + 0.28 * n_sys),
    )
    cmap = plt.get_cmap("tab10")
    for ax, metric in zip(axes.ravel(), chosen, strict=False):
        sub = t[t["metric"] == metric].sort_values("rank", na_position="last")
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
            if label.get_text() == result.baseline:
                label.set_fontweight("bold")
        direction = (
            "higher is better" if bool(sub["higher_is_better"].iloc[0]) else "lower is better"
        )
        ax.set_title(f"{metric} ({direction})", fontsize=9)
        ax.grid(axis="x", alpha=0.3)
    for ax in axes.ravel()[len(chosen) :]:
        ax.set_visible(False)
    fig.suptitle(
        f"System ranking: {result.config.confidence:.0%} bootstrap intervals, colour = "
        f"significance cluster (alpha {result.config.alpha:g}), baseline in bold",
        fontsize=9,
    )
    save_figure(fig, path, dpi=100)
    plt.close(fig)
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
