"""What every figure shares, and the metrics-vs-human figures: scatter, heatmap, α curve."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize
from matplotlib.figure import Figure

from paraeval.pipeline.files import atomic_write

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from paraeval.pipeline.stages.alpha import AlphaCurve

log = logging.getLogger(__name__)
LEGEND_MAX_SYSTEMS = 12  # segments drawn one collection per system, with a legend, up to this
MAX_SCATTER = 4
TOP_IN = 0.45  # the heatmap's frame, in inches: title, each row, column headers, colour bar
HEATMAP_ROW_IN = 0.32
BOTTOM_IN = 0.7
RIGHT_IN = 1.1
COLUMN_IN = 1.0
CMAP = "RdBu_r"
ALPHA_PANEL_IN = (4.6, 3.6)
PNG_DPI = 200
PAD_INCHES = 0.08
PNG_COMPRESS_LEVEL = 3
LOWER_MARK = "↓"
SOURCE_MARK = "◇"
MARKS_NOTE = (
    f"{LOWER_MARK} lower is better   {SOURCE_MARK} similarity to the source (lower = more diverse)"
)
AVERAGES = ("syntactic", "semantic")  # the group averages, shown first
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

    def marked(self, columns: Iterable[str]) -> bool:
        return any(c in self.lower or c in self.source for c in columns)


def averages_first(columns: Iterable[str]) -> list[str]:
    names = list(dict.fromkeys(columns))
    return [c for c in AVERAGES if c in names] + [c for c in names if c not in AVERAGES]


def new_figure(size: tuple[float, float], **kwargs: Any) -> Figure:
    """A figure outside pyplot (no global state) on an Agg canvas, which can measure text."""
    # imported here: a run that draws nothing never imports the backend
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = Figure(figsize=size, **kwargs)
    FigureCanvasAgg(fig)
    return fig


def save_figure(fig: Figure, path: Path, dpi: int = PNG_DPI) -> None:
    """In the format of ``path``'s suffix, cropped to its contents, written atomically."""
    fmt = path.suffix.lstrip(".") or "png"
    # deflate level 3, not Pillow's 6: much faster to encode, for a somewhat larger file
    extra: dict[str, Any] = {"pil_kwargs": {"compress_level": PNG_COMPRESS_LEVEL}}
    extra = extra if fmt == "png" else {}
    # the crop measured here and given as a box: "tight" would draw the figure twice
    fig.set_dpi(dpi)
    engine = fig.get_layout_engine()
    if engine is not None:
        # else the box would be the unplaced axes' and cut off titles and labels
        engine.execute(fig)
    box = fig.get_tightbbox(fig.canvas.get_renderer()).padded(PAD_INCHES)  # type: ignore[attr-defined]
    atomic_write(path, lambda p: fig.savefig(p, format=fmt, dpi=dpi, bbox_inches=box, **extra))


def set_title(ax: Axes, text: str, **kwargs: Any) -> None:
    """At ``y=1.0`` matplotlib skips measuring what lies above the axes, which is slow."""
    ax.set_title(text, y=1.0, **kwargs)


def marks_note(fig: Figure) -> None:
    fig.text(0.01, 0.0, MARKS_NOTE, fontsize=7, ha="left", va="top")


def drawn(path: Path, draw: Callable[[Path], bool]) -> bool:
    """``draw(path)`` (whether it drew anything); a figure that fails is only a warning."""
    try:
        return draw(path)
    except Exception as exc:  # a figure must never cost the numbers
        log.warning("plotting failed for %s (%s); the tables are written", path.name, exc)
        return False


def scatter_columns(
    segments: pd.DataFrame, metric_cols: list[str], max_scatter: int = MAX_SCATTER
) -> list[str]:
    """The columns that get a metric-vs-human scatter plot: the group averages first."""
    present = [c for c in [*AVERAGES, *metric_cols] if c in segments]
    return averages_first(present)[:max_scatter]


