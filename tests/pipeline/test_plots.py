"""What each figure shows: its titles, labels, values, marks and notes (read from SVG files
written with their text as text), and how a figure file is written (PNG at 200 dpi, cropped
to its contents, labels past the figure's edge kept)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import pytest
from PIL import Image

from paraeval.pipeline.report import plots
from paraeval.pipeline.report.plots import (
    LEGEND_MAX_SYSTEMS,
    correlation_heatmap,
    metric_vs_human,
    plot_alpha_curve,
    scatter_columns,
)
from paraeval.pipeline.report.ranking import frontier_plot, ranking_plot
from paraeval.pipeline.stages.alpha import AlphaCurve
from paraeval.pipeline.stages.compare import Comparison
from paraeval.pipeline.stages.paraphrase_table import ParaphraseTable
from tests.pipeline.helpers import compare_settings


@pytest.fixture(autouse=True)
def svg_text() -> Iterator[None]:
    """SVG text written as ``<text>`` elements rather than glyph outlines, so a test can read it."""
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        yield


def _text(path: Path) -> str:
    import html

    return html.unescape(path.read_text(encoding="utf-8"))


def _segments(n_systems: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(0)
    seg = pd.DataFrame(
        {
            "system": np.repeat([f"s{i}" for i in range(n_systems)], 8),
            "item_id": np.tile([f"i{j}" for j in range(8)], n_systems),
            "ter": rng.random(8 * n_systems),
            "human_meaning": rng.random(8 * n_systems),
        }
    )
    return seg, seg.groupby("system")[["ter", "human_meaning"]].mean()


@pytest.mark.parametrize("n_systems", [4, 15])  # a legend of systems, or colours without one
def test_a_scatter_plot_shows_segments_systems_and_their_agreement(
    tmp_path: Path, n_systems: int
) -> None:
    seg, systems = _segments(n_systems)
    path = tmp_path / "scatter.svg"
    style = plots.FigureStyle(fmt="svg", lower=frozenset({"ter"}))
    assert metric_vs_human(seg, systems, "ter", "human_meaning", path, style)
    text = _text(path)
    assert f"ter {plots.LOWER_MARK}" in text and f"ter {plots.LOWER_MARK} (corpus level)" in text
    assert "human meaning" in text and "mean human meaning" in text
    assert "segments: r = " in text and f"n = {8 * n_systems}<" in text
    assert "systems: r = " in text and f"n = {n_systems}<" in text
    assert plots.MARKS_NOTE in text
    # every system's mean is labelled with its name; a legend names them up to a dozen
    legend = n_systems <= LEGEND_MAX_SYSTEMS
    assert (">system<" in text) is legend
    for i in range(n_systems):
        assert text.count(f">s{i}<") == (2 if legend else 1), i


def test_scatter_columns_put_the_group_averages_first() -> None:
    seg = pd.DataFrame(columns=["bleu", "chrf", "semantic", "syntactic", "ter"])
    assert scatter_columns(seg, ["bleu", "chrf", "ter"]) == [
        "syntactic",
        "semantic",
        "bleu",
        "chrf",
    ]
    assert scatter_columns(seg, ["bleu"], max_scatter=1) == ["syntactic"]


def _correlations() -> pd.DataFrame:
    rows = []
    values = {"bleu": (0.3, 0.3), "ter": (-0.6, -0.6), "self_bleu": (np.nan, 0.2)}
    for metric, (at_segment, at_system) in values.items():
        for level, n, value in (("segment", 40, at_segment), ("system", 4, at_system)):
            for coefficient, shift in (("pearson", 0.0), ("kendall_b", 0.01)):
                rows.append(
                    {
                        "metric": metric,
                        "aspect": "human_meaning",
                        "level": level,
                        "coefficient": coefficient,
                        "value": value + shift,
                        "n": n,
                    }
                )
    return pd.DataFrame(rows)


def test_the_heatmap_shows_every_value_with_its_marks_and_n(tmp_path: Path) -> None:
    path = tmp_path / "heatmap.svg"
    style = plots.FigureStyle(fmt="svg", lower=frozenset({"ter"}), source=frozenset({"self_bleu"}))
    assert correlation_heatmap(_correlations(), path, style=style)
    text = _text(path)
    # without the run's headline coefficient: the first in the table (Pearson here)
    assert "Pearson r: metric vs human ratings" in text
    kendall = tmp_path / "kendall.svg"
    assert correlation_heatmap(_correlations(), kendall, coefficient="kendall_b", style=style)
    text = _text(kendall)
    assert "Kendall τ-b: metric vs human ratings" in text
    # each value at both levels, Kendall's (0.01 above Pearson's); a missing one left blank
    assert text.count(">0.31<") == 2 and text.count(">-0.59<") == 2 and ">0.30<" not in text
    assert text.count(">0.21<") == 1 and ">nan<" not in text.lower()
    assert f"ter {plots.LOWER_MARK}" in text and f"self_bleu {plots.SOURCE_MARK}" in text
    assert ">meaning<" in text and ">segment<" in text and ">n = 40<" in text and ">n = 4<" in text
    assert plots.MARKS_NOTE in text
    pearson = tmp_path / "pearson.svg"
    assert correlation_heatmap(_correlations(), pearson, coefficient="pearson", style=style)
    assert "Pearson r: metric vs human ratings" in _text(pearson) and ">0.30<" in _text(pearson)
    assert not correlation_heatmap(_correlations().iloc[:0], tmp_path / "none.svg")
    assert not (tmp_path / "none.svg").exists()


def _curve() -> AlphaCurve:
    rows = []
    for level in ("segment", "system"):
        for split in ("dev", "test"):
            for alpha in (0.0, 0.5, 1.0):
                rows.append(
                    {
                        "level": level,
                        "coefficient": "kendall_b",
                        "aspect": "human_meaning",
                        "alpha": alpha,
                        "split": split,
                        "value": alpha / 2,
                        "n": 10,
                    }
                )
    choice = pd.DataFrame(
        {
            "level": ["segment", "system"],
            "aspect": ["human_meaning"] * 2,
            "chosen_alpha": [1.0, 0.5],
            "test": [0.5, 0.25],
            "configured_alpha": [0.8, 0.8],
        }
    )
    return AlphaCurve(pd.DataFrame(rows), choice)


def test_the_alpha_curve_shows_each_level_and_the_configured_alpha(tmp_path: Path) -> None:
    path = tmp_path / "alpha.svg"
    assert plot_alpha_curve(_curve(), path)
    text = _text(path)
    for level in ("segment", "system"):
        assert f"iBLEU vs humans, {level} level" in text
    assert text.count("meaning (dev)") == 2 and text.count("meaning (test)") == 2
    assert text.count("α (dot: chosen on dev, shown on test)") == 2
    empty = AlphaCurve(_curve().curve.iloc[:0], _curve().choice.iloc[:0])
    assert not plot_alpha_curve(empty, tmp_path / "none.svg")


def _figure_with_note(note: bool) -> matplotlib.figure.Figure:
    fig = plots.new_figure((6, 4))
    ax = fig.subplots()
    ax.plot([0, 1], [1, 0])
    ax.set_yticks([0, 1], ["a long system name", "b"])
    if note:
        plots.marks_note(fig)  # hangs below the figure's lower edge
    return fig


def test_a_png_is_cropped_to_its_contents_at_200_dpi(tmp_path: Path) -> None:
    plain, noted = tmp_path / "plain.png", tmp_path / "noted.png"
    plots.save_figure(_figure_with_note(False), plain)
    plots.save_figure(_figure_with_note(True), noted)
    with Image.open(plain) as a, Image.open(noted) as b:
        assert round(a.info["dpi"][0]) == plots.PNG_DPI
        assert b.size[1] > a.size[1] + 10  # the note below the edge is in the file
        rgb = np.asarray(a.convert("RGB"))
    # cropped to the contents (the long tick label past the canvas's left edge included) with
    # PAD_INCHES of white around them
    ink = np.any(rgb < 250, axis=2)
    rows, cols = np.flatnonzero(ink.any(axis=1)), np.flatnonzero(ink.any(axis=0))
    pad = plots.PAD_INCHES * plots.PNG_DPI
    blank = [rows[0], rgb.shape[0] - 1 - rows[-1], cols[0], rgb.shape[1] - 1 - cols[-1]]
    # (a text's box reaches a few pixels past its ink)
    assert all(pad - 3 <= side <= pad + 8 for side in blank), blank


def _comparison() -> Comparison:
    rows = []
    for metric, higher in (("bleu", True), ("ter", False), ("syntactic", True)):
        for rank, system in enumerate(("strong", "copy", "weak"), start=1):
            rows.append(
                {
                    "metric": metric,
                    "system": system,
                    "score": 10.0 - rank,
                    "ci_low": 9.5 - rank,
                    "ci_high": 10.5 - rank,
                    "rank": rank,
                    "cluster": float(rank if rank < 3 else 2),
                    "higher_is_better": higher,
                }
            )
    systems = pd.DataFrame(
        {
            "diversity": [0.6, 0.0, 0.9],
            "diversity_q25": [0.5, 0.0, 0.8],
            "diversity_q75": [0.7, 0.0, 1.0],
            "adequacy": [0.8, 0.9, 0.2],
            "adequacy_q25": [0.7, 0.9, 0.1],
            "adequacy_q75": [0.9, 0.9, 0.3],
            "copy_rate": [0.0, 1.0, 0.0],
        },
        index=pd.Index(["strong", "copy", "weak"], name="system"),
    )
    return Comparison(
        table=pd.DataFrame(rows),
        systems=systems,
        items=pd.DataFrame(),
        baseline="copy",
        config=compare_settings(confidence=0.9, alpha=0.01),
        signature="",
    )


def test_the_ranking_has_a_panel_per_column_and_marks_the_baseline(tmp_path: Path) -> None:
    path = tmp_path / "ranking.svg"
    style = plots.FigureStyle(fmt="svg", lower=frozenset({"ter"}))
    assert ranking_plot(_comparison(), path, style)
    text = _text(path)
    assert "System ranking: 90% bootstrap intervals" in text and "alpha 0.01" in text
    # the group average first, then the columns in their order; each with its direction
    panels = [text.index(f"{name}<") for name in ("syntactic", "bleu", f"ter {plots.LOWER_MARK}")]
    assert panels == sorted(panels)
    assert text.count("(higher is better)") == 2 and text.count("(lower is better)") == 1
    assert ">cluster 1<" in text and ">baseline (copy)<" in text
    # one row of panels: the systems' names once, left of it, the baseline's in bold
    assert text.count(">strong<") == 1 and text.count(">copy<") == 1
    assert text.count("font-weight: 700") == 1
    empty = dataclasses.replace(_comparison(), table=_comparison().table.iloc[:0])
    assert not ranking_plot(empty, tmp_path / "none.svg")


def test_the_frontier_figure_marks_controls_frontier_and_threshold(tmp_path: Path) -> None:
    table = pd.DataFrame(
        {
            "system": ["strong", "medium", "weak", "copy"],
            "control": [False, False, False, True],
            "frontier": [True, False, True, False],
        }
    )
    for m, values in {
        "adequacy": [0.8, 0.6, 0.4, 0.65],
        "edit_distance": [0.7, 0.3, 0.68, 0.0],
    }.items():
        table[m] = values
        table[f"{m}_low"] = [v - 0.03 for v in values]
        table[f"{m}_high"] = [v + 0.03 for v in values]
    view = ParaphraseTable(
        table, "bertscore_f1", "pinc", "parascore_free", True, 0.35, "edit_distance"
    )
    path = tmp_path / "frontier.svg"
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        assert frontier_plot(view, path)
    text = path.read_text(encoding="utf-8")
    assert "Meaning kept against wording changed" in text
    assert ">strong<" in text and ">weak<" in text
    # the copy, far left of the ranked systems, is drawn on the edge with its values
    assert ">copy (control): 0.000, 0.650, off the axes<" in text
    assert "threshold γ = 0.35" in text
    assert "similarity to the source" in text
    # nothing to draw: no figure
    assert not frontier_plot(
        ParaphraseTable(table.assign(adequacy=np.nan), "cosine", "pinc", x_axis="edit_distance"),
        tmp_path / "no.svg",
    )
