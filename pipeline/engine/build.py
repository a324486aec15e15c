"""Apart from the score stage so that ``paraeval-score`` builds metrics without pandas."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Mapping
from typing import Any

from paraeval.metrics.base import Metric, MetricConfigError, MissingResourceError
from paraeval.metrics.encoder import Encoders
from paraeval.pipeline.config.targets import RUN_ARGUMENT, metric_settings
from paraeval.pipeline.errors import ConfigError

log = logging.getLogger(__name__)


def build_metric(
    metric_id: str,
    settings: Mapping[str, Any],
    allow_external: bool = False,
    encoders: Encoders | None = None,
) -> Metric:
    cls, kwargs = metric_settings(metric_id, settings, allow_external)
    if RUN_ARGUMENT in inspect.signature(cls.__init__).parameters:
        kwargs[RUN_ARGUMENT] = encoders if encoders is not None else Encoders()
    try:
        metric = cls(**kwargs)
    except (MetricConfigError, MissingResourceError) as exc:
        raise ConfigError(str(exc)) from None
    except TypeError as exc:
        raise ConfigError(f"metrics.{metric_id}: {exc}") from None
    if metric.name != metric_id:
        log.debug("metric config key %s builds metric %s", metric_id, metric.name)
    return metric


def build_metrics(
    cfg_metrics: Mapping[str, Any] | None, allow_external: bool = False
) -> dict[str, Metric]:
    """Those on an encoder share one :class:`Encoders`, never another run's."""
    encoders = Encoders()
    metrics = {
        str(key): build_metric(str(key), node, allow_external, encoders)
        for key, node in (cfg_metrics or {}).items()
        if node is not None
    }
    # two metrics giving one column (``rouge2``, ``rougeN`` with ``n: 2``) would overwrite scores
    owner: dict[str, str] = {}
    for metric_id, metric in metrics.items():
        suffixes = ("", "_src") if metric.against_source else ("",)
        for column in (c + s for c in metric.output_columns for s in suffixes):
            first = owner.setdefault(column, metric_id)
            if first != metric_id:
                raise ConfigError(
                    f"metrics '{first}' and '{metric_id}' both give the column '{column}'; "
                    "select one of them or change one's settings"
                )
    return metrics
