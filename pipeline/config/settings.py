"""The composed Hydra config turned into typed, checked settings, once, before any work; the only
module that reads the config tree. Every value comes from ``conf/``: nothing here has a default
of its own, so a missing key is a broken configuration, not a silent fallback."""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import Any, cast

import pandas as pd
from omegaconf import DictConfig, ListConfig, OmegaConf

from paraeval.pipeline.config import targets
from paraeval.pipeline.config.bounds import check_counts
from paraeval.pipeline.config.compose import flatten
from paraeval.pipeline.data.load import load_data
from paraeval.pipeline.engine.settings import EngineSettings
from paraeval.pipeline.errors import ConfigError
from paraeval.pipeline.secrets import redact_values
from paraeval.pipeline.stages.aggregate import Normalizer
from paraeval.pipeline.stages.alpha import AlphaCurveSettings
from paraeval.pipeline.stages.compare import CompareConfig
from paraeval.pipeline.stages.correlate import check_correlation_config
from paraeval.pipeline.stages.score import metric_settings
from paraeval.pipeline.tracking.trackers import Tracker, tracker_from_config

Node = dict[str, object]


@dataclass(frozen=True)
class DataSettings:
    target: str
    options: Node  # the loader's keyword arguments
    name: str
    # systems that are controls (a copy of the source, an off-topic system): shown apart, never
    # ranked, out of the correlations unless correlation.include_controls
    controls: tuple[str, ...] = ()

    @classmethod
    def from_node(cls, node: Mapping[str, object]) -> DataSettings:
        options = {str(k): v for k, v in node.items()}
        target = targets.check("data", options.pop("_target_", ""))
        controls = _names(options.pop("controls", None), "data.controls")
        missing = [k for k, v in options.items() if v == "???"]
        if missing:
            raise ConfigError(f"data.{missing[0]} is required, e.g. data.{missing[0]}=<path>")
        name = str(options.get("name", "data"))
        return cls(target=target, options=options, name=name, controls=controls)

    def load(self) -> pd.DataFrame:
        return load_data(self.target, self.options)


@dataclass(frozen=True)
class ReportSettings:
    print_tables: bool
    max_rows: int
    progress: bool
    format: str  # figure file format: png | pdf | svg
    parallel_figures: bool = True  # each drawn in a forked process as soon as its tables exist


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
    engine: EngineSettings
    params: dict[str, str]  # the flattened resolved config, as MLflow params

    @classmethod
    def from_config(cls, cfg: DictConfig) -> Settings:
        tree = _container(cfg)
        _check_keys(tree, TOP_LEVEL, "")
        check_counts(tree)
        correlation = _node(tree, "correlation")
        check_correlation_config(correlation)
        compare = _node(tree, "compare")
        compare_on = _bool(compare.get("enabled"), "compare.enabled")
        metrics = _metrics(tree)
        allow_external = _bool(tree.get("allow_external_metrics", False), "allow_external_metrics")
        for metric_id, node in metrics.items():
            # target and setting names now, not after the data is loaded
            metric_settings(metric_id, node, allow_external)
        return cls(
            seed=_integer(tree.get("seed"), "seed"),
            data=DataSettings.from_node(_node(tree, "data")),
            metrics=metrics,
            allow_external_metrics=allow_external,
            normalizer=_normalizer(_node(tree, "normalize")),
            correlation=correlation,
            compare=CompareConfig.from_mapping(compare) if compare_on else None,
            cache=_cache(tree),
            alpha_curve=AlphaCurveSettings.from_config(_node(tree, "alpha_curve")),
            report=_report(_node(tree, "report")),
            tracking=_node(tree, "tracking"),
            tracker=tracker_from_config(_node(tree, "tracking")),
            engine=_engine(tree),
            # MLflow params and the report: a tracking URI's password is left out
            params=redact_values(flatten(tree)),
        )

    def tracker_with(self, changes: Mapping[str, object]) -> Tracker:
        """This config's tracker with some of its settings changed (``{"uri": ...}``)."""
        return tracker_from_config({**self.tracking, **changes})


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


