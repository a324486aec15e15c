"""Every result is asked for before any is read (:class:`Later`), so a remote engine runs all
metrics at once on one actor pool, each rebuilt from its config node (:class:`Recipe`)."""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from paraeval.metrics.base import Composed, Metric, MetricResult, joined_segments
from paraeval.metrics.encoder import Encoders
from paraeval.pipeline.engine.texts import Texts

# built when the engine needs them (in this process, one after another)
Calls = Callable[[], Iterable[Texts]]


class Later:
    """Computed when first asked for (:meth:`get`), then kept."""

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
        return [self.then(operator.itemgetter(k)) for k in range(n)]


@dataclass(frozen=True)
class Origin:
    """Indices of :meth:`Composed.parts` taken in turn (iBLEU's BLEU vs the sources: ``(1,)``)."""

    metric_id: str
    parts: tuple[int, ...] = ()

    def part(self, index: int) -> Origin:
        return Origin(self.metric_id, (*self.parts, index))

    def __str__(self) -> str:  # ``ibleu[1]`` for iBLEU's second part
        return self.metric_id + "".join(f"[{k}]" for k in self.parts)


@dataclass(frozen=True)
class Recipe:
    origin: Origin
    settings: dict[str, Any]
    allow_external: bool = False

    def build(self, encoders: Encoders | None = None) -> Metric:
        from paraeval.pipeline.engine.build import build_metric

        metric = build_metric(self.origin.metric_id, self.settings, self.allow_external, encoders)
        for index in self.origin.parts:
            assert isinstance(metric, Composed)
            metric = metric.parts()[index][0]
        return metric


class Engine(Protocol):
    """Runs metrics, each prepared (:meth:`Metric.prepare`) once in each process it runs in before
    its first call: locally with every text of the run (:attr:`texts`), on Ray with a bundle's."""

    texts: Sequence[str]

    def score_calls(self, metric: Metric, origin: Origin, calls: Calls) -> Later:
        """A :class:`SegmentLocal` metric's calls, as one call's result (:func:`joined`)."""

    def score_systems(self, metric: Metric, origin: Origin, calls: Sequence[Texts]) -> list[Later]:
        """:meth:`Metric.score_systems` of the calls (one per system), in order."""


def joined(calls: list[MetricResult]) -> MetricResult:
    """Consecutive calls of a segment-local metric as one, for :meth:`SegmentLocal.select`."""
    if len(calls) == 1:
        return calls[0]
    segment, stats = joined_segments(calls)
    return MetricResult(segment, {}, calls[0].signature, stats)


class LocalEngine:
    kind = "local"

    def __init__(self) -> None:
        self.texts: Sequence[str] = ()
        # by origin: a part (iBLEU's BLEUs) is a new object at each ask, prepared here once
        self._prepared: dict[Origin, Metric] = {}

    def _ready(self, metric: Metric, origin: Origin) -> Metric:
        if origin not in self._prepared:
            metric.prepare(self.texts)
            self._prepared[origin] = metric
        return self._prepared[origin]

    def score_calls(self, metric: Metric, origin: Origin, calls: Calls) -> Later:
        def compute() -> object:
            ready = self._ready(metric, origin)
            # the calls are built lazily: one call's lists at a time
            return joined([ready.score(*call) for call in calls()])

        return Later(compute)

    def score_systems(self, metric: Metric, origin: Origin, calls: Sequence[Texts]) -> list[Later]:
        # one call for all: an encoder metric streams them in one pass
        return Later(lambda: self._ready(metric, origin).score_systems(calls)).each(len(calls))
