"""Where the score stage's metric calls run: ``engine=local`` (this process) or ``engine=ray``
(a Ray cluster through Ray Data). Ray is imported only when ``engine=ray`` is chosen."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from paraeval.pipeline.engine.base import Engine, Origin
from paraeval.pipeline.engine.local import LocalEngine
from paraeval.pipeline.engine.settings import EngineSettings

__all__ = ["Engine", "EngineSettings", "LocalEngine", "Origin", "open_engine"]


@contextmanager
def open_engine(
    settings: EngineSettings,
    metrics: Mapping[str, Mapping[str, Any]],
    allow_external: bool = False,
    progress: bool = False,
) -> Iterator[Engine]:
    """The engine of ``settings`` for the run's ``metrics`` (their config nodes, which a remote
    engine rebuilds them from); a Ray instance it started ends when the block does."""
    if settings.kind == "local":
        yield LocalEngine()
        return
    from paraeval.pipeline.engine.ray_engine import RayEngine

    engine = RayEngine(settings, metrics, allow_external, progress)
    try:
        yield engine
    finally:
        engine.close()
