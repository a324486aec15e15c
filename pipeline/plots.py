"""Plots written to ``plots/`` in the output directory (matplotlib, no display needed)."""

from __future__ import annotations

import functools
import hashlib
import logging
import struct
import warnings
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from paraeval.memo import Memo
from paraeval.pipeline.names import slug

log = logging.getLogger(__name__)


def _plt():  # type: ignore[no-untyped-def]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


FORMATS = ("png", "pdf", "svg")
PNG_DPI = 200
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


PAD_INCHES = 0.08
# room drawn around a PNG figure's own area, so that labels reaching past its edge are kept
MARGIN_INCHES = 1.0


def save_figure(fig: Any, path: Path, dpi: int = PNG_DPI) -> None:
    """The figure in the format of ``path``'s suffix, cropped to its contents (no label is cut
    off), through a temporary file and a rename, so a crash never leaves a truncated file under
    the final name. A PNG is drawn once with a margin and cut to its inked pixels plus the
    padding: ``bbox_inches="tight"`` draws twice (once to measure every artist, once to render),
    and the background colour tells where the contents end just as well."""
    png = (path.suffix.lstrip(".") or "png") == "png"
    save_drawn(fig, path, margin_pixels(fig, dpi) if png else None, dpi)


def save_drawn(fig: Any, path: Path, drawn: np.ndarray | None, dpi: int = PNG_DPI) -> None:
    """``save_figure`` for a figure already drawn with its margin (``margin_pixels``, None where
    it could not be): those pixels are cut and written; where they cannot tell the contents'
    extent (ink reaching the margin's edge), or there are none, matplotlib measures and draws."""
    from paraeval.pipeline.files import atomic_write

    if drawn is not None and write_pixels(drawn, path, dpi):
        return
    fmt = path.suffix.lstrip(".") or "png"
    atomic_write(
        path,
        lambda p: fig.savefig(p, dpi=dpi, format=fmt, bbox_inches="tight", pad_inches=PAD_INCHES),
    )


def write_pixels(drawn: np.ndarray, path: Path, dpi: int = PNG_DPI) -> bool:
    """``drawn`` (``margin_pixels``) cut to its contents and written as a PNG; False, writing
    nothing, where the cut cannot be told."""
    from paraeval.pipeline.files import atomic_write

    cropped = crop_pixels(drawn, dpi)
    if cropped is None:
        return False
    atomic_write(path, lambda p: _write_png(cropped, p, dpi))
    return True


def margin_pixels(fig: Any, dpi: int) -> np.ndarray | None:
    """RGBA pixels of the figure drawn at ``dpi`` with ``MARGIN_INCHES`` around it on every side
    (display point ``(x, y)`` lands at column ``x + MARGIN_INCHES * dpi`` from the left and row
    ``y + MARGIN_INCHES * dpi`` from the bottom); None for a background that is not opaque or
    artists beyond the margin. The pixels are the drawing's own buffer, not a copy: the figure
    keeps its renderer (``fig.canvas.renderer``) for measuring, and is not drawn again."""
    from matplotlib.colors import to_rgba

    if to_rgba(fig.get_facecolor())[3] != 1.0:
        return None
    return drawn_with_margin(fig, dpi)


def drawn_with_margin(fig: Any, dpi: int) -> np.ndarray | None:
    """``margin_pixels`` for any background, transparent included (``layers`` draws an overlay
    on one)."""
    from matplotlib.transforms import Bbox

    if getattr(fig.canvas, "get_renderer", None) is None:
        return None
    # at the drawing's dpi, the renderer it leaves behind measures in the figure's own units
    fig.set_dpi(dpi)
    w, h = fig.get_size_inches()
    box = Bbox.from_extents(-MARGIN_INCHES, -MARGIN_INCHES, w + MARGIN_INCHES, h + MARGIN_INCHES)
    grab = _Grab()
    fig.savefig(grab, format="rgba", dpi=dpi, bbox_inches=box)
    # the drawing's own width: box.width * dpi may fall a hair short of a whole number
    width = int(fig.canvas.renderer.width)
    if grab.data is None or width == 0 or grab.data.nbytes % (4 * width):
        return None
    if not _within_margin(fig, fig.canvas.renderer):
        return None
    return np.frombuffer(grab.data, dtype=np.uint8).reshape(-1, width, 4)


class _Grab:
    """A file for ``savefig(format="rgba")`` that keeps the renderer's buffer it is given
    instead of copying it."""

    data: memoryview | None = None

    def write(self, data: Any) -> int:
        self.data = memoryview(data)
        return self.data.nbytes

    def seek(self, offset: int, whence: int = 0) -> int:  # what tells matplotlib it is a file
        return 0


def ink(rgba: np.ndarray) -> np.ndarray:
    """Where the pixels differ from the background (the colour of the top-left corner, which
    the margin leaves blank)."""
    flat = rgba.view(np.uint32)[..., 0]
    return flat != flat[0, 0]


