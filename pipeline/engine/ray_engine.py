"""The score stage's calls on a Ray cluster, through Ray Data.

Each call is cut into shards, the shards become the rows of a dataset, and ``map_batches`` scores
one shard per batch: by tasks where the metric loads nothing, by a pool of ``actors_per_encoder``
actors that build the metric once each where it loads a model or a resource
(``num_gpus=gpus_per_actor`` for an encoder). The shards: a segment-local metric's distinct
segments, ``rows_per_shard`` at a time; a corpus-weighted metric's (CIDEr, NIST, BERTScore) system's
rows, where :meth:`Metric.shard_bounds` allows, in two passes (map: each shard's
:class:`CorpusCounts`; reduce: each system's sum, here; then each shard scored with its system's
sum); any other metric's system whole. A shard's result comes back pickled, bit for bit what the
metric returned, and the shards of a call are joined in order, so corpus scores come from the same
statistics as in one process. A shard whose worker died is run again by Ray, without limit: Ray
Data's defaults retry its tasks (``max_retries=-1``) and restart a pool's actors, retrying their
calls (``max_restarts=-1``, ``max_task_retries=-1``); an exception a metric raises is not retried. A
metric call is a pure function of its texts, so a rerun gives the same numbers
(``tests/pipeline/test_engine_faults.py`` kills a task's and an actor's worker mid-shard). A shard
that kills every worker it runs on (a crash in a metric's native code) is retried until the run is
stopped.

With no address, Ray is started here for the run and ended with it, ``kill -9`` included
(:mod:`~paraeval.pipeline.engine.local_ray`); an address joins the user's cluster, which stays.
"""

from __future__ import annotations

import logging
import pickle
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from paraeval.metrics.base import CorpusCounts, Metric, MetricResult
from paraeval.pipeline.engine.base import Origin, Recipe, joined
from paraeval.pipeline.engine.local_ray import LocalRay, use_own_instance_settings
from paraeval.pipeline.engine.settings import EngineSettings
from paraeval.pipeline.engine.shards import ShardScorer, score_shards
from paraeval.pipeline.errors import ConfigError
from paraeval.pipeline.stages.texts import Texts, chunks

log = logging.getLogger("paraeval")

# a shard row's texts, as the dataset's columns
FIELDS = ("candidates", "references", "sources")


def to_run_log(names: tuple[str, ...] = ("ray", "ray.data")) -> None:
    """Ray's loggers without their own handlers on stderr, propagating to the run's: its records
    go to the run's log file, not the terminal (:class:`paraeval.pipeline.terminal.FileOnly`).
    One line stays on stderr: Ray's C++ core worker logs an error-level line for every Ray Data
    actor pool (Ray Data sends the pool's function to the actors through the object store), and
    setting its level (``RAY_BACKEND_LOG_LEVEL``) makes it print a line saying so."""
    for name in names:
        logger = logging.getLogger(name)
        for handler in list(logger.handlers):
            stream = getattr(handler, "stream", None)
            if isinstance(handler, logging.StreamHandler) and stream in (sys.stderr, sys.stdout):
                logger.removeHandler(handler)
        logger.propagate = True


def loads_something(metric: Metric) -> bool:
    """Whether building or calling the metric loads a resource worth keeping in an actor."""
    return bool(metric.resources)


def on_encoder(metric: Metric) -> bool:
    return any("encoder" in r for r in metric.resources)


