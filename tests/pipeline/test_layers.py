"""The α curve drawn as a kept base with the configured-α line laid over it: the same pixels
whatever the process drew before, the line where a whole drawing puts it, and the rest of the
figure untouched from one α to the next."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

import paraeval.pipeline.report.layers as layers
from paraeval.metrics import sacre
from paraeval.pipeline.report import figure_files
from paraeval.pipeline.data.load import load_demo
from paraeval.pipeline.stages.alpha import AlphaCurve, AlphaCurveSettings, alpha_curve, plot_alpha_curve
from tests.pipeline.test_sweep import ibleu_stats


@pytest.fixture(autouse=True)
def _no_kept_bases() -> Iterator[None]:
    layers._BASES.clear()
    yield
    layers._BASES.clear()


@pytest.fixture(scope="module")
def curves() -> dict[float, AlphaCurve]:
    df = load_demo()
    df["human_meaning"] = df["human_meaning"].astype(float)
    st = ibleu_stats(df, sacre.IBLEU(alpha=0.8))
    settings = AlphaCurveSettings(grid=[0.0, 0.2, 0.4, 0.6, 0.8, 1.0], seed=5)
    return {
        alpha: alpha_curve(
            df, st, sacre.IBLEU(alpha=alpha), "ibleu", ["human_meaning", "human_fluency"], settings
        )
        for alpha in (0.3, 0.7)
    }


def _pixels(path: Path) -> np.ndarray:
    with Image.open(path) as image:
        return np.asarray(image.convert("RGB")).astype(int)


def _whole(result: AlphaCurve, path: Path) -> np.ndarray:
    """The figure drawn in one piece, the line on top, as matplotlib saves it."""
    configured = float(result.choice["configured_alpha"].iloc[0])
    choice = result.choice[["level", "aspect", "chosen_alpha", "test"]]
    levels = list(dict.fromkeys(result.curve["level"]))
    fig = layers_base(result, choice, levels)
    for ax in fig.axes:
        ax.axvline(configured, color="0.6", linestyle=":", linewidth=1, zorder=10)
    figure_files.save_figure(fig, path)
    figure_files._plt().close(fig)
    return _pixels(path)


def layers_base(result: AlphaCurve, choice: Any, levels: list[str]) -> Any:
    from paraeval.pipeline.stages.alpha import _alpha_curve_base

    return _alpha_curve_base(result.curve, choice, levels)


def test_the_file_does_not_depend_on_what_was_drawn_before(
    tmp_path: Path, curves: dict[float, AlphaCurve], monkeypatch: pytest.MonkeyPatch
) -> None:
    plot_alpha_curve(curves[0.3], tmp_path / "fresh.png")
    bases: list[int] = []
    real = layers._Base
    monkeypatch.setattr(layers, "_Base", lambda *a: bases.append(1) or real(*a))
    plot_alpha_curve(curves[0.7], tmp_path / "other.png")
    plot_alpha_curve(curves[0.3], tmp_path / "again.png")
    assert bases == []  # both drawn on the kept base: only the line was drawn
    assert (tmp_path / "fresh.png").read_bytes() == (tmp_path / "again.png").read_bytes()


def test_the_line_lies_where_a_whole_drawing_puts_it(
    tmp_path: Path, curves: dict[float, AlphaCurve]
) -> None:
    low, high = (tmp_path / "low.png"), (tmp_path / "high.png")
    plot_alpha_curve(curves[0.3], low)
    plot_alpha_curve(curves[0.7], high)
    a, b = _pixels(low), _pixels(high)
    whole = _whole(curves[0.3], tmp_path / "whole.png")
    assert a.shape == whole.shape == b.shape
    # blending the line over the kept pixels rounds as Agg's own blending does, within 2 of 255
    assert np.abs(a - whole).max() <= 2
    # from one α to the other only the two lines' columns change, in both panels
    changed = np.flatnonzero((a != b).any(axis=(0, 2)))
    assert changed.size > 0
    runs = np.split(changed, np.flatnonzero(np.diff(changed) > 1) + 1)
    assert len(runs) == 4 and all(len(r) <= 4 for r in runs)


def test_other_formats_are_drawn_whole(tmp_path: Path, curves: dict[float, AlphaCurve]) -> None:
    result = curves[0.3]
    plot_alpha_curve(result, tmp_path / "curve.svg")
    choice = result.choice[["level", "aspect", "chosen_alpha", "test"]]
    fig = layers_base(result, choice, list(dict.fromkeys(result.curve["level"])))
    fig.savefig(tmp_path / "base.svg")
    figure_files._plt().close(fig)
    dashed = [
        (tmp_path / f).read_text().count("stroke-dasharray") for f in ("curve.svg", "base.svg")
    ]
    assert dashed[0] == dashed[1] + 2  # one dotted configured-α line per panel
    assert len(layers._BASES) == 0


def test_lay_over_blends_by_coverage() -> None:
    base = np.full((3, 4, 4), 255, dtype=np.uint8)
    base[..., :3] = [10, 200, 100]
    top = np.zeros((3, 4, 4), dtype=np.uint8)
    top[1, 2] = [250, 0, 50, 128]
    top[2, 3] = [0, 0, 0, 255]
    out = layers.lay_over(base, top)
    assert out[1, 2].tolist() == [130, 100, 75, 255]
    assert out[2, 3].tolist() == [0, 0, 0, 255]
    keep = np.ones((3, 4), dtype=bool)
    keep[1, 2] = keep[2, 3] = False
    assert (out[keep] == base[keep]).all()
