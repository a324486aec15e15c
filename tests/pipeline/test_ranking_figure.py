"""The ranking and the scatter plots at scale: a generated comparison of 40 systems on 30 columns
(seeded) gives one ranking figure no wider than the page holds at a readable size, in which every
system keeps its row and its colour in every panel, the significance cluster is the marker's fill
and a number (the table's own), and every scatter plot is titled with its metric."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.axes import Axes
from matplotlib.collections import Collection
from matplotlib.colors import to_rgba_array
from matplotlib.figure import Figure
from PIL import Image

from paraeval.pipeline.report import plots
from paraeval.pipeline.report.plots import FigureStyle, scatter_columns, scatter_figure
from paraeval.pipeline.report.ranking import (
    BASELINE_GID,
    CLUSTER_GID,
    INTERVALS_GID,
    MAX_HEIGHT_IN,
    MAX_WIDTH_IN,
    POINTS_GID,
    RankingLayout,
    ranking_figure,
    ranking_layout,
    ranking_plot,
)
from paraeval.pipeline.stages.compare import Comparison
from tests.pipeline.helpers import compare_settings

N_SYSTEMS, N_METRICS = 40, 30
LOWER = {f"m{j:02d}" for j in range(2, N_METRICS) if j % 5 == 0}  # TER-like columns
SOURCE = "m03"  # self-BLEU-like: ranked higher-is-better by the table, read lower = more diverse


def _table(seed: int = 0) -> pd.DataFrame:
    """system_comparison.csv's columns: each system's score, interval, rank and clusters of
    five in the table's direction, the group averages first."""
    rng = np.random.default_rng(seed)
    quality = rng.normal(size=N_SYSTEMS)
    metrics = ["syntactic", "semantic", *(f"m{j:02d}" for j in range(2, N_METRICS))]
    rows = []
    for metric in metrics:
        higher = metric not in LOWER
        score = (quality if higher else -quality) + rng.normal(scale=0.5, size=N_SYSTEMS)
        rank = pd.Series(score).rank(ascending=not higher).to_numpy()
        half = rng.uniform(0.1, 0.4, size=N_SYSTEMS)
        for i in range(N_SYSTEMS):
            rows.append(
                {
                    "metric": metric,
                    "system": f"sys{i:02d}",
                    "score": score[i],
                    "ci_low": score[i] - half[i],
                    "ci_high": score[i] + half[i],
                    "rank": rank[i],
                    "cluster": np.ceil(rank[i] / 5),
                    "higher_is_better": higher,
                }
            )
    return pd.DataFrame(rows)


STYLE = FigureStyle(lower=frozenset(LOWER), source=frozenset({SOURCE}))


def _comparison(table: pd.DataFrame) -> Comparison:
    return Comparison(
        table=table,
        systems=pd.DataFrame(),
        items=pd.DataFrame(),
        baseline="sys07",
        config=compare_settings(confidence=0.95, alpha=0.05),
        signature="",
    )


def _artist(ax: Axes, gid: str) -> Collection:
    (found,) = [c for c in ax.collections if c.get_gid() == gid]
    return found


@pytest.fixture(scope="module")
def drawn() -> tuple[RankingLayout, Figure, float]:
    """The generated comparison's layout and figure (one figure for the tests that read it:
    building it is most of their time), and the seconds its building took."""
    start = time.perf_counter()
    fig = ranking_figure(_comparison(_table()), STYLE)
    seconds = time.perf_counter() - start
    layout = ranking_layout(_table(), "sys07", STYLE)
    assert fig is not None and layout is not None
    return layout, fig, seconds


