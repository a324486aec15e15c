"""The ``correlation`` settings: checked before anything is computed (a typo costs seconds, not
a scoring pass), and the coefficient objects they name."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
from paraeval.pipeline.config.bounds import count
from paraeval.pipeline.errors import ConfigError

SMALL_N_DEFAULT = 10


def include_controls(cfg: Mapping[str, Any]) -> bool | str:
    """``correlation.include_controls``: False (the default), True or ``"both"``."""
    value = cfg.get("include_controls", False)
    if value is True or value is False or value == "both":
        return value  # type: ignore[no-any-return]
    raise ConfigError(f"correlation.include_controls must be false, true or both, got '{value}'")


def check_correlation_config(cfg: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """(levels, coefficients) of ``correlation``; a ConfigError for an unknown name, a bad value
    or a choice that computes nothing (e.g. no coefficient defined at any listed level)."""
    levels_node = cfg.get("levels", ["segment", "system"])
    coef_node = cfg.get("coefficients", ["pearson", "spearman", "kendall_b"])
    # `correlation.levels=system` (a plain string) means the one level, not its letters
    levels = [levels_node] if isinstance(levels_node, str) else list(levels_node)
    coefficients = [coef_node] if isinstance(coef_node, str) else list(coef_node)
    for level in levels:
        if level not in LEVELS:
            raise ConfigError(
                f"correlation.levels: unknown level '{level}'; choose from {list(LEVELS)}"
            )
    for coef in coefficients:
        if coef not in COEFFICIENTS:
            raise ConfigError(
                f"correlation.coefficients: unknown coefficient '{coef}'; choose from "
                f"{list(COEFFICIENTS)}"
            )
    defined = any(level in COEFFICIENTS[coef].levels for level in levels for coef in coefficients)
    if levels and coefficients and not defined:
        raise ConfigError(
            f"correlation: none of the coefficients {coefficients} is defined at the levels "
            f"{levels}; "
            + "; ".join(f"{c} at {list(COEFFICIENTS[c].levels)}" for c in coefficients)
        )
    for key, valid in {
        "unit": TABLE_UNITS,
        "item_nan": ITEM_NAN,
        "item_average": ITEM_AVERAGES,
        "interval": INTERVALS,
    }.items():
        if key in cfg and str(cfg[key]) not in valid:
            raise ConfigError(f"correlation.{key} must be one of {list(valid)}, got '{cfg[key]}'")
    include_controls(cfg)
    _check_number("correlation.confidence", cfg.get("confidence", 0.95), 0.0, 1.0, open_=True)
    count(cfg.get("n_resamples", 1000), "correlation.n_resamples")
    _check_number("correlation.warn_below_n", cfg.get("warn_below_n", SMALL_N_DEFAULT), 0, None)
    configured = configured_coefficients(cfg)
    sig = cfg.get("significance") or {}
    if sig.get("enabled", False):
        for key, valid in (("level", LEVELS), ("coefficient", COEFFICIENTS)):
            if key in sig and str(sig[key]) not in valid:
                raise ConfigError(
                    f"correlation.significance.{key} must be one of {list(valid)}, got '{sig[key]}'"
                )
        sig_level = str(sig.get("level", "segment"))
        sig_name = str(sig.get("coefficient", "pearson"))
        sig_coef = configured.get(sig_name) or COEFFICIENTS[sig_name]
        if sig_level not in sig_coef.levels:
            raise ConfigError(
                f"correlation.significance: coefficient '{sig_coef.name}' is not defined at the "
                f"'{sig_level}' level; it is defined at {list(sig_coef.levels)}"
            )
        method = str(sig.get("method", "williams"))
        if method not in ("williams", "permutation"):
            raise ConfigError(
                f"correlation.significance.method must be williams or permutation, got '{method}'"
            )
        if method == "williams" and not sig_coef.williams:
            raise ConfigError(
                "correlation.significance: Williams' test compares correlation coefficients "
                "(pearson, spearman, kendall_b, kendall_c or a registered correlation), not "
                f"'{sig_coef.name}'; use correlation.significance.method=permutation"
            )
        if method == "williams" and sig_level == "item":
            raise ConfigError(
                "correlation.significance: Williams' test has no form for the item level (a mean "
                "of per-item correlations); use correlation.significance.method=permutation"
            )
        if "unit" in sig and str(sig["unit"]) not in PERMUTATION_UNITS:
            raise ConfigError(
                f"correlation.significance.unit must be one of {list(PERMUTATION_UNITS)}, "
                f"got '{sig['unit']}'"
            )
        if str(sig.get("unit", "items")) == "pairs" and (
            sig_level != "item" or sig_coef.pair_values is None
        ):
            raise ConfigError(
                "correlation.significance.unit=pairs swaps pairs of systems inside items: it "
                "needs level=item and a coefficient over such pairs (acc23, tau_23), not "
                f"'{sig_coef.name}' at the '{sig_level}' level"
            )
        count(sig.get("n_resamples", 1000), "correlation.significance.n_resamples")
        if sig.get("block_size") is not None:
            count(sig["block_size"], "correlation.significance.block_size")
        _check_number("correlation.significance.alpha", sig.get("alpha", 0.05), 0.0, 1.0)
        if str(sig.get("alternative", "two-sided")) not in ALTERNATIVES:
            raise ConfigError(
                f"correlation.significance.alternative must be one of {list(ALTERNATIVES)}, "
                f"got '{sig['alternative']}'"
            )
        early_stop(sig)
    return levels, coefficients


def early_stop(sig: Mapping[str, Any]) -> EarlyStop | None:
    """The early stopping of ``correlation.significance`` (None when ``block_size`` is null)."""
    if sig.get("block_size") is None:
        return None
    try:
        return EarlyStop(
            sig["block_size"],
            float(sig.get("early_min", 0.02)),
            float(sig.get("early_max", 0.5)),
        )
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"correlation.significance: {exc}") from None


def configured_coefficients(cfg: Mapping[str, Any]) -> dict[str, Coefficient]:
    """Every coefficient in ``correlation.coefficient_settings`` built with its settings."""
    node = cfg.get("coefficient_settings") or {}
    if not isinstance(node, Mapping):
        raise ConfigError(
            "correlation.coefficient_settings must map coefficient names to their settings"
        )
    out: dict[str, Coefficient] = {}
    for name, settings in node.items():
        if name not in COEFFICIENTS:
            raise ConfigError(
                f"correlation.coefficient_settings: unknown coefficient '{name}'; choose from "
                f"{list(COEFFICIENTS)}"
            )
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


def coefficient_objects(cfg: Mapping[str, Any], names: Sequence[str]) -> list[Coefficient]:
    configured = configured_coefficients(cfg)
    return [configured.get(n) or get_coefficient(n) for n in names]


def _check_number(
    key: str, value: Any, low: float, high: float | None, open_: bool = False
) -> None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{key} must be a number, got '{value}'") from None
    too_low = number <= low if open_ else number < low
    too_high = high is not None and (number >= high if open_ else number > high)
    if too_low or too_high or number != number:
        left, right = "()" if open_ else "[]"
        upper = "inf)" if high is None else f"{high:g}{right}"
        raise ConfigError(f"{key} must be in {left}{low:g}, {upper}, got {value}")
