"""Allow-list of ``_target_`` names, exact: a prefix would let ``...load.pd.read_pickle`` through,
and a config must never make a run import arbitrary code."""

from __future__ import annotations

import difflib
import importlib
import inspect
from collections.abc import Mapping
from importlib import resources
from typing import TYPE_CHECKING, Any

from paraeval.pipeline.errors import ConfigError, not_allowed

if TYPE_CHECKING:
    from paraeval.metrics.base import Metric

RUN_ARGUMENT = "encoders"  # given by the stage to the metrics that take it, never by a user
NORMALIZER = "paraeval.pipeline.stages.aggregate.Normalizer"


def metric_ids() -> list[str]:
    """The metric ids a run can choose: the names of ``conf/metrics/*.yaml``, sorted."""
    folder = resources.files("paraeval.conf") / "metrics"
    return sorted(p.name[: -len(".yaml")] for p in folder.iterdir() if p.name.endswith(".yaml"))


def metric_targets() -> dict[str, tuple[str, str]]:
    """Allowed metric ``_target_`` -> (module, class name); nothing is imported."""
    from paraeval.metrics import _MODULES, METRICS

    out: dict[str, tuple[str, str]] = {}
    for name in METRICS:
        module = f"paraeval.metrics.{_MODULES[name]}"
        out[f"{module}.{name}"] = (module, name)
        out[f"paraeval.metrics.{name}"] = (module, name)
    return out


def check(group: str, target: object, key: str | None = None) -> str:
    """``target`` when allowed (``group``: metrics or normalize), else a ConfigError naming
    ``key`` and the nearest allowed name."""
    name = str(target or "")
    choices = sorted(metric_targets()) if group == "metrics" else [NORMALIZER]
    if name in choices:
        return name
    kind = "metric" if group == "metrics" else "normalizer"
    raise not_allowed(key or f"{group}._target_", name, kind, choices)


def metric_class(target: str, metric_id: str, allow_external: bool) -> type:
    """Paraeval's by exact name; with ``allow_external``, any importable ``Metric`` subclass."""
    from paraeval.metrics.base import Metric

    known = metric_targets()
    if target in known:
        module_name, attr = known[target]
        cls = getattr(importlib.import_module(module_name), attr)
        assert isinstance(cls, type) and issubclass(cls, Metric)
        return cls
    if not allow_external:
        if target.startswith("paraeval."):
            check("metrics", target, f"metrics.{metric_id}._target_")
        raise ConfigError(
            f"metrics.{metric_id}._target_ '{target}' is outside paraeval's metrics package; "
            "set allow_external_metrics=true to run code from elsewhere"
        )
    module_name, _, attr = target.rpartition(".")
    if not module_name:
        raise ConfigError(f"_target_ '{target}' must be a dotted path module.Class")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"cannot import '{module_name}' for _target_ '{target}': {exc}") from None
    obj = getattr(module, attr, None)
    if not (isinstance(obj, type) and issubclass(obj, Metric)):
        raise ConfigError(f"_target_ '{target}' is not a paraeval metric class")
    return obj


def metric_settings(
    metric_id: str, settings: Mapping[str, Any], allow_external: bool = False
) -> tuple[type[Metric], dict[str, Any]]:
    """The class and keyword arguments of a metric's config node, checked without building it."""
    kwargs = dict(settings)
    target = kwargs.pop("_target_", None)
    if not target:
        raise ConfigError(f"metrics.{metric_id} has no _target_")
    cls = metric_class(str(target), metric_id, allow_external)
    params = inspect.signature(cls).parameters
    valid = [p for p in params if p not in ("self", RUN_ARGUMENT)]
    unknown = [k for k in kwargs if k not in valid]
    if unknown and not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        near = difflib.get_close_matches(unknown[0], valid, n=1, cutoff=0.5)
        hint = f"; did you mean 'metrics.{metric_id}.{near[0]}'?" if near else ""
        raise ConfigError(
            f"metrics.{metric_id}: unknown setting(s) {unknown}{hint}; valid: {valid}"
        )
    return cls, kwargs
