"""What the score stage asks of an engine. The stage asks for every result before reading any
(:class:`Later`), so that a remote engine runs all metrics at once on one pool of actors, each
rebuilt there from its config node (:class:`Recipe`): a metric may hold a loaded model. Here too
the calls in this process (:class:`LocalEngine`) and :func:`open_engine`, which chooses it or Ray
(imported only when ``engine=ray``)."""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from paraeval.metrics.base import Metric, MetricResult, joined_segments
from paraeval.metrics.encoder import Encoders
from paraeval.pipeline.engine.texts import Texts

# a metric's calls, built when the engine needs them (in this process, one after another)
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
        """The items of a list result, each a :class:`Later` (computed together)."""
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
    """What rebuilds a metric anywhere."""

    origin: Origin
    settings: dict[str, Any]
    allow_external: bool = False

    def build(self, encoders: Encoders | None = None) -> Metric:
        """The metric; on an encoder, on ``encoders`` where given (shared with other metrics)."""
        from paraeval.pipeline.engine.build import build_metric

        metric = build_metric(self.origin.metric_id, self.settings, self.allow_external, encoders)
        for index in self.origin.parts:
            metric = metric.parts()[index][0]
        return metric


class Engine(Protocol):
    """``prepare`` runs before the metric's first call where the engine runs it in this process
    (encoders batch the run's texts once)."""

    def score_calls(
        self, metric: Metric, origin: Origin, calls: Calls, prepare: Callable[[], None]
    ) -> Later:
        """A :attr:`Metric.segment_local` metric's calls, as one call's result (:func:`joined`)."""

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
