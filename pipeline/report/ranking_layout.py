"""Where everything of the system ranking goes, computed without drawing (:mod:`.ranking` draws
it): the systems' one order and one colour for every panel, each panel's values and clusters in
the direction the panel reads, and the grid of panels that keeps the figure at most
``MAX_HEIGHT_IN`` tall, however many systems and columns."""

from __future__ import annotations

import math
from dataclasses import dataclass

import matplotlib
import numpy as np
import pandas as pd

from paraeval.pipeline.report import plots
from paraeval.pipeline.report.plots import FigureStyle

# the frame, in inches; 20 inches is 4,000 px at the PNG's 200 dpi
MAX_HEIGHT_IN = 20.0
ROW_IN = 0.12  # a system's row: 8.6 pt, room for its 6 pt name
MIN_ROW_IN = 0.05  # the pitch is shrunk down to this only where the rows would not fit otherwise
PANEL_IN = 1.45  # a panel's axes
GAP_IN = 0.3  # between panels: the cluster numbers right of a panel
NAME_CHAR_IN = 0.052  # a character of a 6 pt name
NAMES_IN = (0.5, 2.0)  # the names' column, left of a row of panels, at least and at most
TITLE_IN = 0.38  # above a panel: its two-line title
TICKS_IN = 0.32  # below a panel: its x tick labels
HEADER_IN = 0.85  # the figure's title and legend
MIN_COLUMNS = 4  # panels a row where fewer would fit: a figure wider than a column of panels


@dataclass(frozen=True)
class Panel:
    """A compared column: every system's values in the figure's system order (NaN where it has
    none) and its cluster numbered in the panel's direction (1 = best that way)."""

    metric: str
    title: str
    lower_is_better: bool  # as the panel reads: its x axis is reversed, better is to the right
    score: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    cluster: np.ndarray


@dataclass(frozen=True)
class RankingLayout:
    """The systems top to bottom, their colours, the panels in reading order and the grid."""

    systems: tuple[str, ...]
    colors: dict[str, tuple[float, float, float, float]]
    baseline: str
    panels: tuple[Panel, ...]
    columns: int  # panels a row
    rows: int  # rows of panels
    row_in: float  # a system's row
    names_in: float  # the names' column left of each row of panels

    @property
    def panel_height_in(self) -> float:
        return TITLE_IN + TICKS_IN + self.row_in * (len(self.systems) + 0.5)

    @property
    def size(self) -> tuple[float, float]:
        width = self.names_in + self.columns * (PANEL_IN + GAP_IN)
        return width, HEADER_IN + self.rows * self.panel_height_in

    def y(self, system: str) -> int:
        """The row of ``system``, the same in every panel: the first is at the top."""
        return len(self.systems) - 1 - self.systems.index(system)


def system_colors(systems: list[str]) -> dict[str, tuple[float, float, float, float]]:
    """A colour per system from a fixed palette, in the given order: tab10 up to ten systems,
    else the dark then the light halves of tab20, tab20b and tab20c (neighbours differ in
    hue), repeated past sixty."""
    names = ("tab10",) if len(systems) <= 10 else ("tab20", "tab20b", "tab20c")
    palette = []
    for name in names:
        cmap = matplotlib.colormaps[name]
        colors = [cmap(i) for i in range(cmap.N)]
        palette += colors if name == "tab10" else colors[0::2] + colors[1::2]
    return {s: palette[i % len(palette)] for i, s in enumerate(systems)}


def _display_ranks(sub: pd.DataFrame, lower: bool) -> pd.Series:
    """The systems' ranks in a column, 1 = best in the direction the panel reads."""
    return sub.set_index("system")["score"].rank(ascending=lower, method="average")


