"""Figures of independent panels on a grid (one per metric, say) under a header, redrawn panel by
panel.

The jobs of an α sweep draw the same grid again and again with most panels unchanged: only the
columns that depend on α move. Building and drawing a matplotlib axes costs tens of milliseconds
whatever it shows, so a figure of thirty panels costs seconds per job. Here a process keeps the
pixels of the last such figure it drew, with each panel's content digest and the box its ink
fills; the next figure of the same frame (size, grid, spacing) draws only the panels whose
content changed, alone on an empty figure of the same frame, and copies their boxes into the kept
pixels.

That is exact, not an approximation: Agg paints each artist onto the pixels under it, so where
no two panels' ink meets, a panel drawn alone leaves the same pixels as drawn among the others.
The boxes are measured (every artist of the axes, and a few pixels more for antialiasing) and
checked: the panels' boxes and the header's may not meet, and the ink of a drawing lies inside
its boxes. Any failed check draws the whole figure, as does every format but PNG.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from paraeval.memo import Memo
from paraeval.pipeline.report import figure_files

# pixels added around each measured box: antialiased edges of glyphs and lines reach past the
# extents matplotlib reports by a pixel or two
SLACK = 2

Box = tuple[int, int, int, int]  # top, bottom, left, right: rows and columns, half-open
# where a part's ink lies: one box for a panel; one per text, legend and axes for the header,
# whose pieces (a title above, a colour bar aside) may flank the panels
Ink = tuple[Box, ...]


@dataclass(frozen=True)
class PanelGrid:
    """The frame of a panel figure: its size in inches, the grid, ``subplots_adjust``'s spacing."""

    size: tuple[float, float]
    rows: int
    cols: int
    spacing: tuple[tuple[str, float], ...] = ()

    def figure(self, dpi: int) -> Any:
        plt = figure_files._plt()
        fig = plt.figure(figsize=self.size, dpi=dpi)
        fig.subplots_adjust(**dict(self.spacing))
        return fig


@dataclass(frozen=True)
class Panel:
    """``draw(ax)`` draws the panel; ``inputs`` is everything it depends on (its digest tells
    whether the panel changed)."""

    draw: Callable[[Any], None]
    inputs: tuple[Any, ...]


@dataclass
class _Canvas:
    pixels: np.ndarray  # the whole figure with its margin (figure_files.margin_pixels)
    keys: list[str]  # the panels' digests, then the header's
    boxes: list[Ink]  # where each one's ink lies
    # the Agg renderer of the last drawing and its size key, lent to the next drawing of this
    # frame: a new renderer of a tall figure maps its buffer afresh (a fifth of a gigabyte for
    # ParaBank-Eval's ranking, 70 ms of page faults a job), a kept one is only cleared
    renderer: Any = None
    renderer_key: Any = None


def _lend_renderer(fig: Any, canvas: _Canvas) -> None:
    """Gives ``fig``'s Agg canvas the kept renderer; matplotlib uses it where the drawing's
    size and dpi are those it was made for (its own reuse test), else makes a new one."""
    if canvas.renderer is not None and hasattr(fig.canvas, "_lastKey"):
        fig.canvas.renderer = canvas.renderer
        fig.canvas._lastKey = canvas.renderer_key


def _keep_renderer(fig: Any, canvas: _Canvas) -> None:
    canvas.renderer = getattr(fig.canvas, "renderer", None)
    canvas.renderer_key = getattr(fig.canvas, "_lastKey", None)


@dataclass
class _Frames:
    canvases: Memo[str, _Canvas] = field(
        default_factory=lambda: Memo(
            "panels.canvases", max_entries=4, max_bytes=256 << 20, size=lambda c: c.pixels.nbytes
        )
    )


_FRAMES = _Frames()


