"""Plots written to ``plots/`` in the output directory (matplotlib, no display needed)."""

from __future__ import annotations

import functools
import logging
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from paraeval.pipeline.figure_files import _plt, render, save_figure
from paraeval.pipeline.names import slug

log = logging.getLogger(__name__)


FORMATS = ("png", "pdf", "svg")
LOWER_MARK = "↓"
SOURCE_MARK = "◇"
MARKS_NOTE = (
    f"{LOWER_MARK} lower is better   {SOURCE_MARK} similarity to the source (lower = more diverse)"
)
COEFFICIENT_NAMES = {
    "pearson": "Pearson r",
    "spearman": "Spearman ρ",
    "kendall_b": "Kendall τ-b",
    "kendall_c": "Kendall τ-c",
}


@dataclass(frozen=True)
class FigureStyle:
    """What every figure needs besides its data: the file format and each column's direction."""

    fmt: str = "png"
    lower: frozenset[str] = frozenset()  # columns where lower is better
    source: frozenset[str] = frozenset()  # columns that measure similarity to the source

    def label(self, column: str) -> str:
        if column in self.lower:
            return f"{column} {LOWER_MARK}"
        if column in self.source:
            return f"{column} {SOURCE_MARK}"
        return column

    def direction(self, column: str, higher_is_better: bool = True) -> str:
        if column in self.source:
            return "similarity to the source: lower = more diverse"
        lower = column in self.lower or not higher_is_better
        return "lower is better" if lower else "higher is better"

    def marked(self, columns: list[str]) -> bool:
        return any(c in self.lower or c in self.source for c in columns)

    def path(self, folder: Path, stem: str) -> Path:
        return folder / f"{stem}.{self.fmt}"


def correlation_heatmap(
    corr: pd.DataFrame, path: Path, coefficient: str | None = None, style: FigureStyle | None = None
) -> None:
    """Metrics x (aspect, level) for one coefficient; NaN cells are left blank; a column's
    header gives its ``n`` when every cell of it has the same. Each metric's row is a panel of
    its own (``pipeline.panels``): an α sweep's job redraws only the rows that moved."""
    from paraeval.pipeline.panels import Panel, PanelGrid, save_panels

    if corr.empty:
        return
    style = style or FigureStyle()
    coefficient = coefficient or (
        "kendall_b" if "kendall_b" in set(corr["coefficient"]) else corr["coefficient"].iloc[0]
    )
    sub = corr[corr["coefficient"] == coefficient]
    table = sub.pivot_table(
        index="metric", columns=["aspect", "level"], values="value", aggfunc="first", sort=False
    )
    headers = []
    for aspect, level in table.columns:
        head = f"{str(aspect).removeprefix('human_')}\n{level}"
        if "n" in sub.columns:
            ns = set(sub.loc[(sub["aspect"] == aspect) & (sub["level"] == level), "n"].dropna())
            if len(ns) == 1:
                head += f"\nn = {int(ns.pop())}"
        headers.append(head)
    rows = [style.label(str(m)) for m in table.index]
    data = table.to_numpy(dtype=float)
    n_rows, n_cols = data.shape
    label_in = 0.5 + 0.075 * max((len(r) for r in rows), default=4)
    width = label_in + 1.0 * n_cols + 1.1
    height = HEATMAP_TOP_IN + HEATMAP_ROW_IN * n_rows + HEATMAP_BOTTOM_IN
    grid = PanelGrid(
        size=(width, height),
        rows=n_rows,
        cols=1,
        spacing=(
            ("left", label_in / width),
            ("right", 1 - 1.1 / width),
            ("top", 1 - HEATMAP_TOP_IN / height),
            ("bottom", HEATMAP_BOTTOM_IN / height),
            # a white rule between rows: each row's ink stays apart from the next one's
            ("hspace", HEATMAP_GAP),
        ),
    )
    panels = [
        Panel(
            functools.partial(
                _heatmap_row,
                values=data[i],
                label=rows[i],
                headers=headers if i == n_rows - 1 else None,
            ),
            (data[i], rows[i], headers if i == n_rows - 1 else None),
        )
        for i in range(n_rows)
    ]
    name = COEFFICIENT_NAMES.get(coefficient, coefficient)
    marked = style.marked(list(table.index))
    header = Panel(
        functools.partial(_heatmap_header, name=name, marked=marked, grid=grid),
        (name, marked, grid),
    )
    save_panels(path, grid, panels, header)


