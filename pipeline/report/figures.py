"""Every figure of an evaluation, drawn into ``plots/``; a failed figure is only a warning. On
Linux each is drawn once its tables exist, in a forked process: it shares the run's memory
copy-on-write (nothing to send) and dies with the run (``PR_SET_PDEATHSIG``, ``kill -9`` too)."""

from __future__ import annotations

import gc
import logging
import os
import signal
import sys
import warnings
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from paraeval.pipeline.context import RunContext
from paraeval.pipeline.files import PLOTS_DIR
from paraeval.pipeline.lifetime import die_with_parent
from paraeval.pipeline.names import slug
from paraeval.pipeline.report.human_plots import (
    correlation_heatmap,
    metric_vs_human,
    plot_alpha_curve,
    scatter_columns,
)
from paraeval.pipeline.report.plots import FigureStyle, drawn
from paraeval.pipeline.report.ranking import frontier_plot, ranking_plot
from paraeval.pipeline.stages.headline import headline_coefficient

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


HEATMAP_COLUMNS = ["metric", "aspect", "level", "coefficient", "value", "n"]
Plan = list[tuple[Path, partial[bool]]]
log = logging.getLogger(__name__)


def figure_plan(ev: Evaluation, out_dir: str | Path) -> Plan:
    """Each figure of ``ev``: its file in ``out_dir/plots`` and the call that draws it."""
    style = figure_style(ev)
    agg = ev.aggregated
    assert agg is not None  # figure_style checked it
    draws: list[tuple[str, partial[bool]]] = []
    if not ev.correlations.empty:
        shown = ev.correlations[HEATMAP_COLUMNS]
        headline = headline_coefficient(ev.settings.correlation, shown["coefficient"])
        draw = partial(correlation_heatmap, shown, coefficient=headline, style=style)
        draws.append(("correlation_heatmap", draw))
    for metric in scatter_columns(agg.segments, list(agg.columns)):
        for aspect in ev.aspects:
            draw = partial(metric_vs_human, agg.segments, agg.systems, metric, aspect, style=style)
            # the names come from the data: made file-safe
            draws.append((f"scatter_{slug(metric)}_{slug(aspect)}", draw))
    if ev.paraphrase is not None:
        draws.append(("paraphrase_frontier", partial(frontier_plot, ev.paraphrase)))
    if ev.compared is not None:
        draws.append(("system_ranking", partial(ranking_plot, ev.compared, style=style)))
    if ev.alpha_curve is not None:
        draws.append(("alpha_curve", partial(plot_alpha_curve, ev.alpha_curve)))
    plots = Path(out_dir) / PLOTS_DIR
    return [(style.path(plots, stem), draw) for stem, draw in draws]


def _draw(plan: Plan) -> list[Path]:
    with warnings.catch_warnings():
        # one system or constant scores give singular axis limits; matplotlib copes and warns
        warnings.simplefilter("ignore", UserWarning)
        return [path for path, draw in plan if drawn(path, draw)]


def write_figures(ev: Evaluation, out_dir: str | Path) -> list[Path]:
    """Draws every figure of ``ev`` into ``out_dir/plots``; returns the files written."""
    return _draw(figure_plan(ev, out_dir))


class Figures:
    """The figures of an evaluation being computed, each started as soon as its tables exist
    (:meth:`start_ready` after each stage), in forked processes; :meth:`wait` for all of them."""

    def __init__(self, out_dir: str | Path, parallel: bool, context: RunContext) -> None:
        self.out_dir = Path(out_dir)
        self.context = context  # told of figures a killed process left missing (exit 4)
        # forked processes die with the run by a Linux-only kernel signal
        self.parallel = parallel and sys.platform == "linux"
        self.started: Plan = []
        self.here: Plan = []  # drawn by wait() where no process can be started
        self.pids: list[int] = []
        self.plans: dict[int, list[Path]] = {}  # each process's figures

    def start_ready(self, ev: Evaluation) -> None:
        """Starts drawing the figures of ``ev``'s tables that are not started yet."""
        if ev.aggregated is None:
            return
        known = {path for path, _ in self.started}
        plan = [(path, draw) for path, draw in figure_plan(ev, self.out_dir) if path not in known]
        if not plan:
            return
        self.started += plan
        if not self.parallel:
            self.here += plan
            return
        for path, _ in plan:
            # a file of an earlier run in this folder would read as drawn
            path.unlink(missing_ok=True)
        pid = _fork(plan)
        self.pids.append(pid)
        self.plans[pid] = [path for path, _ in plan]

    def wait(self) -> list[Path]:
        """Waits for every figure started; the files drawn."""
        try:
            while self.pids:
                code = os.waitstatus_to_exitcode(os.waitpid(self.pids[0], 0)[1])
                plan = self.plans.pop(self.pids.pop(0), [])
                missing = [path.name for path in plan if not path.exists()]
                if code != 0 and missing:
                    how = f"signal {-code}" if code < 0 else f"exit status {code}"
                    self.context.figures_missing.append(self.out_dir)
                    log.warning(
                        "run in %s: the figure process ended with %s; figures missing: %s; "
                        "the tables are written",
                        self.out_dir,
                        how,
                        ", ".join(missing),
                    )
        except BaseException:
            self.stop()  # an interrupt while waiting: the figures are not wanted any more
            raise
        _draw(self.here)
        self.here = []
        return [path for path, _ in self.started if path.exists()]

    def stop(self) -> None:
        """Kills the processes still drawing, and reaps them."""
        while self.pids:
            pid = self.pids.pop()
            self.plans.pop(pid, None)
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)


def _fork(plan: Plan) -> int:
    """A child process that draws ``plan`` and ends; its pid."""
    parent = os.getpid()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()  # else their buffers would be written twice
    pid = os.fork()
    if pid == 0:  # the child: draws and leaves without running the run's exit handlers
        # the collector leaves the run's objects alone: scanning them would write to every page
        # they share with the run (copy-on-write) for nothing
        gc.freeze()
        code = 1
        try:
            die_with_parent(parent)
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the run's to handle
            _draw(plan)
            code = 0
        finally:
            os._exit(code)
    return pid
