"""paraeval: evaluate paraphrase generation. Cheap to import: the API loads on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from paraeval.pipeline.version import __version__

if TYPE_CHECKING:
    from paraeval.pipeline.api import Evaluation, evaluate
    from paraeval.pipeline.config.compose import list_metrics

__all__ = ["Evaluation", "__version__", "evaluate", "list_metrics"]


def __getattr__(name: str) -> Any:
    if name in ("evaluate", "Evaluation"):
        from paraeval.pipeline import api

        return getattr(api, name)
    if name == "list_metrics":
        from paraeval.pipeline.config.compose import list_metrics

        return list_metrics
    raise AttributeError(f"module 'paraeval' has no attribute {name!r}")
