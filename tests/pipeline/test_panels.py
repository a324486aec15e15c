"""A panel figure (the correlation heatmap) redrawn panel by panel gives the same pixels as the
whole figure drawn afresh, and falls back to the whole drawing where panels' ink meets."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from PIL import Image

import paraeval.pipeline.report.panels as panels
import paraeval.pipeline.report.plots as plots


@pytest.fixture(autouse=True)
def _no_kept_canvases() -> Iterator[None]:
    panels._FRAMES.canvases.clear()
    yield
    panels._FRAMES.canvases.clear()


def _pixels(path: Path) -> np.ndarray:
    with Image.open(path) as image:
        return np.asarray(image.convert("RGBA"))


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
    rng = np.random.default_rng(5)
    steps = [{f"metric_{k}": list(rng.uniform(-1, 1, 4)) for k in range(6)}]
    for m in ("metric_1", "metric_4"):
        steps.append(dict(steps[-1], **{m: list(rng.uniform(-1, 1, 4))}))
    whole = []
    for k, step in enumerate(steps):
        panels._FRAMES.canvases.clear()
        plots.correlation_heatmap(_correlations(step), tmp_path / f"w{k}.png")
        whole.append(_pixels(tmp_path / f"w{k}.png"))
    panels._FRAMES.canvases.clear()
    plots.correlation_heatmap(_correlations(steps[0]), tmp_path / "r0.png")
    ((canvas, _),) = panels._FRAMES.canvases._entries.values()
    first = canvas.renderer
    assert first is not None
    for k, step in enumerate(steps[1:], start=1):
        plots.correlation_heatmap(_correlations(step), tmp_path / f"r{k}.png")
        ((now, _),) = panels._FRAMES.canvases._entries.values()
        assert now is canvas and now.renderer is first
        np.testing.assert_array_equal(_pixels(tmp_path / f"r{k}.png"), whole[k])
    assert (whole[0] != whole[2]).any()
