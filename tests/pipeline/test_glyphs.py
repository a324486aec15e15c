"""Glyph bitmaps kept between drawings (pipeline/glyphs.py): every pixel as matplotlib's own Agg
text drawing gives it, for the figures a run draws and for text at every subpixel phase."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

import paraeval.pipeline.report.figure_files as figure_files
import paraeval.pipeline.report.glyphs as glyphs
import paraeval.pipeline.report.plots as plots

pytestmark = pytest.mark.skipif(
    not matplotlib.__version__.startswith(glyphs._VERSIONS),
    reason="another matplotlib draws its own text (install() refuses it; tested below)",
)


@pytest.fixture
def own_text() -> Iterator[None]:
    """matplotlib's own text drawing for the test; the kept glyphs again after it."""
    was = bool(glyphs._INSTALLED)
    glyphs.uninstall()
    yield
    if was:
        glyphs.install()


def text_figure(seed: int) -> np.ndarray:
    """Text of every kind Agg draws: tick labels (rotated too), a title, annotations, rotated
    text, text without antialiasing, mathtext (glyphs and rules), and one string at each of 64
    subpixel offsets; its RGBA pixels."""
    rng = np.random.default_rng(seed)
    fig = Figure(figsize=(6, 4), dpi=137)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(121)
    ax.scatter(rng.normal(size=50), rng.normal(size=50))
    ax.set_title(f"r = {rng.normal():.3f}   τ = {rng.normal():.3f}")
    ax.set_xlabel("ibleu (corpus level)")
    for k in range(5):
        ax.annotate(
            f"sys{k}",
            (rng.normal(), rng.normal()),
            xytext=(3, 3),
            textcoords="offset points",
            fontsize=7,
        )
    ax.tick_params(axis="x", labelrotation=37)
    ax2 = fig.add_subplot(122)
    ax2.text(0.1, 0.5, "rotated Text", rotation=rng.uniform(0, 360), fontsize=11)
    ax2.text(0.2, 0.2, "no antialias", fontsize=9, antialiased=False)
    ax2.text(0.3, 0.8, r"$\sum_i x_i^2 \sqrt{y}$", fontsize=12)
    # lines spaced by the font's own metrics, in another family and weight
    ax2.text(0.5, 0.3, "two\nlines", fontsize=8, family="serif", weight="bold", va="top")
    for k in range(64):  # a 64th of a pixel apart: every phase FreeType places a glyph at
        ax2.text(
            0.01 + k / 64 / 300 * 137 / 100,
            0.05 + k * 0.012 + k / 64 / 400,
            "Ag",
            fontsize=6,
            transform=ax2.transAxes,
        )
    fig.canvas.draw()
    return np.asarray(fig.canvas.buffer_rgba()).copy()


def test_kept_glyphs_give_matplotlibs_own_pixels(own_text: None) -> None:
    expected = [text_figure(seed) for seed in range(4)]
    assert glyphs.install()
    first = [text_figure(seed) for seed in range(4)]  # glyphs rendered, then kept
    kept = len(glyphs._GLYPHS)
    again = [text_figure(seed) for seed in range(4)]  # the same glyphs from the kept bitmaps
    assert kept > 300 and len(glyphs._GLYPHS) == kept
    laid = len(glyphs._LAYOUTS)  # the strings' layouts were kept too, and served the third
    assert laid > 20 and len(glyphs._LAYOUTS) == laid
    # and each font's line metrics: sizes 6 to 12, two families
    heights = len(glyphs._HEIGHTS)
    assert heights >= 5 and len(glyphs._HEIGHTS) == heights
    for a, b, c in zip(expected, first, again, strict=True):
        assert np.array_equal(a, b)
        assert np.array_equal(a, c)
    assert not np.array_equal(expected[0], expected[1])


def phase_figure(shift: float) -> np.ndarray:
    """The same string 64 times, a 64th of a pixel further right each time, on whole-pixel rows:
    FreeType renders each of a glyph's 64 horizontal phases differently. ``shift`` (pixels)
    moves them all."""
    from matplotlib.transforms import IdentityTransform

    fig = Figure(figsize=(5, 2), dpi=100)
    FigureCanvasAgg(fig)
    for k in range(64):
        x = 10 + (k % 8) * 60 + k / 64 + shift
        fig.text(x, 10 + (k // 8) * 20, "Ag", fontsize=9, transform=IdentityTransform())
    fig.canvas.draw()
    return np.asarray(fig.canvas.buffer_rgba()).copy()


def test_each_subpixel_phase_keeps_its_own_bitmap(own_text: None) -> None:
    shifts = [0.0, 1 / 64, 0.5, 3 + 5 / 64]
    expected = [phase_figure(s) for s in shifts]
    assert glyphs.install()
    for _ in range(2):  # rendered and kept, then every phase taken from the kept bitmaps
        for s, e in zip(shifts, expected, strict=True):
            assert np.array_equal(phase_figure(s), e), s
    assert not np.array_equal(expected[0], expected[1])


def _scatter_pixels(path: Path) -> np.ndarray:
    from PIL import Image

    with Image.open(path) as image:
        return np.asarray(image.convert("RGBA"))


def test_a_runs_scatter_plot_is_the_same_file(tmp_path: Path, own_text: None) -> None:
    rng = np.random.default_rng(3)
    seg = pd.DataFrame(
        {
            "system": np.repeat(["copy", "weak", "strong"], 20),
            "bleu": rng.random(60) * 50 - 20,
            "human_meaning": rng.random(60) * 4 + 1,
        }
    )
    systems = seg.groupby("system", sort=False)[["bleu", "human_meaning"]].mean()
    paths = []
    for k, install in enumerate((False, True, True)):
        if install:
            assert glyphs.install()
        plots._SCATTERS.clear()
        figure_files._FILES.clear()
        path = tmp_path / f"scatter{k}.png"
        plots.metric_vs_human(seg, systems, "bleu", "human_meaning", path)
        paths.append(path)
    assert paths[0].read_bytes() == paths[1].read_bytes() == paths[2].read_bytes()
    assert _scatter_pixels(paths[0]).shape[0] > 100


def test_another_matplotlib_is_left_alone(monkeypatch: pytest.MonkeyPatch, own_text: None) -> None:
    from matplotlib.backends import backend_agg

    own = backend_agg.RendererAgg._draw_text_glyphs_and_boxes
    monkeypatch.setattr(matplotlib, "__version__", "9.0.0")
    assert not glyphs.install()
    assert backend_agg.RendererAgg._draw_text_glyphs_and_boxes is own
    assert not hasattr(backend_agg.RendererAgg, "_get_font_height_metrics")
