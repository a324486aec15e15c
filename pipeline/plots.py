"""Plots written to ``plots/`` in the output directory (matplotlib, no display needed)."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

log = logging.getLogger(__name__)


def _plt():  # type: ignore[no-untyped-def]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: Path, dpi: int) -> None:
    """PNG through a temporary file and a rename (the format is given: the temporary name has no
    .png suffix), so a crash never leaves a truncated image under the final name."""
    from pipeline.track import atomic_write

    atomic_write(path, lambda p: fig.savefig(p, dpi=dpi, format="png"))


def correlation_heatmap(corr: pd.DataFrame, path: Path, coefficient: str | None = None) -> None:
    """Metrics x (aspect, level) for one coefficient; NaN cells are left blank."""
    if corr.empty:
        return
    coefficient = coefficient or (
        "kendall_b" if "kendall_b" in set(corr["coefficient"]) else corr["coefficient"].iloc[0]
    )
    sub = corr[corr["coefficient"] == coefficient]
    table = sub.pivot_table(
        index="metric", columns=["aspect", "level"], values="value", aggfunc="first", sort=False
    )
    plt = _plt()
    fig, ax = plt.subplots(
        figsize=(1.4 + 1.1 * table.shape[1], 1.0 + 0.38 * table.shape[0]), layout="constrained"
    )
    data = table.to_numpy(dtype=float)
    im = ax.imshow(np.ma.masked_invalid(data), cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto")
    ax.set_xticks(
        range(table.shape[1]),
        [f"{str(a).removeprefix('human_')}\n{lv}" for a, lv in table.columns],
        fontsize=8,
    )
    ax.set_yticks(range(table.shape[0]), list(table.index), fontsize=8)
    for i in range(data.shape[0]):
        for j in range(data.shape[1]):
            if np.isfinite(data[i, j]):
                ax.text(
                    j,
                    i,
                    f"{data[i, j]:.2f}",
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="white" if abs(data[i, j]) > 0.6 else "black",
                )
    ax.set_title(f"{coefficient} with human ratings")
    fig.colorbar(im, ax=ax, shrink=0.8)
    save_figure(fig, path, dpi=110)
    plt.close(fig)


def metric_vs_human(
    segments: pd.DataFrame, systems: pd.DataFrame, metric: str, aspect: str, path: Path
) -> None:
    """Segment-level points coloured by system, system means as large markers."""
    plt = _plt()
    # fixed margins: a layout engine costs more than the drawing itself on small plots
    fig, axes = plt.subplots(1, 2, figsize=(9, 4))
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.13, top=0.92, wspace=0.25)
    for system, sub in segments.groupby("system", sort=False):
        axes[0].scatter(sub[metric], sub[aspect], s=10, alpha=0.6, label=str(system))
    axes[0].set_xlabel(metric)
    axes[0].set_ylabel(aspect)
    axes[0].set_title("segments")
    if len(systems) <= 12:
        axes[0].legend(fontsize=7, markerscale=1.5)
    if metric in systems and aspect in systems:
        axes[1].scatter(systems[metric], systems[aspect], s=40)
        for name, row in systems.iterrows():
            axes[1].annotate(
                str(name),
                (row[metric], row[aspect]),
                fontsize=7,
                xytext=(3, 3),
                textcoords="offset points",
            )
    axes[1].set_xlabel(f"{metric} (corpus)")
    axes[1].set_ylabel(f"mean {aspect}")
    axes[1].set_title("systems")
    save_figure(fig, path, dpi=90)
    plt.close(fig)


def write_plots(
    out_dir: Path,
    segments: pd.DataFrame,
    systems: pd.DataFrame,
    corr: pd.DataFrame,
    metric_cols: list[str],
    aspects: list[str],
    max_scatter: int = 4,
) -> list[Path]:
    plots = out_dir / "plots"
    written = []
    try:
        with warnings.catch_warnings():
            # one system or constant scores give singular axis limits; matplotlib copes and warns
            warnings.simplefilter("ignore", UserWarning)
            if not corr.empty:
                p = plots / "correlation_heatmap.png"
                correlation_heatmap(corr, p)
                written.append(p)
            chosen = [c for c in ("syntactic", "semantic") if c in segments] + [
                c for c in metric_cols if c not in ("syntactic", "semantic")
            ]
            for metric in chosen[:max_scatter]:
                for aspect in aspects:
                    p = plots / f"scatter_{metric}_{aspect}.png"
                    metric_vs_human(segments, systems, metric, aspect, p)
                    written.append(p)
    except Exception as exc:  # a plot must never cost the numbers
        log.warning("plotting failed (%s); the tables are written", exc)
    return written