# the heatmap's frame, in inches: the title above the rows, each row, the column headers below
HEATMAP_TOP_IN = 0.45
HEATMAP_ROW_IN = 0.32
HEATMAP_BOTTOM_IN = 0.7
# the space between two rows, as a fraction of a row's height: 0.03 in, 6 pixels at 200 dpi,
# more than the few pixels of antialiasing and slack around each row's ink
HEATMAP_GAP = 0.1


def _heatmap_row(ax: Any, values: np.ndarray, label: str, headers: list[str] | None) -> None:
    ax.imshow(np.ma.masked_invalid(values[None, :]), cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto")
    ax.set_yticks([0], [label], fontsize=8)
    if headers is None:
        ax.set_xticks([])
    else:
        ax.set_xticks(range(len(values)), headers, fontsize=8)
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    for j, v in enumerate(values):
        if np.isfinite(v):
            ax.text(
                j,
                0,
                f"{v:.2f}",
                ha="center",
                va="center",
                fontsize=7,
                color="white" if abs(v) > 0.6 else "black",
            )


def _heatmap_header(fig: Any, name: str, marked: bool, grid: Any) -> None:
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    spacing = dict(grid.spacing)
    left, right, top, bottom = (spacing[k] for k in ("left", "right", "top", "bottom"))
    fig.text(
        (left + right) / 2,
        top + 0.12 / grid.size[1],
        f"{name}: metric vs human ratings",
        ha="center",
        va="bottom",
        fontsize=10,
    )
    # the colour bar right of the rows, four fifths of their height, as fig.colorbar's shrink
    span = top - bottom
    cax = fig.add_axes(
        (right + 0.15 / grid.size[0], bottom + 0.1 * span, 0.18 / grid.size[0], 0.8 * span)
    )
    bar = fig.colorbar(ScalarMappable(Normalize(-1, 1), cmap="RdBu_r"), cax=cax)
    bar.set_label(name, fontsize=8)
    bar.ax.tick_params(labelsize=8)
    if marked:
        fig.text(0.01, 0.0, MARKS_NOTE, fontsize=7, ha="left", va="top")


def plain_y(ax: Any) -> None:
    """Y tick labels written out, never as an offset or a power of ten above the axis, which
    would leave ``set_title``'s placement short of matplotlib's."""
    ax.ticklabel_format(axis="y", style="plain", useOffset=False)


def set_title(ax: Any, text: str, **kwargs: Any) -> None:
    """``ax.set_title`` at ``y=1.0``: where matplotlib places a title when nothing of the axes
    lies above it (ticks below, fixed tick labels or ``plain_y``). Given the height, matplotlib
    skips measuring the axis for it at every drawing, about 35 ms per axes."""
    ax.set_title(text, y=1.0, **kwargs)


def _agreement(x: np.ndarray, y: np.ndarray) -> str:
    """``r``, ``τ`` and ``n`` of the finite pairs, for the corner of a scatter plot."""
    from scipy import stats

    keep = np.isfinite(x) & np.isfinite(y)
    n = int(keep.sum())
    if n < 2 or np.ptp(x[keep]) == 0 or np.ptp(y[keep]) == 0:
        return f"n = {n}"
    r = float(stats.pearsonr(x[keep], y[keep])[0])
    tau = float(stats.kendalltau(x[keep], y[keep])[0])
    return f"r = {r:+.3f}   τ = {tau:+.3f}   n = {n}"


def metric_vs_human(
    segments: pd.DataFrame,
    systems: pd.DataFrame,
    metric: str,
    aspect: str,
    path: Path,
    style: FigureStyle | None = None,
) -> None:
    """Segment-level points coloured by system, system means as large markers; Pearson r,
    Kendall τ and n in each panel."""
    style = style or FigureStyle()
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
    fig.subplots_adjust(wspace=0.25)
    order = list(dict.fromkeys(segments["system"]))
    if len(order) <= 12:
        for system, sub in segments.groupby("system", sort=False):
            axes[0].scatter(sub[metric], sub[aspect], s=10, alpha=0.6, label=str(system))
    else:
        # without a legend one collection draws the same colours as one call per system
        # (cycled through the default colour cycle in order of appearance), much faster
        cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        code = segments["system"].map({s: i for i, s in enumerate(order)}).to_numpy()
        x = segments[metric].to_numpy(dtype=float)
        y = segments[aspect].to_numpy(dtype=float)
        # one marker line per colour: Agg stamps a cached marker, far faster than a scatter
        # collection with a colour per point (same size, s=10 points^2)
        for k, color in enumerate(cycle):
            pick = code % len(cycle) == k
            if pick.any():
                axes[0].plot(x[pick], y[pick], "o", ms=10**0.5, mew=0, alpha=0.6, color=color)
    human = aspect.removeprefix("human_")
    for ax in axes:
        plain_y(ax)
    axes[0].set_xlabel(style.label(metric))
    axes[0].set_ylabel(f"human {human}")
    # the agreement in the title: a box inside the axes would hide points
    seg_stats = _agreement(
        segments[metric].to_numpy(dtype=float), segments[aspect].to_numpy(dtype=float)
    )
    set_title(axes[0], f"segments: {seg_stats}", fontsize=9)
    if len(order) <= 12:
        axes[0].legend(
            fontsize=7, markerscale=1.5, title="system", title_fontsize=7, loc="lower right"
        )
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
        sys_stats = _agreement(
            systems[metric].to_numpy(dtype=float), systems[aspect].to_numpy(dtype=float)
        )
        set_title(axes[1], f"systems: {sys_stats}", fontsize=9)
    axes[1].set_xlabel(f"{style.label(metric)} (corpus level)")
    axes[1].set_ylabel(f"mean human {human}")
    if style.marked([metric]):
        fig.text(0.01, 0.0, MARKS_NOTE, fontsize=7, ha="left", va="top")
    save_figure(fig, path)
    plt.close(fig)


def scatter_columns(
    segments: pd.DataFrame, metric_cols: list[str], max_scatter: int = 4
) -> list[str]:
    """The columns that get a metric-vs-human scatter plot: the group averages first."""
    chosen = [c for c in ("syntactic", "semantic") if c in segments] + [
        c for c in metric_cols if c not in ("syntactic", "semantic") and c in segments
    ]
    return chosen[:max_scatter]


def write_plots(
    out_dir: Path,
    segments: pd.DataFrame,
    systems: pd.DataFrame,
    corr: pd.DataFrame,
    metric_cols: list[str],
    aspects: list[str],
    max_scatter: int = 4,
    style: FigureStyle | None = None,
) -> list[Path]:
    style = style or FigureStyle()
    plots = out_dir / "plots"
    written = []
    try:
        with warnings.catch_warnings():
            # one system or constant scores give singular axis limits; matplotlib copes and warns
            warnings.simplefilter("ignore", UserWarning)
            if not corr.empty:
                p = style.path(plots, "correlation_heatmap")
                kept = ["metric", "aspect", "level", "coefficient", "value"]
                shown = corr[kept + (["n"] if "n" in corr.columns else [])]
                render(
                    p,
                    "correlation_heatmap",
                    lambda q: correlation_heatmap(shown, q, style=style),
                    shown.reset_index(drop=True),
                    style,
                )
                written.append(p)
            for metric in scatter_columns(segments, metric_cols, max_scatter):
                for aspect in aspects:
                    p = style.path(
                        plots, f"scatter_{slug(metric)}_{slug(aspect)}"
                    )  # names from data
                    seg = segments[["system", metric, aspect]]
                    sys_view = (
                        systems.reindex(columns=[metric, aspect])
                        if (metric in systems and aspect in systems)
                        else None
                    )
                    render(
                        p,
                        "metric_vs_human",
                        lambda q, m=metric, a=aspect, sg=seg: metric_vs_human(
                            sg, systems, m, a, q, style
                        ),
                        metric,
                        aspect,
                        seg.reset_index(drop=True),
                        sys_view,
                        style,
                    )
                    written.append(p)
    except Exception as exc:  # a plot must never cost the numbers
        log.warning("plotting failed (%s); the tables are written", exc)
    return written
