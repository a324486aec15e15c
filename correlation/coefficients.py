"""Correlation coefficients between metric scores and human scores, with one explicit NaN policy,
and the registry :data:`COEFFICIENTS` through which every other module of the package finds them.

Every function returns ``(value, p_value)`` as plain floats.

NaN policy (the same everywhere in :mod:`correlation`):

- pairs where either score is NaN (or infinite) are dropped before anything is computed;
- if fewer than 3 pairs remain (2 for the Kendall coefficients), or if either remaining vector is
  constant, the result is ``(nan, nan)``. Recent scipy returns 0 or 1 (with a warning) for
  constant input; passing that on would put a made-up number in a correlation table.

Matrix conventions follow mt-metrics-eval: a score matrix has shape ``(n_systems, n_items)``, NaN
where a system has no output or no human rating for that item.

Adding a coefficient
--------------------
One :class:`Coefficient` entry, passed to :func:`register_coefficient` (a built-in one at the end
of this module), and its test. Nothing else: the levels, the bootstrap, the permutation test, the
tables and the pipeline's config check all look coefficients up here. The entry gives

- ``name``: what configs and the ``coefficient`` column of the tables call it;
- ``fn``: ``(x, y) -> (value, p_value)`` following the NaN policy above, on two paired vectors
  (``vector=True``) or, for a coefficient that needs the systems x items structure
  (``vector=False``, e.g. :func:`kendall_like`), on two ``(n_systems, n_items)`` matrices;
- ``levels``: the levels of :mod:`correlation.levels` where it is defined (a matrix coefficient
  cannot be defined at the system level, which has one score per system);
- ``ordinal``: True where, on segments and items, the row depends on the metric's scores only
  through their order (ties included), so that a column with an order already correlated shares
  its rows; declared with a test that shows it bit for bit;
- optional vectorised forms, each only a speed-up with the same numbers as the generic path used
  without it (the tests compare both with ``fn`` on explicitly resampled data):

  - ``weighted(x, y, w)``: the coefficient over the last axis of samples with multiplicity weights
    ``w`` (item level, system level, their resamples and permutations); without it every weighted
    sample is expanded and passed to ``fn``;
  - ``pooled(pairs, wt)``: the coefficient of the fixed pooled cells of a
    :class:`correlation.bootstrap.FixedPairs` under each column of weights ``wt`` (n, B)
    (segment-level bootstrap and permutation test); without it each resample is built and ``fn``
    called on it;
  - ``pooled_by_items(pairs, item, n_items, item_w)``: the same when whole items are resampled,
    with the weight of item i in ``item_w[:, i]``; may return None to fall back to ``pooled``;
  - ``segment_resampled(metric, human, resamples)`` and ``segment_batch(metrics, human)``: the
    segment level of a matrix coefficient under bootstrap resamples, and for a batch of metric
    matrices (permutation test).

``correlate`` and the tables also take an unregistered :class:`Coefficient` or any callable
``(x, y) -> (value, p_value)`` (nlpstats style), treated as a vector coefficient at every level.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import math
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

import numpy as np
from scipy import stats

if TYPE_CHECKING:
    from paraeval.correlation.bootstrap import FixedPairs, Resamples

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
    # the system level from the system x item matrices rather than from one score per system
    # (soft pairwise accuracy permutes segment scores)
    matrix_system: MatrixSystemFn | None = None
    # Williams' test is derived for Pearson's r and compares correlation-like coefficients only;
    # rates over pairs (pairwise accuracy, Kendall-like, acc23 ...) set False
    williams: bool = True
    # the value of ``fn`` alone, bit-equal to it, where the p-value costs most of the call (the
    # metric-metric correlations of Williams' test read no p-value)
    statistic: StatisticFn | None = None
    # the settings this entry was built with (see :func:`configure`), for signatures and reports
    options: tuple[tuple[str, Any], ...] = ()
    # on segments and items, every number of a table row (value, p-value, n, interval) depends on
    # the metric's scores only through their order (ties included): a metric column with the same
    # order as one already correlated shares its rows (an α sweep's iBLEU, a rescaled column).
    # Declared only where tests/correlation/test_corr_table.py shows it bit for bit.
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

MetricTies = Literal["discordant", "skip"]
METRIC_TIES: tuple[str, ...] = ("discordant", "skip")
MarginRule = Literal["at_least", "above"]
MARGIN_RULES: tuple[str, ...] = ("at_least", "above")
HumanTies = Literal["count", "skip"]
HUMAN_TIES: tuple[str, ...] = ("count", "skip")

NAN_RESULT: tuple[float, float] = (float("nan"), float("nan"))


def paired_finite(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Flatten two score arrays of the same shape and keep the pairs where both are finite."""
    xa = np.asarray(x, dtype=float).ravel()
    ya = np.asarray(y, dtype=float).ravel()
    if xa.shape != ya.shape:
        raise ValueError(
            f"paired scores need the same number of values, got {xa.size} and {ya.size}"
        )
    keep = np.isfinite(xa) & np.isfinite(ya)
    return xa[keep], ya[keep]


