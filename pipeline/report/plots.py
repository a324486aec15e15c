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

from paraeval.memo import Memo
from paraeval.pipeline.report.figure_files import _plt, render, save_figure
from paraeval.pipeline.data.load import in_order
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
    from paraeval.pipeline.report.panels import Panel, PanelGrid, save_panels

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
    Kendall τ and n in each panel.

    A PNG whose figure this process drew before from the same frame (everything but the
    values: columns, systems and their rows, style) is drawn by moving that figure's points
    instead of building it again (:class:`_Scatter`)."""
    style = style or FigureStyle()
    frame = _Scatter.frame(segments, systems, metric, aspect, style, path)
    kept = _SCATTERS.get(frame) if frame is not None else None
    if kept is not None:
        try:
            kept.refill(segments, systems)
            save_figure(kept.fig, path)
        except BaseException:
            _SCATTERS.discard(frame)  # half moved: the next one is built anew
            raise
        return
    scatter = _Scatter.build(segments, systems, metric, aspect, style)
    save_figure(scatter.fig, path)
    if frame is not None:
        _SCATTERS.put(frame, scatter)


# systems up to which the segments are drawn one collection per system, with a legend
_LEGEND_MAX_SYSTEMS = 12


@dataclass
class _Scatter:
    """A drawn ``metric_vs_human`` figure, kept so that the next figure of the same frame moves
    its points rather than building and laying out two axes, their ticks and texts again (the
    jobs of an α sweep draw the same scatter plots with new x values).

    Exact, not an approximation: what the values decide is set as the plotting calls set it (a
    collection's offsets, a line's data, the annotations' anchors, the titles) and the data
    limits are gathered again as ``Axes.add_collection`` and ``Axes.add_line`` gather them, so
    the next drawing autoscales from the same limits. Values that are not all finite, which
    those calls mask, are drawn on a new figure."""

    fig: Any
    axes: Any
    metric: str
    aspect: str
    legend: bool  # one collection per system (with a legend) rather than a line per colour
    # without a legend: the rows of each marker line's colour, which the frame (its rows'
    # systems) decides
    picks: list[np.ndarray]

    @staticmethod
    def frame(
        segments: pd.DataFrame,
        systems: pd.DataFrame,
        metric: str,
        aspect: str,
        style: FigureStyle,
        path: Path,
    ) -> tuple[Any, ...] | None:
        """What a figure is built from besides the values; None where it is not kept."""
        if path.suffix != ".png" or not _finite(segments, systems, metric, aspect):
            return None
        names = segments["system"].astype(str)
        return (
            metric,
            aspect,
            style,
            _hash_rows(names),
            tuple(map(str, systems.index)),
            metric in systems and aspect in systems,
        )

    @classmethod
    def build(
        cls,
        segments: pd.DataFrame,
        systems: pd.DataFrame,
        metric: str,
        aspect: str,
        style: FigureStyle,
    ) -> _Scatter:
        fig = _agg_figure((10, 4.2))
        axes = fig.subplots(1, 2)
        fig.subplots_adjust(wspace=0.25)
        order = in_order(segments["system"])
        legend = len(order) <= _LEGEND_MAX_SYSTEMS
        picks: list[np.ndarray] = []
        if legend:
            for system, sub in segments.groupby("system", sort=False):
                axes[0].scatter(sub[metric], sub[aspect], s=10, alpha=0.6, label=str(system))
        else:
            # without a legend one collection draws the same colours as one call per system
            # (cycled through the default colour cycle in order of appearance), much faster
            x, y = _xy(segments, metric, aspect)
            # one marker line per colour: Agg stamps a cached marker, far faster than a
            # scatter collection with a colour per point (same size, s=10 points^2)
            for pick, color in _colour_picks(segments, order):
                axes[0].plot(x[pick], y[pick], "o", ms=10**0.5, mew=0, alpha=0.6, color=color)
                picks.append(pick)
        human = aspect.removeprefix("human_")
        for ax in axes:
            plain_y(ax)
        axes[0].set_xlabel(style.label(metric))
        axes[0].set_ylabel(f"human {human}")
        # the agreement in the title: a box inside the axes would hide points
        set_title(axes[0], f"segments: {_agreement(*_xy(segments, metric, aspect))}", fontsize=9)
        if legend:
            axes[0].legend(
                fontsize=7, markerscale=1.5, title="system", title_fontsize=7, loc="lower right"
            )
        if metric in systems and aspect in systems:
            axes[1].scatter(systems[metric], systems[aspect], s=40)
            for name, row in systems.iterrows():
                xy = (row[metric], row[aspect])
                axes[1].annotate(
                    str(name),
                    xy,
                    fontsize=7,
                    xytext=(3, 3),
                    textcoords="offset points",
                    # a finite point lies inside the axes, which are scaled to hold every point
                    # with a margin: matplotlib's test of each label's point, at every drawing,
                    # would pass anyway (a tenth of a kept scatter plot's redrawing)
                    annotation_clip=False if np.isfinite(xy).all() else None,
                )
            set_title(axes[1], f"systems: {_agreement(*_xy(systems, metric, aspect))}", fontsize=9)
        axes[1].set_xlabel(f"{style.label(metric)} (corpus level)")
        axes[1].set_ylabel(f"mean human {human}")
        if style.marked([metric]):
            fig.text(0.01, 0.0, MARKS_NOTE, fontsize=7, ha="left", va="top")
        return cls(fig, axes, metric, aspect, legend, picks)

    def refill(self, segments: pd.DataFrame, systems: pd.DataFrame) -> None:
        """The figure showing these values (of the frame it was built for)."""
        metric, aspect = self.metric, self.aspect
        seg_ax, sys_ax = self.axes
        if self.legend:
            groups = segments.groupby("system", sort=False)
            for coll, (_, sub) in zip(seg_ax.collections, groups, strict=True):
                coll.set_offsets(np.column_stack(_xy(sub, metric, aspect)))
        else:
            x, y = _xy(segments, metric, aspect)
            for line, pick in zip(seg_ax.lines, self.picks, strict=True):
                line.set_data(x[pick], y[pick])
        seg_ax.title.set_text(f"segments: {_agreement(*_xy(segments, metric, aspect))}")
        if sys_ax.collections:
            sys_ax.collections[0].set_offsets(np.column_stack(_xy(systems, metric, aspect)))
            for note, (_, row) in zip(sys_ax.texts, systems.iterrows(), strict=True):
                note.xy = (row[metric], row[aspect])
            sys_ax.title.set_text(f"systems: {_agreement(*_xy(systems, metric, aspect))}")
        for ax in self.axes:
            _gather_limits(ax)
            ax.autoscale_view()


def _agg_figure(size: tuple[float, float]) -> Any:
    """A figure outside pyplot (nothing to close; dropped, it is freed) on an Agg canvas of its
    own, which keeps its renderer from one drawing to the next."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=size)
    FigureCanvasAgg(fig)
    return fig


def _xy(frame: pd.DataFrame, metric: str, aspect: str) -> tuple[np.ndarray, np.ndarray]:
    return frame[metric].to_numpy(dtype=float), frame[aspect].to_numpy(dtype=float)


def _finite(segments: pd.DataFrame, systems: pd.DataFrame, metric: str, aspect: str) -> bool:
    """Whether a kept figure can show these values: the collections (the system means, and the
    segments where each system has a collection of its own) must be finite, as ``scatter``
    masks what is not and a moved collection would not. The segments' marker lines (one per
    colour, without a legend) may hold missing ratings: a line's data keeps them and both the
    drawing and the data limits skip them, whether it is built or moved."""
    parts: list[np.ndarray] = []
    if segments["system"].nunique() <= _LEGEND_MAX_SYSTEMS:
        parts += _xy(segments, metric, aspect)
    if metric in systems and aspect in systems:
        parts += _xy(systems, metric, aspect)
    return all(np.isfinite(p).all() for p in parts)


def _colour_picks(segments: pd.DataFrame, order: list[Any]) -> list[tuple[np.ndarray, str]]:
    """The rows of each colour of the default cycle (systems coloured in order of appearance),
    for the colours that have rows."""
    cycle = _plt().rcParams["axes.prop_cycle"].by_key()["color"]
    code = segments["system"].map({s: i for i, s in enumerate(order)}).to_numpy()
    picks = [(code % len(cycle) == k, color) for k, color in enumerate(cycle)]
    return [(pick, color) for pick, color in picks if pick.any()]


def _gather_limits(ax: Any) -> None:
    """The axes' data limits gathered again from its lines and collections, as ``add_line``
    and ``add_collection`` gather them when an artist is added."""
    # relim resets the limits and takes the lines again; older matplotlib leaves collections
    # out of it, and a collection taken twice changes nothing
    ax.relim()
    for coll in ax.collections:
        box = coll.get_datalim(ax.transData)
        points = box.get_points()
        if not np.isinf(box.minpos).all():
            points = np.concatenate([points, [box.minpos]])
        ax.update_datalim(points)


def _hash_rows(values: pd.Series) -> bytes:
    return pd.util.hash_pandas_object(values, index=False).to_numpy().tobytes()


# the scatter figures this process keeps for their frame's next drawing: those of an α
# sweep's job (at most eight, about 12 MB of pixels each)
_SCATTERS: Memo[tuple[Any, ...], _Scatter] = Memo("plots.scatters", max_entries=8)


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
