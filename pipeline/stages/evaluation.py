"""The one object that passes between the stages, and the stages themselves.

:func:`compute` runs load's result through score -> aggregate -> correlate -> compare -> alpha
curve; each stage reads the :class:`Evaluation` and fills in its own part. Figures are jobs
(a picklable callable given the output folder): the CLI draws them in a helper process while the
later stages run; :meth:`Evaluation.write` draws whatever was not drawn yet. Nothing here reads
the config tree (that is :mod:`paraeval.pipeline.config.settings`) or talks to MLflow.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from paraeval.blas import on_one_blas_thread
from paraeval.metrics.base import Metric
from paraeval.pipeline.stages.aggregate import Aggregated, aggregate
from paraeval.pipeline.stages.cache import ScoreCache, correlate_cached
from paraeval.pipeline.stages.compare import COMPARISON_COLUMNS, SYSTEM_COLUMNS, Comparison, compare
from paraeval.pipeline.report.compare_plots import write_compare_plots
from paraeval.pipeline.stages.correlate import correlate, significance
from paraeval.pipeline.report.figures import ANY_LANE, Figures
from paraeval.pipeline.files import write_csv, write_parquet
from paraeval.pipeline.data.humans import human_report
from paraeval.pipeline.data.load import HUMAN_PREFIX
from paraeval.pipeline.report.plots import FigureStyle, scatter_columns, write_plots
from paraeval.pipeline.stages.score import Scores, build_metrics, score
from paraeval.pipeline.config.settings import Settings
from paraeval.pipeline.stages.alpha import AlphaCurve, compute_alpha_curve, curve_metrics, plot_alpha_curve
from paraeval.pipeline.report.terminal import Status
from paraeval.pipeline.tracking.mlflow_store import (
    RunRecord,
    hydra_tags,
    library_versions,
    sweep_run_name,
)
from paraeval.pipeline.tracking.trackers import Tracker, tracker_from_config

log = logging.getLogger("paraeval")

# a figure to draw: called with the output folder; picklable, so a helper process can draw it
FigureJob = Callable[[Path], object]


@dataclass
class Evaluation:
    """Scores, correlations and comparison of one evaluation.

    ``segments``, ``systems``, ``correlations``, ``comparison`` and ``signatures`` hold what the
    output files hold; :meth:`write` writes those files, :meth:`log` sends them to MLflow.
    """

    settings: Settings
    table: pd.DataFrame  # the loaded tidy table
    metrics: dict[str, Metric] = field(default_factory=dict)
    cache: ScoreCache | None = None
    scores: Scores | None = None
    aggregated: Aggregated | None = None
    correlations: pd.DataFrame = field(default_factory=pd.DataFrame)
    significance: pd.DataFrame = field(default_factory=pd.DataFrame)
    humans: pd.DataFrame = field(default_factory=pd.DataFrame)
    compared: Comparison | None = None
    alpha_curve: AlphaCurve | None = None
    run_metrics: dict[str, float] = field(default_factory=dict)  # logged besides correlations
    started_at: float = field(default_factory=time.time)  # when the run started (epoch seconds)
    # what the table was read from (load.take_load_token), where known: keys the score stage's
    # memo of the texts' digests
    table_token: str | None = None
    figures: list[FigureJob] = field(default_factory=list)

    # ------------------------------------------------------------------ what the files hold
    @property
    def _agg(self) -> Aggregated:
        if self.aggregated is None:
            raise RuntimeError("the evaluation has not been computed")
        return self.aggregated

    @property
    def segments(self) -> pd.DataFrame:
        """One row per (item, system): the tidy table, every metric column, the group averages."""
        return self._agg.segments.drop(columns=["origin"], errors="ignore")

    @property
    def systems(self) -> pd.DataFrame:
        """One row per system (the index): corpus-level scores, group averages, mean human
        scores; ``system_scores.csv`` is this table with the index as its first column."""
        return self._agg.systems

    @property
    def comparison(self) -> pd.DataFrame:
        """Per system and column: score, bootstrap interval, paired p-values, cluster."""
        if self.compared is None:
            return pd.DataFrame(columns=COMPARISON_COLUMNS)
        return self.compared.table

    @property
    def signatures(self) -> dict[str, str]:
        """The signature of every output column."""
        return {c: info.signature for c, info in self._agg.columns.items()}

    @property
    def aspects(self) -> list[str]:
        return [c for c in self._agg.segments.columns if c.startswith(HUMAN_PREFIX)]

    def signature_table(self) -> pd.DataFrame:
        return pd.DataFrame(
            [
                {
                    "column": c,
                    "metric": i.metric,
                    "group": i.group,
                    "higher_is_better": i.higher_is_better,
                    "signature": i.signature,
                }
                for c, i in self._agg.columns.items()
            ]
        )

    # ------------------------------------------------------------------ output
    def write(self, out_dir: str | Path) -> Path:
        """Writes every output file, figure and ``report.html`` into ``out_dir``."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        write_tables(self, out)
        drawn = Figures(background=False)
        for job in self.figures:
            drawn.submit(job, out)
        from paraeval.pipeline.report.html import write_html

        write_html(self, out)
        return out

    def log(
        self,
        out_dir: str | Path,
        tracking: Mapping[str, object] | None = None,
        overrides: Sequence[str] = (),
    ) -> str | None:
        """Writes the output files into ``out_dir`` and logs them with this evaluation's tracker
        (``tracking``: keys of ``conf/tracking/*.yaml`` to change, e.g. ``{"uri": ...}``).
        Returns the MLflow run id, or None when nothing was logged (the files are kept)."""
        s = self.settings
        tracker = s.tracker if tracking is None else tracker_from_config({**s.tracking, **tracking})
        out = self.write(out_dir)
        logged = tracker.log(out, run_record(self, out, overrides, tracker))
        return None if logged is None else logged.run_id