def is_constant(v: np.ndarray) -> bool:
    """Exact test (no tolerance): a vector whose values are all equal carries no ranking."""
    return v.size == 0 or bool(np.all(v == v[0]))


def _degenerate(x: np.ndarray, y: np.ndarray, min_n: int) -> bool:
    return x.size < min_n or is_constant(x) or is_constant(y)


EXACT_MAX_N = 8
"""Up to this many pairs the p-values of Pearson, Spearman and Kendall come from the exact
permutation distribution (all n! pairings enumerated: the numbers of
scipy.stats.permutation_test with ``n_resamples=np.inf``); above it from scipy's large-sample
approximations, which do not hold for a handful of systems (Spearman's p on 3 perfectly
ordered systems is 0.0 by the t approximation, 1/3 exactly)."""


@functools.lru_cache(maxsize=EXACT_MAX_N + 1)
def _all_pairings(n: int) -> np.ndarray:
    """Every permutation of ``range(n)``, shape (n!, n) (read-only, shared)."""
    perms = np.array(list(itertools.permutations(range(n))), dtype=np.intp)
    perms.flags.writeable = False
    return perms


def _exact_p(observed: float, permuted: np.ndarray) -> float:
    """Two-sided p-value from the statistic under all n! pairings, as scipy's
    ``permutation_test`` computes it for an exact null distribution: twice the smaller one-sided
    p-value, at most 1, values within a relative 1e-12 of the observed one counting as equal."""
    tol = 1e-12 * max(1.0, abs(observed))
    greater = float(np.mean(permuted >= observed - tol))
    less = float(np.mean(permuted <= observed + tol))
    return min(1.0, 2.0 * min(greater, less))


def _exact_linear_p(xs: np.ndarray, ys: np.ndarray) -> float:
    """Exact p-value of Pearson's r of ``xs`` and ``ys`` (Spearman's rho: pass ranks). Under
    re-pairing the means and norms are fixed, so r is a fixed multiple of sum(xc * yc[perm])."""
    xc, yc = xs - xs.mean(), ys - ys.mean()
    perms = _all_pairings(xs.size)
    return _exact_p(float(xc @ yc), yc[perms] @ xc)


def _exact_kendall_p(xs: np.ndarray, ys: np.ndarray) -> float:
    """Exact p-value of Kendall's tau-b / tau-c. Under re-pairing the tie counts of each side are
    fixed, so tau is a fixed multiple of S = sum_{i<j} sign(x_i - x_j) sign(y_i - y_j)."""
    sx = np.sign(xs[:, None] - xs[None, :])
    yp = ys[_all_pairings(xs.size)]
    s_perm = np.einsum("pij,ij->p", np.sign(yp[:, :, None] - yp[:, None, :]), sx)
    observed = float((np.sign(ys[:, None] - ys[None, :]) * sx).sum())
    return _exact_p(observed, s_perm)


