"""The score stage's calls in this process, and :func:`open_engine`, which chooses them or Ray's
(imported only for ``engine=ray``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from paraeval.metrics.base import Metric
from paraeval.pipeline.config.nodes import EngineSettings
from paraeval.pipeline.engine.base import Calls, Engine, Later, Origin, joined
from paraeval.pipeline.engine.texts import Texts


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


@contextmanager
def open_engine(
    settings: EngineSettings, metrics: Mapping[str, Mapping[str, Any]], allow_external: bool = False
) -> Iterator[Engine]:
    """The engine of ``settings`` for the run's ``metrics`` (their config nodes, which a remote
    engine rebuilds them from); a Ray instance it started ends when the block does."""
    if settings.kind == "local":
        yield LocalEngine()
        return
    from paraeval.pipeline.engine.ray_engine import RayEngine

    engine = RayEngine(settings, metrics, allow_external)
    try:
        yield engine
    finally:
        engine.close()
