"""The typed ``correlation`` settings, checked before anything is computed (a typo costs seconds,
not a scoring pass), with the coefficient objects they name built once."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from paraeval.correlation import (
    ALTERNATIVES,
    COEFFICIENTS,
    INTERVALS,
    ITEM_AVERAGES,
    ITEM_NAN,
    LEVELS,
    PERMUTATION_UNITS,
    TABLE_UNITS,
    Coefficient,
    EarlyStop,
    configure,
    get_coefficient,
)
from paraeval.pipeline.config.nodes import (
    boolean,
    check_keys,
    count,
    known,
    names,
    one_of,
    required,
)
from paraeval.pipeline.errors import ConfigError

KEYS = (
    "levels",
    "coefficients",
    "item_nan",
    "item_average",
    "ci",
    "n_resamples",
    "confidence",
    "unit",
    "coefficient_settings",
    "interval",
    "warn_below_n",
    "include_controls",
    "significance",
)
SIGNIFICANCE_KEYS = (
    "enabled",
    "method",
    "level",
    "coefficient",
    "unit",
    "n_resamples",
    "alpha",
    "alternative",
    "block_size",
    "early_min",
    "early_max",
)
METHODS = ("williams", "permutation")


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
        """A ConfigError for an unknown name, a bad value, a missing key or a choice that
        computes nothing (no coefficient defined at any listed level)."""
        required(node, KEYS, "correlation")
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


def _significance(
    node: Mapping[str, Any], configured: Mapping[str, Coefficient]
) -> SignificanceSettings | None:
    section = "correlation.significance"
    check_keys(node, SIGNIFICANCE_KEYS, section)
    if not boolean(node.get("enabled"), f"{section}.enabled"):
        return None
    required(node, SIGNIFICANCE_KEYS, section)
    level = one_of(node["level"], LEVELS, f"{section}.level")
    name = one_of(node["coefficient"], COEFFICIENTS, f"{section}.coefficient")
    method = str(node["method"])
    coef = configured.get(name) or COEFFICIENTS[name]
    if level not in coef.levels:
        raise ConfigError(
            f"{section}: coefficient '{coef.name}' is not defined at the '{level}' level; it is "
            f"defined at {list(coef.levels)}"
        )
    if method not in METHODS:
        raise ConfigError(f"{section}.method must be williams or permutation, got '{method}'")
    if method == "williams" and not coef.williams:
        raise ConfigError(
            f"{section}: Williams' test compares correlation coefficients (pearson, spearman, "
            f"kendall_b, kendall_c or a registered correlation), not '{coef.name}'; use "
            f"{section}.method=permutation"
        )
    if method == "williams" and level == "item":
        raise ConfigError(
            f"{section}: Williams' test has no form for the item level (a mean of per-item "
            f"correlations); use {section}.method=permutation"
        )
    unit = one_of(node["unit"], PERMUTATION_UNITS, f"{section}.unit")
    if unit == "pairs" and (level != "item" or coef.pair_values is None):
        raise ConfigError(
            f"{section}.unit=pairs swaps pairs of systems inside items: it needs level=item and "
            f"a coefficient over such pairs (acc23, tau_23), not '{coef.name}' at the "
            f"'{level}' level"
        )
    alternative = one_of(node["alternative"], ALTERNATIVES, f"{section}.alternative")
    return SignificanceSettings(
        method=method,
        level=level,
        coefficient=coef,
        unit=unit,
        n_resamples=count(node["n_resamples"], f"{section}.n_resamples"),
        alpha=number(f"{section}.alpha", node["alpha"], 0.0, 1.0),
        alternative=alternative,
        early_stop=_early_stop(node),
    )


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


def number(key: str, value: Any, low: float, high: float | None, open_: bool = False) -> float:
    """``value`` as a number in [low, high] (``open_``: (low, high)), or a ConfigError."""
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{key} must be a number, got '{value}'") from None
    too_low = out <= low if open_ else out < low
    too_high = high is not None and (out >= high if open_ else out > high)
    if too_low or too_high or out != out:
        left, right = "()" if open_ else "[]"
        upper = "inf)" if high is None else f"{high:g}{right}"
        raise ConfigError(f"{key} must be in {left}{low:g}, {upper}, got {value}")
    return out
