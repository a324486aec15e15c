"""What runs in Ray's worker processes, without importing Ray: Ray Data calls these with a batch of
rows (a pyarrow table), each a bundle of shards, and collects one row per shard. Each metric is
rebuilt there from its :class:`~paraeval.pipeline.engine.base.Recipe` (a model never travels)."""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from typing import Any

import numpy as np

from paraeval.metrics.base import CorpusCounts, Metric, MetricResult
from paraeval.metrics.encoder import Encoders
from paraeval.pipeline.engine.base import Recipe
from paraeval.pipeline.heap import release_free_memory

# one shard of a request: its index in the pass, the request (``asked``), the call it is of, and
# its texts: candidates, references, sources (None where the metric takes none). A request's mode:
# one call of a segment-local metric (``score``), one system's call of another (``systems``), or
# a shard of a corpus-weighted one's system, ``counts`` then ``counted`` with the summed counts
Unit = tuple[int, int, int, list[str], list[list[str]], "list[str] | None"]


def score_shards(
    batch: Any,
    recipes: Sequence[Recipe],
    modes: Sequence[str],
    counts: Sequence[Sequence[CorpusCounts]] = (),
) -> dict[str, np.ndarray]:
    """A task's bundle: each metric is built once for it, in the task, as an actor builds it."""
    return ShardScorer(recipes, modes, counts)(batch)


class ShardScorer:
    """An actor's callable for the metrics of a pass that load something: each built once per actor
    at its first shard, those on an encoder sharing one :class:`Encoders` (as in one process)."""

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
        """Each shard of the bundles in ``batch`` (a pickled list of :data:`Unit` per row): its
        index and its pickled result, bit for bit what the metric returned."""
        shards: list[int] = []
        results: list[bytes] = []
        for payload in batch.column("bundle").to_pylist():
            units: list[Unit] = pickle.loads(payload)
            # encoders batch the bundle's texts in one pass, as one process batches the run's:
            # length-sorted batches over many texts pad less than each shard's alone
            texts: dict[int, list[str]] = {}
            for _, request, _, cands, refs, srcs in units:
                if self.modes[request] != "counts":
                    every = [*cands, *(r for rs in refs for r in rs), *(srcs or ())]
                    texts.setdefault(request, []).extend(every)
            for request, some in texts.items():
                self.metric(request).prepare(some)
            for shard, request, call, cands, refs, srcs in units:
                metric, mode = self.metric(request), self.modes[request]
                result: MetricResult | CorpusCounts
                if mode == "counts":
                    result = metric.corpus_counts(cands, refs, srcs)
                elif mode == "score":
                    result = metric.score(cands, refs, srcs)
                elif mode == "counted":
                    result = metric.score_counted(self.counts[request][call], cands, refs, srcs)
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
