"""The score stage's calls on a Ray cluster through Ray Data: every asked call at once, in shards
and bundles, by tasks for the metrics that load nothing and one actor pool for the rest (see
docs/scaling.md, which also says how failed workers are retried)."""

from __future__ import annotations

import logging
import pickle
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from paraeval.metrics.base import CorpusCounts, Metric, MetricResult
from paraeval.pipeline.config.nodes import EngineSettings
from paraeval.pipeline.engine.base import Calls, Later, Origin, Recipe, joined
from paraeval.pipeline.engine.local_ray import LocalRay, use_own_instance_settings
from paraeval.pipeline.engine.shards import ShardScorer, Unit, score_shards
from paraeval.pipeline.engine.texts import Texts, chunks
from paraeval.pipeline.errors import ConfigError

log = logging.getLogger("paraeval")


def to_run_log() -> None:
    """Ray's records go to the run's log file, not the terminal (``terminal.FileOnly``). One line
    stays on stderr: Ray's C++ core worker logs an error for every Ray Data actor pool, and setting
    its level (``RAY_BACKEND_LOG_LEVEL``) makes it print a line saying so."""
    for name in ("ray", "ray.data"):
        logger = logging.getLogger(name)
        for handler in list(logger.handlers):
            stream = getattr(handler, "stream", None)
            if isinstance(handler, logging.StreamHandler) and stream in (sys.stderr, sys.stdout):
                logger.removeHandler(handler)
        logger.propagate = True


