"""Figures drawn as a base that stays and a thin overlay that moves.

An α sweep's α curve is the same figure in every job but for one line, the configured α. Drawing
the figure costs a third of a second; the line alone, milliseconds. Here a process keeps the
pixels of the base it drew last (every artist but the overlay) and where its axes lie; a figure
on the same base draws only its overlay, on a transparent figure of the same frame (size, axes
positions, limits and scales), and lays it over the kept pixels.

A PNG is always made that way, the first drawing of a base too, so a file's pixels never depend
on what the process drew before: the overlay lies on top of everything in the base, its pixels
blended over the base's by their coverage (within two levels of 255 of what Agg gives the same
artists drawn on the base directly). Other formats draw the base and the overlay as one figure,
the overlay on top.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from paraeval.memo import Memo
from paraeval.pipeline.report import figure_files

# above every artist of the base (a legend is drawn at 5)
OVERLAY_ZORDER = 10

# where an axes lies and what its data limits are: (left, bottom, width, height), xlim, ylim,
# x scale, y scale
AxesFrame = tuple[
    tuple[float, float, float, float], tuple[float, float], tuple[float, float], str, str
]


@dataclass(frozen=True)
class _Base:
    pixels: np.ndarray  # the base drawn with its margin (figure_files.margin_pixels)
    size: tuple[float, float]  # inches
    axes: tuple[AxesFrame, ...]


_BASES: Memo[str, _Base] = Memo(
    "layers.bases", max_entries=4, max_bytes=128 << 20, size=lambda b: b.pixels.nbytes
)


def _frame(fig: Any) -> tuple[tuple[float, float], tuple[AxesFrame, ...]]:
    w, h = fig.get_size_inches()
    axes = tuple(
        (
            tuple(float(v) for v in ax.get_position().bounds),
            tuple(float(v) for v in ax.get_xlim()),
            tuple(float(v) for v in ax.get_ylim()),
            str(ax.get_xscale()),
            str(ax.get_yscale()),
        )
        for ax in fig.axes
    )
    return (float(w), float(h)), axes  # type: ignore[return-value]


def _overlay_pixels(
    base: _Base, overlay: Callable[[Sequence[Any]], None], dpi: int
) -> np.ndarray | None:
    """The overlay alone, drawn on a transparent figure of the base's frame."""
    plt = figure_files._plt()
    fig = plt.figure(figsize=base.size, dpi=dpi)
    try:
        fig.patch.set_alpha(0.0)
        axes = []
        for bounds, xlim, ylim, xscale, yscale in base.axes:
            ax = fig.add_axes(bounds)
            ax.set_xscale(xscale)
            ax.set_yscale(yscale)
            ax.set_xlim(xlim)
            ax.set_ylim(ylim)
            ax.set_axis_off()
            axes.append(ax)
        overlay(axes)
        return figure_files.drawn_with_margin(fig, dpi)
    finally:
        plt.close(fig)


def lay_over(base: np.ndarray, top: np.ndarray) -> np.ndarray:
    """``top`` (RGBA, straight alpha, as Agg leaves it) blended over the opaque ``base``."""
    out = base.copy()
    # only the pixels the overlay covers (a thin line's, a label's): where its alpha is 0 the
    # blend gives the base's own value back
    hit = np.flatnonzero(np.ascontiguousarray(top[..., 3]).reshape(-1))
    if hit.size == 0:
        return out
    flat = out.reshape(-1, 4)
    over_px = np.ascontiguousarray(top).reshape(-1, 4)[hit]
    a = over_px[:, 3:].astype(np.uint32)
    over = over_px[:, :3].astype(np.uint32)
    under = flat[hit, :3].astype(np.uint32)
    flat[hit, :3] = ((over * a + under * (255 - a) + 127) // 255).astype(np.uint8)
    return out


def _whole(
    path: Path, base: Callable[[], Any], overlay: Callable[[Sequence[Any]], None], dpi: int
) -> None:
    fig = base()
    try:
        overlay(list(fig.axes))
        figure_files.save_figure(fig, path, dpi)
    finally:
        figure_files._plt().close(fig)


def save_layered(
    path: Path,
    kind: str,
    base: Callable[[], Any],
    base_inputs: tuple[Any, ...],
    overlay: Callable[[Sequence[Any]], None],
    dpi: int = figure_files.PNG_DPI,
) -> None:
    """The figure ``base()`` returns with ``overlay(axes)`` drawn on top of it (into the base's
    axes, in their order) to ``path``, as ``save_figure`` writes it. ``base_inputs`` is
    everything the base depends on: a PNG on a base this process drew before draws only the
    overlay. ``overlay`` should give its artists ``zorder=OVERLAY_ZORDER``, which places them
    on top where the figure is drawn whole."""
    if path.suffix != ".png":
        _whole(path, base, overlay, dpi)
        return
    key = figure_files.content_key(figure_files._code_digest(), kind, dpi, base_inputs)
    kept = _BASES.get(key)
    if kept is None:
        fig = base()
        try:
            pixels = figure_files.margin_pixels(fig, dpi)
            if pixels is None:  # no kept base without its pixels: this figure is drawn whole
                overlay(list(fig.axes))
                figure_files.save_figure(fig, path, dpi)
                return
            kept = _BASES.put(key, _Base(pixels.copy(), *_frame(fig)))
        finally:
            figure_files._plt().close(fig)
    top = _overlay_pixels(kept, overlay, dpi)
    if top is None or top.shape != kept.pixels.shape:
        _whole(path, base, overlay, dpi)
        return
    if not figure_files.write_pixels(lay_over(kept.pixels, top), path, dpi):
        _whole(path, base, overlay, dpi)
