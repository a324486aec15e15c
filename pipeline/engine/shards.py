"""What runs in Ray's worker processes: shards of metric calls, each metric rebuilt there from
its :class:`~paraeval.pipeline.engine.base.Recipe` (a loaded model never travels). Nothing here
imports Ray: Ray Data calls these with a batch of rows (a pyarrow table), each a bundle of
shards, and collects the rows they return, one per shard. A shard names its request (the index
of a metric's calls in the pass), and the request says the metric (``recipes``), what a shard of
it is (``modes``) and the summed counts of each of its calls (``counts``, ``counted`` only)."""

from __future__ import annotations

import pickle
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from paraeval.metrics.base import CorpusCounts, Metric, MetricResult
from paraeval.metrics.encoder import Encoders
from paraeval.pipeline.engine.base import Recipe
from paraeval.pipeline.heap import release_free_memory

# what a shard's call is: one call of a segment-local metric (``score``), one system's call of
# any other metric (``systems``: :meth:`Metric.score_systems`, one call), or a shard of a
# system's call of a corpus-weighted metric: counted (``counts``: :meth:`Metric.corpus_counts`),
# then scored with its call's summed counts (``counted``: :meth:`Metric.score_counted`)
MODES = ("score", "systems", "counts", "counted")


# one shard of a request: its index in the pass, the request (``asked``), the call it is of, and
# its texts: candidates, references, sources (None where the metric takes none)
Unit = tuple[int, int, int, list[str], list[list[str]], "list[str] | None"]


def score_rows(
    metric_of: Callable[[int], Metric],
    modes: Sequence[str],
    batch: Any,
    counts: Sequence[Sequence[CorpusCounts]] = (),
) -> dict[str, np.ndarray]:
    """Each shard of the bundles in ``batch`` (a pickled list of :data:`Unit` per row) scored:
    one output row per shard, its index and its pickled result (bit for bit what the metric
    returned; the driver unpickles it). ``metric_of``: the metric of a request."""
    shards: list[int] = []
    results: list[bytes] = []
    for payload in batch.column("bundle").to_pylist():
        units: list[Unit] = pickle.loads(payload)
        # encoders batch the bundle's texts in one pass, as one process batches the run's:
        # length-sorted batches over many texts pad less than each shard's alone
        texts: dict[int, list[str]] = {}
        for _, request, _, cands, refs, srcs in units:
            if modes[request] != "counts":
                every = [*cands, *(r for rs in refs for r in rs), *(srcs or ())]
                texts.setdefault(request, []).extend(every)
        for request, some in texts.items():
            metric_of(request).prepare(some)
        for shard, request, call, cands, refs, srcs in units:
            metric, mode = metric_of(request), modes[request]
            result: MetricResult | CorpusCounts
            if mode == "counts":
                result = metric.corpus_counts(cands, refs, srcs)
            elif mode == "score":
                result = metric.score(cands, refs, srcs)
            elif mode == "counted":
                result = metric.score_counted(counts[request][call], cands, refs, srcs)
            else:
                (result,) = metric.score_systems([(cands, refs, srcs)])
            shards.append(shard)
            results.append(pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL))
        # a worker scores bundle after bundle: without this its heaps keep each one's freed
        # pages (an encoder actor's resident set grew with the rows it had scored)
        release_free_memory()
    out = np.empty(len(results), dtype=object)
    out[:] = results
    return {"shard": np.asarray(shards, dtype=np.int64), "result": out}


def score_shards(
    batch: Any,
    recipes: Sequence[Recipe],
    modes: Sequence[str],
    counts: Sequence[Sequence[CorpusCounts]] = (),
) -> dict[str, np.ndarray]:
    """A task's bundle: each metric is built once for it, in the task, as an actor builds it."""
    return ShardScorer(recipes, modes, counts)(batch)


class ShardScorer:
    """An actor's callable for every metric of a pass that loads something: each metric is built
    once per actor, when its first shard comes, and those on an encoder share one
    :class:`Encoders` (one model and one memo of sentences for all of them, as in one
    process)."""

    def __init__(
        self,
        recipes: Sequence[Recipe],
        modes: Sequence[str],
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
        return score_rows(self.metric, self.modes, batch, self.counts)