def pearson(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Pearson's r and the two-sided p-value of scipy.stats.pearsonr (exact permutation
    p-value for n <= :data:`EXACT_MAX_N`)."""
    xs, ys = paired_finite(x, y)
    if _degenerate(xs, ys, 3):
        return NAN_RESULT
    res = stats.pearsonr(xs, ys)
    if xs.size <= EXACT_MAX_N:
        return float(res.statistic), _exact_linear_p(xs, ys)
    return float(res.statistic), float(res.pvalue)


def pearson_statistic(x: np.ndarray, y: np.ndarray) -> float:
    """``pearson(x, y)[0]`` without the p-value: scipy.stats.pearsonr's statistic, computed by
    the same array operations in the same order (a third of the time of the whole test)."""
    xs, ys = paired_finite(x, y)
    if _degenerate(xs, ys, 3):
        return NAN_RESULT[0]
    helpers = _pearsonr_helpers()
    if helpers is None:
        return float(stats.pearsonr(xs, ys).statistic)
    xp, vector_norm = helpers
    xmean = xp.mean(xs, axis=-1, keepdims=True)
    ymean = xp.mean(ys, axis=-1, keepdims=True)
    xm = xs - xmean
    ym = ys - ymean
    xmax = xp.max(xp.abs(xm), axis=-1, keepdims=True)
    ymax = xp.max(xp.abs(ym), axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        normxm = xmax * vector_norm(xm / xmax, axis=-1, keepdims=True, xp=xp)
        normym = ymax * vector_norm(ym / ymax, axis=-1, keepdims=True, xp=xp)
        r = xp.vecdot(xm / normxm, ym / normym, axis=-1)
    return float(xp.clip(r, -1.0, 1.0))


@functools.cache
def _pearsonr_helpers() -> tuple[Any, Callable[..., np.ndarray]] | None:
    """The array namespace scipy.stats.pearsonr computes with for numpy arrays, and its norm;
    None where this scipy has them elsewhere (then pearsonr itself is called)."""
    try:
        from scipy._lib._array_api import array_namespace, xp_vector_norm
    except ImportError:
        return None
    return array_namespace(np.empty(2)), xp_vector_norm


def spearman(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Spearman's rho (average ranks for ties) and scipy's two-sided p-value (exact
    permutation p-value for n <= :data:`EXACT_MAX_N`)."""
    xs, ys = paired_finite(x, y)
    if _degenerate(xs, ys, 3):
        return NAN_RESULT
    res = stats.spearmanr(xs, ys)
    if xs.size <= EXACT_MAX_N:
        # ranks are fixed under re-pairing, so rho of every pairing is Pearson on the ranks
        return float(res.statistic), _exact_linear_p(stats.rankdata(xs), stats.rankdata(ys))
    return float(res.statistic), float(res.pvalue)


def _kendall(x: np.ndarray, y: np.ndarray, variant: Literal["b", "c"]) -> tuple[float, float]:
    xs, ys = paired_finite(x, y)
    if _degenerate(xs, ys, 2):
        return NAN_RESULT
    with warnings.catch_warnings():
        # scipy warns when its exact p-value method falls back; the value itself is unaffected.
        warnings.simplefilter("ignore", RuntimeWarning)
        res = stats.kendalltau(xs, ys, variant=variant)
    if xs.size <= EXACT_MAX_N:
        return float(res.statistic), _exact_kendall_p(xs, ys)
    return float(res.statistic), float(res.pvalue)


