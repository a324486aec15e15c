"""PNG figures are drawn once and cut to their contents: the same crop as matplotlib's
``bbox_inches="tight"`` (labels past the figure's edge kept), and the measured path where the
background cannot tell where the contents end. Figure jobs go to two helper processes."""

from __future__ import annotations

import functools
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

import paraeval.pipeline.report.figure_files as figure_files
import paraeval.pipeline.report.figures as figures
import paraeval.pipeline.report.plots as plots
from paraeval.pipeline.stages.evaluation import (
    _draw_alpha_curve,
    _draw_compare,
    _draw_heatmap,
    _draw_scatters,
)


def _figure(note_y: float | None = None, transparent: bool = False) -> Any:
    plt = figure_files._plt()
    fig, axes = plt.subplots(2, 2, figsize=(6, 4))
    for k, ax in enumerate(axes.flat):
        ax.plot(np.arange(10), np.arange(10) ** (1 + k / 4))
        ax.set_yticks([0, 20, 40], ["a long system name", "b", "c"], fontsize=7)
        ax.set_title(f"panel {k}\n(higher is better)", fontsize=8)
    if note_y is not None:
        fig.text(0.01, note_y, "a note that hangs below the figure", fontsize=7, va="top")
    if transparent:
        fig.patch.set_alpha(0.0)
    return fig


def _tight(fig: Any, path: Path) -> Image.Image:
    fig.savefig(
        path, dpi=figure_files.PNG_DPI, bbox_inches="tight", pad_inches=figure_files.PAD_INCHES
    )
    return Image.open(path)


def _ink_box(image: Image.Image) -> tuple[int, int]:
    """Width and height of the non-white pixels."""
    rgba = np.asarray(image.convert("RGBA"))
    ink = (rgba[..., :3] < 250).any(axis=2)
    rows, cols = np.flatnonzero(ink.any(axis=1)), np.flatnonzero(ink.any(axis=0))
    return int(cols[-1] - cols[0] + 1), int(rows[-1] - rows[0] + 1)


def _save_counting(fig: Any, path: Path) -> list[object]:
    """``save_figure(fig, path)``; returns the ``bbox_inches`` of each ``savefig`` it made."""
    calls: list[object] = []
    real = fig.savefig

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs.get("bbox_inches"))
        return real(*args, **kwargs)

    fig.savefig = counting
    try:
        figure_files.save_figure(fig, path)
    finally:
        fig.savefig = real
    return calls


@pytest.mark.parametrize("note_y", [None, 0.0, -0.1])
def test_png_is_cut_like_matplotlibs_tight_crop(tmp_path: Path, note_y: float | None) -> None:
    fig = _figure(note_y)
    ours = tmp_path / "ours.png"
    calls = _save_counting(fig, ours)
    assert len(calls) == 1 and calls[0] != "tight"  # one drawing, no measuring pass
    reference = _tight(fig, tmp_path / "tight.png")
    mine = Image.open(ours)
    assert mine.info.get("dpi") is not None and round(mine.info["dpi"][0]) == figure_files.PNG_DPI
    # the same contents: the inked area agrees to a pixel or two (antialiasing at the edges)
    assert np.allclose(_ink_box(mine), _ink_box(reference), atol=3)
    # and the same padding around them, within a few pixels
    assert np.allclose(mine.size, reference.size, atol=2 * round(figure_files.PAD_INCHES * 200))
    if note_y is not None:  # the note below the figure's edge is in the file
        plain = tmp_path / "plain.png"
        figure_files.save_figure(_figure(None), plain)
        assert mine.size[1] > Image.open(plain).size[1] + 10


@pytest.mark.parametrize(
    ("note_y", "transparent"), [(-1.0, False), (None, True)], ids=["far-outside", "transparent"]
)
def test_png_falls_back_to_the_measured_crop(
    tmp_path: Path, note_y: float | None, transparent: bool
) -> None:
    fig = _figure(note_y, transparent)
    ours = tmp_path / "ours.png"
    calls = _save_counting(fig, ours)
    assert calls[-1] == "tight"  # the contents reach past the margin, or nothing tells them
    reference = _tight(fig, tmp_path / "tight.png")
    assert Image.open(ours).size == reference.size


def test_figure_jobs_go_to_their_lanes(tmp_path: Path) -> None:
    assert figures.lane_of(functools.partial(_draw_compare, None)) == 1 % figures.lanes()
    assert figures.lane_of(functools.partial(_draw_heatmap, None)) == 0
    assert figures.lane_of(functools.partial(_draw_scatters, None)) == 0
    # a job's own lane (the scatter plots of the second rating) comes before its function's
    second = functools.partial(_draw_scatters, None)
    second.lane = 1  # type: ignore[attr-defined]
    assert figures.lane_of(second) == 1 % figures.lanes()
    assert figures.lane_of(_draw_alpha_curve) is None  # the least busy lane


