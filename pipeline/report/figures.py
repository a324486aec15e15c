"""Every figure of a finished evaluation, drawn into ``plots/`` from the :class:`Evaluation`'s
tables by the run's process and, on the command line, a worker process (:mod:`.worker`). A figure
that fails is a warning, never a failed run."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from paraeval.pipeline.names import slug
from paraeval.pipeline.report.alpha_plot import plot_alpha_curve
from paraeval.pipeline.report.compare_plots import diversity_adequacy_plot
from paraeval.pipeline.report.heatmap import correlation_heatmap
from paraeval.pipeline.report.plots import figure_style
from paraeval.pipeline.report.ranking import ranking_plot
from paraeval.pipeline.report.scatter import metric_vs_human, scatter_columns
from paraeval.pipeline.report.worker import FigureWorker, Job, run_jobs

if TYPE_CHECKING:
    from paraeval.pipeline.stages.evaluation import Evaluation

PLOTS_DIR = "plots"
# what the heatmap shows of the correlation table
HEATMAP_COLUMNS = ["metric", "aspect", "level", "coefficient", "value", "n"]
# rough drawing cost of each kind of figure (seconds on ParaBank-Eval), to share them out
_WEIGHTS = {"system_ranking": 5.0, "correlation_heatmap": 1.1, "alpha_curve": 0.5}


def write_figures(
    ev: Evaluation, out_dir: str | Path, worker: FigureWorker | None = None
) -> list[Path]:
    """Draws every figure of ``ev`` into ``out_dir/plots``, part of them in ``worker`` when one
    is given; returns the files written."""
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
    jobs: list[Job] = [(style.path(plots, stem), draw) for stem, draw in draws]
    return run_jobs(jobs, worker, _weight)


def _weight(job: Job) -> float:
    stem = job[0].stem
    return _WEIGHTS.get(stem, 0.85 if stem.startswith("scatter_") else 0.5)