def _agreement(frame: pd.DataFrame, metric: str, aspect: str) -> str:
    """``r``, ``τ`` and ``n`` of the finite pairs, for the title of a scatter plot."""
    from scipy import stats

    x, y = frame[metric].to_numpy(dtype=float), frame[aspect].to_numpy(dtype=float)
    keep = np.isfinite(x) & np.isfinite(y)
    n = int(keep.sum())
    if n < 2 or np.ptp(x[keep]) == 0 or np.ptp(y[keep]) == 0:
        return f"n = {n}"
    r = float(stats.pearsonr(x[keep], y[keep])[0])
    tau = float(stats.kendalltau(x[keep], y[keep])[0])
    return f"r = {r:+.3f}   τ = {tau:+.3f}   n = {n}"


def scatter_figure(
    segments: pd.DataFrame,
    systems: pd.DataFrame,
    metric: str,
    aspect: str,
    style: FigureStyle | None = None,
) -> Figure:
    """The segments coloured by system beside the systems' means; r, τ and n in each title."""
    style = style or FigureStyle()
    fig = new_figure((10, 4.2))
    human = aspect.removeprefix("human_")
    fig.suptitle(f"{style.label(metric)} vs human {human}", fontsize=10)
    seg_ax, sys_ax = fig.subplots(1, 2)
    fig.subplots_adjust(wspace=0.25)
    # markers of a line per system: Agg stamps one marker, a scatter draws each point as a path
    codes, names = pd.factorize(segments["system"], sort=False)
    x, y = segments[metric].to_numpy(), segments[aspect].to_numpy()
    for code, name in enumerate(names):
        at = codes == code
        seg_ax.plot(x[at], y[at], ls="", marker="o", ms=3.2, mew=0, alpha=0.6, label=str(name))
    for ax in (seg_ax, sys_ax):
        ax.ticklabel_format(axis="y", style="plain", useOffset=False)  # no offset, no 1e3
    seg_ax.set(xlabel=style.label(metric), ylabel=f"human {human}")
    # the agreement in the title: a box inside the axes would hide points
    set_title(seg_ax, f"segments: {_agreement(segments, metric, aspect)}", fontsize=9)
    if len(names) <= LEGEND_MAX_SYSTEMS:
        seg_ax.legend(
            fontsize=7, markerscale=1.5, title="system", title_fontsize=7, loc="lower right"
        )
    if metric in systems and aspect in systems:
        sys_ax.scatter(systems[metric], systems[aspect], s=40)
        for name, row in systems.iterrows():
            point = (row[metric], row[aspect])
            sys_ax.annotate(str(name), point, fontsize=7, xytext=(3, 3), textcoords="offset points")
        set_title(sys_ax, f"systems: {_agreement(systems, metric, aspect)}", fontsize=9)
    sys_ax.set(xlabel=f"{style.label(metric)} (corpus level)", ylabel=f"mean human {human}")
    if style.marked([metric]):
        marks_note(fig)
    return fig


def metric_vs_human(
    segments: pd.DataFrame,
    systems: pd.DataFrame,
    metric: str,
    aspect: str,
    path: Path,
    style: FigureStyle | None = None,
) -> bool:
    save_figure(scatter_figure(segments, systems, metric, aspect, style), path)
    return True


def _headers(sub: pd.DataFrame, columns: pd.Index) -> list[str]:
    """Each column's aspect and level, and its ``n`` where every cell of it has the same."""
    headers = []
    for aspect, level in columns:
        head = f"{str(aspect).removeprefix('human_')}\n{level}"
        ns = set(sub.loc[(sub["aspect"] == aspect) & (sub["level"] == level), "n"].dropna())
        if len(ns) == 1:
            head += f"\nn = {int(ns.pop())}"
        headers.append(head)
    return headers


