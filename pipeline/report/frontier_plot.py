"""The headline figure: each system's adequacy against its distance from the source, with their
intervals, the controls marked apart, the frontier marked and ParaScore's threshold drawn."""

from __future__ import annotations

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
    # room for a label per point: the figure grows with the number of systems
    side = min(12.0, 6.0 + 0.12 * int(shown.sum()))
    fig = new_figure((side + 1.5, side * 0.75), layout="constrained")
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
    # a control far from the ranked systems (a copy: no change, all the meaning) would squeeze
    # them into a corner: it is drawn on the edge, its values in its label
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
            clip_on=False,  # a control on the edge is drawn whole
        )
    for i in np.flatnonzero(shown):
        name = str(t["system"].iloc[i]) + (" (control)" if controls[i] else "")
        if off[i]:
            true_x, true_y = float(t[x_col].iloc[i]), float(t["adequacy"].iloc[i])
            name += f": {true_x:.3f}, {true_y:.3f}, off the axes"
        ax.annotate(
            name,
            (x[i], y[i]),
            fontsize=7,
            # a point on the edge is labelled inwards
            xytext=(6, -10) if off[i] else (4, 3),
            textcoords="offset points",
            color=CONTROL_COLOR if controls[i] else "black",
        )
    if gamma is not None:
        label = f"ParaScore's threshold γ = {gamma:g}: no more diversity reward beyond"
        ax.axvline(gamma, color="0.3", ls="--", lw=1.0, zorder=1, label=label)
    measure = "PINC" if view.diversity == "pinc" else "100 − self-BLEU"
    ax.set_xlabel(AXIS_LABELS[x_col].format(measure=measure))
    against = "the source" if view.reference_free else "the references"
    ax.set_ylabel(f"adequacy: {view.adequacy} (similarity to {against})")
    title = "Meaning kept against wording changed"
    if view.paraphrase:
        title += f" ({view.paraphrase} ranks the systems)"
    ax.set_title(title, fontsize=11)
    ax.grid(alpha=0.3)
    if limits is None:
        ax.margins(x=0.08, y=0.08)
    # outside the axes (inside, it would hide points); constrained layout makes room for it
    fig.legend(loc="outside lower center", ncol=2, fontsize=8, frameon=False)
    save_figure(fig, path)
    return True


def _limits(
    xs: tuple[np.ndarray, ...], ys: tuple[np.ndarray, ...], ranked: np.ndarray, gamma: float | None
) -> tuple[tuple[float, float], tuple[float, float]] | None:
    """The axes' ranges around the ranked systems' values and intervals (and the threshold)."""
    if not ranked.any():
        return None
    shown_x = [v[ranked] for v in xs] + ([np.array([gamma])] if gamma is not None else [])
    out = []
    for values in (np.concatenate(shown_x), np.concatenate([v[ranked] for v in ys])):
        lo, hi = float(np.nanmin(values)), float(np.nanmax(values))
        pad = 0.08 * (hi - lo) if hi > lo else 0.05 * max(abs(hi), 1.0)
        out.append((lo - pad, hi + pad))
    return out[0], out[1]