class RayEngine:
    kind = "ray"

    def __init__(
        self,
        settings: EngineSettings,
        metrics: Mapping[str, Mapping[str, Any]],
        allow_external: bool = False,
        progress: bool = False,
    ) -> None:
        if settings.address is None:
            use_own_instance_settings()
        try:
            import ray
            import ray.data
        except ImportError:
            raise ConfigError("engine=ray needs Ray Data: pip install 'paraeval[ray]'") from None
        self.settings = settings
        self.metrics = {k: dict(v) for k, v in metrics.items()}
        self.allow_external = allow_external
        start = time.perf_counter()
        self.local = LocalRay(settings.actors_per_encoder) if settings.address is None else None
        address = self.local.address if self.local is not None else settings.address
        try:
            ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
        except BaseException:
            self.close()
            raise
        self.started = self.local is not None
        where = "a Ray instance started for this run" if self.started else address
        # the seconds to start (or join) Ray: a fixed cost of the run, which benchmarks read
        log.info("engine=ray: scoring on %s (ready in %.1f s)", where, time.perf_counter() - start)
        # Ray Data logs each dataset's execution at INFO: one line per metric and shard size
        logging.getLogger("ray.data").setLevel(logging.WARNING)
        to_run_log()
        context = ray.data.DataContext.get_current()
        context.enable_progress_bars = progress
        context.print_on_execution_start = False

    def close(self) -> None:
        """Ends a Ray instance started for the run; leaves a joined cluster (disconnects)."""
        import ray

        start = time.perf_counter()
        ray.shutdown()
        if self.local is not None:
            self.local.stop()
            log.info("engine=ray: Ray stopped in %.1f s", time.perf_counter() - start)

    def prepare(self, metric: Metric, texts: Iterable[str]) -> None:
        """Nothing here: the model is loaded where the shards are scored, not by the driver."""

    def score_calls(
        self, metric: Metric, origin: Origin, calls: Iterable[Texts]
    ) -> list[MetricResult]:
        calls = list(calls)
        shards: list[Texts] = []
        owners: list[int] = []
        for k, (cands, refs, srcs) in enumerate(calls):
            # an empty call is one empty shard: the metric says what it gives for none
            for part in list(chunks(len(cands), self.settings.rows_per_shard)) or [slice(0, 0)]:
                shards.append((cands[part], refs[part], srcs[part]))
                owners.append(k)
        results = self._run(metric, origin, shards, "score", owners)
        per_call: list[list[MetricResult]] = [[] for _ in calls]
        for k, result in zip(owners, results, strict=True):
            per_call[k].append(result)
        return [joined(r) for r in per_call]

    def score_systems(
        self, metric: Metric, origin: Origin, calls: Sequence[Texts]
    ) -> list[MetricResult]:
        bounds = [
            metric.shard_bounds(refs, self.settings.rows_per_shard)
            if metric.corpus_weighted
            else []
            for _, refs, _ in calls
        ]
        if all(len(b) <= 1 for b in bounds):
            # a system's whole call is one shard: its rows depend on each other otherwise than
            # through counts (a whole system's diversity, ParaScore's normalisation), or every
            # system fits one shard, which counts its own texts (no counting pass)
            return self._run(metric, origin, list(calls), "systems")
        shards: list[Texts] = []
        owners: list[int] = []
        for k, ((cands, refs, srcs), parts) in enumerate(zip(calls, bounds, strict=True)):
            for part in parts:
                shards.append((cands[part], refs[part], None if srcs is None else srcs[part]))
                owners.append(k)
        # map: each shard's counts; reduce: each call's sum, given to every shard of the call
        counts = [CorpusCounts() for _ in calls]
        if metric.uses_counts:
            found = self._run(metric, origin, shards, "counts", owners)
            for k, shard_counts in zip(owners, found, strict=True):
                counts[k] += shard_counts
        results = self._run(metric, origin, shards, "counted", owners, counts)
        per_call: list[list[MetricResult]] = [[] for _ in calls]
        for k, result in zip(owners, results, strict=True):
            per_call[k].append(result)
        return [metric.joined_shards(r) for r in per_call]

    def _run(
        self,
        metric: Metric,
        origin: Origin,
        shards: list[Texts],
        mode: str,
        owners: Sequence[int] = (),
        counts: Sequence[CorpusCounts] = (),
    ) -> list[Any]:
        """Each shard's unpickled result, in order; ``owners``: the call each shard is of."""
        import ray.data

        recipe = Recipe(origin, self.metrics[origin.metric_id], self.allow_external)
        items = [
            {
                "shard": i,
                "call": owners[i] if owners else 0,
                **dict(zip(FIELDS, shard, strict=True)),
            }
            for i, shard in enumerate(shards)
        ]
        data = ray.data.from_items(items, override_num_blocks=len(items))
        common: dict[str, Any] = {"batch_size": 1, "batch_format": "pyarrow"}
        kwargs = {"recipe": recipe, "mode": mode, "counts": list(counts)}
        if loads_something(metric):
            actors = max(1, min(self.settings.actors_per_encoder, len(items)))
            scored = data.map_batches(
                ShardScorer,
                fn_constructor_kwargs=kwargs,
                compute=ray.data.ActorPoolStrategy(size=actors),
                num_gpus=self.settings.gpus_per_actor if on_encoder(metric) else 0,
                **common,
            )
        else:
            scored = data.map_batches(score_shards, fn_kwargs=kwargs, **common)
        rows = sorted(scored.take_all(), key=lambda row: int(row["shard"]))
        if len(rows) != len(shards):
            raise RuntimeError(f"Ray returned {len(rows)} of {len(shards)} shards of {origin}")
        return [pickle.loads(row["result"]) for row in rows]
