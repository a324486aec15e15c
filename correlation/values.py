"""The values every other module of :mod:`correlation` passes around: the levels, one
coefficient's descriptor (:class:`Coefficient`) and one correlation (:class:`Correlation`).
The table of known coefficients is :mod:`correlation.catalog`."""

from __future__ import annotations

from collections.abc import Callable, Hashable, MutableMapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np

if TYPE_CHECKING:
    from paraeval.correlation.fixed_pairs import FixedPairs
    from paraeval.correlation.resamples import Resamples

LEVELS: tuple[str, ...] = ("segment", "item", "system")
NAN_RESULT: tuple[float, float] = (float("nan"), float("nan"))

Memo: TypeAlias = MutableMapping[Hashable, Any]
ValueFn: TypeAlias = Callable[[np.ndarray, np.ndarray], tuple[float, float]]
MatrixFn: TypeAlias = Callable[[np.ndarray, np.ndarray], np.ndarray]
ItemLevelFn: TypeAlias = Callable[[np.ndarray, np.ndarray, "np.ndarray | None"], np.ndarray]
PairValuesFn: TypeAlias = Callable[
    [np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]
]


@dataclass(frozen=True)
class Coefficient:
    """One correlation coefficient: ``fn(x, y) -> (value, p_value)`` on paired vectors
    (``vector``) or on two ``(n_systems, n_items)`` matrices, the levels it is defined at, and the
    optional vectorised forms the bootstrap and the permutation test use in place of the generic
    path (every one gives the numbers of ``fn`` on the resampled data)."""

    name: str
    fn: ValueFn
    levels: tuple[str, ...] = LEVELS
    vector: bool = True
    # (x, y, w) -> values over the last axis of samples weighted by multiplicities
    weighted: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray] | None = None
    # (pairs, weights (n, B)) -> (B,): one pooled sample under many weightings
    pooled: Callable[[FixedPairs, np.ndarray], np.ndarray] | None = None
    # (pairs, item of each cell, n_items, item multiplicities (B, n_items)) -> (B,) or None
    pooled_by_items: Callable[[FixedPairs, np.ndarray, int, np.ndarray], Any] | None = None
    # (metric, human, resamples) -> (B,) segment values, or None where it cannot
    segment_resampled: Callable[[np.ndarray, np.ndarray, Resamples], Any] | None = None
    # (metrics (K, S, I), human) -> (K,) segment values
    segment_batch: MatrixFn | None = None
    # the item level as one statistic of the whole matrix (one calibrated epsilon for all items):
    # (metric, human, item multiplicities (B, n_items) or None) -> (B,) or (1,)
    item_level: ItemLevelFn | None = None
    # with item_level: each item's value under the choices made on the whole matrix
    item_values_fixed: MatrixFn | None = None
    # with item_level over pairs of systems: (item of each pair, its value, pairs per item)
    pair_values: PairValuesFn | None = None
    # the system level from the system x item matrices (soft pairwise accuracy): (metrics
    # (K, S, I) missing the same cells, human, memo its calls on that human share) -> (K,)
    matrix_system: Callable[[np.ndarray, np.ndarray, Memo], np.ndarray] | None = None
    # with matrix_system: (metric, human, resamples, memo shared by the metrics of a set) -> (B,)
    matrix_system_resampled: Callable[[np.ndarray, np.ndarray, Resamples, Memo], Any] | None = None
    # Williams' test compares correlation-like coefficients only, not rates over pairs
    williams: bool = True
    # fn's value alone, bit-equal to it, where the p-value costs most of the call
    statistic: Callable[[np.ndarray, np.ndarray], float] | None = None
    # the settings it was built with, for signatures and reports
    options: tuple[tuple[str, Any], ...] = ()
    # on segments and items a row depends on the metric only through its order
    ordinal: bool = False

    def __post_init__(self) -> None:
        if not self.name or not isinstance(self.name, str):
            raise ValueError(f"a coefficient needs a name, got {self.name!r}")
        object.__setattr__(self, "levels", tuple(self.levels))
        if not self.levels or any(lv not in LEVELS for lv in self.levels):
            raise ValueError(
                f"coefficient {self.name!r}: levels must be a non-empty subset of {LEVELS}, "
                f"got {self.levels}"
            )
        if not self.vector and "system" in self.levels:
            raise ValueError(
                f"coefficient {self.name!r} needs the systems x items structure, which the "
                "system level (one score per system) does not have"
            )


CoefficientLike: TypeAlias = "str | Coefficient | ValueFn"


@dataclass(frozen=True)
class Correlation:
    """One correlation value with its p-value and the counts behind it."""

    value: float
    p_value: float
    n: int
    n_dropped: int


def check_matrices(metric: np.ndarray, human: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Both as float matrices of the same ``(n_systems, n_items)`` shape, or ``ValueError``."""
    m = np.asarray(metric, dtype=float)
    h = np.asarray(human, dtype=float)
    if m.ndim != 2 or h.ndim != 2 or m.shape != h.shape:
        raise ValueError(
            "metric and human scores must be matrices of the same shape (n_systems, n_items), "
            f"got {m.shape} and {h.shape}"
        )
    return m, h


def row_nanmean(a: np.ndarray) -> np.ndarray:
    """Mean of the finite values along the last axis; NaN (without a warning) where none."""
    ok = np.isfinite(a)
    count = ok.sum(axis=-1)
    total = np.where(ok, a, 0.0).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)
