"""The only reader of the config tree, checked before any work; a missing key is a broken config."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass, fields
from typing import Any, cast

import pandas as pd
from omegaconf import DictConfig, ListConfig, OmegaConf

from paraeval.correlation import COEFFICIENTS, LEVELS, Coefficient, configure, get_coefficient
from paraeval.correlation.levels import ITEM_AVERAGES, ITEM_NAN, TABLE_UNITS
from paraeval.correlation.significance import (
    ALTERNATIVES,
    METHODS,
    PERMUTATION_UNITS,
    EarlyStop,
    check_test,
)
from paraeval.correlation.table import INTERVALS
from paraeval.pipeline.config import targets
from paraeval.pipeline.config.compose import flatten
from paraeval.pipeline.config.nodes import (
    ADDRESS_KEY,
    AlphaCurveSettings,
    CacheSettings,
    CompareSettings,
    DataSettings,
    EngineSettings,
    LimitsSettings,
    NormalizeSettings,
    ReportSettings,
    TrackingSettings,
    boolean,
    check_keys,
    check_reachable,
    count,
    known,
    names,
    number,
    one_of,
    required,
)
from paraeval.pipeline.errors import ConfigError
from paraeval.pipeline.secrets import redact_values

Node = dict[str, object]

# count settings of a metric and the smallest value each takes (their memory: stages.memory_bounds)
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


def _keys(cls: type, left_out: str, *extra: str) -> tuple[str, ...]:
    """A node's keys: one per field of ``cls`` but ``left_out``, and ``extra``."""
    return (*(f.name for f in fields(cls) if f.name != left_out), *extra)


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
    limits: LimitsSettings
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
            limits=LimitsSettings.from_node(_node(tree, "limits")),
            tracking=TrackingSettings.from_node(_node(tree, "tracking")),
            engine=engine,
            # MLflow params and the report: a tracking URI's password is left out
            params=redact_values(flatten(tree)),
        )


# the top-level keys of conf/config.yaml: one per setting but ``params``, and presets
TOP_LEVEL = _keys(Settings, "params", "experiment")


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
    """Unresolved: ``OmegaConf.missing_keys`` fails on an interpolation to a missing value."""
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
    """The count settings ``correlation`` and ``compare`` leave, before the data is loaded."""
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
    metrics = tree.get("metrics") or {}  # none: the data's precomputed ones only (check_table)
    if not isinstance(metrics, Mapping):
        raise ConfigError("no metrics selected; e.g. 'metrics=[bleu,chrf]'")
    return {str(k): _node(metrics, str(k)) for k, v in metrics.items() if v is not None}


def _integer(value: object, key: str) -> int:
    with suppress(TypeError, ValueError):
        if not isinstance(value, bool):
            return int(value)  # type: ignore[call-overload, no-any-return]
    raise ConfigError(f"{key} must be an integer, got '{value}'")


def check_table(settings: Settings, table: pd.DataFrame) -> None:
    """The settings that name things in the data (the comparison's baseline), once it is loaded."""
    if not settings.metrics and not any(str(c).startswith("metric_") for c in table.columns):
        raise ConfigError(
            "no metrics selected and the data has no precomputed scores (metric_<name> "
            "columns): nothing to correlate; e.g. 'metrics=[bleu,chrf]'"
        )
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


@dataclass(frozen=True)
class SignificanceTask:
    """One significance table (mt-metrics-eval's Task): which correlations it compares, the
    permutation unit, and its weight in the overall ranking."""

    level: str
    coefficient: Coefficient
    unit: str
    weight: float = 1.0


@dataclass(frozen=True)
class SignificanceSettings:
    """The test between two metrics' correlations with the same human score."""

    method: str  # williams | permutation
    level: str
    coefficient: Coefficient
    unit: str
    n_resamples: int
    alpha: float
    alternative: str
    early_stop: EarlyStop | None  # None: all n_resamples permutations
    tasks: tuple[SignificanceTask, ...]  # the listed tasks, else the one of level/coefficient/unit


SIGNIFICANCE_KEYS = _keys(
    SignificanceSettings, "early_stop", "enabled", "block_size", "early_min", "early_max"
)


