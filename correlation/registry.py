"""The registry of correlation coefficients: :class:`Coefficient` (one coefficient and the forms
the levels and the bootstrap can use) and :data:`COEFFICIENTS`, through which every other module
of the package finds them (:mod:`correlation.coefficients` explains how to add one).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np

if TYPE_CHECKING:
    from paraeval.correlation.fixed_pairs import FixedPairs
    from paraeval.correlation.resamples import Resamples

LEVELS: tuple[str, ...] = ("segment", "item", "system")

ValueFn: TypeAlias = Callable[[np.ndarray, np.ndarray], tuple[float, float]]
StatisticFn: TypeAlias = Callable[[np.ndarray, np.ndarray], float]
WeightedFn: TypeAlias = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]
PooledFn: TypeAlias = Callable[["FixedPairs", np.ndarray], np.ndarray]
PooledByItemsFn: TypeAlias = Callable[
    ["FixedPairs", np.ndarray, int, np.ndarray], "np.ndarray | None"
]
SegmentResampledFn: TypeAlias = Callable[[np.ndarray, np.ndarray, "Resamples"], np.ndarray]
SegmentBatchFn: TypeAlias = Callable[[np.ndarray, np.ndarray], np.ndarray]
ItemLevelFn: TypeAlias = Callable[[np.ndarray, np.ndarray, "np.ndarray | None"], np.ndarray]
PairValuesFn: TypeAlias = Callable[
    [np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]
]
MatrixSystemFn: TypeAlias = Callable[[np.ndarray, np.ndarray], float]


@dataclass(frozen=True)
class Coefficient:
    """One correlation coefficient and the forms the levels and the bootstrap can use (see the
    module docstring)."""

    name: str
    fn: ValueFn
    levels: tuple[str, ...] = LEVELS
    vector: bool = True
    weighted: WeightedFn | None = None
    pooled: PooledFn | None = None
    pooled_by_items: PooledByItemsFn | None = None
    segment_resampled: SegmentResampledFn | None = None
    segment_batch: SegmentBatchFn | None = None
    # the item level as one statistic of the whole matrix (tie calibration picks one epsilon for
    # all items): ``(metric, human, item_w)`` -> values for every row of item weights (B, n_items),
    # or for the unweighted matrix (shape (1,)) when ``item_w`` is None
    item_level: ItemLevelFn | None = None
    # with ``item_level``: each item's own value under the choices made on the whole matrix
    # (NaN where undefined), so that a permutation test can swap whole items between metrics
    item_values_fixed: SegmentBatchFn | None = None
    # with ``item_level`` over pairs of systems inside items: (item of each pair, the pair's
    # value, pairs per item) under the choices made on the whole matrix, so that a permutation
    # test can swap single pairs between metrics (mt-metrics-eval's PairwisePermutationSigDiff)
    pair_values: PairValuesFn | None = None
    # the system level from the system x item matrices rather than from one score per system
    # (soft pairwise accuracy permutes segment scores)
    matrix_system: MatrixSystemFn | None = None
    # with ``matrix_system``: its value under every resample of a set, (B,), equal to it on each
    # resampled matrix
    matrix_system_resampled: SegmentResampledFn | None = None
    # Williams' test is derived for Pearson's r and compares correlation-like coefficients only;
    # rates over pairs (pairwise accuracy, Kendall-like, acc23 ...) set False
    williams: bool = True
    # the value of ``fn`` alone, bit-equal to it, where the p-value costs most of the call (the
    # metric-metric correlations of Williams' test read no p-value)
    statistic: StatisticFn | None = None
    # the settings this entry was built with (see :func:`configure`), for signatures and reports
    options: tuple[tuple[str, Any], ...] = ()
    # on segments and items a table row depends on the metric's scores only through their order:
    # columns with the same order share rows (declared where test_corr_table.py shows it exactly)
    ordinal: bool = False

    def __post_init__(self) -> None:
        if not self.name or not isinstance(self.name, str):
            raise ValueError(f"a coefficient needs a name, got {self.name!r}")
        object.__setattr__(self, "levels", tuple(self.levels))
        unknown = [lv for lv in self.levels if lv not in LEVELS]
        if unknown or not self.levels:
            raise ValueError(
                f"coefficient {self.name!r}: levels must be a non-empty subset of {LEVELS}, "
                f"got {self.levels}"
            )
        if not self.vector and "system" in self.levels:
            raise ValueError(
                f"coefficient {self.name!r} needs the systems x items structure, which the "
                "system level (one score per system) does not have"
            )

    def __call__(self, x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
        return self.fn(x, y)


CoefficientLike: TypeAlias = "str | Coefficient | ValueFn"

COEFFICIENTS: dict[str, Coefficient] = {}
"""Every known coefficient by name, in the order of registration (the order configs list)."""


def register_coefficient(coefficient: Coefficient, *, replace: bool = False) -> Coefficient:
    """Add ``coefficient`` to :data:`COEFFICIENTS`; a taken name is an error unless ``replace``."""
    if coefficient.name in COEFFICIENTS and not replace:
        raise ValueError(f"a coefficient named {coefficient.name!r} is already registered")
    COEFFICIENTS[coefficient.name] = coefficient
    return coefficient


def get_coefficient(coefficient: CoefficientLike) -> Coefficient:
    """The :class:`Coefficient` for a registered name, a Coefficient itself, or a plain callable
    ``(x, y) -> (value, p)`` (a vector coefficient at every level, generic paths only)."""
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


SETTINGS: dict[str, Callable[..., Coefficient]] = {}
"""Name -> factory ``(**settings) -> Coefficient`` for coefficients that take settings."""


def register_settings(name: str, factory: Callable[..., Coefficient]) -> None:
    """Let ``configure(name, settings)`` build ``name`` with settings; the factory's keyword
    arguments (with their defaults) are the settings a config may give."""
    SETTINGS[name] = factory


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
    """The registered coefficient ``name`` built with ``settings`` (``ValueError`` naming the
    valid settings for an unknown one or an invalid value)."""
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


def coefficient_name(coefficient: CoefficientLike) -> str:
    """The name a table row gives ``coefficient``."""
    return coefficient if isinstance(coefficient, str) else get_coefficient(coefficient).name


class _VectorFunctions(Mapping[str, ValueFn]):
    """Name -> ``fn`` of the registered paired-vector coefficients defined at every level; a view,
    so coefficients registered later are in it."""

    def _names(self) -> list[str]:
        return [n for n, c in COEFFICIENTS.items() if c.vector and c.levels == LEVELS]

    def __getitem__(self, name: str) -> ValueFn:
        if name not in self._names():
            raise KeyError(name)
        return COEFFICIENTS[name].fn

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())


VECTOR_FUNCTIONS: Mapping[str, ValueFn] = _VectorFunctions()
