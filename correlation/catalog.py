"""The table of known coefficients: :data:`COEFFICIENTS` by name (the order configs list) and
:data:`SETTINGS`, the factories of those that take settings. Both are read-only literals; a
coefficient outside them is passed as a :class:`~correlation.values.Coefficient` or a callable."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from paraeval.correlation.coefficients import (
    KENDALL_B,
    KENDALL_C,
    PEARSON,
    SPEARMAN,
    kendall_like_coefficient,
    pairwise_accuracy_coefficient,
)
from paraeval.correlation.pdp import PDP
from paraeval.correlation.spa import soft_pairwise_accuracy_coefficient
from paraeval.correlation.ties import acc23_coefficient, tau23_coefficient
from paraeval.correlation.values import Coefficient, CoefficientLike

SETTINGS: Mapping[str, Callable[..., Coefficient]] = MappingProxyType(
    {
        "kendall_like": kendall_like_coefficient,
        "pairwise_accuracy": pairwise_accuracy_coefficient,
        "soft_pairwise_accuracy": soft_pairwise_accuracy_coefficient,
        "acc23": acc23_coefficient,
        "tau_23": tau23_coefficient,
    }
)
"""Name -> factory ``(**settings) -> Coefficient``; its keyword arguments are the settings."""

COEFFICIENTS: Mapping[str, Coefficient] = MappingProxyType(
    {
        c.name: c
        for c in (
            PEARSON,
            SPEARMAN,
            KENDALL_B,
            KENDALL_C,
            kendall_like_coefficient(),
            pairwise_accuracy_coefficient(),
            PDP,
            soft_pairwise_accuracy_coefficient(),
            acc23_coefficient(),
            tau23_coefficient(),
        )
    }
)
"""Every known coefficient by name, with its default settings."""


def get_coefficient(coefficient: CoefficientLike) -> Coefficient:
    """The :class:`Coefficient` for a name in :data:`COEFFICIENTS`, a Coefficient itself, or a
    plain callable ``(x, y) -> (value, p)`` (a vector coefficient at every level)."""
    if isinstance(coefficient, Coefficient):
        return coefficient
    if isinstance(coefficient, str):
        found = COEFFICIENTS.get(coefficient)
        if found is None:
            raise ValueError(
                f"unknown coefficient {coefficient!r}; valid coefficients: "
                f"{', '.join(COEFFICIENTS)}"
            )
        return found
    if callable(coefficient):
        return Coefficient(getattr(coefficient, "__name__", None) or "custom", coefficient)
    raise TypeError(f"a coefficient is a name or a callable, got {coefficient!r}")


def coefficient_settings(name: str) -> dict[str, Any]:
    """The settings of coefficient ``name`` with their defaults (empty when it has none)."""
    factory = SETTINGS.get(name)
    if factory is None:
        return {}
    return {
        p.name: p.default
        for p in inspect.signature(factory).parameters.values()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    }


def configure(name: str, settings: Mapping[str, Any] | None = None) -> Coefficient:
    """Coefficient ``name`` built with ``settings`` (``ValueError`` naming the valid settings for
    an unknown one or an invalid value)."""
    base = get_coefficient(name)
    if not settings:
        return base
    valid = coefficient_settings(name)
    unknown = [k for k in settings if k not in valid]
    if unknown:
        raise ValueError(
            f"coefficient {name!r} has no setting {unknown[0]!r}; its settings: "
            + (", ".join(f"{k} (default {v!r})" for k, v in valid.items()) or "none")
        )
    return SETTINGS[name](**dict(settings))