def kendall_b(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Kendall's tau-b (ties corrected) as scipy.stats.kendalltau(variant='b')."""
    return _kendall(x, y, "b")


def kendall_c(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Stuart's tau-c as scipy.stats.kendalltau(variant='c')."""
    return _kendall(x, y, "c")


def _check_matrix_pair(metric: np.ndarray, human: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    m = np.asarray(metric, dtype=float)
    h = np.asarray(human, dtype=float)
    if m.ndim != 2 or m.shape != h.shape:
        raise ValueError(
            "metric and human must be matrices of the same shape (n_systems, n_items), "
            f"got {m.shape} and {h.shape}"
        )
    return m, h


def _check_kendall_like_settings(metric_ties: str, human_margin: float, margin_rule: str) -> None:
    if metric_ties not in METRIC_TIES:
        raise ValueError(f"metric_ties must be one of {METRIC_TIES}, got {metric_ties!r}")
    if margin_rule not in MARGIN_RULES:
        raise ValueError(f"margin_rule must be one of {MARGIN_RULES}, got {margin_rule!r}")
    if not (isinstance(human_margin, int | float) and math.isfinite(human_margin)):
        raise ValueError(f"human_margin must be a finite number, got {human_margin!r}")
    if human_margin < 0:
        raise ValueError(f"human_margin must be >= 0, got {human_margin!r}")


def kendall_like_classes(
    dm: np.ndarray,
    dh: np.ndarray,
    *,
    metric_ties: MetricTies = "discordant",
    human_margin: float = 0.0,
    margin_rule: MarginRule = "at_least",
) -> tuple[np.ndarray, np.ndarray]:
    """(concordant, discordant) masks of system pairs with metric and human differences
    ``dm``, ``dh`` (see :func:`kendall_like_counts`)."""
    with np.errstate(invalid="ignore"):
        adh = np.abs(dh)
        counted = adh >= human_margin if margin_rule == "at_least" else adh > human_margin
        if metric_ties == "skip":
            counted = counted & (dm != 0)
        conc = counted & (((dh > 0) & (dm > 0)) | ((dh < 0) & (dm < 0)))
    return conc, counted & ~conc


def kendall_like_counts(
    metric: np.ndarray,
    human: np.ndarray,
    *,
    metric_ties: MetricTies = "discordant",
    human_margin: float = 0.0,
    margin_rule: MarginRule = "at_least",
) -> tuple[np.ndarray, np.ndarray]:
    """Concordant and discordant system pairs inside each item, shape ``(n_items,)`` each.

    As WMT's scripts and mt-metrics-eval's ``KendallLike(thresh=human_margin)``: a pair of systems
    counts where both have a finite metric and human score for the item and their human scores
    differ by at least ``human_margin`` (``margin_rule="at_least"``; WMT's DARR used 25 points on
    the 0-100 DA scale). It is concordant when the metric orders it as the humans do, otherwise
    discordant: a pair tied in the metric is discordant (it failed to separate what humans
    separated), and so is a counted pair tied in the human score (with ``human_margin=0`` every
    human tie counts, as in mt-metrics-eval with ``thresh=0``). ``margin_rule="above"`` is
    paraeval's earlier rule: only differences strictly above ``human_margin`` count (0 skips
    exact human ties). ``metric_ties="skip"`` leaves pairs tied in the metric out instead.
    """
    m, h = _check_matrix_pair(metric, human)
    _check_kendall_like_settings(metric_ties, human_margin, margin_rule)
    ok = np.isfinite(m) & np.isfinite(h)
    # (items, systems, systems) pair tensors; items are columns of the score matrix.
    mt, ht, okt = m.T, h.T, ok.T
    dm = mt[:, :, None] - mt[:, None, :]
    dh = ht[:, :, None] - ht[:, None, :]
    valid = okt[:, :, None] & okt[:, None, :]
    valid &= np.triu(np.ones((m.shape[0], m.shape[0]), dtype=bool), k=1)[None]
    conc, disc = kendall_like_classes(
        dm, dh, metric_ties=metric_ties, human_margin=human_margin, margin_rule=margin_rule
    )
    concordant = (valid & conc).sum(axis=(1, 2))
    discordant = (valid & disc).sum(axis=(1, 2))
    return concordant.astype(float), discordant.astype(float)


def kendall_like(
    metric: np.ndarray,
    human: np.ndarray,
    *,
    metric_ties: MetricTies = "discordant",
    human_margin: float = 0.0,
    margin_rule: MarginRule = "at_least",
) -> tuple[float, float]:
    """WMT segment-level Kendall-like tau, pooled over all items of two score matrices.

    ``(C - D) / (C + D)`` with C and D summed over the system pairs of every item (see
    :func:`kendall_like_counts` for which pairs count). No p-value is defined: it is NaN.
    Constant metric or human input (over all finite cells), or no countable pair, gives NaN
    (mt-metrics-eval returns its tau, or 0 without pairs: a deviation listed in the README).
    """
    m, h = _check_matrix_pair(metric, human)
    ok = np.isfinite(m) & np.isfinite(h)
    if is_constant(m[ok]) or is_constant(h[ok]):
        return NAN_RESULT
    c, d = kendall_like_counts(
        m, h, metric_ties=metric_ties, human_margin=human_margin, margin_rule=margin_rule
    )
    total = c.sum() + d.sum()
    if total == 0:
        return NAN_RESULT
    return float((c.sum() - d.sum()) / total), float("nan")


def pairwise_accuracy(
    metric: np.ndarray, human: np.ndarray, *, human_ties: HumanTies = "count"
) -> tuple[float, float]:
    """System-level pairwise ranking accuracy (Kocmi et al. 2021) of two ``(n_systems,)`` vectors.

    The share of system pairs that the metric orders as the humans do, comparing the signs of
    the two differences: a pair tied in both agrees, a pair tied on one side only disagrees.
    ``human_ties="count"`` takes every pair, as Kocmi et al. and mt-metrics-eval's ``Agreement``;
    ``"skip"`` is paraeval's earlier rule, which left out pairs the humans tie (and gave NaN for
    constant input). Systems with a NaN score are dropped; fewer than 2 systems gives NaN.
    No p-value: NaN.
    """
    if human_ties not in HUMAN_TIES:
        raise ValueError(f"human_ties must be one of {HUMAN_TIES}, got {human_ties!r}")
    xs, ys = paired_finite(metric, human)
    if xs.size < 2 or (human_ties == "skip" and _degenerate(xs, ys, 2)):
        return NAN_RESULT
    dx = np.sign(xs[:, None] - xs[None, :])
    dy = np.sign(ys[:, None] - ys[None, :])
    upper = np.triu(np.ones((xs.size, xs.size), dtype=bool), k=1)
    counted = upper & (dy != 0) if human_ties == "skip" else upper
    total = int(counted.sum())
    if total == 0:
        return NAN_RESULT
    return float((counted & (dx == dy)).sum() / total), float("nan")


# ---------------------------------------------------------------------------------------------
# Weighted coefficients from pair tensors, batched over leading axes (small n).
# x, y, w broadcast to (..., n); w = 0 marks missing values.
# ---------------------------------------------------------------------------------------------


def _support_constant(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    lo = np.where(w > 0, x, np.inf).min(axis=-1)
    hi = np.where(w > 0, x, -np.inf).max(axis=-1)
    return np.asarray(lo >= hi)


def _weighted_pearson(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    total = w.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mx = (w * x).sum(axis=-1) / total
        my = (w * y).sum(axis=-1) / total
        dx = x - mx[..., None]
        dy = y - my[..., None]
        r = (w * dx * dy).sum(axis=-1) / np.sqrt((w * dx * dx).sum(axis=-1) * (w * dy * dy).sum(-1))
    return np.clip(r, -1.0, 1.0)


def _pair_midranks(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Mid-ranks of the expanded sample (value s repeated w_s times), for every position."""
    sums = _integer_midrank_sums(x, w)
    if sums is not None:
        below, tied = sums
        return below + (tied + 1.0) / 2.0
    less = (x[..., None, :] < x[..., :, None]).astype(float)
    equal = (x[..., None, :] == x[..., :, None]).astype(float)
    below = np.einsum("...st,...t->...s", less, w)
    tied = np.einsum("...st,...t->...s", equal, w)
    return below + (tied + 1.0) / 2.0


def pair_statistic(
    coefficient: CoefficientLike, x: np.ndarray, y: np.ndarray, w: np.ndarray | float
) -> np.ndarray:
    """``coefficient`` over the last axis of weighted samples; NaN where undefined.

    Weights are multiplicities: the result equals the coefficient of the sample in which value s
    appears ``w_s`` times. Non-finite values must carry weight 0. A coefficient without a
    ``weighted`` form is computed on every expanded sample in turn.
    """
    coef = get_coefficient(coefficient)
    x, y, w = np.broadcast_arrays(x, y, w)
    w = np.where(np.isfinite(x) & np.isfinite(y), w, 0.0)
    x = np.where(w > 0, x, 0.0)
    y = np.where(w > 0, y, 0.0)
    if coef.weighted is not None:
        return coef.weighted(x, y, w)
    return _expanded_statistic(coef, x, y, w)


def _expanded_statistic(
    coef: Coefficient, x: np.ndarray, y: np.ndarray, w: np.ndarray
) -> np.ndarray:
    """The generic path: every weighted sample rebuilt (value s repeated w_s times) and passed to
    ``coef.fn``; a matrix coefficient sees it as one item column."""
    out = np.empty(x.shape[:-1])
    for idx in np.ndindex(*out.shape):
        keep = w[idx] > 0
        reps = np.rint(w[idx][keep]).astype(np.intp)
        xs = np.repeat(x[idx][keep], reps)
        ys = np.repeat(y[idx][keep], reps)
        out[idx] = coef.fn(xs, ys)[0] if coef.vector else coef.fn(xs[:, None], ys[:, None])[0]
    return out


def _weighted_setup(x: np.ndarray, w: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Total weight and whether either support is constant, over the last axis."""
    total = w.sum(axis=-1)
    const = _support_constant(x, w) | _support_constant(y, w)
    return total, const


def _weighted_pearson_statistic(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    total, const = _weighted_setup(x, w, y)
    r = _weighted_pearson(x, y, w)
    return np.where(const | (total < 3), np.nan, r)


def _weighted_spearman_statistic(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    total, const = _weighted_setup(x, w, y)
    r = _weighted_pearson(_pair_midranks(x, w), _pair_midranks(y, w), w)
    return np.where(const | (total < 3), np.nan, r)


def _weighted_accuracy(
    x: np.ndarray, y: np.ndarray, w: np.ndarray, human_ties: HumanTies = "count"
) -> np.ndarray:
    total, const = _weighted_setup(x, w, y)
    ww = w[..., :, None] * w[..., None, :]
    sx = np.sign(x[..., :, None] - x[..., None, :])
    sy = np.sign(y[..., :, None] - y[..., None, :])
    if human_ties == "skip":
        untied = sy != 0
        good = (ww * (untied & (sx == sy))).sum(axis=(-2, -1))
        pairs = (ww * untied).sum(axis=(-2, -1))
        undefined = const | (total < 2) | (pairs == 0)
    else:
        # the diagonal holds each value against itself (w_s^2 ordered pairs); the expanded
        # sample has w_s (w_s - 1) of them, copies of one system, tied on both sides: agreeing
        good = (ww * (sx == sy)).sum(axis=(-2, -1)) - total
        pairs = total * total - total
        undefined = total < 2
    with np.errstate(invalid="ignore", divide="ignore"):
        acc = good / pairs
    return np.where(undefined, np.nan, acc)


def _weighted_kendall(
    x: np.ndarray, y: np.ndarray, w: np.ndarray, variant: Literal["b", "c"]
) -> np.ndarray:
    total, const = _weighted_setup(x, w, y)
    sums = _integer_pair_sums(x, y, w) if variant == "b" else None
    if sums is not None:
        s, tied_x, tied_y = sums
    else:
        ww = w[..., :, None] * w[..., None, :]
        sx = np.sign(x[..., :, None] - x[..., None, :])
        sy = np.sign(y[..., :, None] - y[..., None, :])
        s = (ww * sx * sy).sum(axis=(-2, -1))
        tied_x = (ww * (sx == 0)).sum(axis=(-2, -1))
        tied_y = (ww * (sy == 0)).sum(axis=(-2, -1))
    s = s / 2.0
    n0 = (total * total - total) / 2.0
    n1 = (tied_x - total) / 2.0
    n2 = (tied_y - total) / 2.0
    with np.errstate(invalid="ignore", divide="ignore"):
        if variant == "b":
            tau = s / np.sqrt((n0 - n1) * (n0 - n2))
        else:
            present = w > 0
            # distinct values on the support: each present value counts 1/multiplicity-in-positions
            same_x = ((sx == 0) & present[..., None, :]).sum(axis=-1)
            same_y = ((sy == 0) & present[..., None, :]).sum(axis=-1)
            kx = np.where(present, 1.0 / np.maximum(same_x, 1), 0.0).sum(axis=-1)
            ky = np.where(present, 1.0 / np.maximum(same_y, 1), 0.0).sum(axis=-1)
            m = np.rint(np.minimum(kx, ky))
            tau = 2.0 * s / (total * total * (m - 1.0) / m)
    return np.where(const | (total < 2), np.nan, np.clip(tau, -1.0, 1.0))


# weights whose pair sums stay exact in float64 (the sum of w_i w_j below 2**53)
_EXACT_WEIGHT_SUM = 2.0**26


def _integer_rows(
    values: tuple[np.ndarray, ...], w: np.ndarray | float, finite: bool
) -> tuple[tuple[int, ...], list[np.ndarray], np.ndarray] | None:
    """``values`` and the weights broadcast together and laid out as contiguous (rows, n), with
    the broadcast shape, where the compiled passes of :mod:`_pairs` give exact integer sums:
    integer weights whose sums stay below :data:`_EXACT_WEIGHT_SUM` (and, with ``finite``,
    finite values). None otherwise."""
    arrays = np.broadcast_arrays(*(np.asarray(v, float) for v in values), np.asarray(w, float))
    shape = arrays[0].shape
    if not shape or shape[-1] == 0:
        return None
    n = shape[-1]
    *xs, ws = (np.ascontiguousarray(a).reshape(-1, n) for a in arrays)
    exact = (
        np.isfinite(ws).all()
        and (ws == np.rint(ws)).all()
        and (np.abs(ws).sum(axis=1) < _EXACT_WEIGHT_SUM).all()
    )
    if not exact or (finite and not all(np.isfinite(x).all() for x in xs)):
        return None
    return shape, xs, ws


def _integer_pair_sums(
    x: np.ndarray, y: np.ndarray, w: np.ndarray | float
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Kendall's pair sums by the compiled pass (:func:`_pairs.kendall_pair_sums`) where they are
    sums of exact integers (finite values, integer weights): the same numbers as the sums of
    the broadcast (rows, n, n) products, without them. None otherwise."""
    from paraeval.correlation._pairs import kendall_pair_sums

    laid = _integer_rows((x, y), w, finite=True)
    if laid is None:
        return None
    shape, (xs, ys), ws = laid
    s, tied_x, tied_y = kendall_pair_sums(xs, ys, ws)
    return s.reshape(shape[:-1]), tied_x.reshape(shape[:-1]), tied_y.reshape(shape[:-1])


def _integer_midrank_sums(
    x: np.ndarray, w: np.ndarray | float
) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`_pair_midranks`' two sums by the compiled pass (:func:`_pairs.midrank_sums`) where
    the weights are integers (exact sums, the same numbers; comparisons with NaN are false in
    both forms); None otherwise."""
    from paraeval.correlation._pairs import midrank_sums

    laid = _integer_rows((x,), w, finite=False)
    if laid is None:
        return None
    shape, (xs,), ws = laid
    below, tied = midrank_sums(xs, ws)
    return below.reshape(shape), tied.reshape(shape)


def _weighted_kendall_b(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    return _weighted_kendall(x, y, w, "b")


def _weighted_kendall_c(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    return _weighted_kendall(x, y, w, "c")


def _weighted_kendall_like(
    x: np.ndarray, y: np.ndarray, w: np.ndarray, **settings: Any
) -> np.ndarray:
    c, d = pair_kendall_like_counts(x, y, w, **settings)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(c + d > 0, (c - d) / (c + d), np.nan)


def pair_kendall_like_counts(
    x: np.ndarray,
    y: np.ndarray,
    w: np.ndarray,
    *,
    metric_ties: MetricTies = "discordant",
    human_margin: float = 0.0,
    margin_rule: MarginRule = "at_least",
) -> tuple[np.ndarray, np.ndarray]:
    """Weighted concordant/discordant counts of the WMT Kendall-like statistic over the last axis.

    Same rules as :func:`correlation.coefficients.kendall_like_counts`. Weights are
    multiplicities: copies of one system are a pair tied on both sides, counted (as discordant)
    only where human ties are counted (``human_margin=0`` under ``"at_least"``).
    """
    x, y, w = np.broadcast_arrays(x, y, w)
    w = np.where(np.isfinite(x) & np.isfinite(y), w, 0.0)
    x = np.where(w > 0, x, 0.0)
    y = np.where(w > 0, y, 0.0)
    ww = w[..., :, None] * w[..., None, :]
    conc, disc = kendall_like_classes(
        x[..., :, None] - x[..., None, :],
        y[..., :, None] - y[..., None, :],
        metric_ties=metric_ties,
        human_margin=human_margin,
        margin_rule=margin_rule,
    )
    c = (ww * conc).sum(axis=(-2, -1)) / 2.0
    # the diagonal (each value against itself, w_s^2 ordered pairs) stands for w_s (w_s - 1)
    # copies' pairs: take the w_s self-pairs back out
    self_disc = np.diagonal(disc, axis1=-2, axis2=-1)
    d = ((ww * disc).sum(axis=(-2, -1)) - (w * self_disc).sum(axis=-1)) / 2.0
    return c, d


# ---------------------------------------------------------------------------------------------
# Hooks whose kernels live in modules that import this one: looked up when first called.
# ---------------------------------------------------------------------------------------------


def _pooled_pearson(pairs: FixedPairs, wt: np.ndarray) -> np.ndarray:
    return pairs.pearson(wt)


def _pooled_spearman(pairs: FixedPairs, wt: np.ndarray) -> np.ndarray:
    return pairs.spearman(wt)


def _pooled_kendall_b(pairs: FixedPairs, wt: np.ndarray) -> np.ndarray:
    return pairs.kendall(wt, "b")


def _pooled_kendall_c(pairs: FixedPairs, wt: np.ndarray) -> np.ndarray:
    return pairs.kendall(wt, "c")


def _pearson_by_items(
    pairs: FixedPairs, item: np.ndarray, n_items: int, item_w: np.ndarray
) -> np.ndarray:
    return pairs.pearson_by_items(item, n_items, item_w)


def _spearman_by_items(
    pairs: FixedPairs, item: np.ndarray, n_items: int, item_w: np.ndarray
) -> np.ndarray:
    return pairs.spearman_by_items(item, item_w)


def _kendall_b_by_items(
    pairs: FixedPairs, item: np.ndarray, n_items: int, item_w: np.ndarray
) -> np.ndarray | None:
    return pairs.kendall_b_by_items(item, n_items, item_w)


def _kendall_like_resampled(
    metric: np.ndarray, human: np.ndarray, res: Resamples, **settings: Any
) -> np.ndarray:
    from paraeval.correlation.bootstrap import kendall_like_segment_values

    return kendall_like_segment_values(metric, human, res, **settings)


def _kendall_like_batch(metrics: np.ndarray, human: np.ndarray, **settings: Any) -> np.ndarray:
    from paraeval.correlation.significance import kendall_like_segment_batch

    return kendall_like_segment_batch(metrics, human, **settings)


register_coefficient(
    Coefficient(
        "pearson",
        pearson,
        weighted=_weighted_pearson_statistic,
        pooled=_pooled_pearson,
        pooled_by_items=_pearson_by_items,
        statistic=pearson_statistic,
    )
)
register_coefficient(
    Coefficient(
        "spearman",
        spearman,
        weighted=_weighted_spearman_statistic,
        pooled=_pooled_spearman,
        pooled_by_items=_spearman_by_items,
        ordinal=True,
    )
)
register_coefficient(
    Coefficient(
        "kendall_b",
        kendall_b,
        weighted=_weighted_kendall_b,
        pooled=_pooled_kendall_b,
        pooled_by_items=_kendall_b_by_items,
        ordinal=True,
    )
)
register_coefficient(
    Coefficient(
        "kendall_c",
        kendall_c,
        weighted=_weighted_kendall_c,
        pooled=_pooled_kendall_c,
        ordinal=True,
    )
)


def kendall_like_coefficient(
    *,
    human_margin: float = 0.0,
    margin_rule: MarginRule = "at_least",
    metric_ties: MetricTies = "discordant",
) -> Coefficient:
    """The ``kendall_like`` entry with these settings (see :func:`kendall_like_counts`): system
    pairs inside items, pooled over all items (segment level) or one value per item (item
    level)."""
    _check_kendall_like_settings(metric_ties, human_margin, margin_rule)
    settings: dict[str, Any] = {
        "human_margin": float(human_margin),
        "margin_rule": margin_rule,
        "metric_ties": metric_ties,
    }
    return Coefficient(
        "kendall_like",
        partial(kendall_like, **settings),
        levels=("segment", "item"),
        vector=False,
        weighted=partial(_weighted_kendall_like, **settings),
        segment_resampled=partial(_kendall_like_resampled, **settings),
        segment_batch=partial(_kendall_like_batch, **settings),
        williams=False,
        options=tuple(sorted(settings.items())),
        ordinal=True,
    )


def pairwise_accuracy_coefficient(*, human_ties: HumanTies = "count") -> Coefficient:
    """The ``pairwise_accuracy`` entry with these settings (see :func:`pairwise_accuracy`): it
    orders systems, so only the system level has anything to order."""
    if human_ties not in HUMAN_TIES:
        raise ValueError(f"human_ties must be one of {HUMAN_TIES}, got {human_ties!r}")
    return Coefficient(
        "pairwise_accuracy",
        partial(pairwise_accuracy, human_ties=human_ties),
        levels=("system",),
        weighted=partial(_weighted_accuracy, human_ties=human_ties),
        williams=False,
        options=(("human_ties", human_ties),),
    )


register_coefficient(kendall_like_coefficient())
register_settings("kendall_like", kendall_like_coefficient)
register_coefficient(pairwise_accuracy_coefficient())
register_settings("pairwise_accuracy", pairwise_accuracy_coefficient)