@dataclass(frozen=True)
class CorrelationSettings:
    levels: tuple[str, ...]
    coefficients: tuple[Coefficient, ...]  # built with coefficient_settings
    item_nan: str
    item_average: str
    ci: bool
    n_resamples: int
    confidence: float
    unit: str
    interval: str
    warn_below_n: float
    include_controls: bool | str  # false | true | "both"
    significance: SignificanceSettings | None  # None: switched off
    node: dict[str, Any]  # as composed: what the correlation row cache's keys cover

    @property
    def coefficient_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.coefficients)

    @property
    def bootstrap(self) -> bool:
        """Whether the table draws bootstrap resamples for its intervals."""
        return self.ci and self.interval == "bootstrap"

    @classmethod
    def from_node(cls, node: Mapping[str, Any]) -> CorrelationSettings:
        """Also a ConfigError for a choice that computes nothing (no coefficient at any level)."""
        required(node, CORRELATION_KEYS, "correlation")
        levels = names(node["levels"], "correlation.levels")
        coefficient_names = names(node["coefficients"], "correlation.coefficients")
        for level in levels:
            known(level, LEVELS, "correlation.levels", "level")
        for coef in coefficient_names:
            known(coef, COEFFICIENTS, "correlation.coefficients", "coefficient")
        defined = any(
            level in COEFFICIENTS[c].levels for level in levels for c in coefficient_names
        )
        if levels and coefficient_names and not defined:
            raise ConfigError(
                f"correlation: none of the coefficients {list(coefficient_names)} is defined at "
                f"the levels {list(levels)}; "
                + "; ".join(f"{c} at {list(COEFFICIENTS[c].levels)}" for c in coefficient_names)
            )
        for key, valid in {
            "unit": TABLE_UNITS,
            "item_nan": ITEM_NAN,
            "item_average": ITEM_AVERAGES,
            "interval": INTERVALS,
        }.items():
            one_of(node[key], valid, f"correlation.{key}")
        include = node["include_controls"]
        if not (include is True or include is False or include == "both"):
            raise ConfigError(
                f"correlation.include_controls must be false, true or both, got '{include}'"
            )
        configured = configured_coefficients(node["coefficient_settings"])
        return cls(
            levels=levels,
            coefficients=tuple(configured.get(n) or get_coefficient(n) for n in coefficient_names),
            item_nan=str(node["item_nan"]),
            item_average=str(node["item_average"]),
            ci=boolean(node["ci"], "correlation.ci"),
            n_resamples=count(node["n_resamples"], "correlation.n_resamples"),
            confidence=number("correlation.confidence", node["confidence"], 0.0, 1.0, True),
            unit=str(node["unit"]),
            interval=str(node["interval"]),
            warn_below_n=number("correlation.warn_below_n", node["warn_below_n"], 0, None),
            include_controls=include,
            significance=_significance(node["significance"], configured),
            node=dict(node),
        )


# the node's keys: one per setting but the node itself, and what the coefficients are built with
CORRELATION_KEYS = _keys(CorrelationSettings, "node", "coefficient_settings")


def _significance(
    node: Mapping[str, Any], configured: Mapping[str, Coefficient]
) -> SignificanceSettings | None:
    section = "correlation.significance"
    check_keys(node, SIGNIFICANCE_KEYS, section)
    if not boolean(node.get("enabled"), f"{section}.enabled"):
        return None
    required(node, SIGNIFICANCE_KEYS, section)
    method = one_of(node["method"], METHODS, f"{section}.method")
    task = _task(node, section, method, configured, listed=False)
    listed = node["tasks"]
    if listed is not None and (not isinstance(listed, list) or not listed):
        raise ConfigError(
            f"{section}.tasks must be null or a non-empty list of {{level, coefficient, unit, "
            f"weight}}, got {listed!r}"
        )
    tasks = [
        _task(t, f"{section}.tasks[{i}]", method, configured, listed=True)
        for i, t in enumerate(listed or [])
    ]
    return SignificanceSettings(
        method=method,
        level=task.level,
        coefficient=task.coefficient,
        unit=task.unit,
        n_resamples=count(node["n_resamples"], f"{section}.n_resamples"),
        alpha=number(f"{section}.alpha", node["alpha"], 0.0, 1.0),
        alternative=one_of(node["alternative"], ALTERNATIVES, f"{section}.alternative"),
        early_stop=_early_stop(node),
        tasks=tuple(tasks) or (task,),
    )


def _task(
    node: object, section: str, method: str, configured: Mapping[str, Coefficient], listed: bool
) -> SignificanceTask:
    """The level, coefficient and unit of ``node`` (and a ``listed`` task's weight), checked."""
    keys = ("level", "coefficient", "unit", "weight")
    if not isinstance(node, Mapping):
        raise ConfigError(f"{section} must be a mapping of {', '.join(keys)}, got {node!r}")
    if listed:
        required(node, keys, section)
    level = one_of(node["level"], LEVELS, f"{section}.level")
    name = one_of(node["coefficient"], COEFFICIENTS, f"{section}.coefficient")
    coef = configured.get(name) or COEFFICIENTS[name]
    if level not in coef.levels:
        raise ConfigError(
            f"{section}: coefficient '{coef.name}' is not defined at the '{level}' level; it is "
            f"defined at {list(coef.levels)}"
        )
    unit = one_of(node["unit"], PERMUTATION_UNITS, f"{section}.unit")
    try:
        check_test(method, level, coef, unit)
    except ValueError as exc:
        raise ConfigError(f"{section}: {exc}") from None
    weight = number(f"{section}.weight", node.get("weight", 1.0), 0.0, None, True)
    return SignificanceTask(level, coef, unit, weight)


def _early_stop(sig: Mapping[str, Any]) -> EarlyStop | None:
    if sig["block_size"] is None:
        return None
    count(sig["block_size"], "correlation.significance.block_size")
    try:
        return EarlyStop(sig["block_size"], float(sig["early_min"]), float(sig["early_max"]))
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"correlation.significance: {exc}") from None


def configured_coefficients(node: object) -> dict[str, Coefficient]:
    """Every coefficient of ``correlation.coefficient_settings`` built with its settings."""
    node = node or {}
    if not isinstance(node, Mapping):
        raise ConfigError(
            "correlation.coefficient_settings must map coefficient names to their settings"
        )
    out: dict[str, Coefficient] = {}
    for name, settings in node.items():
        known(name, COEFFICIENTS, "correlation.coefficient_settings", "coefficient")
        if settings is not None and not isinstance(settings, Mapping):
            raise ConfigError(
                f"correlation.coefficient_settings.{name} must be a mapping of settings, "
                f"got {settings!r}"
            )
        try:
            out[str(name)] = configure(str(name), dict(settings or {}))
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"correlation.coefficient_settings.{name}: {exc}") from None
    return out
