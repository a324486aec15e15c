"""What the score stage asks of an engine, and what every engine shares.

The stage decides what is scored (each distinct call once, from the score cache or not); an
engine decides where: :class:`~paraeval.pipeline.engine.local.LocalEngine` in this process,
:class:`~paraeval.pipeline.engine.ray_engine.RayEngine` on a Ray cluster. A remote engine cannot
send a metric object (it may hold a loaded model): it rebuilds the metric from its config node,
which :class:`Origin` names.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from paraeval.metrics.base import Metric, MetricResult, joined_segments
from paraeval.pipeline.stages.texts import Texts


@dataclass(frozen=True)
class Origin:
    """Where a metric object comes from: the run's metric ``metric_id``, then the index of each
    :meth:`Metric.parts` taken from it in turn (iBLEU's BLEU against the sources: ``(1,)``)."""

    metric_id: str
    parts: tuple[int, ...] = ()

    def part(self, index: int) -> Origin:
        return Origin(self.metric_id, (*self.parts, index))


@dataclass(frozen=True)
class Recipe:
    """What rebuilds a metric anywhere: its config node and its :class:`Origin`."""

    origin: Origin
    settings: dict[str, Any]
    allow_external: bool = False

    def build(self) -> Metric:
        from paraeval.pipeline.stages.build import build_metric

        metric = build_metric(self.origin.metric_id, self.settings, self.allow_external)
        for index in self.origin.parts:
            metric = metric.parts()[index][0]
        return metric


class Engine(Protocol):
    """Where the score stage's metric calls run."""

    def prepare(self, metric: Metric, texts: Iterable[str]) -> None:
        """Before ``metric``'s first call: every text of the run (encoders batch them once)."""

    def score_calls(
        self, metric: Metric, origin: Origin, calls: Iterable[Texts]
    ) -> list[MetricResult]:
        """A :attr:`Metric.segment_local` metric's result of each call, in order."""

    def score_systems(
        self, metric: Metric, origin: Origin, calls: Sequence[Texts]
    ) -> list[MetricResult]:
        """:meth:`Metric.score_systems` of the calls (one per system), in order."""


def joined(calls: list[MetricResult]) -> MetricResult:
    """The results of consecutive calls of a segment-local metric as one call's, for
    :meth:`Metric.select` (which computes the corpus scores of what it selects)."""
    if len(calls) == 1:
        return calls[0]
    segment, stats = joined_segments(calls)
    return MetricResult(segment, {}, calls[0].signature, stats)