def test_a_job_for_any_lane_goes_to_the_least_busy(monkeypatch: pytest.MonkeyPatch) -> None:
    from concurrent.futures import Future

    monkeypatch.setattr(figures, "lanes", lambda: 2)
    drawn = figures.Figures(background=True)
    done: Future[list[str]] = Future()
    done.set_result([])
    pending: Future[list[str]] = Future()
    drawn._pending = [(0, pending), (1, pending), (1, pending)]
    assert drawn._least_busy() == 0  # one pending drawing against two
    drawn._pending = [(0, pending), (1, done), (1, done)]
    assert drawn._least_busy() == 1  # drawings done do not count
    drawn._pending = [(0, done), (1, done)]
    assert drawn._least_busy() == 0
    drawn._pending = []


def _pid(path: Path) -> None:
    import os

    path.write_text(str(os.getpid()))


def _lane1(path: Path) -> None:
    _pid(path)


_lane1.lane = 1  # type: ignore[attr-defined]


def test_two_lanes_are_two_helper_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(figures, "lanes", lambda: 2)
    drawn = figures.Figures(background=True)
    drawn.submit(_pid, tmp_path / "a")
    drawn.submit(_lane1, tmp_path / "b")
    drawn.submit(_pid, tmp_path / "c")
    drawn.wait()
    pids = [int((tmp_path / n).read_text()) for n in "abc"]
    assert pids[0] == pids[2] != pids[1]  # a lane is one process, kept for the next job
    import os

    assert os.getpid() not in pids


