"""The composed Hydra config turned into typed settings, once, before any work.

This is the only module that reads the config tree. Every value comes from the YAML files in
``conf/`` (composed by Hydra for the CLI and by :func:`paraeval.evaluate` for the API): nothing
here has a default of its own, so a key missing from the config is a broken configuration, not a
silent fallback. Each setting is checked here, so a mistake is one line before anything is loaded
or scored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast

import pandas as pd
from omegaconf import DictConfig, OmegaConf

from paraeval.pipeline import targets
from paraeval.pipeline.aggregate import Normalizer
from paraeval.pipeline.compare import CompareConfig
from paraeval.pipeline.correlate import check_correlation_config
from paraeval.pipeline.errors import ConfigError
from paraeval.pipeline.load import load_data
from paraeval.pipeline.sweep import AlphaCurveSettings
from paraeval.pipeline.track import flatten
from paraeval.pipeline.tracking import Tracker, tracker_from_config

Node = dict[str, object]


@dataclass(frozen=True)
class DataSettings:
    target: str
    options: Node  # the loader's keyword arguments
    name: str

    @classmethod
    def from_node(cls, node: Mapping[str, object]) -> DataSettings:
        options = {str(k): v for k, v in node.items()}
        target = targets.check("data", options.pop("_target_", ""))
        missing = [k for k, v in options.items() if v == "???"]
        if missing:
            raise ConfigError(f"data.{missing[0]} is required, e.g. data.{missing[0]}=<path>")
        return cls(target=target, options=options, name=str(options.get("name", "data")))

    def load(self) -> pd.DataFrame:
        return load_data(self.target, self.options)


@dataclass(frozen=True)
class ReportSettings:
    print_tables: bool
    max_rows: int
    plot_process: bool
    progress: bool


@dataclass(frozen=True)
class Settings:
    """Everything a run needs, typed and checked."""

    seed: int
    data: DataSettings
    metrics: dict[str, Node]
    allow_external_metrics: bool
    normalizer: Normalizer
    correlation: Node
    compare: CompareConfig | None  # None: the comparison is switched off
    cache: Node | None
    alpha_curve: AlphaCurveSettings
    report: ReportSettings
    tracking: Node
    tracker: Tracker
    params: dict[str, str]  # the flattened resolved config, as MLflow params

    @classmethod
    def from_config(cls, cfg: DictConfig) -> Settings:
        for key in OmegaConf.missing_keys(cfg):
            raise ConfigError(f"{key} is required, e.g. {key}=<value>")
        tree = _container(cfg)
        correlation = _node(tree, "correlation")
        check_correlation_config(correlation)
        compare = _node(tree, "compare")
        return cls(
            seed=_integer(tree.get("seed"), "seed"),
            data=DataSettings.from_node(_node(tree, "data")),
            metrics=_metrics(tree),
            allow_external_metrics=_flag(tree, "allow_external_metrics", False),
            normalizer=_normalizer(_node(tree, "normalize")),
            correlation=correlation,
            compare=CompareConfig.from_mapping(compare) if compare.get("enabled") else None,
            cache=_node(tree, "cache") if tree.get("cache") else None,
            alpha_curve=AlphaCurveSettings.from_config(_node(tree, "alpha_curve")),
            report=_report(_node(tree, "report")),
            tracking=_node(tree, "tracking"),
            tracker=tracker_from_config(_node(tree, "tracking")),
            params=flatten(tree),
        )


def _container(cfg: DictConfig) -> Node:
    try:
        tree = OmegaConf.to_container(cfg, resolve=True)
    except Exception as exc:  # an interpolation that cannot resolve, e.g. a missing env variable
        raise ConfigError(f"the configuration does not resolve: {exc}") from None
    return cast(Node, tree)


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


def _normalizer(node: Node) -> Normalizer:
    targets.check("normalize", node.get("_target_"))
    options = {k: v for k, v in node.items() if k != "_target_"}
    try:
        return Normalizer(**options)  # type: ignore[arg-type]
    except TypeError as exc:
        raise ConfigError(f"normalize: {exc}") from None


def _integer(value: object, key: str) -> int:
    if isinstance(value, bool):
        raise ConfigError(f"{key} must be an integer, got '{value}'")
    try:
        return int(value)  # type: ignore[call-overload, no-any-return]
    except (TypeError, ValueError):
        raise ConfigError(f"{key} must be an integer, got '{value}'") from None


def _flag(tree: Mapping[str, object], key: str, absent: bool) -> bool:
    # only for keys a user adds with `+key=...`; every other flag is in the YAML files
    return bool(tree.get(key, absent))


def _report(node: Node) -> ReportSettings:
    return ReportSettings(
        print_tables=bool(node["print_tables"]),
        max_rows=_integer(node["max_rows"], "report.max_rows"),
        plot_process=bool(node["plot_process"]),
        progress=bool(node["progress"]),
    )
