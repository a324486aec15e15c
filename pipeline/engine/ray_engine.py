"""Ray Data engine (docs/scaling.md). Ray is imported in functions: workers import this module."""

from __future__ import annotations

import logging
import os
import pickle
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from paraeval.metrics.base import CorpusCounts, Metric, MetricResult, Sharded, row_slices
from paraeval.metrics.encoder import Encoders
from paraeval.pipeline.config.nodes import EngineSettings
from paraeval.pipeline.engine.base import Calls, Engine, Later, LocalEngine, Origin, Recipe, joined
from paraeval.pipeline.engine.texts import Texts
from paraeval.pipeline.errors import ConfigError
from paraeval.pipeline.lifetime import die_with_parent, release_free_memory

log = logging.getLogger("paraeval")

START_TIMEOUT_S = 120.0


def use_own_instance_settings() -> None:
    """Before Ray is imported. Driver and instance must agree on token auth: ``ray start`` enables
    it where ``~/.ray/auth_token`` exists, a driver joining by address does not."""
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")


class LocalRay:
    """``ray start --head --block`` under a guard the kernel SIGTERMs when the run ends, even on
    ``kill -9`` (``ray.init()``'s processes would leave the raylet's agents behind, and ``ray
    start`` swallows a SIGTERM that comes while it starts)."""

    def __init__(self, actors_per_encoder: int = 1) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        use_own_instance_settings()
        env = dict(os.environ)
        # on SIGTERM Ray drains the node for 30 s, which Ray Data's idle actors never let end
        env.setdefault("RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S", "0")
        # else Ray Data's actors get OMP_NUM_THREADS=1 and torch encodes on one thread
        threads = max(1, (os.cpu_count() or 1) // actors_per_encoder)
        env.setdefault("OMP_NUM_THREADS", str(threads))
        here = Path(sys.executable).parent / "ray"  # the command of the Ray the run imports
        command = str(here) if here.is_file() else shutil.which("ray")
        if command is None:
            raise ConfigError("engine=ray needs Ray's `ray` command: pip install 'paraeval[ray]'")
        guarded = [sys.executable, "-m", "paraeval.pipeline.lifetime", command, "start", "--head"]
        options = ["--block", "--node-ip-address=127.0.0.1", f"--port={port}"]
        options += ["--include-dashboard=false", "--disable-usage-stats"]
        parent = os.getpid()
        self.address = f"127.0.0.1:{port}"
        # a file, not a pipe: Ray's command writes for as long as it runs, and nobody reads
        self._err = tempfile.TemporaryFile()  # noqa: SIM115 - closed by stop()
        self.process = subprocess.Popen(
            guarded + options,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._err,
            preexec_fn=lambda: die_with_parent(parent, signal.SIGTERM),
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self._err.seek(0)
                lines = self._err.read().decode(errors="replace").strip().splitlines()
                last = lines[-1] if lines else f"exit status {self.process.returncode}"
                self._err.close()
                raise ConfigError(f"engine=ray: cannot start Ray on this machine ({last})")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1.0):
                    return
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise ConfigError(f"engine=ray: Ray did not start within {START_TIMEOUT_S:g} s")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._err.close()


class ShardMode(Enum):
    """A :class:`Sharded` metric's shards are counted, then scored with the summed counts."""

    SCORE = "score"
    SYSTEMS = "systems"
    COUNT = "count"
    SCORE_SHARD = "score_shard"


class Shard(NamedTuple):
    position: int  # in the pass
    request: int  # the pass's recipe and mode
    call: int
    candidates: list[str]
    references: list[list[str]]
    sources: list[str]


def score_shards(
    batch: Any,
    recipes: Sequence[Recipe],
    modes: Sequence[ShardMode],
    counts: Sequence[Sequence[CorpusCounts]] = (),
) -> dict[str, np.ndarray]:
    return ShardScorer(recipes, modes, counts)(batch)


class ShardScorer:
    """Each metric built once per actor (or task), those on an encoder sharing one Encoders."""

    def __init__(
        self,
        recipes: Sequence[Recipe],
        modes: Sequence[ShardMode],
        counts: Sequence[Sequence[CorpusCounts]] = (),
    ) -> None:
        self.recipes, self.modes, self.counts = recipes, modes, counts
        self.encoders = Encoders()
        # by origin: two requests of one metric (CIDEr of two shard sizes) build it once
        self.metrics: dict[object, Metric] = {}

    def metric(self, request: int) -> Metric:
        recipe = self.recipes[request]
        if recipe.origin not in self.metrics:
            self.metrics[recipe.origin] = recipe.build(self.encoders)
        return self.metrics[recipe.origin]

    def __call__(self, batch: Any) -> dict[str, np.ndarray]:
        shards: list[int] = []
        results: list[bytes] = []
        for payload in batch.column("bundle").to_pylist():
            units: list[Shard] = pickle.loads(payload)
            # one length-sorted pass over the bundle's texts pads less than each shard's alone
            texts: dict[int, list[str]] = {}
            for unit in units:
                if self.modes[unit.request] is not ShardMode.COUNT:
                    flat = (r for rs in unit.references for r in rs)
                    every = [*unit.candidates, *flat, *unit.sources]
                    texts.setdefault(unit.request, []).extend(every)
            for request, some in texts.items():
                self.metric(request).prepare(some)
            for unit in units:
                metric, mode = self.metric(unit.request), self.modes[unit.request]
                cands, refs, srcs = unit.candidates, unit.references, unit.sources
                result: MetricResult | CorpusCounts
                if mode is ShardMode.SCORE:
                    result = metric.score(cands, refs, srcs)
                elif mode is ShardMode.SYSTEMS:
                    (result,) = metric.score_systems([(cands, refs, srcs)])
                else:
                    assert isinstance(metric, Sharded)
                    if mode is ShardMode.COUNT:
                        result = metric.counts(cands, refs)
                    else:
                        counts = self.counts[unit.request][unit.call]
                        result = metric.score_shard(counts, cands, refs, srcs)
                shards.append(unit.position)
                results.append(pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL))
            # else the worker's heaps keep each bundle's freed pages (its resident set grows)
            release_free_memory()
        out = np.empty(len(results), dtype=object)
        out[:] = results
        return {"shard": np.asarray(shards, dtype=np.int64), "result": out}