def _names(value: object, key: str) -> tuple[str, ...]:
    """A list of system names (null: none; one name alone: that one)."""
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, Sequence) or any(
        isinstance(v, Mapping | Sequence) and not isinstance(v, str) for v in value
    ):
        raise ConfigError(f"{key} must be a list of system names, got {value!r}")
    return tuple(str(v) for v in value)


def _integer(value: object, key: str) -> int:
    with suppress(TypeError, ValueError):
        if not isinstance(value, bool):
            return int(value)  # type: ignore[call-overload, no-any-return]
    raise ConfigError(f"{key} must be an integer, got '{value}'")


def _bool(value: object, key: str) -> bool:
    """YAML's true/false only: ``maybe`` or ``1`` is a mistake, not a truthy string."""
    if not isinstance(value, bool):
        raise ConfigError(f"{key} must be true or false, got '{value}'")
    return value


def _check_keys(node: Mapping[str, object], valid: Sequence[str], section: str) -> None:
    """A key that is not a setting (a misspelling added with ``+``) is an error naming the
    nearest valid key."""
    for key in node:
        if key not in valid:
            where = f"{section}.{key}" if section else str(key)
            near = difflib.get_close_matches(str(key), list(valid), n=1, cutoff=0.5)
            hint = f"; did you mean '{section + '.' if section else ''}{near[0]}'?" if near else ""
            raise ConfigError(
                f"unknown setting '{where}'{hint} (valid: {', '.join(sorted(map(str, valid)))})"
            )


# the top-level keys of conf/config.yaml, the config groups, and the opt-in flag added with +
TOP_LEVEL = (
    "seed",
    "data",
    "metrics",
    "normalize",
    "correlation",
    "compare",
    "tracking",
    "experiment",
    "cache",
    "alpha_curve",
    "report",
    "allow_external_metrics",
    "engine",
)
REPORT_KEYS = ("print_tables", "max_rows", "progress", "format", "parallel_figures")
CACHE_KEYS = ("enabled", "dir")


def _report(node: Node) -> ReportSettings:
    from paraeval.pipeline.report.plots import FORMATS

    _check_keys(node, REPORT_KEYS, "report")
    max_rows = _integer(node["max_rows"], "report.max_rows")
    if max_rows < 1:
        raise ConfigError(f"report.max_rows must be a positive integer, got {max_rows}")
    print_tables = _bool(node["print_tables"], "report.print_tables")
    progress = _bool(node["progress"], "report.progress")
    if node["format"] not in FORMATS:
        raise ConfigError(f"report.format must be one of {list(FORMATS)}, got '{node['format']}'")
    parallel = _bool(node.get("parallel_figures", True), "report.parallel_figures")
    return ReportSettings(print_tables, max_rows, progress, str(node["format"]), parallel)


def _engine(tree: Mapping[str, object]) -> EngineSettings:
    # an absent group: a config composed before engines existed (a saved run's), run locally
    engine = EngineSettings.from_node(_node(tree, "engine")) if "engine" in tree else None
    engine = engine or EngineSettings()
    engine.check_reachable()
    return engine


def _cache(tree: Mapping[str, object]) -> Node | None:
    node = _node(tree, "cache")
    _check_keys(node, CACHE_KEYS, "cache")
    if not _bool(node.get("enabled"), "cache.enabled"):
        return None
    if not isinstance(node.get("dir"), str) or not node["dir"]:
        raise ConfigError(f"cache.dir must be a folder, got '{node.get('dir')}'")
    return node


def check_table(settings: Settings, table: pd.DataFrame) -> None:
    """The settings that name things in the data (the comparison's baseline system), checked
    once it is loaded, before any scoring (with the memory of the count settings,
    :func:`paraeval.pipeline.stages.memory_bounds.check_memory`)."""
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
