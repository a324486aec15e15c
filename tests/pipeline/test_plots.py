"""Figures drawn once per content: a second job of a sweep whose plotted data did not change
writes the PNG it already drew; changed data is drawn again."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import paraeval.pipeline.figure_files as figure_files
import paraeval.pipeline.plots as plots


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