# --------------------------------------------------------------------------- stages
def score_stage(ev: Evaluation) -> list[FigureJob]:
    s = ev.settings
    ev.metrics = build_metrics(s.metrics, s.allow_external_metrics)
    ev.cache = ScoreCache.from_config(s.cache)
    ev.scores = score(
        ev.table, ev.metrics, progress=s.report.progress, cache=ev.cache, texts_key=ev.table_token
    )
    if ev.cache is not None:
        ev.cache.log_summary()
        ev.run_metrics.update(ev.cache.metrics())
    return []


def aggregate_stage(ev: Evaluation) -> list[FigureJob]:
    assert ev.scores is not None
    agg = ev.aggregated = aggregate(ev.scores, ev.settings.normalizer)
    ev.humans = human_report(agg.segments)
    # the scatter plots need the scores only: drawn while the correlations are computed, each
    # rating's in a helper of its own (a sweep job redraws as many in each)
    shown = scatter_columns(agg.segments, list(agg.columns))
    jobs = []
    for k, aspect in enumerate(ev.aspects):
        job = functools.partial(
            _draw_scatters,
            agg.segments[["system", *shown, aspect]],
            agg.systems.copy(),
            shown,
            [aspect],
            figure_style(ev),
        )
        job.lane = k  # type: ignore[attr-defined]
        jobs.append(job)
    return jobs


def correlate_stage(ev: Evaluation) -> list[FigureJob]:
    assert ev.scores is not None
    agg, settings = ev._agg, ev.settings.correlation
    rng = np.random.default_rng(ev.settings.seed)
    if ev.cache is not None:
        # rows of columns whose scores did not change (all but iBLEU in an alpha sweep) come
        # from the cache; the result and the generator state are those of a full computation
        ev.correlations = correlate_cached(agg, settings, rng, ev.scores, ev.cache)
        ev.run_metrics.update(ev.cache.metrics())
    else:
        ev.correlations = correlate(agg, settings, rng, ev.scores)
    ev.significance = significance(agg, settings, rng)
    if not ev.aspects and settings.get("levels"):
        log.warning("%s", no_ratings_message(ev.table))
    return [functools.partial(_draw_heatmap, ev.correlations, figure_style(ev))]


