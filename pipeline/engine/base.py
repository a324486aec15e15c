"""What the score stage asks of an engine, and what every engine shares.

The stage decides what is scored (each distinct call once, from the score cache or not); an
engine decides where and when: :class:`~paraeval.pipeline.engine.local.LocalEngine` in this
process, each metric when its result is first asked for;
:class:`~paraeval.pipeline.engine.ray_engine.RayEngine` on a Ray cluster, every metric the stage
asked for at once, so that the metrics that load something share one pool of actors (one encoder
model and one forward pass per sentence for all encoder metrics, as in one process). The stage
therefore asks for every result first and reads them after: an engine answers with
:class:`Later` results. A remote engine cannot send a metric object (it may hold a loaded model):
it rebuilds the metric from its config node, which :class:`Origin` names.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from paraeval.metrics.base import Metric, MetricResult, joined_segments
from paraeval.metrics.encoder import Encoders
from paraeval.pipeline.stages.texts import Texts

# what the score stage gives an engine for a metric's calls: they are built when the engine
# needs them (a segment-local metric's calls, one after another in this process)
Calls = Callable[[], Iterable[Texts]]


class Later:
    """A result computed when it is first asked for (:meth:`get`), then kept."""

    def __init__(self, compute: Callable[[], Any]) -> None:
        self._compute: Callable[[], Any] | None = compute
        self._value: Any = None

    @classmethod
    def now(cls, value: Any) -> Later:
        later = cls(lambda: value)
        later.get()
        return later

    @property
    def done(self) -> bool:
        return self._compute is None

    def get(self) -> Any:
        if self._compute is not None:
            self._value = self._compute()
            self._compute = None
        return self._value

    def then(self, step: Callable[[Any], Any]) -> Later:
        return Later(lambda: step(self.get()))

    def each(self, n: int) -> list[Later]:
        """The items of a list result, each a :class:`Later` of its own (computed together)."""
        return [self.then(operator.itemgetter(k)) for k in range(n)]


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

    def build(self, encoders: Encoders | None = None) -> Metric:
        """The metric; on an encoder, on ``encoders`` where given (shared with other metrics)."""
        from paraeval.pipeline.stages.build import build_metric

        metric = build_metric(self.origin.metric_id, self.settings, self.allow_external, encoders)
        for index in self.origin.parts:
            metric = metric.parts()[index][0]
        return metric


class Engine(Protocol):
    """Where and when the score stage's metric calls run. ``prepare`` runs before the metric's
    first call where the engine runs it in this process (encoders batch the run's texts once)."""

    def score_calls(
        self, metric: Metric, origin: Origin, calls: Calls, prepare: Callable[[], None]
    ) -> Later:
        """A :attr:`Metric.segment_local` metric's calls, as one call's result
        (:func:`joined`)."""

    def score_systems(
        self, metric: Metric, origin: Origin, calls: Sequence[Texts], prepare: Callable[[], None]
    ) -> list[Later]:
        """:meth:`Metric.score_systems` of the calls (one per system), in order."""


def joined(calls: list[MetricResult]) -> MetricResult:
    """The results of consecutive calls of a segment-local metric as one call's, for
    :meth:`Metric.select` (which computes the corpus scores of what it selects)."""
    if len(calls) == 1:
        return calls[0]
    segment, stats = joined_segments(calls)
    return MetricResult(segment, {}, calls[0].signature, stats)
