"""The stages and what passes between them; nothing here reads the config tree or MLflow."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from paraeval.correlation.ranking import RANKING_COLUMNS, metric_ranking
from paraeval.metrics.base import Metric
from paraeval.pipeline.config.settings import Settings
from paraeval.pipeline.data.validate import HUMAN_PREFIX, human_columns, human_report
from paraeval.pipeline.engine.ray_engine import open_engine
from paraeval.pipeline.errors import ConfigError
from paraeval.pipeline.files import PARAPHRASE_FILE, write_csv, write_parquet
from paraeval.pipeline.lifetime import release_free_memory
from paraeval.pipeline.stages.aggregate import Aggregated, Normalizer, aggregate, without_systems
from paraeval.pipeline.stages.alpha import AlphaCurve, compute_alpha_curve, curve_metrics
from paraeval.pipeline.stages.cache import ScoreCache
from paraeval.pipeline.stages.compare import COMPARISON_COLUMNS, SYSTEM_COLUMNS, Comparison, compare
from paraeval.pipeline.stages.correlate import correlate, significance
from paraeval.pipeline.stages.limits import Limit
from paraeval.pipeline.stages.paraphrase_table import ParaphraseTable, paraphrase_table
from paraeval.pipeline.stages.roles import Roles, find_roles
from paraeval.pipeline.stages.score import Scores, build_metrics, score
from paraeval.pipeline.terminal import Status

log = logging.getLogger("paraeval")


@dataclass
class Evaluation:
    """Scores, correlations and comparison of one evaluation, as the output files hold them."""

    settings: Settings
    table: pd.DataFrame  # the loaded tidy table
    roles: Roles = field(default_factory=Roles)  # the controls; whether it is reference-free
    metrics: dict[str, Metric] = field(default_factory=dict)
    cache: ScoreCache | None = None
    scores: Scores | None = None
    aggregated: Aggregated | None = None
    correlations: pd.DataFrame = field(default_factory=pd.DataFrame)
    # with correlation.include_controls=both: the correlations with the controls too
    correlations_with_controls: pd.DataFrame = field(default_factory=pd.DataFrame)
    significance: pd.DataFrame = field(default_factory=pd.DataFrame)
    # each tested pair's permutation draws, by (aspect, level, coefficient, metric_a, metric_b)
    draws: dict[tuple[str, ...], np.ndarray] = field(default_factory=dict)
    humans: pd.DataFrame = field(default_factory=pd.DataFrame)
    compared: Comparison | None = None
    paraphrase: ParaphraseTable | None = None  # the headline: adequacy, diversity, both at once
    alpha_curve: AlphaCurve | None = None
    run_metrics: dict[str, float] = field(default_factory=dict)  # logged besides correlations
    started_at: float = field(default_factory=time.time)  # when the run started (epoch seconds)

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
        """One row per system (``system_scores.csv``), with the comparison's columns."""
        systems = self._agg.systems.copy()
        systems["control"] = systems.index.isin(self.roles.controls)
        if self.compared is None:
            return systems
        extra = self.compared.systems.reindex(systems.index)[list(SYSTEM_COLUMNS)]
        return pd.concat([systems, extra], axis=1)

    @property
    def comparison(self) -> pd.DataFrame:
        """Per system and column: score, bootstrap interval, paired p-values, cluster."""
        if self.compared is None:
            return pd.DataFrame(columns=COMPARISON_COLUMNS)
        return self.compared.table

    @property
    def ranking(self) -> pd.DataFrame:
        """``metric_ranking.csv``: every test's ranking, and the overall one over the tasks."""
        sig, info = self.settings.correlation.significance, self._agg.columns
        rows = metric_ranking(
            self.correlations.to_dict("records"),
            self.significance.to_dict("records"),
            self.draws,
            [(t.level, t.coefficient.name, t.weight) for t in sig.tasks] if sig else [],
            sig.alpha if sig else 0.05,
            lower_is_better={c for c, i in info.items() if not i.higher_is_better},
            precomputed={c for c, i in info.items() if i.group == "precomputed"},
            baselines=self.table.attrs.get("baseline_metrics", ()),
        )
        return pd.DataFrame(rows, columns=list(RANKING_COLUMNS)).astype(
            {"order": "Int64", "cluster": "Int64"}
        )

    @property
    def signatures(self) -> dict[str, str]:
        return {c: info.signature for c, info in self._agg.columns.items()}

    @property
    def aspects(self) -> list[str]:
        return human_columns(self._agg.segments)

    def signature_table(self) -> pd.DataFrame:
        return pd.DataFrame(
            [
                {"column": c, **asdict(i), "segment_signature": i.segment_signature or i.signature}
                for c, i in self._agg.columns.items()
            ]
        )


def score_stage(ev: Evaluation) -> None:
    s = ev.settings
    ev.metrics = build_metrics(s.metrics, s.allow_external_metrics)
    if ev.roles.reference_free:
        # those that contrast the references with the sources (iBLEU) mean nothing here
        left = {k: m for k, m in ev.metrics.items() if not m.describe().needs_own_references}
        dropped = [k for k in ev.metrics if k not in left]
        if dropped and not left:
            raise ConfigError(
                f"nothing to score: {', '.join(dropped)} means nothing on reference-free data "
                f"({ev.roles.reason}); choose other metrics"
            )
        if dropped:
            log.warning(
                "reference-free data (%s): %s not computed, nor the alpha curve: iBLEU is then "
                "(2*alpha - 1) * BLEU(candidate, source), a multiple of BLEU whose alpha means "
                "nothing",
                ev.roles.reason,
                ", ".join(dropped),
            )
        ev.metrics = left
    ev.cache = None if s.cache is None else ScoreCache(s.cache.dir)
    with open_engine(s.engine, s.metrics, s.allow_external_metrics) as engine:
        ev.scores = score(
            ev.table, ev.metrics, progress=s.report.progress, cache=ev.cache, engine=engine
        )
    if ev.cache is not None:
        ev.cache.log_summary()
        ev.run_metrics.update(ev.cache.metrics())


