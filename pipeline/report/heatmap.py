"""The correlation heatmap: every metric against every (human aspect, level) for one coefficient."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize

from paraeval.pipeline.report import plots
from paraeval.pipeline.report.plots import FigureStyle
from paraeval.pipeline.stages.headline import headline_coefficient

# the frame, in inches: the title above the rows, each row, the column headers below, the
# colour bar's room on the right
TOP_IN = 0.45
ROW_IN = 0.32
BOTTOM_IN = 0.7
RIGHT_IN = 1.1
COLUMN_IN = 1.0
CMAP = "RdBu_r"


def _headers(sub: pd.DataFrame, columns: pd.Index) -> list[str]:
    """Each column's aspect and level, and its ``n`` where every cell of it has the same."""
    headers = []
    for aspect, level in columns:
        head = f"{str(aspect).removeprefix('human_')}\n{level}"
        if "n" in sub.columns:
            ns = set(sub.loc[(sub["aspect"] == aspect) & (sub["level"] == level), "n"].dropna())
            if len(ns) == 1:
                head += f"\nn = {int(ns.pop())}"
        headers.append(head)
    return headers


def correlation_heatmap(
    corr: pd.DataFrame, path: Path, coefficient: str | None = None, style: FigureStyle | None = None
) -> bool:
    """Metrics x (aspect, level) for one coefficient (the run's headline coefficient, given by
    the caller; without it the first in ``corr``), NaN cells blank; False when there is nothing
    to draw."""
    if corr.empty:
        return False
    style = style or FigureStyle()
    coefficient = coefficient or headline_coefficient({}, corr["coefficient"])
    sub = corr[corr["coefficient"] == coefficient]
    table = sub.pivot_table(
        index="metric", columns=["aspect", "level"], values="value", aggfunc="first", sort=False
    )
    if table.empty:
        return False
    rows = [style.label(str(m)) for m in table.index]
    data = table.to_numpy(dtype=float)
    n_rows, n_cols = data.shape
    label_in = 0.5 + 0.075 * max((len(r) for r in rows), default=4)
    width = label_in + COLUMN_IN * n_cols + RIGHT_IN
    height = TOP_IN + ROW_IN * n_rows + BOTTOM_IN
    fig = plots.new_figure((width, height))
    left, right = label_in / width, 1 - RIGHT_IN / width
    bottom, top = BOTTOM_IN / height, 1 - TOP_IN / height
    ax = fig.add_axes((left, bottom, right - left, top - bottom))
    norm = Normalize(-1, 1)
    ax.imshow(np.ma.masked_invalid(data), cmap=CMAP, norm=norm, aspect="auto")
    # a white rule between rows keeps each metric's row apart from the next one's
    ax.hlines(np.arange(n_rows - 1) + 0.5, -0.5, n_cols - 0.5, colors="white", lw=2)
    ax.set_xticks(range(n_cols), _headers(sub, table.columns), fontsize=8)
    ax.set_yticks(range(n_rows), rows, fontsize=8)
    ax.tick_params(length=0)
    ax.spines[:].set_visible(False)
    for (i, j), v in np.ndenumerate(data):
        if np.isfinite(v):
            color = "white" if abs(v) > 0.6 else "black"
            ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7, color=color)
    name = plots.COEFFICIENT_NAMES.get(coefficient, coefficient)
    ax.set_title(f"{name}: metric vs human ratings", fontsize=10)
    # the colour bar right of the rows, four fifths of their height
    span = top - bottom
    cax = fig.add_axes((right + 0.15 / width, bottom + 0.1 * span, 0.18 / width, 0.8 * span))
    bar = fig.colorbar(ScalarMappable(norm, cmap=CMAP), cax=cax)
    bar.set_label(name, fontsize=8)
    bar.ax.tick_params(labelsize=8)
    if style.marked(str(m) for m in table.index):
        plots.marks_note(fig)
    plots.save_figure(fig, path)
    return True