class RayEngine:
    kind = "ray"

    def __init__(
        self,
        settings: EngineSettings,
        metrics: Mapping[str, Mapping[str, Any]],
        allow_external: bool = False,
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
        self.asked: list[Asked] = []  # not yet run (:meth:`run_asked`)
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
        # benchmarks read this fixed cost of the run from the log
        log.info("engine=ray: scoring on %s (ready in %.1f s)", where, time.perf_counter() - start)
        # Ray Data logs every dataset's execution at INFO
        logging.getLogger("ray.data").setLevel(logging.WARNING)
        to_run_log()
        context = ray.data.DataContext.get_current()
        context.enable_progress_bars = False
        context.print_on_execution_start = False

    def close(self) -> None:
        """Ends a Ray instance started for the run; leaves a joined cluster (disconnects)."""
        import ray

        start = time.perf_counter()
        ray.shutdown()
        if self.local is not None:
            self.local.stop()
            log.info("engine=ray: Ray stopped in %.1f s", time.perf_counter() - start)

    def score_calls(
        self, metric: Metric, origin: Origin, calls: Calls, prepare: Callable[[], None]
    ) -> Later:
        shards: list[Texts] = []
        owners: list[int] = []
        for k, (cands, refs, srcs) in enumerate(calls()):
            # an empty call is one empty shard: the metric says what it gives for none
            for part in list(chunks(len(cands), self.settings.rows_per_shard)) or [slice(0, 0)]:
                shards.append((cands[part], refs[part], srcs[part]))
                owners.append(k)
        asked = self._ask(metric, origin, "score", shards, owners, max(owners, default=0) + 1)
        return Later(lambda: joined(self._results(asked)))

    def score_systems(
        self, metric: Metric, origin: Origin, calls: Sequence[Texts], prepare: Callable[[], None]
    ) -> list[Later]:
        rows = self.settings.rows_per_shard
        bounds = [
            metric.shard_bounds(r, rows) if metric.corpus_weighted else [] for _, r, _ in calls
        ]
        if all(len(b) <= 1 for b in bounds):
            # one shard per system: its rows depend on each other otherwise than through counts
            # (diversity, ParaScore's normalisation), or each system fits one shard (no counting)
            whole = self._ask(metric, origin, "systems", list(calls), range(len(calls)), len(calls))
            return Later(lambda: self._results(whole)).each(len(calls))
        shards: list[Texts] = []
        owners: list[int] = []
        for k, ((cands, refs, srcs), parts) in enumerate(zip(calls, bounds, strict=True)):
            for part in parts:
                shards.append((cands[part], refs[part], None if srcs is None else srcs[part]))
                owners.append(k)
        asked = self._ask(metric, origin, "counted", shards, owners, len(calls))

        def per_system() -> list[MetricResult]:
            per_call: list[list[MetricResult]] = [[] for _ in calls]
            for k, result in zip(owners, self._results(asked), strict=True):
                per_call[k].append(result)
            return [metric.joined_shards(r) for r in per_call]

        return Later(per_system).each(len(calls))

    def _ask(
        self,
        metric: Metric,
        origin: Origin,
        mode: str,
        shards: list[Texts],
        owners: Iterable[int],
        calls: int,
    ) -> Asked:
        recipe = Recipe(origin, self.metrics[origin.metric_id], self.allow_external)
        counts = [CorpusCounts() for _ in range(calls)]
        asked = Asked(metric, recipe, mode, shards, list(owners), counts)
        self.asked.append(asked)
        return asked

    def _results(self, asked: Asked) -> list[Any]:
        """The request's shard results; the first asked for runs every request made so far."""
        if asked.results is None:
            self.run_asked()
        assert asked.results is not None
        return asked.results

    def run_asked(self) -> None:
        """Every request not yet run: the counts of each corpus-weighted metric that has several
        shards (summed per call here), then every shard."""
        todo, self.asked = self.asked, []
        counting = [a for a in todo if a.mode == "counted" and a.metric.uses_counts]
        if counting:
            found = self._run(counting, counting=True)
            for asked, shard_counts in zip(counting, found, strict=True):
                for k, counts in zip(asked.owners, shard_counts, strict=True):
                    asked.counts[k] += counts
        for asked, results in zip(todo, self._run(todo), strict=True):
            asked.results = results

    def _run(self, todo: list[Asked], counting: bool = False) -> list[list[Any]]:
        """Each request's unpickled shard results, in order."""
        import ray
        import ray.data

        out: list[list[Any]] = [[] for _ in todo]
        executions = []
        # a metric that loads a resource (an encoder, WordNet) keeps it in an actor; others: tasks
        for actors in (False, True):
            group = [k for k, a in enumerate(todo) if bool(a.metric.resources) == actors]
            if not group:
                continue
            units: list[Unit] = []
            for local, k in enumerate(group):
                asked = todo[k]
                for shard, call in zip(asked.shards, asked.owners, strict=True):
                    units.append((len(units), local, call, *shard))
            kwargs = {
                "recipes": [todo[k].recipe for k in group],
                "modes": ["counts" if counting else todo[k].mode for k in group],
                "counts": [todo[k].counts for k in group],
            }
            cpus = int(ray.cluster_resources().get("CPU", 1))
            size = max(1, self.settings.actors_per_encoder if actors else cpus)
            bundles = bundled(units, self.settings.rows_per_shard, size)
            items = [{"bundle": pickle.dumps(b, protocol=pickle.HIGHEST_PROTOCOL)} for b in bundles]
            data = ray.data.from_items(items, override_num_blocks=len(items))
            common: dict[str, Any] = {"batch_size": 1, "batch_format": "pyarrow"}
            if actors:
                gpus = any("encoder" in r for k in group for r in todo[k].metric.resources)
                if gpus:
                    self._check_gpus()
                scored = data.map_batches(
                    ShardScorer,
                    fn_constructor_kwargs=kwargs,
                    compute=ray.data.ActorPoolStrategy(size=min(size, len(items))),
                    num_gpus=self.settings.gpus_per_actor if gpus else 0,
                    **common,
                )
            else:
                scored = data.map_batches(score_shards, fn_kwargs=kwargs, **common)
            executions.append((group, units, len(items), actors, scored))
        # at once: tasks use the CPUs the actors leave while they start and between bundles
        with ThreadPoolExecutor(max_workers=len(executions) or 1) as pool:
            taken = list(pool.map(_taken, (scored for *_, scored in executions)))
        for (group, units, bundles_n, actors, _), (found, seconds) in zip(
            executions, taken, strict=True
        ):
            rows = sorted(found, key=lambda row: int(row["shard"]))
            names = ", ".join(_named(todo[k].recipe.origin) for k in group)
            if len(rows) != len(units):
                raise RuntimeError(f"Ray returned {len(rows)} of {len(units)} shards of {names}")
            log.info(
                "engine=ray: %d shards in %d bundles %s by %s in %.1f s: %s",
                len(units),
                bundles_n,
                "counted" if counting else "scored",
                "actors" if actors else "tasks",
                seconds,
                names,
            )
            for unit, row in zip(units, rows, strict=True):
                out[group[unit[1]]].append(pickle.loads(row["result"]))
        return out

    def _check_gpus(self) -> None:
        """Actors that ask for more GPUs than the cluster has would wait for them: for ever on
        the instance this run started (one machine, whose GPUs Ray found at its start); on a
        cluster that may add a node with GPUs, a warning."""
        import ray

        wanted = self.settings.gpus_per_actor
        have = float(ray.cluster_resources().get("GPU", 0))
        if wanted <= have:
            return
        if self.started:
            raise ConfigError(
                f"engine.gpus_per_actor={wanted:g}: Ray finds {have:g} GPUs on this machine "
                "(those CUDA_VISIBLE_DEVICES shows); set engine.gpus_per_actor=0 to encode on "
                "the CPU"
            )
        log.warning(
            "engine.gpus_per_actor=%g: the cluster has %g GPUs now; the encoder actors wait "
            "until a node with enough joins",
            wanted,
            have,
        )


def _taken(scored: Any) -> tuple[list[dict[str, Any]], float]:
    start = time.perf_counter()
    return scored.take_all(), time.perf_counter() - start


def bundled(units: Sequence[Unit], rows: int, workers: int) -> list[list[Unit]]:
    """Consecutive shards in bundles of about ``rows`` rows, one Ray Data row each: an encoder
    encodes a bundle's texts in one length-sorted pass, a task builds its metric once per bundle.
    Smaller where there would be fewer than two per worker (actors, or the cluster's CPUs)."""
    total = sum(len(unit[3]) for unit in units)
    target = max(1, min(rows, -(-total // (2 * workers))))
    out: list[list[Unit]] = []
    filled = target
    for unit in units:
        if filled >= target:
            out.append([])
            filled = 0
        out[-1].append(unit)
        filled += len(unit[3])
    return out


def _named(origin: Origin) -> str:
    """A request's metric as the log names it: ``ibleu[1]`` for iBLEU's second part."""
    return origin.metric_id + "".join(f"[{k}]" for k in origin.parts)


@dataclass
class Asked:
    """A metric's calls asked of the engine: its shards, the call each is of (``owners``), each
    call's summed counts (``counted``), and, once run, each shard's result."""

    metric: Metric
    recipe: Recipe
    mode: str
    shards: list[Texts]
    owners: list[int]
    counts: list[CorpusCounts]
    results: list[Any] | None = None
