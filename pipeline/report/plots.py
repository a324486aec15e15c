"""What every figure of ``plots/`` shares: formats, direction marks, style, making and saving."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from paraeval.pipeline.files import atomic_write

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


log = logging.getLogger(__name__)

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

    def direction(self, column: str, higher_is_better: bool = True) -> str:
        if column in self.source:
            return "similarity to the source: lower = more diverse"
        lower = column in self.lower or not higher_is_better
        return "lower is better" if lower else "higher is better"

    def marked(self, columns: Iterable[str]) -> bool:
        return any(c in self.lower or c in self.source for c in columns)

    def path(self, folder: Path, stem: str) -> Path:
        return folder / f"{stem}.{self.fmt}"


def averages_first(columns: Iterable[str]) -> list[str]:
    """The distinct columns in their order, the group averages first."""
    names = list(dict.fromkeys(columns))
    return [c for c in AVERAGES if c in names] + [c for c in names if c not in AVERAGES]


def new_figure(size: tuple[float, float], **kwargs: Any) -> Figure:
    """A figure outside pyplot (no global state) on an Agg canvas, which can measure text."""
    # imported here: drawing nothing costs no matplotlib import
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=size, **kwargs)
    FigureCanvasAgg(fig)
    return fig


def save_figure(fig: Figure, path: Path, dpi: int = PNG_DPI) -> None:
    """The figure in the format of ``path``'s suffix, cropped to its contents, written
    atomically (a crash never leaves a truncated file under the final name)."""
    fmt = path.suffix.lstrip(".") or "png"
    # deflate level 3, not Pillow's 6: much faster to encode, for a somewhat larger file
    extra: dict[str, Any] = {"pil_kwargs": {"compress_level": PNG_COMPRESS_LEVEL}}
    extra = extra if fmt == "png" else {}
    # the crop measured here, at the saving resolution, and given as a box: with "tight"
    # savefig would draw the whole figure once more to measure it
    fig.set_dpi(dpi)
    engine = fig.get_layout_engine()
    if engine is not None:
        # a layout engine places the axes when the figure is drawn: measured before that, the
        # box would be the unplaced axes' and cut off titles and labels
        engine.execute(fig)
    box = fig.get_tightbbox(fig.canvas.get_renderer()).padded(PAD_INCHES)  # type: ignore[attr-defined]
    atomic_write(path, lambda p: fig.savefig(p, format=fmt, dpi=dpi, bbox_inches=box, **extra))


def plain_y(ax: Axes) -> None:
    """Y tick labels written out, never as an offset or a power of ten above the axis."""
    ax.ticklabel_format(axis="y", style="plain", useOffset=False)


def set_title(ax: Axes, text: str, **kwargs: Any) -> None:
    """``ax.set_title`` at ``y=1.0``, where it goes when nothing of the axes lies above it:
    matplotlib then skips measuring the axis, which is slow."""
    ax.set_title(text, y=1.0, **kwargs)


def marks_note(fig: Figure) -> None:
    """The note that explains the direction marks, under the figure's lower left corner."""
    fig.text(0.01, 0.0, MARKS_NOTE, fontsize=7, ha="left", va="top")


def drawn(path: Path, draw: Callable[[Path], bool]) -> bool:
    """``draw(path)`` (whether it drew anything); a figure that fails is only a warning."""
    try:
        return draw(path)
    except Exception as exc:  # a figure must never cost the numbers
        log.warning("plotting failed for %s (%s); the tables are written", path.name, exc)
        return False
