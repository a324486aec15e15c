"""paraeval: evaluate paraphrase generation.

The one import name of the distribution. The repository's top-level folders are its subpackages
(``pyproject.toml`` maps them): :mod:`paraeval.metrics` (one class per metric),
:mod:`paraeval.correlation` (coefficients, levels, resampling, significance on systems x items
matrices) and :mod:`paraeval.pipeline` (the stages, Hydra and MLflow). :func:`evaluate` runs the
whole pipeline on a DataFrame or a file and returns an :class:`Evaluation`; :func:`list_metrics`
tells which metrics it can run.

Importing this package is cheap: the API is loaded on first use.
"""

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