def crop_pixels(rgba: np.ndarray, dpi: int) -> np.ndarray | None:
    """``rgba`` cut to its inked pixels plus ``PAD_INCHES``; None where the ink reaches the edge
    (something may lie beyond it) or there is none."""
    inked = ink(rgba)
    rows, cols = np.flatnonzero(inked.any(axis=1)), np.flatnonzero(inked.any(axis=0))
    if rows.size == 0:
        return None
    height, width = inked.shape
    if rows[0] == 0 or cols[0] == 0 or rows[-1] == height - 1 or cols[-1] == width - 1:
        return None
    pad = round(PAD_INCHES * dpi)
    top, bottom = max(rows[0] - pad, 0), min(rows[-1] + pad + 1, height)
    left, right = max(cols[0] - pad, 0), min(cols[-1] + pad + 1, width)
    return rgba[top:bottom, left:right]


def _within_margin(fig: Any, renderer: Any) -> bool:
    """Whether the figure's own texts, legends and axes lie within the margin drawn around it:
    what lies wholly beyond it would leave no ink at the margin's edge to tell of it."""
    w, h = fig.get_size_inches()
    reach = MARGIN_INCHES * fig.dpi
    for artist in [*fig.texts, *fig.legends, *fig.axes]:
        if not artist.get_visible():
            continue
        box = artist.get_window_extent(renderer)
        if (
            box.x0 < -reach
            or box.y0 < -reach
            or box.x1 > w * fig.dpi + reach
            or box.y1 > h * fig.dpi + reach
        ):
            return False
    return True


def _write_png(pixels: np.ndarray, path: Path, dpi: int) -> None:
    """A PNG of the pixels: RGB where every pixel is opaque, else RGBA; each row filtered as its
    difference from the row above ("Up") and deflated at level 3. A figure is mostly flat areas
    and horizontal strokes, which that filter turns into long zero runs: a few percent larger
    than a per-row adaptive filter at level 6, at a fifth of the time."""
    import matplotlib

    opaque = bool((pixels[..., 3] == 255).all())
    channels = 3 if opaque else 4
    rows = np.ascontiguousarray(pixels[..., :channels]).reshape(pixels.shape[0], -1)
    # uint8 arithmetic wraps modulo 256, as the filter is defined
    filtered = np.empty((rows.shape[0], rows.shape[1] + 1), dtype=np.uint8)
    filtered[:, 0] = 2  # "Up"
    filtered[:, 1:] = rows
    if rows.shape[0] > 1:
        np.subtract(rows[1:], rows[:-1], out=filtered[1:, 1:])
    filtered[0, 0] = 0  # the first row has no row above it: unfiltered
    ppm = round(dpi / 0.0254)
    software = f"Matplotlib version{matplotlib.__version__}, https://matplotlib.org/"
    chunks = [
        _png_chunk(
            b"IHDR",
            struct.pack(
                ">IIBBBBB", pixels.shape[1], pixels.shape[0], 8, 2 if opaque else 6, 0, 0, 0
            ),
        ),
        _png_chunk(b"pHYs", struct.pack(">IIB", ppm, ppm, 1)),
        _png_chunk(b"tEXt", b"Software\0" + software.encode("latin-1")),
        _png_chunk(b"IDAT", zlib.compress(filtered, 3)),
        _png_chunk(b"IEND", b""),
    ]
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        f.writelines(chunks)


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


# Figure files this process has drawn, by a digest of the drawing function, the plotting code,
# the format and the plotted data. A Hydra multirun runs its jobs in one process, and most figures
# of an α sweep's jobs show data that did not change: those are written again, not drawn again.
_FILES: Memo[str, bytes] = Memo("plots.files", max_entries=128)
_CODE: str | None = None


def _code_digest() -> str:
    global _CODE
    if _CODE is None:
        import matplotlib

        h = hashlib.blake2b(matplotlib.__version__.encode(), digest_size=16)
        for name in ("plots.py", "panels.py", "layers.py", "compare_plots.py", "sweep.py"):
            h.update((Path(__file__).parent / name).read_bytes())
        _CODE = h.hexdigest()
    return _CODE


def _feed(h: Any, part: Any) -> None:
    if isinstance(part, pd.DataFrame | pd.Series):
        frame = part.to_frame() if isinstance(part, pd.Series) else part
        h.update(repr([list(map(str, frame.columns)), list(map(str, frame.dtypes))]).encode())
        h.update(pd.util.hash_pandas_object(frame, index=True).to_numpy().tobytes())
    elif isinstance(part, np.ndarray):
        h.update(repr((part.shape, part.dtype.str)).encode() + part.tobytes())
    elif isinstance(part, list | tuple):
        h.update(b"[")
        for p in part:
            _feed(h, p)
        h.update(b"]")
    else:
        h.update(repr(part).encode())
    h.update(b"\x1f")


def render(path: Path, kind: str, draw: Callable[[Path], object], *inputs: Any) -> None:
    """``draw(path)``, unless this process already drew a ``kind`` figure from the same
    ``inputs`` (everything the figure depends on): then those bytes are written."""
    h = hashlib.blake2b(digest_size=32)
    h.update(f"{_code_digest()}|{kind}|{path.suffix}".encode())
    for part in inputs:
        _feed(h, part)
    key = h.hexdigest()
    drawn = _FILES.get(key)
    if drawn is not None:
        from paraeval.pipeline.files import atomic_write

        atomic_write(path, lambda p: p.write_bytes(drawn))
        return
    draw(path)
    if not path.exists():  # nothing to draw
        return
    _FILES.put(key, path.read_bytes())


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
