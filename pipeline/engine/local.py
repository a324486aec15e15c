"""The score stage's calls in this process: what the stage always did, each metric when its
result is first asked for (the stage asks in its order of metrics)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from paraeval.metrics.base import Metric
from paraeval.pipeline.engine.base import Calls, Later, Origin, joined
from paraeval.pipeline.stages.texts import Texts


class LocalEngine:
    kind = "local"

    def score_calls(
        self, metric: Metric, origin: Origin, calls: Calls, prepare: Callable[[], None]
    ) -> Later:
        def compute() -> object:
            prepare()
            # one call's lists at a time: the calls are built lazily
            return joined([metric.score(*call) for call in calls()])

        return Later(compute)

    def score_systems(
        self, metric: Metric, origin: Origin, calls: Sequence[Texts], prepare: Callable[[], None]
    ) -> list[Later]:
        def compute() -> object:
            prepare()
            # one call for all: an encoder metric streams them in one pass
            return metric.score_systems(calls)

        return Later(compute).each(len(calls))