def _draw(
    fig: Any, grid: PanelGrid, panels: Sequence[Panel], header: Panel, which: Sequence[int]
) -> dict[int, Any]:
    """Draws the panels numbered in ``which`` (``len(panels)``: the header) onto ``fig``;
    returns their axes (the header: the figure)."""
    spec = fig.add_gridspec(grid.rows, grid.cols)
    drawn: dict[int, Any] = {}
    for i in which:
        if i == len(panels):
            header.draw(fig)
            drawn[i] = fig
        else:
            ax = fig.add_subplot(spec[i // grid.cols, i % grid.cols])
            panels[i].draw(ax)
            drawn[i] = ax
    return drawn


def _boxes(fig: Any, drawn: dict[int, Any], shape: tuple[int, ...], dpi: int) -> dict[int, Ink]:
    """Each drawn part's ink boxes in the pixels of ``figure_files.margin_pixels`` (measured with
    its renderer): an axes with all its artists and labels; the header as the figure's own
    texts, legends and the axes it adds (a colour bar), a box each."""
    renderer = fig.canvas.renderer
    margin = figure_files.MARGIN_INCHES * dpi
    height, width = shape[0], shape[1]
    panel_axes = [part for part in drawn.values() if part is not fig]
    boxes: dict[int, Ink] = {}
    for i, part in drawn.items():
        if part is fig:
            extents = [a.get_window_extent(renderer) for a in [*fig.texts, *fig.legends]]
            extents += [
                a.get_tightbbox(renderer) for a in fig.axes if all(a is not p for p in panel_axes)
            ]
        else:
            extents = [part.get_tightbbox(renderer)]
        boxes[i] = tuple(
            (
                max(int(np.floor(height - (e.y1 + margin))) - SLACK, 0),
                min(int(np.ceil(height - (e.y0 + margin))) + SLACK, height),
                max(int(np.floor(e.x0 + margin)) - SLACK, 0),
                min(int(np.ceil(e.x1 + margin)) + SLACK, width),
            )
            for e in extents
            if e is not None and e.width > 0 and e.height > 0
        )
    return boxes


def _meet(a: Box, b: Box) -> bool:
    return a[0] < b[1] and b[0] < a[1] and a[2] < b[3] and b[2] < a[3]


def _ink_outside(rgba: np.ndarray, boxes: Sequence[Box]) -> bool:
    from paraeval.pipeline.report.pixel_scan import ink_outside

    flat = rgba.view(np.uint32)[..., 0]
    table = np.array(boxes, dtype=np.int64).reshape(-1, 4)
    return bool(ink_outside(flat, flat[0, 0], table))


def _apart(a: Ink, b: Ink) -> bool:
    return not any(_meet(x, y) for x in a for y in b)


def _separate(parts: Sequence[Ink]) -> bool:
    return all(_apart(a, b) for k, a in enumerate(parts) for b in parts[k + 1 :])


def _update(
    canvas: _Canvas,
    grid: PanelGrid,
    panels: Sequence[Panel],
    header: Panel,
    keys: list[str],
    dpi: int,
) -> np.ndarray | None:
    """The kept pixels with the changed parts redrawn; None where that cannot be done exactly."""
    changed = [i for i, (old, new) in enumerate(zip(canvas.keys, keys, strict=True)) if old != new]
    if not changed:
        return canvas.pixels
    fig = grid.figure(dpi)
    _lend_renderer(fig, canvas)
    try:
        drawn = _draw(fig, grid, panels, header, changed)
        fresh = figure_files.margin_pixels(fig, dpi)
        _keep_renderer(fig, canvas)
        if fresh is None or fresh.shape != canvas.pixels.shape:
            return None
        new_boxes = _boxes(fig, drawn, fresh.shape, dpi)
    finally:
        figure_files._plt().close(fig)
    if _ink_outside(fresh, [b for ink in new_boxes.values() for b in ink]):
        return None
    boxes = list(canvas.boxes)
    for i in changed:
        boxes[i] = new_boxes.get(i, ())
    if not _separate(boxes):
        return None
    # the old ink of a changed part goes too: its old and new boxes are replaced, and neither
    # may hold any of an unchanged part's ink
    regions = tuple(b for i in changed for b in (*canvas.boxes[i], *boxes[i]))
    still = tuple(b for i, ink in enumerate(boxes) if i not in changed for b in ink)
    if not _apart(regions, still):
        return None
    # the kept pixels are updated in place: a copy of a large figure's costs more than drawing
    # a panel
    for top, bottom, left, right in regions:
        canvas.pixels[top:bottom, left:right] = fresh[top:bottom, left:right]
    canvas.keys, canvas.boxes = keys, boxes
    return canvas.pixels


def save_panels(
    path: Path,
    grid: PanelGrid,
    panels: Sequence[Panel],
    header: Panel,
    dpi: int = figure_files.PNG_DPI,
) -> None:
    """The figure of ``panels`` on ``grid`` under ``header`` to ``path`` (as ``save_figure``
    writes it). A PNG of a frame this process drew before redraws only the changed panels."""
    png = path.suffix == ".png"
    frame = figure_files.content_key(figure_files._code_digest(), grid, dpi, len(panels))
    keys = [figure_files.content_key(p.inputs) for p in [*panels, header]]
    if png:
        canvas = _FRAMES.canvases.get(frame)
        pixels = None if canvas is None else _update(canvas, grid, panels, header, keys, dpi)
        if pixels is not None and figure_files.write_pixels(pixels, path, dpi):
            return
        _FRAMES.canvases.discard(frame)
    fig = grid.figure(dpi)
    try:
        drawn = _draw(fig, grid, panels, header, range(len(panels) + 1))
        pixels = figure_files.margin_pixels(fig, dpi) if png else None
        # measuring every panel costs a tenth of the drawing, in a helper beside the run's
        # own work: a sweep's second job then redraws its changed panels only
        if pixels is not None:
            boxes = _boxes(fig, drawn, pixels.shape, dpi)
            listed = [boxes.get(i, ()) for i in range(len(panels) + 1)]
            if _separate(listed) and not _ink_outside(pixels, [b for ink in listed for b in ink]):
                kept = _Canvas(pixels.copy(), keys, listed)
                _keep_renderer(fig, kept)
                _FRAMES.canvases.put(frame, kept)
        figure_files.save_drawn(fig, path, pixels, dpi)
    finally:
        figure_files._plt().close(fig)
