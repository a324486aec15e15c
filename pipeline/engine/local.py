"""The score stage's calls in this process: what the stage always did."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from paraeval.metrics.base import Metric, MetricResult
from paraeval.pipeline.engine.base import Origin
from paraeval.pipeline.stages.texts import Texts


class LocalEngine:
    kind = "local"

    def prepare(self, metric: Metric, texts: Iterable[str]) -> None:
        metric.prepare(texts)

    def score_calls(
        self, metric: Metric, origin: Origin, calls: Iterable[Texts]
    ) -> list[MetricResult]:
        # one call's lists at a time: the caller builds them lazily
        return [metric.score(*call) for call in calls]

    def score_systems(
        self, metric: Metric, origin: Origin, calls: Sequence[Texts]
    ) -> list[MetricResult]:
        # one call for all: an encoder metric streams them in one pass
        return metric.score_systems(calls)