def no_ratings_message(table: pd.DataFrame) -> str:
    seen = table.attrs.get("columns_seen")
    if seen is None:
        return (
            "no human ratings found: nothing to correlate; give them with "
            "data.human={aspect: {system: file}}"
        )
    return (
        f"no human ratings found: nothing to correlate (no column starts with "
        f"'{HUMAN_PREFIX}'; the data has columns {seen}); name yours with "
        "data.columns.human={aspect: column}"
    )


def compare_stage(ev: Evaluation) -> list[FigureJob]:
    if ev.settings.compare is None or ev.scores is None:
        return []
    agg = ev._agg
    ev.compared = compare(ev.scores, agg, ev.settings.compare)
    for col in SYSTEM_COLUMNS:
        agg.systems[col] = ev.compared.systems[col].reindex(agg.systems.index)
    return [functools.partial(_draw_compare, ev.compared, figure_style(ev))]


def alpha_curve_stage(ev: Evaluation) -> list[FigureJob]:
    if ev.scores is None:
        return []
    ev.alpha_curve = compute_alpha_curve(
        ev.settings.alpha_curve, ev._agg.segments, ev.scores.stats, ev.scores.metrics, ev.aspects
    )
    if ev.alpha_curve is None:
        return []
    ev.run_metrics.update(curve_metrics(ev.alpha_curve))
    return [functools.partial(_draw_alpha_curve, ev.alpha_curve, figure_style(ev))]


Stage = Callable[[Evaluation], list[FigureJob]]
# the comparison before the correlations: its figure (the ranking, a panel per column) is the
# longest a sweep's job draws, and is started sooner so
STAGES: tuple[Stage, ...] = (
    score_stage,
    aggregate_stage,
    compare_stage,
    correlate_stage,
    alpha_curve_stage,
)


@on_one_blas_thread
def compute(
    table: pd.DataFrame,
    settings: Settings,
    on_figure: Callable[[FigureJob], None] | None = None,
    status: Status | None = None,
    started_at: float | None = None,
    table_token: str | None = None,
) -> Evaluation:
    """Every stage on a loaded table; ``on_figure`` gets each figure as soon as its data exists;
    ``status`` tells the terminal which stage runs; ``started_at`` is when the run began (its
    loading included), for the tracker; ``table_token`` is
    :func:`paraeval.pipeline.data.load.take_load_token` of the table, where it has one."""
    ev = Evaluation(settings, table, table_token=table_token)
    if started_at is not None:
        ev.started_at = started_at
    status = status if status is not None else Status(enabled=False)
    for stage in STAGES:
        with status.stage(stage.__name__.removesuffix("_stage").replace("_", " ")):
            jobs = stage(ev)
            release_free_memory()
        for job in jobs:
            ev.figures.append(job)
            if on_figure is not None:
                on_figure(job)
    return ev


