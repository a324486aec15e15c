"""The one allow-list of what a config's ``_target_`` may name. A config must never make a run
import or call arbitrary code (``paraeval.pipeline.data.load.pd.read_pickle`` starts with a loader
module's name), so every ``_target_`` is looked up by its exact name in its group's table, built
from paraeval's own registries (:func:`allowed`); a metric class from elsewhere needs
``allow_external_metrics=true``. Any other name is a :class:`ConfigError` before any import."""

from __future__ import annotations

import importlib
from importlib import resources

from paraeval.pipeline.errors import ConfigError, not_allowed

# what each group's _target_ names, for the error line
KINDS = {
    "data": "data loader",
    "metrics": "metric",
    "normalize": "normalizer",
    "tracking": "tracker",
}
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


def allowed(group: str) -> list[str]:
    """The exact names ``<group>._target_`` may take."""
    if group == "data":
        from paraeval.pipeline.data.load import LOADERS

        return sorted(LOADERS)
    if group == "metrics":
        return sorted(metric_targets())
    if group == "normalize":
        return [NORMALIZER]
    if group == "tracking":
        from paraeval.pipeline.tracking.trackers import TRACKERS

        return sorted(TRACKERS)
    raise ValueError(f"no _target_ allow-list for group '{group}'")


def check(group: str, target: object, key: str | None = None) -> str:
    """``target`` itself when it is on the group's list; a ConfigError naming ``key`` (default
    ``<group>._target_``), the nearest allowed name and the choices otherwise."""
    name = str(target or "")
    choices = allowed(group)
    if name in choices:
        return name
    raise not_allowed(key or f"{group}._target_", name, KINDS[group], choices)


def metric_class(target: str, metric_id: str, allow_external: bool) -> type:
    """The metric class a ``_target_`` names: paraeval's by exact name; with ``allow_external``
    (the user opted in to running that code) any importable subclass of ``Metric``."""
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