def system_order(table: pd.DataFrame, lower: dict[str, bool]) -> list[str]:
    """The systems by their mean rank over the group averages (over every column where there is
    none), best first; a system without any score last, ties by name."""
    chosen = [c for c in plots.AVERAGES if (table["metric"] == c).any()]
    chosen = chosen or list(dict.fromkeys(table["metric"]))
    ranks = pd.concat(
        [_display_ranks(table[table["metric"] == c], lower[c]) for c in chosen], axis=1
    )
    mean = ranks.mean(axis=1, skipna=True)
    systems = sorted(set(table["system"]), key=str)
    return sorted(systems, key=lambda s: (not math.isfinite(mean.get(s, math.nan)), mean.get(s, 0)))


def _display_clusters(cluster: np.ndarray, table_lower: bool, lower: bool) -> np.ndarray:
    """The compared clusters numbered from the best in the panel's direction: where the table
    ranked the other way (a similarity to the source, higher = closer to a copy), the same
    groups of indistinguishable systems numbered from the other end."""
    if lower == table_lower or not np.isfinite(cluster).any():
        return cluster
    return np.nanmax(cluster) + 1 - cluster


def _lower(table: pd.DataFrame, style: FigureStyle) -> dict[str, bool]:
    """Whether each column reads lower-is-better: a similarity to the source reads "lower =
    more diverse", whatever the table ranked by."""
    first = table.drop_duplicates("metric").set_index("metric")["higher_is_better"]
    return {c: (not bool(first[c])) or c in style.source for c in first.index}


def comparison_colors(
    table: pd.DataFrame, style: FigureStyle | None = None
) -> dict[str, tuple[float, float, float, float]]:
    """Each compared system's colour in the ranking, for the other figures of the comparison:
    a system has one colour in all of them."""
    if table.empty:
        return {}
    return system_colors(system_order(table, _lower(table, style or FigureStyle())))


def _grid(n_systems: int, n_panels: int) -> tuple[int, int, float]:
    """(columns, rows, row pitch): the fewest columns (at least MIN_COLUMNS) whose rows of
    panels fit MAX_HEIGHT_IN; the row pitch shrunk only where one row of panels would not."""
    fixed = TITLE_IN + TICKS_IN
    for columns in range(min(MIN_COLUMNS, n_panels), n_panels + 1):
        rows = math.ceil(n_panels / columns)
        if HEADER_IN + rows * (fixed + ROW_IN * (n_systems + 0.5)) <= MAX_HEIGHT_IN:
            return columns, rows, ROW_IN
    pitch = (MAX_HEIGHT_IN - HEADER_IN - fixed) / (n_systems + 0.5)
    return n_panels, 1, max(pitch, MIN_ROW_IN)


def ranking_layout(
    table: pd.DataFrame, baseline: str, style: FigureStyle | None = None
) -> RankingLayout | None:
    """The layout of ``table`` (``system_comparison.csv``'s columns); None where it is empty."""
    style = style or FigureStyle()
    if table.empty:
        return None
    chosen = plots.averages_first(table["metric"])
    first = table.drop_duplicates("metric").set_index("metric")["higher_is_better"]
    lower = _lower(table, style)
    systems = system_order(table, lower)
    panels = []
    for metric in chosen:
        sub = table[table["metric"] == metric]
        sub = sub.drop_duplicates("system").set_index("system", drop=False).reindex(systems)
        # the short form of a similarity's direction: the long one is wider than a panel
        way = "lower = more diverse" if metric in style.source else None
        title = f"{style.label(metric)}\n({way or style.direction(metric, not lower[metric])})"
        panels.append(
            Panel(
                metric,
                title,
                lower[metric],
                sub["score"].to_numpy(dtype=float),
                sub["ci_low"].to_numpy(dtype=float),
                sub["ci_high"].to_numpy(dtype=float),
                _display_clusters(
                    sub["cluster"].to_numpy(dtype=float), not first[metric], lower[metric]
                ),
            )
        )
    columns, rows, pitch = _grid(len(systems), len(panels))
    longest = max(len(str(s)) for s in systems) + 1
    names = min(max(longest * NAME_CHAR_IN, NAMES_IN[0]), NAMES_IN[1])
    colors = system_colors(systems)
    return RankingLayout(
        tuple(systems), colors, baseline, tuple(panels), columns, rows, pitch, names
    )
