"""A cell figure (the system ranking) is put together from its cells' pixels: after a change only
the changed cells are drawn again, to the pixels of a drawing from scratch; a cell whose ink
leaves it, and the vector formats, get the figure drawn whole with the same geometry."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

import paraeval.pipeline.report.cells as cells
import paraeval.pipeline.report.compare_plots as compare_plots
from paraeval.pipeline.stages.aggregate import aggregate
from paraeval.pipeline.stages.compare import CompareConfig, compare
from paraeval.pipeline.report.figure_files import save_figure
from paraeval.pipeline.data.load import load_demo
from paraeval.pipeline.stages.score import build_metrics, score


@pytest.fixture(autouse=True)
def _no_kept_pictures() -> Iterator[None]:
    cells._PICTURES.clear()
    yield
    cells._PICTURES.clear()


def _comparison(alpha: float, baseline: str = "medium") -> Any:
    metrics = build_metrics(
        {
            "bleu": {"_target_": "paraeval.metrics.sacre.BLEU"},
            "ter": {"_target_": "paraeval.metrics.sacre.TER", "against_source": True},
            "self_bleu": {"_target_": "paraeval.metrics.sacre.SelfBLEU"},
            "ibleu": {"_target_": "paraeval.metrics.sacre.IBLEU", "alpha": alpha},
        }
    )
    scores = score(load_demo(), metrics, progress=False)
    return compare(
        scores,
        aggregate(scores),
        CompareConfig(baseline=baseline, seed=3, n_bootstrap=200, n_ar=500),
    )


def _pixels(path: Path) -> np.ndarray:
    with Image.open(path) as image:
        return np.asarray(image.convert("RGBA"))


def _fresh(result: Any, path: Path) -> np.ndarray:
    cells._PICTURES.clear()
    assert compare_plots.ranking_plot(result, path)
    return _pixels(path)


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    drawn: list[str] = []
    real = compare_plots._ranking_panel

    def counted(ax: Any, **kwargs: Any) -> None:
        drawn.append(kwargs["title"].split("\n")[0])
        real(ax, **kwargs)

    monkeypatch.setattr(compare_plots, "_ranking_panel", counted)
    return drawn


def test_an_alpha_step_redraws_the_changed_cells_to_the_same_pixels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before, after = _comparison(0.8), _comparison(0.7)
    drawn = _counting(monkeypatch)
    for k in range(2):
        assert compare_plots.ranking_plot(before, tmp_path / f"before{k}.png")
    n_panels = before.table["metric"].nunique()
    assert len(drawn) == n_panels  # kept from the first drawing: the second drew nothing
    np.testing.assert_array_equal(
        _pixels(tmp_path / "before0.png"), _pixels(tmp_path / "before1.png")
    )
    drawn.clear()
    assert compare_plots.ranking_plot(after, tmp_path / "after.png")
    changed = {
        m
        for m in before.table["metric"].unique()
        if not before.table[before.table["metric"] == m]
        .reset_index(drop=True)
        .equals(after.table[after.table["metric"] == m].reset_index(drop=True))
    }
    # iBLEU and the syntactic average move with alpha; the others do not
    assert "ibleu" in changed and "bleu" not in changed and len(changed) < n_panels
    assert sorted(drawn) == sorted(changed)
    incremental = _pixels(tmp_path / "after.png")
    whole = _fresh(after, tmp_path / "whole.png")
    assert incremental.shape == whole.shape
    np.testing.assert_array_equal(incremental, whole)
    # and the figure did change
    old = _pixels(tmp_path / "before1.png")
    assert old.shape != whole.shape or (old != whole).any()


def test_a_baseline_change_redraws_every_cell_and_the_header_to_the_same_pixels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = _comparison(0.8, "medium"), _comparison(0.8, "strong")
    for k in range(2):
        assert compare_plots.ranking_plot(first, tmp_path / f"first{k}.png")
    drawn = _counting(monkeypatch)
    assert compare_plots.ranking_plot(second, tmp_path / "second.png")
    assert len(drawn) == second.table["metric"].nunique()
    np.testing.assert_array_equal(
        _pixels(tmp_path / "second.png"), _fresh(second, tmp_path / "whole.png")
    )


def test_the_put_together_png_is_the_whole_figure_drawn_by_matplotlib(tmp_path: Path) -> None:
    """The cells laid side by side are the figure matplotlib draws whole with the same
    geometry: the same size, and the same pixels but for the antialiasing of edges that fall
    on other fractions of a pixel."""
    parts = compare_plots.ranking_panels(_comparison(0.8))
    assert parts is not None
    cells.save_cells(tmp_path / "cells.png", *parts)
    save_figure(cells.whole_figure(*parts), tmp_path / "whole.png")
    put, whole = _pixels(tmp_path / "cells.png"), _pixels(tmp_path / "whole.png")
    assert put.shape == whole.shape
    differ = np.abs(put.astype(int) - whole.astype(int)).max(axis=-1) > 64
    assert differ.mean() < 0.002, differ.mean()


def _tick_cell(ax: Any, label: str, value: float) -> None:
    ax.plot([0, 1], [0, value])
    ax.set_yticks([0, value], ["0", label])


def _title(fig: Any, bottom: float, inch: float, title: str) -> None:
    fig.suptitle(title, y=bottom + 0.1 * inch, va="bottom")


def _figure(path: Path, labels: list[str], value: float) -> Path:
    grid = cells.CellGrid(cell=(600, 400), rows=1, cols=2, header=80, axes=(200, 60, 360, 300))
    parts = [
        cells.Cell(functools.partial(_tick_cell, label=lab, value=value + k), (lab, value + k))
        for k, lab in enumerate(labels)
    ]
    header = cells.Header(functools.partial(_title, title="t"), ("t",))
    cells.save_cells(path, grid, parts, header)
    return path


def test_a_cell_whose_ink_leaves_it_gets_the_whole_figure(tmp_path: Path) -> None:
    # the right cell's long tick label reaches into the left cell: drawn whole, never kept
    labels = ["a", "a tick label long enough to reach into the left cell"]
    long = _pixels(_figure(tmp_path / "long.png", labels, 1.0))
    assert len(cells._PICTURES._entries) == 0
    # the label is there in full: the figure reaches further left than its two cells
    short = _pixels(_figure(tmp_path / "short.png", ["a", "b"], 1.0))
    assert len(cells._PICTURES._entries) == 1
    assert long.shape[1] > short.shape[1]
    # the short one is redrawn cell by cell, to the same pixels
    step = _pixels(_figure(tmp_path / "step.png", ["a", "c"], 1.0))
    cells._PICTURES.clear()
    np.testing.assert_array_equal(step, _pixels(_figure(tmp_path / "fresh.png", ["a", "c"], 1.0)))
    assert (step != short).any()


def test_other_formats_draw_the_whole_figure(tmp_path: Path) -> None:
    result = _comparison(0.8)
    for k in range(2):
        assert compare_plots.ranking_plot(result, tmp_path / f"r{k}.svg")
    text = (tmp_path / "r1.svg").read_text(encoding="utf-8")
    assert "ibleu" in text and "System ranking" in text
    assert len(cells._PICTURES._entries) == 0