def release_free_memory() -> None:
    """Gives the C heap's free pages back to the system between stages (glibc's
    ``malloc_trim``; nothing where there is none). The correlation's worker threads leave their
    freed working arrays in per-thread heaps (~300 MB at 400,000 rows) that the large arrays of
    the next stage, mapped on their own, cannot reuse: without this the peak of a run is the
    sum of its stages' leftovers rather than its largest stage."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None).malloc_trim  # the running process's C library
    except (OSError, AttributeError):  # another C library (musl) has none
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return fn  # type: ignore[no-any-return]


# --------------------------------------------------------------------------- figures
def figure_style(ev: Evaluation) -> FigureStyle:
    columns = ev._agg.columns
    return FigureStyle(
        fmt=ev.settings.report.format,
        lower=frozenset(c for c, i in columns.items() if not i.higher_is_better),
        source=frozenset(
            c for c, i in columns.items() if i.group == "diversity" or c.endswith("_src")
        ),
    )


def _draw_scatters(
    segments: pd.DataFrame,
    systems: pd.DataFrame,
    shown: list[str],
    aspects: list[str],
    style: FigureStyle,
    out: Path,
) -> None:
    write_plots(out, segments, systems, pd.DataFrame(), shown, aspects, style=style)


def _draw_heatmap(correlations: pd.DataFrame, style: FigureStyle, out: Path) -> None:
    write_plots(out, pd.DataFrame(), pd.DataFrame(), correlations, [], [], style=style)


def _draw_compare(result: Comparison, style: FigureStyle, out: Path) -> None:
    write_compare_plots(out / "plots", result, style)


# two helpers draw (pipeline.figures): the scatter plots, submitted first, one rating's in
# each; then the heatmap in one and the system ranking, which follows the comparison, in the
# other. Each stays in its helper, where the figures it drew last are kept.
_draw_heatmap.lane = 0  # type: ignore[attr-defined]
_draw_compare.lane = 1  # type: ignore[attr-defined]


def _draw_alpha_curve(result: AlphaCurve, style: FigureStyle, out: Path) -> None:
    plot_alpha_curve(result, style.path(out / "plots", "alpha_curve"))


# its configured-α line moves every job of a sweep: whichever helper is freer draws it
_draw_alpha_curve.lane = ANY_LANE  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- files
def write_tables(ev: Evaluation, out: Path) -> None:
    """The output tables, in the order a reader looks for them."""
    agg = ev._agg
    if ev.compared is not None:
        write_csv(ev.compared.table, out / "system_comparison.csv")
    if ev.alpha_curve is not None:
        write_csv(ev.alpha_curve.curve, out / "alpha_curve.csv")
        write_csv(ev.alpha_curve.choice, out / "alpha_choice.csv")
    write_parquet(ev.segments, out / "segment_scores.parquet")
    write_csv(agg.systems.reset_index(), out / "system_scores.csv")
    write_csv(ev.correlations, out / "correlations.csv")
    if not ev.significance.empty:
        write_csv(ev.significance, out / "significance.csv")
    if not ev.humans.empty:
        write_csv(ev.humans, out / "human_report.csv")
    write_csv(agg.normalization, out / "normalization.csv")
    write_csv(ev.signature_table(), out / "signatures.csv")


# --------------------------------------------------------------------------- tracking record
def run_record(
    ev: Evaluation, out: Path, overrides: Sequence[str] = (), tracker: Tracker | None = None
) -> RunRecord:
    """What the tracker receives besides the files: params, tags (signatures, versions, sweep),
    the run name and the run's own metrics."""
    s = ev.settings
    tracker = tracker or s.tracker
    params = dict(s.params)
    params["metrics.selected"] = ",".join(ev.metrics)
    tags = {
        "paraeval.data": s.data.name,
        "paraeval.git_commit": _git_commit(),
        "paraeval.output_dir": str(out.resolve()),
        "paraeval.overrides": " ".join(overrides),
    }
    tags.update({f"signature.{k}": v for k, v in ev.signatures.items()})
    tags.update(library_versions())
    tags.update(hydra_tags())
    files = [str(f) for f in ev.table.attrs.get("data_files", []) if not str(f).startswith("<")]
    dataset = _dataset_label(s.data.name, files)
    name = readable_run_name(dataset, overrides)
    return RunRecord(
        tracking=tracker.settings,
        params=params,
        tags=tags,
        run_name=tracker.run_name or sweep_run_name(name, tags),
        metrics=dict(ev.run_metrics),
        data_name=dataset,
        data_source=str(Path(files[0]).resolve()) if files else "",
        started_ms=int(ev.started_at * 1000),
        ended_ms=int(time.time() * 1000),
    )


# override keys that do not change what a run computes, or that the dataset name already says
RUN_NAME_EXCLUDED = ("hydra.", "tracking", "cache.", "report.", "data")


def readable_run_name(dataset: str, overrides: Sequence[str]) -> str:
    """``<dataset>: key=value,key=value``, from the overrides that change the numbers (Hydra's
    override_dirname, without the keys of :data:`RUN_NAME_EXCLUDED`)."""
    kept = [o for o in overrides if not o.lstrip("+~").startswith(RUN_NAME_EXCLUDED)]
    return f"{dataset}: {','.join(kept)}" if kept else dataset


def _dataset_label(name: str, files: Sequence[str]) -> str:
    """The dataset as its user knows it: the file name, or the layout's name for several."""
    if len(files) == 1:
        return Path(files[0]).name
    if files:
        return f"{name}: {Path(files[0]).name} + {len(files) - 1} files"
    return name


@functools.cache
def _git_commit() -> str:
    # once per process: the code a process runs is what it imported at the start
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"
