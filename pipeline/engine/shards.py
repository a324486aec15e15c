"""What runs in Ray's worker processes: one shard's metric call, the metric rebuilt there from
its :class:`~paraeval.pipeline.engine.base.Recipe` (a loaded model never travels). Nothing here
imports Ray: Ray Data calls these with a batch of shard rows (a pyarrow table) and collects
the rows they return."""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from typing import Any

import numpy as np

from paraeval.metrics.base import CorpusCounts, Metric, MetricResult
from paraeval.pipeline.engine.base import Recipe

# what a shard's call is: one call of a segment-local metric (``score``), one system's call of
# any other metric (``systems``: :meth:`Metric.score_systems`, one call), or a shard of a
# system's call of a corpus-weighted metric: counted (``counts``: :meth:`Metric.corpus_counts`),
# then scored with its call's summed counts (``counted``: :meth:`Metric.score_counted`)
MODES = ("score", "systems", "counts", "counted")


def score_rows(
    metric: Metric, mode: str, batch: Any, counts: Sequence[CorpusCounts] = ()
) -> dict[str, np.ndarray]:
    """Each shard row of ``batch`` scored: its index and its pickled result (bit for bit what
    the metric returned; the driver unpickles it). ``counts``: each call's summed counts, by the
    row's ``call`` (``counted`` only)."""
    shards = batch.column("shard").to_pylist()
    calls = batch.column("call").to_pylist()
    columns = [batch.column(c).to_pylist() for c in ("candidates", "references", "sources")]
    results = []
    for call, cands, refs, srcs in zip(calls, *columns, strict=True):
        result: MetricResult | CorpusCounts
        if mode == "counts":
            result = metric.corpus_counts(cands, refs, srcs)
        else:
            # encoders batch the shard's texts in one pass, as the local engine the run's
            metric.prepare([*cands, *(r for rs in refs for r in rs), *(srcs or ())])
            if mode == "score":
                result = metric.score(cands, refs, srcs)
            elif mode == "counted":
                result = metric.score_counted(counts[call], cands, refs, srcs)
            else:
                (result,) = metric.score_systems([(cands, refs, srcs)])
        results.append(pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL))
    out = np.empty(len(results), dtype=object)
    out[:] = results
    return {"shard": np.asarray(shards, dtype=np.int64), "result": out}


def score_shards(
    batch: Any, recipe: Recipe, mode: str, counts: Sequence[CorpusCounts] = ()
) -> dict[str, np.ndarray]:
    """A task's shards: the metric is built for them (n-gram metrics build in microseconds)."""
    return score_rows(recipe.build(), mode, batch, counts)


class ShardScorer:
    """An actor's callable: the metric (its model) is built once per actor, in the actor."""

    def __init__(self, recipe: Recipe, mode: str, counts: Sequence[CorpusCounts] = ()) -> None:
        self.metric = recipe.build()
        self.mode = mode
        self.counts = counts

    def __call__(self, batch: Any) -> dict[str, np.ndarray]:
        return score_rows(self.metric, self.mode, batch, self.counts)