@pytest.mark.parametrize("cut", [False, True])  # a whole array, or a crop of a larger one
@pytest.mark.parametrize("opaque", [True, False])
@pytest.mark.parametrize("shape", [(1, 1), (2, 3), (57, 131)])
def test_png_writer_round_trips_through_pillow(
    tmp_path: Path, opaque: bool, shape: tuple[int, int], cut: bool
) -> None:
    """The PNG written by hand reads back in Pillow (which checks every chunk's CRC and the
    deflate stream) as exactly the pixels given, with the dpi and the Software text."""
    rng = np.random.default_rng(sum(shape) + opaque)
    whole = rng.integers(0, 256, size=(shape[0] + 3, shape[1] + 5, 4), dtype=np.uint8)
    whole[: shape[0] // 2, : shape[1] // 2] = 255  # flat areas, as in a figure
    if opaque:
        whole[..., 3] = 255
    pixels = (
        whole[1 : shape[0] + 1, 2 : shape[1] + 2] if cut else whole[: shape[0], : shape[1]].copy()
    )
    path = tmp_path / "x.png"
    figure_files._write_png(pixels, path, dpi=figure_files.PNG_DPI)
    with Image.open(path) as image:
        image.load()
        assert image.mode == ("RGB" if opaque else "RGBA")
        assert round(image.info["dpi"][0]) == round(image.info["dpi"][1]) == figure_files.PNG_DPI
        assert image.info["Software"].startswith("Matplotlib version")
        got = np.asarray(image.convert("RGBA"))
    np.testing.assert_array_equal(got, pixels)


def test_a_given_title_height_is_where_matplotlib_would_put_it() -> None:
    """Titles are placed at ``y=1.0`` (sparing matplotlib's measuring of the axis): that is its
    own placement where no offset or power of ten sits above the y axis, which ``plain_y``
    rules out even for values that would get one."""
    plt = figure_files._plt()
    values = [1000.0011, 1000.0013, 1000.0017]  # an offset ("+1e3") by default
    fig, (auto, given) = plt.subplots(1, 2)
    for ax in (auto, given):
        ax.plot([0, 1, 2], values)
        plots.plain_y(ax)
    auto.set_title("segments: r = +0.5")
    plots.set_title(given, "segments: r = +0.5")
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax in (auto, given):
        assert ax.yaxis.offsetText.get_text() == ""
    assert auto.title.get_position()[1] == given.title.get_position()[1] == 1.0
    a, b = (ax.title.get_window_extent(renderer) for ax in (auto, given))
    assert a.y0 == b.y0 and a.height == b.height
    plt.close(fig)


@pytest.mark.parametrize("size", [(6.2, 3.71), (4.6, 3.6), (10.0, 4.2)])
def test_the_margin_drawing_takes_sizes_that_are_no_whole_pixel_count_in_floats(
    size: tuple[float, float],
) -> None:
    # (6.2 + 2) * 200 is 1639.9999999999998 in floating point: the drawing is 1640 wide
    plt = figure_files._plt()
    fig = plt.figure(figsize=size)
    fig.add_subplot().plot([0, 1], [1, 0])
    pixels = figure_files.margin_pixels(fig, figure_files.PNG_DPI)
    plt.close(fig)
    assert pixels is not None
    margin = 2 * figure_files.MARGIN_INCHES
    want = (round((size[1] + margin) * 200), round((size[0] + margin) * 200), 4)
    assert pixels.shape == want


def test_a_redrawn_png_deflates_only_its_changed_bands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A figure written again with a few rows changed takes its other bands from the last
    writing: the file is byte for byte the one written from scratch, and reads back as its
    pixels."""
    rng = np.random.default_rng(7)
    band = figure_files.BAND_ROWS
    first = np.full((5 * band + 9, 37, 4), 255, dtype=np.uint8)
    first[10:40, 3:30, :3] = rng.integers(0, 256, size=(30, 27, 3), dtype=np.uint8)
    second = first.copy()
    # the last row of the second band, which the third band's first row is filtered against
    second[2 * band - 1, 5:9, :3] = 0
    second[4 * band + 3, 1, 0] = 7
    compressors: list[int] = []
    real = zlib.compressobj

    def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
        # the bands' raw deflate streams only: numba, compiling the band comparison on a cold
        # cache, makes compressors of its own (symbol names)
        if args[2:3] == (-15,):
            compressors.append(1)
        return real(*args, **kwargs)

    figure_files._BANDS.clear()
    figure_files._write_png(first, tmp_path / "a.png", 200, key="fig.png")
    monkeypatch.setattr(zlib, "compressobj", counting)
    figure_files._write_png(second, tmp_path / "b.png", 200, key="fig.png")
    assert len(compressors) == 3  # of six bands
    figure_files._BANDS.clear()
    figure_files._write_png(second, tmp_path / "c.png", 200, key="fig.png")
    assert len(compressors) == 3 + 6
    assert (tmp_path / "b.png").read_bytes() == (tmp_path / "c.png").read_bytes()
    for name, pixels in (("a.png", first), ("b.png", second)):
        with Image.open(tmp_path / name) as image:
            np.testing.assert_array_equal(np.asarray(image.convert("RGBA")), pixels)
    # a kept image of another shape or transparency is not used
    transparent = second.copy()
    transparent[0, 0, 3] = 0
    figure_files._write_png(transparent, tmp_path / "d.png", 200, key="fig.png")
    assert len(compressors) == 3 + 6 + 6
    with Image.open(tmp_path / "d.png") as image:
        np.testing.assert_array_equal(np.asarray(image.convert("RGBA")), transparent)


def test_adler32_of_two_parts_is_that_of_the_whole() -> None:
    rng = np.random.default_rng(3)
    for a, b in [(b"", b"x"), (b"abc", b""), (rng.bytes(100_003), rng.bytes(70_001))]:
        combined = figure_files._adler32_combine(zlib.adler32(a), zlib.adler32(b), len(b))
        assert combined == zlib.adler32(a + b)


def test_redrawn_pngs_equal_fresh_ones_as_transparency_comes_and_goes(tmp_path: Path) -> None:
    """A sequence of images written under one name, each changing some rows and with them
    whether every pixel is opaque: every file is byte for byte the one written from scratch."""
    rng = np.random.default_rng(11)
    band = figure_files.BAND_ROWS
    image = np.full((4 * band + 5, 23, 4), 255, dtype=np.uint8)
    steps = []
    for k in range(6):
        image = image.copy()
        row = int(rng.integers(0, image.shape[0]))
        image[row, 2:9, :3] = rng.integers(0, 256, size=(7, 3), dtype=np.uint8)
        # transparent in steps 2 and 3, in another band each time; opaque again after
        image[:, :, 3] = 255
        if k in (2, 3):
            image[(k - 1) * band + 3, 4, 3] = 17
        steps.append(image)
    figure_files._BANDS.clear()
    for k, pixels in enumerate(steps):
        figure_files._write_png(pixels, tmp_path / f"kept{k}.png", 200, key="seq.png")
    for k, pixels in enumerate(steps):
        figure_files._BANDS.clear()
        figure_files._write_png(pixels, tmp_path / f"fresh{k}.png", 200, key="seq.png")
        kept = (tmp_path / f"kept{k}.png").read_bytes()
        assert kept == (tmp_path / f"fresh{k}.png").read_bytes(), k
        with Image.open(tmp_path / f"kept{k}.png") as read:
            np.testing.assert_array_equal(np.asarray(read.convert("RGBA")), pixels)