@pytest.mark.slow
def test_40_systems_and_30_columns_fit_the_page_width(
    drawn: tuple[RankingLayout, Figure, float], tmp_path: Path
) -> None:
    _, fig, seconds = drawn
    path = tmp_path / "ranking.png"
    start = time.perf_counter()
    plots.save_figure(fig, path)
    seconds += time.perf_counter() - start
    with Image.open(path) as image:
        width, height = image.size
        assert round(image.info["dpi"][1]) == plots.PNG_DPI
    # the page shows it at 104 px an inch: 1,300 px wide, its 7 pt names 10 px tall
    assert width <= (MAX_WIDTH_IN + 2 * plots.PAD_INCHES) * plots.PNG_DPI
    assert height <= MAX_HEIGHT_IN * plots.PNG_DPI
    # panels in several rows, not one strip of thirty
    assert height > width
    assert seconds < 60, seconds  # a few seconds on an idle machine
    assert fig.get_suptitle().startswith("System ranking: 95% bootstrap intervals")
    texts = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "cluster 1" in texts and "baseline (sys07)" in texts
    assert ranking_figure(_comparison(_table().iloc[:0])) is None


def test_every_system_keeps_its_row_and_colour_in_every_panel(
    drawn: tuple[RankingLayout, Figure, float],
) -> None:
    table = _table()
    layout, fig, _ = drawn
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert len(panels) == len(layout.panels) == N_METRICS
    assert [ax.get_title().split(" ")[0].split("\n")[0] for ax in panels[:3]] == [
        "syntactic",
        "semantic",
        "m02",
    ]
    rows = np.array([layout.y(s) for s in layout.systems], dtype=float)
    colors = to_rgba_array([layout.colors[s] for s in layout.systems])
    assert len({tuple(c) for c in colors}) == N_SYSTEMS  # forty systems, forty colours
    for ax, panel in zip(panels, layout.panels, strict=True):
        points = _artist(ax, POINTS_GID)
        assert np.array_equal(points.get_offsets()[:, 1], rows), panel.metric
        assert np.array_equal(points.get_offsets()[:, 0], panel.score)
        assert np.array_equal(points.get_edgecolor(), colors), panel.metric
        assert np.array_equal(_artist(ax, INTERVALS_GID).get_color(), colors)
        base = _artist(ax, BASELINE_GID).get_offsets()
        assert base[0, 1] == layout.y("sys07")
    # the order is the systems' mean rank over the two group averages, best first
    ranks = table[table["metric"].isin(plots.AVERAGES)].pivot(
        index="system", columns="metric", values="rank"
    )
    assert list(ranks.mean(axis=1).sort_values(kind="stable").index) == list(layout.systems)


def test_the_cluster_is_the_fill_and_a_number_never_the_place_or_colour(
    drawn: tuple[RankingLayout, Figure, float],
) -> None:
    table = _table()
    layout, fig, _ = drawn
    # other clusters, the same scores: the same rows and colours
    shuffled = table.assign(cluster=np.random.default_rng(1).permutation(table["cluster"]))
    other = ranking_layout(shuffled, "sys07", STYLE)
    assert other is not None
    assert other.systems == layout.systems and other.colors == layout.colors
    assert any(
        not np.array_equal(a.cluster, b.cluster)
        for a, b in zip(layout.panels, other.panels, strict=True)
    )
    rows = np.array([layout.y(s) for s in layout.systems], dtype=float)
    for ax, panel in zip([ax for ax in fig.axes if ax.get_visible()], layout.panels, strict=True):
        points = _artist(ax, POINTS_GID)
        filled = np.all(points.get_facecolor() == points.get_edgecolor(), axis=1)
        assert np.array_equal(filled, panel.cluster == 1), panel.metric  # the best, filled
        assert filled.any() and not filled.all()
        # each system's cluster number on its row right of the panel
        for cluster in np.unique(panel.cluster):
            (line,) = [x for x in ax.lines if x.get_gid() == f"{CLUSTER_GID} {cluster:g}"]
            assert sorted(line.get_ydata()) == sorted(rows[panel.cluster == cluster])


