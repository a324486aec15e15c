"""The headline figure: each system's adequacy against its distance from the source, with their
intervals, the controls marked apart, the frontier marked and ParaScore's threshold drawn."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from paraeval.pipeline.report.plots import new_figure, save_figure

if TYPE_CHECKING:
    from pathlib import Path

    from paraeval.pipeline.stages.paraphrase_table import ParaphraseTable

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
    n = int(shown.sum())
    # room for a label per point: the figure grows with the number of systems
    side = min(12.0, 6.0 + 0.12 * n)
    fig = new_figure((side + 1.5, side * 0.75), layout="constrained")
    ax = fig.subplots()
    controls = t["control"].to_numpy(dtype=bool)
    on = t["frontier"].to_numpy(dtype=bool)
    groups = (
        (
            "frontier (no system better on both axes beyond the intervals)",
            on & ~controls,
            FRONTIER_COLOR,
            "D",
            46,
        ),
        ("other systems", ~on & ~controls, SYSTEM_COLOR, "o", 30),
        ("controls (never ranked)", controls, CONTROL_COLOR, "X", 60),
    )
    xl, xh = t[f"{x_col}_low"].to_numpy(dtype=float), t[f"{x_col}_high"].to_numpy(dtype=float)
    yl, yh = t["adequacy_low"].to_numpy(dtype=float), t["adequacy_high"].to_numpy(dtype=float)
    for label, mask, color, marker, size in groups:
        m = mask & shown
        if not m.any():
            continue
        ax.errorbar(
            x[m],
            y[m],
            xerr=_errors(xl[m], x[m], xh[m]),
            yerr=_errors(yl[m], y[m], yh[m]),
            fmt="none",
            ecolor=color,
            alpha=0.5,
            lw=1.0,
            zorder=2,
        )
        ax.scatter(
            x[m],
            y[m],
            s=size,
            marker=marker,
            color=color,
            edgecolors="black",
            linewidths=0.5,
            zorder=3,
            label=label,
        )
    for i in np.flatnonzero(shown):
        name = str(t["system"].iloc[i]) + (" (control)" if controls[i] else "")
        ax.annotate(
            name,
            (x[i], y[i]),
            fontsize=7,
            xytext=(4, 3),
            textcoords="offset points",
            color=CONTROL_COLOR if controls[i] else "black",
        )
    if view.gamma is not None and x_col == "edit_distance":
        ax.axvline(
            view.gamma,
            color="0.3",
            ls="--",
            lw=1.0,
            zorder=1,
            label=f"ParaScore's threshold γ = {view.gamma:g}: no more diversity reward beyond",
        )
    measure = "PINC" if view.diversity == "pinc" else "100 − self-BLEU"
    ax.set_xlabel(AXIS_LABELS[x_col].format(measure=measure))
    against = "the source" if view.reference_free else "the references"
    ax.set_ylabel(f"adequacy: {view.adequacy} (similarity to {against})")
    title = "Meaning kept against wording changed"
    if view.paraphrase:
        title += f" ({view.paraphrase} ranks the systems)"
    ax.set_title(title, fontsize=11)
    ax.grid(alpha=0.3)
    ax.margins(x=0.08, y=0.08)
    # outside the axes (inside, it would hide points); constrained layout makes room for it
    fig.legend(loc="outside lower center", ncol=2, fontsize=8, frameon=False)
    if not math.isfinite(float(np.nanmax(x[shown]))):
        return False
    save_figure(fig, path)
    return True
