"""Every figure of a finished evaluation, drawn into ``plots/`` from the :class:`Evaluation`'s
tables in the run's own process. A figure that fails is a warning, never a failed run."""

from __future__ import annotations

import warnings
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from paraeval.pipeline.names import slug
from paraeval.pipeline.report.alpha_plot import plot_alpha_curve
from paraeval.pipeline.report.compare_plots import diversity_adequacy_plot
from paraeval.pipeline.report.heatmap import correlation_heatmap
from paraeval.pipeline.report.plots import FigureStyle, drawn
from paraeval.pipeline.report.ranking import ranking_plot
from paraeval.pipeline.report.scatter import metric_vs_human, scatter_columns

if TYPE_CHECKING:
    from paraeval.pipeline.stages.evaluation import Evaluation


def figure_style(ev: Evaluation) -> FigureStyle:
    """The run's figure format and each output column's direction marks."""
    if ev.aggregated is None:
        raise RuntimeError("the evaluation has not been computed")
    info = ev.aggregated.columns.items()
    lower = frozenset(c for c, i in info if not i.higher_is_better)
    source = frozenset(c for c, i in info if i.group == "diversity" or c.endswith("_src"))
    return FigureStyle(ev.settings.report.format, lower, source)


PLOTS_DIR = "plots"
# what the heatmap shows of the correlation table
HEATMAP_COLUMNS = ["metric", "aspect", "level", "coefficient", "value", "n"]


def write_figures(ev: Evaluation, out_dir: str | Path) -> list[Path]:
    """Draws every figure of ``ev`` into ``out_dir/plots``; returns the files written."""
    style = figure_style(ev)
    plots = Path(out_dir) / PLOTS_DIR
    agg = ev.aggregated
    assert agg is not None  # figure_style checked it
    draws: list[tuple[str, partial[bool]]] = []
    if not ev.correlations.empty:
        shown = ev.correlations[[c for c in HEATMAP_COLUMNS if c in ev.correlations.columns]]
        draws.append(("correlation_heatmap", partial(correlation_heatmap, shown, style=style)))
    for metric in scatter_columns(agg.segments, list(agg.columns)):
        for aspect in ev.aspects:
            draw = partial(metric_vs_human, agg.segments, agg.systems, metric, aspect, style=style)
            # the names come from the data: made file-safe
            draws.append((f"scatter_{slug(metric)}_{slug(aspect)}", draw))
    if ev.compared is not None:
        draws.append(("diversity_adequacy", partial(diversity_adequacy_plot, ev.compared)))
        draws.append(("system_ranking", partial(ranking_plot, ev.compared, style=style)))
    if ev.alpha_curve is not None:
        draws.append(("alpha_curve", partial(plot_alpha_curve, ev.alpha_curve)))
    with warnings.catch_warnings():
        # one system or constant scores give singular axis limits; matplotlib copes and warns
        warnings.simplefilter("ignore", UserWarning)
        paths = [style.path(plots, stem) for stem, _ in draws]
        return [path for path, (_, draw) in zip(paths, draws, strict=True) if drawn(path, draw)]