def test_the_clusters_are_the_tables_whatever_the_panels_direction(
    drawn: tuple[RankingLayout, Figure, float],
) -> None:
    """A lower-is-better column reads best to the right (its axis reversed); a similarity to
    the source reads "lower = more diverse", and its clusters are still the table's: the
    copying system, first in the table, is in cluster 1, filled, as on the page."""
    table = _table()
    source = table["metric"] == SOURCE
    copying = table.loc[source].sort_values("score")["system"].iloc[-1]
    layout, fig, _ = drawn
    by_metric = dict(zip([p.metric for p in layout.panels], fig.axes, strict=True))
    for panel in layout.panels:
        assert bool(by_metric[panel.metric].xaxis_inverted()) is panel.lower_is_better
        rows = table[table["metric"] == panel.metric].set_index("system")["cluster"]
        assert np.array_equal(panel.cluster, rows.reindex(layout.systems).to_numpy())
    src = next(p for p in layout.panels if p.metric == SOURCE)
    assert src.lower_is_better and "lower = more diverse" in src.title
    at = layout.systems.index(copying)
    assert src.cluster[at] == 1
    points = _artist(by_metric[SOURCE], POINTS_GID)
    assert np.array_equal(points.get_facecolor()[at], points.get_edgecolor()[at])


def test_a_missing_system_keeps_the_others_rows() -> None:
    table = _table()
    gap = (table["metric"] == "m04") & (table["system"] == "sys11")
    layout = ranking_layout(table[~gap], "sys07", STYLE)
    full = ranking_layout(table, "sys07", STYLE)
    assert layout is not None and full is not None
    assert layout.systems == full.systems
    m04 = next(p for p in layout.panels if p.metric == "m04")
    assert np.isnan(m04.score[layout.systems.index("sys11")])


def _segments(n_systems: int, metrics: list[str]) -> pd.DataFrame:
    rng = np.random.default_rng(2)
    n = 6 * n_systems
    data = {m: rng.random(n) for m in [*metrics, "human_meaning", "human_fluency"]}
    return pd.DataFrame({"system": np.repeat([f"sys{i:02d}" for i in range(n_systems)], 6), **data})


@pytest.mark.parametrize("max_scatter", [4, 30])
def test_every_scatter_plot_is_titled_with_its_metric_and_aspect(max_scatter: int) -> None:
    metrics = ["syntactic", "semantic", *(f"m{j:02d}" for j in range(2, N_METRICS))]
    seg = _segments(N_SYSTEMS, metrics)
    systems = seg.groupby("system").mean()
    chosen = scatter_columns(seg, metrics[2:], max_scatter)
    assert len(chosen) == max_scatter
    style = STYLE
    for metric in chosen[:: max(1, max_scatter // 4)]:
        for aspect in ("human_meaning", "human_fluency"):
            fig = scatter_figure(seg, systems, metric, aspect, style)
            title = fig.get_suptitle()
            assert title.startswith(style.label(metric)), title
            assert aspect.removeprefix("human_") in title
            levels = [ax.get_title() for ax in fig.axes]
            assert levels[0].startswith("segments:") and levels[1].startswith("systems:")


def test_the_png_keeps_the_cluster_numbers_right_of_a_reversed_last_panel(tmp_path: Path) -> None:
    """The PNG is cropped to its contents: the numbers right of the panels' last column, the
    first row's reversed (TER-like m05), are in it."""
    table = _table()
    table = table[
        table["metric"].isin(["syntactic", "semantic", *(f"m{j:02d}" for j in range(2, 16))])
    ]
    layout = ranking_layout(table, "sys07", STYLE)
    assert layout is not None and layout.columns == 6  # wider than the caption
    assert layout.panels[5].metric == "m05" and layout.panels[5].lower_is_better
    path = tmp_path / "ranking.png"
    assert ranking_plot(_comparison(table), path, STYLE)
    with Image.open(path) as image:
        grey = np.asarray(image.convert("L"))
    dark = grey < 60
    # the panels' frames: columns dark over most of a panel's height; the last is the right
    # edge of the reversed panel
    frames = np.flatnonzero(dark.sum(axis=0) > 0.5 * grey.shape[0])
    right = frames.max()
    assert right < grey.shape[1] - 20
    numbers = grey[:, right + 5 :] < 200
    assert numbers.any(axis=0).sum() >= 4  # the digits' ink, not just the crop's margin
