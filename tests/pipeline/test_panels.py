"""A panel figure redrawn panel by panel gives the same pixels as the whole figure drawn afresh,
and falls back to the whole drawing where panels' ink meets."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from PIL import Image

import paraeval.pipeline.compare_plots as compare_plots
import paraeval.pipeline.panels as panels
import paraeval.pipeline.plots as plots
from paraeval.pipeline.aggregate import aggregate
from paraeval.pipeline.compare import CompareConfig, compare
from paraeval.pipeline.load import load_demo
from paraeval.pipeline.score import build_metrics, score


@pytest.fixture(autouse=True)
def _no_kept_canvases() -> Iterator[None]:
    panels._FRAMES.canvases.clear()
    yield
    panels._FRAMES.canvases.clear()


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
    panels._FRAMES.canvases.clear()
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


def test_an_alpha_step_redraws_the_changed_panels_to_the_same_pixels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before, after = _comparison(0.8), _comparison(0.7)
    drawn = _counting(monkeypatch)
    for k in range(2):
        assert compare_plots.ranking_plot(before, tmp_path / f"before{k}.png")
    n_panels = before.table["metric"].nunique()
    assert len(drawn) == n_panels  # kept from the first drawing: the second drew nothing
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


def test_a_baseline_change_redraws_every_panel_and_the_header_to_the_same_pixels(
    tmp_path: Path,
) -> None:
    first, second = _comparison(0.8, "medium"), _comparison(0.8, "strong")
    for k in range(2):
        assert compare_plots.ranking_plot(first, tmp_path / f"first{k}.png")
    assert compare_plots.ranking_plot(second, tmp_path / "second.png")
    np.testing.assert_array_equal(
        _pixels(tmp_path / "second.png"), _fresh(second, tmp_path / "whole.png")
    )


def _label_panel(ax: Any, label: str, value: float) -> None:
    ax.plot([0, 1], [0, value])
    ax.set_yticks([0, value], ["0", label])


def _header(fig: Any, title: str) -> None:
    fig.suptitle(title)


def _figure(tmp_path: Path, name: str, labels: list[str], value: float, wspace: float) -> Path:
    grid = panels.PanelGrid(size=(6.0, 3.0), rows=1, cols=2, spacing=(("wspace", wspace),))
    parts = [
        panels.Panel(functools.partial(_label_panel, label=lab, value=value + k), (lab, value + k))
        for k, lab in enumerate(labels)
    ]
    header = panels.Panel(functools.partial(_header, title="t"), ("t",))
    path = tmp_path / name
    panels.save_panels(path, grid, parts, header)
    return path


def test_panels_whose_labels_meet_are_drawn_whole(tmp_path: Path) -> None:
    # the right panel's long tick label reaches into the left panel: never kept as a canvas
    labels = ["a", "a tick label long enough to reach into the left panel"]
    for k in range(2):
        _figure(tmp_path, f"a{k}.png", labels, 1.0, wspace=0.05)
    assert len(panels._FRAMES.canvases._entries) == 0
    # apart, the same panels are kept and redrawn one at a time, to the same pixels
    short = ["a", "b"]
    for k in range(2):
        _figure(tmp_path, f"b{k}.png", short, 1.0, wspace=0.4)
    assert len(panels._FRAMES.canvases._entries) == 1
    step = _pixels(_figure(tmp_path, "c.png", short, 2.0, wspace=0.4))
    panels._FRAMES.canvases.clear()
    np.testing.assert_array_equal(step, _pixels(_figure(tmp_path, "d.png", short, 2.0, wspace=0.4)))


def test_other_formats_draw_the_whole_figure(tmp_path: Path) -> None:
    result = _comparison(0.8)
    for k in range(2):
        assert compare_plots.ranking_plot(result, tmp_path / f"r{k}.svg")
    text = (tmp_path / "r1.svg").read_text(encoding="utf-8")
    assert "ibleu" in text and "System ranking" in text
    assert len(panels._FRAMES.canvases._entries) == 0


def _correlations(values: dict[str, list[float]]) -> pd.DataFrame:
    cells = [(a, lv) for a in ("human_meaning", "human_fluency") for lv in ("segment", "system")]
    return pd.DataFrame(
        [
            {"metric": m, "aspect": a, "level": lv, "coefficient": "kendall_b", "value": v, "n": 9}
            for m, row in values.items()
            for (a, lv), v in zip(cells, row, strict=True)
        ]
    )


def test_a_heatmap_redraws_the_rows_that_moved_to_the_same_pixels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(4)
    before = {f"metric_{k}": list(rng.uniform(-1, 1, 4)) for k in range(8)}
    before["metric_3"][2] = float("nan")  # a blank cell
    after = dict(before, metric_2=[0.9, -0.95, 0.1, float("nan")], metric_7=[0.5, 0.4, 0.3, 0.2])
    drawn: list[str] = []
    real = plots._heatmap_row

    def counted(ax: Any, **kwargs: Any) -> None:
        drawn.append(kwargs["label"])
        real(ax, **kwargs)

    monkeypatch.setattr(plots, "_heatmap_row", counted)
    for k in range(2):
        plots.correlation_heatmap(_correlations(before), tmp_path / f"before{k}.png")
    assert len(panels._FRAMES.canvases._entries) == 1
    drawn.clear()
    plots.correlation_heatmap(_correlations(after), tmp_path / "after.png")
    assert drawn == ["metric_2", "metric_7"]  # metric_7 also carries the column headers
    panels._FRAMES.canvases.clear()
    plots.correlation_heatmap(_correlations(after), tmp_path / "whole.png")
    np.testing.assert_array_equal(_pixels(tmp_path / "after.png"), _pixels(tmp_path / "whole.png"))
    assert (_pixels(tmp_path / "before1.png") != _pixels(tmp_path / "whole.png")).any()


def test_redraws_of_a_frame_reuse_its_renderer_to_the_same_pixels(tmp_path: Path) -> None:
    """The changed panels of a kept frame are drawn on the renderer of the frame's last
    drawing (cleared, not made anew), and give the pixels of a drawing from scratch."""
    results = [_comparison(a) for a in (0.8, 0.7, 0.6)]
    whole = [_fresh(result, tmp_path / f"w{k}.png") for k, result in enumerate(results)]
    panels._FRAMES.canvases.clear()
    assert compare_plots.ranking_plot(results[0], tmp_path / "r0.png")
    ((canvas, _),) = panels._FRAMES.canvases._entries.values()
    first = canvas.renderer
    assert first is not None
    for k, result in enumerate(results[1:], start=1):
        assert compare_plots.ranking_plot(result, tmp_path / f"r{k}.png")
        ((now, _),) = panels._FRAMES.canvases._entries.values()
        assert now is canvas and now.renderer is first
        np.testing.assert_array_equal(_pixels(tmp_path / f"r{k}.png"), whole[k])