def to_run_log() -> None:
    """One line stays on stderr: Ray's C++ core worker logs an error per Ray Data actor pool, and
    ``RAY_BACKEND_LOG_LEVEL`` makes it print a line saying so."""
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
        self.texts: Sequence[str] = ()  # a worker prepares a metric with a bundle's
        start = time.perf_counter()
        self.local = LocalRay(settings.actors_per_encoder) if settings.address is None else None
        address = self.local.address if self.local is not None else settings.address
        try:
            ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
        except BaseException:
            self.close()
            raise
        where = "a Ray instance started for this run" if self.local else address
        # benchmarks read this fixed cost of the run from the log
        log.info("engine=ray: scoring on %s (ready in %.1f s)", where, time.perf_counter() - start)
        # Ray Data logs every dataset's execution at INFO
        logging.getLogger("ray.data").setLevel(logging.WARNING)
        to_run_log()
        context = ray.data.DataContext.get_current()
        context.enable_progress_bars = False
        context.print_on_execution_start = False

    def close(self) -> None:
        """Ends a Ray instance started for the run; disconnects from a joined cluster."""
        import ray

        start = time.perf_counter()
        ray.shutdown()
        if self.local is not None:
            self.local.stop()
            log.info("engine=ray: Ray stopped in %.1f s", time.perf_counter() - start)

    def score_calls(self, metric: Metric, origin: Origin, calls: Calls) -> Later:
        rows = self.settings.rows_per_shard
        shards, owners = cut((call, row_slices(len(call[0]), rows)) for call in calls())
        asked = self._ask(metric, origin, ShardMode.SCORE, shards, owners)
        return Later(lambda: joined(self._results(asked)))

    def score_systems(self, metric: Metric, origin: Origin, calls: Sequence[Texts]) -> list[Later]:
        rows = self.settings.rows_per_shard
        sharded = metric if isinstance(metric, Sharded) else None
        bounds = [sharded.split(r, rows) if sharded else [] for _, r, _ in calls]
        if sharded is None or all(len(b) <= 1 for b in bounds):
            # rows depend on each other beyond counts (ParaScore), or each system fits one shard
            whole = self._ask(metric, origin, ShardMode.SYSTEMS, list(calls), [*range(len(calls))])
            return Later(lambda: self._results(whole)).each(len(calls))
        shards, owners = cut(zip(calls, bounds, strict=True))
        asked = self._ask(metric, origin, ShardMode.SCORE_SHARD, shards, owners)

        def per_system() -> list[MetricResult]:
            per_call: list[list[MetricResult]] = [[] for _ in calls]
            for k, result in zip(owners, self._results(asked), strict=True):
                per_call[k].append(result)
            return [sharded.reduce(r) for r in per_call]

        return Later(per_system).each(len(calls))

    def _ask(
        self,
        metric: Metric,
        origin: Origin,
        mode: ShardMode,
        shards: list[Texts],
        owners: list[int],
    ) -> Asked:
        recipe = Recipe(origin, self.metrics[origin.metric_id], self.allow_external)
        # a call after the last with a shard has no counts to sum
        counts = [CorpusCounts() for _ in range(max(owners, default=0) + 1)]
        asked = Asked(metric, recipe, mode, shards, owners, counts)
        self.asked.append(asked)
        return asked

    def _results(self, asked: Asked) -> list[Any]:
        """The first asked for runs every request made so far."""
        if asked.results is None:
            self.run_asked()
        assert asked.results is not None
        return asked.results

    def run_asked(self) -> None:
        """First the counts of each corpus-weighted metric with several shards, then every shard."""
        todo, self.asked = self.asked, []
        sharded = [a for a in todo if a.mode is ShardMode.SCORE_SHARD]
        counting = [a for a in sharded if isinstance(a.metric, Sharded) and a.metric.uses_counts]
        if counting:
            found = self._run(counting, counting=True)
            for asked, shard_counts in zip(counting, found, strict=True):
                for k, counts in zip(asked.owners, shard_counts, strict=True):
                    asked.counts[k] += counts
        for asked, results in zip(todo, self._run(todo), strict=True):
            asked.results = results

    def _run(self, todo: list[Asked], counting: bool = False) -> list[list[Any]]:
        import ray
        import ray.data

        out: list[list[Any]] = [[] for _ in todo]
        executions = []
        # a metric that loads a resource (an encoder, WordNet) keeps it in an actor; others: tasks
        for actors in (False, True):
            group = [k for k, a in enumerate(todo) if bool(a.metric.resources) == actors]
            if not group:
                continue
            units: list[Shard] = []
            for local, k in enumerate(group):
                asked = todo[k]
                for shard, call in zip(asked.shards, asked.owners, strict=True):
                    units.append(Shard(len(units), local, call, *shard))
            kwargs = {
                "recipes": [todo[k].recipe for k in group],
                "modes": [ShardMode.COUNT if counting else todo[k].mode for k in group],
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
                scored = data.map_batches(score_shards, fn_kwargs=kwargs, **common)  # type: ignore[arg-type]
            executions.append((group, units, len(items), "actors" if actors else "tasks", scored))
        # at once: tasks use the CPUs the actors leave while they start and between bundles
        with ThreadPoolExecutor(max_workers=len(executions) or 1) as pool:
            taken = list(pool.map(_taken, (scored for *_, scored in executions)))
        message = "engine=ray: %d shards in %d bundles %s by %s in %.1f s: %s"
        what = "counted" if counting else "scored"
        for (group, units, n_bundles, by, _), (found, seconds) in zip(
            executions, taken, strict=True
        ):
            rows = sorted(found, key=lambda row: int(row["shard"]))
            names = ", ".join(str(todo[k].recipe.origin) for k in group)
            if len(rows) != len(units):
                raise RuntimeError(f"Ray returned {len(rows)} of {len(units)} shards of {names}")
            log.info(message, len(units), n_bundles, what, by, seconds, names)
            for unit, row in zip(units, rows, strict=True):
                out[group[unit.request]].append(pickle.loads(row["result"]))
        return out

    def _check_gpus(self) -> None:
        """On an instance this run started, actors asking for missing GPUs would wait for ever."""
        import ray

        wanted = self.settings.gpus_per_actor
        have = float(ray.cluster_resources().get("GPU", 0))
        if wanted <= have:
            return
        if self.local:
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


def cut(calls: Iterable[tuple[Texts, Iterable[slice]]]) -> tuple[list[Texts], list[int]]:
    """Each call's texts cut at its slices; with each shard, the call it is of."""
    parts = [(k, (c[p], r[p], s[p])) for k, ((c, r, s), slices) in enumerate(calls) for p in slices]
    return [shard for _, shard in parts], [k for k, _ in parts]


def _taken(scored: Any) -> tuple[list[dict[str, Any]], float]:
    start = time.perf_counter()
    return scored.take_all(), time.perf_counter() - start


def bundled(units: Sequence[Shard], rows: int, workers: int) -> list[list[Shard]]:
    """About ``rows`` rows, smaller where there would be fewer than two per worker."""
    total = sum(len(unit.candidates) for unit in units)
    target = max(1, min(rows, -(-total // (2 * workers))))
    out: list[list[Shard]] = []
    filled = target
    for unit in units:
        if filled >= target:
            out.append([])
            filled = 0
        out[-1].append(unit)
        filled += len(unit.candidates)
    return out


@dataclass
class Asked:
    """A metric's calls asked of the engine: ``owners`` the call each shard is of."""

    metric: Metric
    recipe: Recipe
    mode: ShardMode
    shards: list[Texts]
    owners: list[int]
    counts: list[CorpusCounts]
    results: list[Any] | None = None


@contextmanager
def open_engine(
    settings: EngineSettings, metrics: Mapping[str, Mapping[str, Any]], allow_external: bool = False
) -> Iterator[Engine]:
    """``metrics``: config nodes Ray rebuilds from; a Ray instance it started ends with it."""
    if settings.kind == "local":
        yield LocalEngine()
        return
    engine = RayEngine(settings, metrics, allow_external)
    try:
        yield engine
    finally:
        engine.close()
