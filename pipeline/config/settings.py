"""The composed Hydra config turned into typed, checked settings once, before any work: the only
module that reads the config tree. Nothing here has a default of its own, so a missing key is a
broken configuration, not a silent fallback."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass, fields
from typing import Any, cast

import pandas as pd
from omegaconf import DictConfig, ListConfig, OmegaConf

from paraeval.pipeline.config import targets
from paraeval.pipeline.config.compose import flatten
from paraeval.pipeline.config.correlation import CorrelationSettings
from paraeval.pipeline.config.nodes import (
    ADDRESS_KEY,
    AlphaCurveSettings,
    CacheSettings,
    CompareSettings,
    DataSettings,
    EngineSettings,
    NormalizeSettings,
    ReportSettings,
    TrackingSettings,
    boolean,
    check_keys,
    check_reachable,
    count,
)
from paraeval.pipeline.errors import ConfigError
from paraeval.pipeline.secrets import redact_values

Node = dict[str, object]

# count settings of a metric (conf/metrics/*.yaml) and the smallest value each takes; what their
# memory needs once the data's shape is known: :mod:`paraeval.pipeline.stages.memory_bounds`
METRIC_COUNTS: dict[str, int] = {
    "batch_size": 1,
    "bert_score_batch_size": 0,  # 0: bert-score's padding rule off
    "max_ngram_order": 1,
    "max_order": 1,
    "char_order": 0,
    "word_order": 0,
    "max_length": 1,
    "n": 1,  # rougeN's order
}
# metrics whose corpus statistics have two counts per n-gram order (and their order setting)
NGRAM_ORDERS = ("max_ngram_order", "max_order")


@dataclass(frozen=True)
class Settings:
    """Everything a run needs, typed and checked."""

    seed: int
    data: DataSettings
    metrics: dict[str, Node]
    allow_external_metrics: bool
    normalize: NormalizeSettings
    correlation: CorrelationSettings
    compare: CompareSettings | None  # None: the comparison is switched off
    cache: CacheSettings | None  # None: no cache
    alpha_curve: AlphaCurveSettings
    report: ReportSettings
    tracking: TrackingSettings
    engine: EngineSettings
    params: dict[str, str]  # the flattened resolved config, as MLflow params

    @classmethod
    def from_config(cls, cfg: DictConfig) -> Settings:
        tree = _container(cfg)
        check_keys(tree, TOP_LEVEL, "")
        _check_counts(tree)
        metrics = _metrics(tree)
        allow_external = boolean(
            tree.get("allow_external_metrics", False), "allow_external_metrics"
        )
        for metric_id, node in metrics.items():
            # target and setting names now, not after the data is loaded
            targets.metric_settings(metric_id, node, allow_external)
        targets.check("normalize", _node(tree, "normalize").get("_target_"))
        engine = EngineSettings.from_node(_node(tree, "engine"))
        if engine.kind == "ray":
            check_reachable(engine.address, ADDRESS_KEY)
        return cls(
            seed=_integer(tree.get("seed"), "seed"),
            data=DataSettings.from_node(_node(tree, "data")),
            metrics=metrics,
            allow_external_metrics=allow_external,
            normalize=NormalizeSettings.from_node(_node(tree, "normalize")),
            correlation=CorrelationSettings.from_node(_node(tree, "correlation")),
            compare=CompareSettings.from_node(_node(tree, "compare")),
            cache=CacheSettings.from_node(_node(tree, "cache")),
            alpha_curve=AlphaCurveSettings.from_node(_node(tree, "alpha_curve")),
            report=ReportSettings.from_node(_node(tree, "report")),
            tracking=TrackingSettings.from_node(_node(tree, "tracking")),
            engine=engine,
            # MLflow params and the report: a tracking URI's password is left out
            params=redact_values(flatten(tree)),
        )


# the top-level keys of conf/config.yaml: one per setting (``params`` is derived) and the
# ``experiment`` group, presets that set the others
TOP_LEVEL = (*(f.name for f in fields(Settings) if f.name != "params"), "experiment")


def _container(cfg: DictConfig) -> Node:
    try:
        tree = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
    except Exception as exc:
        # a required value (``???``) not given: looked for only on failure, the walk is slow
        for key in _missing(cfg):
            raise ConfigError(f"{key} is required, e.g. {key}=<value>") from None
        raise ConfigError(f"the configuration does not resolve: {exc}") from None
    return cast(Node, tree)


def _missing(cfg: Any, prefix: str = "") -> list[str]:
    """The keys whose value is ``???``, in order, found without resolving anything
    (``OmegaConf.missing_keys`` fails on an interpolation that leads to a missing value)."""
    found: list[str] = []
    dot = "." if prefix else ""
    for key in range(len(cfg)) if isinstance(cfg, ListConfig) else list(cfg.keys()):
        name = f"{prefix}[{key}]" if isinstance(key, int) else f"{prefix}{dot}{key}"
        if OmegaConf.is_interpolation(cfg, key):
            continue
        if OmegaConf.is_missing(cfg, key):
            found.append(name)
            continue
        node = cfg[key]  # neither missing nor an interpolation: reading it resolves nothing
        if isinstance(node, (DictConfig, ListConfig)):
            found.extend(_missing(node, name))
    return found


def _check_counts(tree: Mapping[str, Any]) -> None:
    """The count settings not checked elsewhere, before the data is loaded (``correlation`` and
    ``compare`` check theirs)."""
    for metric_id, node in (tree.get("metrics") or {}).items():
        if not isinstance(node, Mapping):
            continue
        for key, minimum in METRIC_COUNTS.items():
            if node.get(key) is not None:
                count(node[key], f"metrics.{metric_id}.{key}", minimum)
    data = tree.get("data") or {}
    if isinstance(data, Mapping) and data.get("max_items") is not None:
        count(data["max_items"], "data.max_items")


def _node(tree: Mapping[str, object], key: str) -> Node:
    value = tree.get(key)
    if not isinstance(value, Mapping):
        raise ConfigError(f"'{key}' must be a config group or mapping, got {value!r}")
    return {str(k): v for k, v in value.items()}


def _metrics(tree: Mapping[str, object]) -> dict[str, Node]:
    metrics = tree.get("metrics")
    if not metrics or not isinstance(metrics, Mapping):
        raise ConfigError("no metrics selected; e.g. 'metrics=[bleu,chrf]'")
    return {str(k): _node(metrics, str(k)) for k, v in metrics.items() if v is not None}


def _integer(value: object, key: str) -> int:
    with suppress(TypeError, ValueError):
        if not isinstance(value, bool):
            return int(value)  # type: ignore[call-overload, no-any-return]
    raise ConfigError(f"{key} must be an integer, got '{value}'")


def check_table(settings: Settings, table: pd.DataFrame) -> None:
    """The settings that name things in the data (the comparison's baseline), checked once it is
    loaded, before any scoring."""
    compare = settings.compare
    if compare is not None and compare.baseline is not None:
        systems = sorted(map(str, table["system"].unique()))
        if compare.baseline not in systems:
            near = difflib.get_close_matches(compare.baseline, systems, n=1)
            hint = f"did you mean '{near[0]}'? " if near else ""
            raise ConfigError(
                f"compare.baseline '{compare.baseline}' is not a system; {hint}choose from "
                f"{systems}"
            )