def aggregate_stage(ev: Evaluation) -> None:
    assert ev.scores is not None
    norm = ev.settings.normalize
    agg = ev.aggregated = aggregate(ev.scores, Normalizer(norm.method, norm.bounds))
    ev.humans = human_report(agg.segments)


def correlated(ev: Evaluation) -> Aggregated:
    """The rows correlated: without the controls unless ``correlation.include_controls`` is true."""
    if ev.settings.correlation.include_controls is True:
        return ev._agg
    return without_systems(ev._agg, ev.roles.controls)


def correlate_stage(ev: Evaluation) -> None:
    assert ev.scores is not None
    agg, settings = correlated(ev), ev.settings.correlation
    rng = np.random.default_rng(ev.settings.seed)
    rows = ev.cache.rows if ev.cache is not None else None
    limit = Limit(ev.settings.limits.max_stage_minutes, ev.settings.report.progress)
    ev.correlations = correlate(agg, settings, rng, ev.scores, rows, limit)
    if ev.cache is not None:
        ev.run_metrics.update(ev.cache.metrics())
    ev.significance = significance(agg, settings, rng, ev.draws, limit)
    if settings.include_controls == "both" and ev.roles.controls:
        # a generator of its own: the table without controls is the one a run without "both" has
        both = np.random.default_rng(ev.settings.seed)
        ev.correlations_with_controls = correlate(ev._agg, settings, both, ev.scores, None, limit)
    if not ev.aspects and settings.levels:
        log.warning("%s", no_ratings_message(ev.table))


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


def compare_stage(ev: Evaluation) -> None:
    if ev.scores is None:
        return
    if ev.settings.compare is not None:
        limit = Limit(ev.settings.limits.max_stage_minutes, ev.settings.report.progress)
        ev.compared = compare(ev.scores, ev._agg, ev.settings.compare, ev.roles.controls, limit)
    seed = ev.settings.compare.seed if ev.settings.compare is not None else ev.settings.seed
    rng = np.random.default_rng(seed)
    ev.paraphrase = paraphrase_table(ev._agg, ev.compared, ev.roles, ev.scores.metrics, rng)


def alpha_curve_stage(ev: Evaluation) -> None:
    if ev.scores is None:
        return
    ev.alpha_curve = compute_alpha_curve(
        ev.settings.alpha_curve,
        correlated(ev).segments,
        ev.scores.stats,
        ev.scores.metrics,
        ev.aspects,
        scored=ev._agg.segments,  # iBLEU's scores per α for every system, the controls too
    )
    if ev.alpha_curve is not None:
        ev.run_metrics.update(curve_metrics(ev.alpha_curve))


Stage = Callable[[Evaluation], None]
STAGES: tuple[Stage, ...] = (
    score_stage,
    aggregate_stage,
    compare_stage,
    correlate_stage,
    alpha_curve_stage,
)


@threadpool_limits.wrap(limits=1, user_api="blas")  # the same bits on any core count
def compute(
    table: pd.DataFrame,
    settings: Settings,
    status: Status | None = None,
    started_at: float | None = None,
    after_stage: Callable[[Evaluation], None] | None = None,
) -> Evaluation:
    """Every stage on a loaded table; ``started_at``: when the run began (its loading included)."""
    compare = settings.compare
    baseline = () if compare is None else (compare.baseline, compare.baseline_is_control)
    ev = Evaluation(settings, table, find_roles(table, settings.data.controls, *baseline))
    if started_at is not None:
        ev.started_at = started_at
    status = status if status is not None else Status(enabled=False)
    for stage in STAGES:
        with status.stage(stage.__name__.removesuffix("_stage").replace("_", " ")):
            stage(ev)
            release_free_memory()
        if after_stage is not None:
            after_stage(ev)
    return ev


def write_tables(ev: Evaluation, out: Path) -> None:
    """The output tables, in the order a reader looks for them."""
    if ev.paraphrase is not None:
        write_csv(ev.paraphrase.table, out / PARAPHRASE_FILE)
    if ev.compared is not None:
        write_csv(ev.compared.table, out / "system_comparison.csv")
    if ev.alpha_curve is not None:
        write_csv(ev.alpha_curve.curve, out / "alpha_curve.csv")
        write_csv(ev.alpha_curve.choice, out / "alpha_choice.csv")
        write_csv(ev.alpha_curve.system_scores, out / "alpha_systems.csv")
    write_parquet(ev.segments, out / "segment_scores.parquet")
    write_csv(ev.systems.reset_index(), out / "system_scores.csv")
    write_csv(ev.correlations, out / "correlations.csv")
    if not ev.correlations_with_controls.empty:
        write_csv(ev.correlations_with_controls, out / "correlations_with_controls.csv")
    if not ev.significance.empty:
        write_csv(ev.significance, out / "significance.csv")
    if not ev.correlations.empty:
        write_csv(ev.ranking, out / "metric_ranking.csv")
    if not ev.humans.empty:
        write_csv(ev.humans, out / "human_report.csv")
    write_csv(ev._agg.normalization, out / "normalization.csv")
    write_csv(ev.signature_table(), out / "signatures.csv")