def correlation_heatmap(
    corr: pd.DataFrame, path: Path, coefficient: str | None = None, style: FigureStyle | None = None
) -> bool:
    """Metrics x (aspect, level) for ``coefficient`` (default: the first); False if nothing."""
    if corr.empty:
        return False
    style = style or FigureStyle()
    coefficient = coefficient or str(corr["coefficient"].iloc[0])
    sub = corr[corr["coefficient"] == coefficient]
    table = sub.pivot_table(
        index="metric", columns=["aspect", "level"], values="value", aggfunc="first", sort=False
    )
    if table.empty:
        return False
    rows = [style.label(str(m)) for m in table.index]
    data = table.to_numpy(dtype=float)
    n_rows, n_cols = data.shape
    label_in = 0.5 + 0.075 * max((len(r) for r in rows), default=4)
    width = label_in + COLUMN_IN * n_cols + RIGHT_IN
    height = TOP_IN + HEATMAP_ROW_IN * n_rows + BOTTOM_IN
    fig = new_figure((width, height))
    left, right = label_in / width, 1 - RIGHT_IN / width
    bottom, top = BOTTOM_IN / height, 1 - TOP_IN / height
    ax = fig.add_axes((left, bottom, right - left, top - bottom))
    norm = Normalize(-1, 1)
    ax.imshow(np.ma.masked_invalid(data), cmap=CMAP, norm=norm, aspect="auto")
    ax.hlines(np.arange(n_rows - 1) + 0.5, -0.5, n_cols - 0.5, colors="white", lw=2)
    ax.set_xticks(range(n_cols), _headers(sub, table.columns), fontsize=8)
    ax.set_yticks(range(n_rows), rows, fontsize=8)
    ax.tick_params(length=0)
    ax.spines[:].set_visible(False)
    for (i, j), v in np.ndenumerate(data):
        if np.isfinite(v):
            color = "white" if abs(v) > 0.6 else "black"
            ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7, color=color)
    name = COEFFICIENT_NAMES.get(coefficient, coefficient)
    ax.set_title(f"{name}: metric vs human ratings", fontsize=10)
    span = top - bottom
    cax = fig.add_axes((right + 0.15 / width, bottom + 0.1 * span, 0.18 / width, 0.8 * span))
    bar = fig.colorbar(ScalarMappable(norm, cmap=CMAP), cax=cax)
    bar.set_label(name, fontsize=8)
    bar.ax.tick_params(labelsize=8)
    if style.marked(str(m) for m in table.index):
        marks_note(fig)
    save_figure(fig, path)
    return True


def plot_alpha_curve(result: AlphaCurve, path: Path) -> bool:
    """Dev solid, test dashed, dev's α a dot on test, the configured α dotted; False if no curve."""
    curve, choice = result.curve, result.choice
    levels = list(dict.fromkeys(curve["level"]))
    if not levels:
        return False
    configured = choice["configured_alpha"].iloc[0] if len(choice) else None
    width = ALPHA_PANEL_IN[0] * len(levels)
    fig = new_figure((width, ALPHA_PANEL_IN[1]))
    axes = fig.subplots(1, len(levels), squeeze=False)[0]
    # fixed margins: the panels are all alike
    fig.subplots_adjust(left=0.6 / width, right=0.98, bottom=0.15, top=0.9, wspace=0.3)
    colors = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, level in zip(axes, levels, strict=True):
        sub = curve[curve.level == level]
        for k, aspect in enumerate(dict.fromkeys(sub["aspect"])):
            color = colors[k % len(colors)]
            for split, line_style in (("dev", "-"), ("test", "--")):
                line = sub[(sub.aspect == aspect) & (sub.split == split)]
                label = f"{aspect.removeprefix('human_')} ({split})"
                ax.plot(line["alpha"], line["value"], line_style, color=color, label=label)
            pick = choice[(choice.level == level) & (choice.aspect == aspect)]
            if len(pick) and np.isfinite(pick["chosen_alpha"].iloc[0]):
                chosen = pick.iloc[0]
                ax.plot([chosen["chosen_alpha"]], [chosen["test"]], "o", color=color, markersize=6)
        if configured is not None:
            ax.axvline(float(configured), color="0.6", linestyle=":", linewidth=1)
        ax.ticklabel_format(axis="y", style="plain", useOffset=False)
        set_title(ax, f"iBLEU vs humans, {level} level")
        ax.set_xlabel("α (dot: chosen on dev, shown on test)")
        ax.set_ylabel(sub["coefficient"].iloc[0] if len(sub) else "")
        ax.legend(fontsize=7)
    save_figure(fig, path)
    return True
