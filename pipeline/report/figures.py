"""Every figure of a finished evaluation, drawn into ``plots/`` by the run's process and, on the
command line, a worker process that ends with the run (:mod:`.worker`).

The stages produce tables only; this module reads them from the :class:`Evaluation` and draws:
the correlation heatmap, the metric-vs-human scatter plots, the diversity–adequacy view, the
system ranking and the iBLEU α curve, each in the format ``report.format`` names. A figure that
fails is a warning, never a failed run.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from paraeval.pipeline.names import slug
from paraeval.pipeline.report.alpha_plot import plot_alpha_curve
from paraeval.pipeline.report.compare_plots import diversity_adequacy_plot
from paraeval.pipeline.report.heatmap import correlation_heatmap
from paraeval.pipeline.report.plots import FigureStyle
from paraeval.pipeline.report.ranking import ranking_plot
from paraeval.pipeline.report.scatter import metric_vs_human, scatter_columns
from paraeval.pipeline.report.worker import FigureWorker, run_jobs

if TYPE_CHECKING:
    from paraeval.pipeline.stages.evaluation import Evaluation

PLOTS_DIR = "plots"
# what the heatmap shows of the correlation table
HEATMAP_COLUMNS = ["metric", "aspect", "level", "coefficient", "value", "n"]


def figure_style(ev: Evaluation) -> FigureStyle:
    """The run's figure format and each output column's direction marks."""
    if ev.aggregated is None:
        raise RuntimeError("the evaluation has not been computed")
    columns = ev.aggregated.columns
    return FigureStyle(
        fmt=ev.settings.report.format,
        lower=frozenset(c for c, i in columns.items() if not i.higher_is_better),
        source=frozenset(
            c for c, i in columns.items() if i.group == "diversity" or c.endswith("_src")
        ),
    )


def write_figures(
    ev: Evaluation, out_dir: str | Path, worker: FigureWorker | None = None
) -> list[Path]:
    """Draws every figure of ``ev`` into ``out_dir/plots``, part of them in ``worker`` when one
    is given; returns the files written."""
    if ev.aggregated is None:
        raise RuntimeError("the evaluation has not been computed")
    style = figure_style(ev)
    plots = Path(out_dir) / PLOTS_DIR
    agg = ev.aggregated
    jobs: list[tuple[Path, Callable[[Path], bool]]] = []
    if not ev.correlations.empty:
        shown = ev.correlations[[c for c in HEATMAP_COLUMNS if c in ev.correlations.columns]]
        jobs.append(
            (
                style.path(plots, "correlation_heatmap"),
                functools.partial(correlation_heatmap, shown, style=style),
            )
        )
    for metric in scatter_columns(agg.segments, list(agg.columns)):
        for aspect in ev.aspects:
            jobs.append(
                (
                    # the names come from the data: made file-safe
                    style.path(plots, f"scatter_{slug(metric)}_{slug(aspect)}"),
                    functools.partial(
                        metric_vs_human, agg.segments, agg.systems, metric, aspect, style=style
                    ),
                )
            )
    if ev.compared is not None:
        jobs.append(
            (
                style.path(plots, "diversity_adequacy"),
                functools.partial(diversity_adequacy_plot, ev.compared),
            )
        )
        jobs.append(
            (
                style.path(plots, "system_ranking"),
                functools.partial(ranking_plot, ev.compared, style=style),
            )
        )
    if ev.alpha_curve is not None:
        jobs.append(
            (style.path(plots, "alpha_curve"), functools.partial(plot_alpha_curve, ev.alpha_curve))
        )
    return run_jobs(jobs, worker, _weight)


# rough drawing cost of each kind of figure (seconds on ParaBank-Eval), to share them out
_WEIGHTS = {"system_ranking": 5.0, "correlation_heatmap": 1.1, "alpha_curve": 0.5}


def _weight(job: tuple[Path, object]) -> float:
    stem = job[0].stem
    return _WEIGHTS.get(stem, 0.85 if stem.startswith("scatter_") else 0.5)
