"""Figures drawn once per content: a second job of a sweep whose plotted data did not change
writes the PNG it already drew; changed data is drawn again."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import paraeval.pipeline.report.figure_files as figure_files
import paraeval.pipeline.report.plots as plots


def _segments(shift: float = 0.0) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(0)
    seg = pd.DataFrame(
        {
            "system": np.repeat([f"s{i}" for i in range(15)], 8),
            "item_id": np.tile([f"i{j}" for j in range(8)], 15),
            "bleu": rng.random(120) + shift,
            "human_meaning": rng.random(120),
        }
    )
    systems = seg.groupby("system")[["bleu", "human_meaning"]].mean()
    return seg, systems


def test_same_inputs_are_drawn_once_and_changed_inputs_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    real = plots.metric_vs_human

    def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(str(args[2]))
        return real(*args, **kwargs)

    monkeypatch.setattr(plots, "metric_vs_human", counting)
    figure_files._FILES.clear()
    seg, systems = _segments()
    corr = pd.DataFrame(
        {
            "metric": ["bleu"],
            "aspect": ["human_meaning"],
            "level": ["segment"],
            "coefficient": ["pearson"],
            "value": [0.5],
        }
    )
    first = plots.write_plots(tmp_path / "a", seg, systems, corr, ["bleu"], ["human_meaning"])
    second = plots.write_plots(tmp_path / "b", seg, systems, corr, ["bleu"], ["human_meaning"])
    assert calls == ["bleu"]  # the second run reused the first drawing
    assert [p.name for p in first] == [p.name for p in second]
    for a, b in zip(first, second, strict=True):
        assert a.read_bytes() == b.read_bytes() and a.read_bytes()[:4] == b"\x89PNG"
    moved, moved_sys = _segments(shift=0.25)
    third = plots.write_plots(tmp_path / "c", moved, moved_sys, corr, ["bleu"], ["human_meaning"])
    assert calls == ["bleu", "bleu"]
    scatter = next(p for p in third if p.name.startswith("scatter_"))
    assert scatter.read_bytes() != (tmp_path / "a" / "plots" / scatter.name).read_bytes()


def _pixels(path: Path) -> np.ndarray:
    from PIL import Image

    with Image.open(path) as image:
        return np.asarray(image.convert("RGBA"))


def _moved(seg: pd.DataFrame, factor: float, humans: bool) -> tuple[pd.DataFrame, pd.DataFrame]:
    seg = seg.copy()
    seg["bleu"] = seg["bleu"] * factor - 0.1
    if humans:
        seg["human_meaning"] = seg["human_meaning"].to_numpy()[::-1]
    return seg, seg.groupby("system", sort=False)[["bleu", "human_meaning"]].mean()


def _count_builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list that gets an entry for every scatter figure built anew."""
    builds: list[int] = []
    real = plots._Scatter.build

    def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
        builds.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(plots._Scatter, "build", counting)
    return builds


@pytest.mark.parametrize("n_systems", [4, 15])  # a collection per system, a line per colour
def test_a_kept_scatter_moved_to_new_values_draws_what_a_new_figure_draws(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, n_systems: int
) -> None:
    seg, _ = _segments()
    seg = seg[seg["system"].isin([f"s{i}" for i in range(n_systems)])]
    builds = _count_builds(monkeypatch)
    plots._SCATTERS.clear()
    steps = [(1.0, False), (3.0, False), (0.5, True), (-2.0, False)]
    kept = []
    for k, (factor, humans) in enumerate(steps):
        path = tmp_path / f"kept{k}.png"
        plots.metric_vs_human(*_moved(seg, factor, humans), "bleu", "human_meaning", path)
        kept.append(path)
    assert len(builds) == 1  # one figure, moved three times
    for k, (factor, humans) in enumerate(steps):
        plots._SCATTERS.clear()
        path = tmp_path / f"new{k}.png"
        plots.metric_vs_human(*_moved(seg, factor, humans), "bleu", "human_meaning", path)
        assert np.array_equal(_pixels(kept[k]), _pixels(path)), k
    assert len(builds) == 1 + len(steps)
    assert not np.array_equal(_pixels(kept[0]), _pixels(kept[1]))


@pytest.mark.parametrize("n_systems", [4, 15])  # a collection per system, a line per colour
def test_segments_with_missing_values_in_a_kept_scatter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, n_systems: int
) -> None:
    """A missing segment score or rating: with a collection per system the figure is built
    anew (``scatter`` masks it, a moved collection would not); with marker lines the kept
    figure is moved, and draws what a new figure draws."""
    seg, _ = _segments()
    seg = seg[seg["system"].isin([f"s{i}" for i in range(n_systems)])].reset_index(drop=True)
    builds = _count_builds(monkeypatch)

    def holed(factor: float) -> tuple[pd.DataFrame, pd.DataFrame]:
        moved, _ = _moved(seg, factor, False)
        moved.loc[3, "bleu"] = np.nan
        moved.loc[11, "human_meaning"] = np.nan
        # the means skip them, as the pipeline's do: the system level stays finite
        return moved, moved.groupby("system", sort=False)[["bleu", "human_meaning"]].mean()

    plots._SCATTERS.clear()
    plots.metric_vs_human(*_moved(seg, 1.0, False), "bleu", "human_meaning", tmp_path / "a.png")
    for k, factor in enumerate((2.0, 0.5)):
        plots.metric_vs_human(*holed(factor), "bleu", "human_meaning", tmp_path / f"h{k}.png")
    assert len(builds) == (1 if n_systems > 12 else 3)
    for k, factor in enumerate((2.0, 0.5)):
        plots._SCATTERS.clear()
        plots.metric_vs_human(*holed(factor), "bleu", "human_meaning", tmp_path / f"n{k}.png")
        assert np.array_equal(_pixels(tmp_path / f"h{k}.png"), _pixels(tmp_path / f"n{k}.png"))
    # the holes show: not the figure of the complete values
    plots._SCATTERS.clear()
    plots.metric_vs_human(*_moved(seg, 2.0, False), "bleu", "human_meaning", tmp_path / "c.png")
    assert not np.array_equal(_pixels(tmp_path / "c.png"), _pixels(tmp_path / "h0.png"))
