"""Compare stage: system scores with bootstrap intervals, paired tests against a baseline, a ranking
with significance clusters, and the diversity–adequacy view.

Definitions:

- Every column (metric outputs and the ``syntactic``/``semantic`` averages) is compared on the items
  that every system has, in the baseline's item order.
- **Bootstrap**: ``n_bootstrap`` resamples of items, drawn once per run exactly as sacrebleu draws
  them (``np.random.default_rng(seed).choice(n, size=(B, n))``), so every system and column sees the
  same resamples. A corpus-level n-gram metric (one with per-segment sufficient statistics) is
  recomputed from the resampled statistics, never by rescoring text (sacrebleu metrics through a
  vectorised copy of their formulas, others through ``Metric.corpus_from_stats``); every other
  column, and a metric whose corpus score is the mean of its segment scores, is the mean of its
  resampled segment scores (NaN segments skipped). The interval is the percentile interval at
  ``confidence``.
- **Paired bootstrap** and **approximate randomization** against the baseline follow
  ``sacrebleu.significance._paired_bs_test`` / ``_paired_ar_test`` step by step (same RNG calls,
  same float32 statistics in the bootstrap, same p-value ``(c + 1) / (N + 1)``), so for BLEU, chrF
  and TER the p-values equal ``sacrebleu --paired-bs`` / ``--paired-ar`` with ``SACREBLEU_SEED``
  set to the run's seed (any seed but 0, which sacrebleu's system tests treat as "unseeded").
  sacrebleu 2.x draws from ``np.random.default_rng`` (a Generator), and so does this module.
  Other columns use the same procedure on their segment-score means.
- **Clusters**: per column, the best remaining system and every remaining system whose paired
  bootstrap p-value against it is ≥ ``alpha`` form a cluster; repeat on the rest. Cluster 1 holds
  the systems not distinguishable from the best. "Best" follows the column's direction.
- **diversity** (per system): 1 minus the mean over its items of the mean min-max normalized
  syntactic similarity to the SOURCE, over the similarity-to-source columns that were computed: the
  ``<metric>_src`` twins of non-semantic metrics and ``diversity``-group metrics such as
  ``self_bleu``. Each column is min-max normalized over the pool (lower-is-better columns flipped)
  whatever the run's normalizer, so diversity lies in [0, 1]: 0 = copies the input on every item
  (the lowest possible), HIGHER = MORE DIVERSE.
- **adequacy** (per system): the mean over its items of the normalized semantic similarity: the
  ``semantic`` group average (to the references); on an item where that is missing, the mean of the
  normalized ``_src`` twins of semantic metrics (similarity to the source). Higher = keeps meaning.
- **copy_rate**: share of a system's candidates equal to their source after collapsing whitespace,
  stripping and case folding.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numba
import numpy as np
import pandas as pd
from numba import njit
from paraeval.pipeline.errors import ConfigError
from paraeval.pipeline.figures import Figures

log = logging.getLogger(__name__)

COMPARISON_COLUMNS = [
    "system",
    "metric",
    "score",
    "ci_low",
    "ci_high",
    "baseline",
    "p_bootstrap",
    "p_ar",
    "cluster",
    "rank",
    "higher_is_better",
    "n_items",
    "signature",
]
SYSTEM_COLUMNS = ("diversity", "adequacy", "copy_rate")
AVERAGES = ("syntactic", "semantic")

ScoreFn = Callable[[np.ndarray], np.ndarray]


# --------------------------------------------------------------------------- config
@dataclass
class CompareConfig:
    enabled: bool = True
    baseline: str | None = None
    n_bootstrap: int = 1000
    n_ar: int = 10000
    confidence: float = 0.95
    alpha: float = 0.05
    seed: int | None = 1234

    def __post_init__(self) -> None:
        for key in ("n_bootstrap", "n_ar"):
            value = getattr(self, key)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"compare.{key} must be a positive integer, got {value!r}")
        for key in ("confidence", "alpha"):
            value = getattr(self, key)
            if not isinstance(value, int | float) or not 0.0 < float(value) < 1.0:
                raise ConfigError(f"compare.{key} must be a number in (0, 1), got {value!r}")
        if self.seed is not None and (not isinstance(self.seed, int) or self.seed < 0):
            raise ConfigError(
                f"compare.seed must be a non-negative integer or null, got {self.seed!r}"
            )
        if self.baseline is not None:
            self.baseline = str(self.baseline)

    @classmethod
    def from_mapping(cls, cfg: Mapping[str, Any]) -> CompareConfig:
        known = set(cls.__dataclass_fields__)
        unknown = [k for k in cfg if k not in known]
        if unknown:
            raise ConfigError(f"compare: unknown setting(s) {unknown}; valid: {sorted(known)}")
        return cls(**dict(cfg))

    def signature(self) -> str:
        seed = "none" if self.seed is None else str(self.seed)
        return (
            f"bs:{self.n_bootstrap}|ar:{self.n_ar}|seed:{seed}|conf:{self.confidence:g}"
            f"|alpha:{self.alpha:g}"
        )


# --------------------------------------------------------------------------- sacrebleu formulas
# sacrebleu's corpus scores computed on many summed-statistics rows at once. They follow
# ``_compute_score_from_stats`` operation by operation and in the same dtype (float32 inside
# sacrebleu's paired bootstrap, float64 otherwise), and use ``math.log``/``math.exp`` rather than
# numpy's vectorised versions, which differ in the last bit: the paired-test p-values count strict
# inequalities, so the scores must be bit-identical to sacrebleu's for the p-values to be equal.

_MY_LOG_FLOOR = -9999999999.0  # sacrebleu.utils.my_log(0.0)


@njit(cache=True, nogil=True)
def _libm_log(x: np.ndarray) -> np.ndarray:
    out = np.empty_like(x)
    for i in range(x.size):
        out[i] = math.log(x[i])
    return out


@njit(cache=True, nogil=True)
def _libm_exp(x: np.ndarray) -> np.ndarray:
    out = np.empty_like(x)
    for i in range(x.size):
        out[i] = math.exp(x[i])
    return out


# numba compiles these scalar loops to the C library's log/exp, the functions behind Python's
# math.log/math.exp (a test checks bit equality on millions of values). With Intel SVML, numba
# may vectorise them into other code: then each value goes through Python's math module.
if numba.config.USING_SVML:
    _MATH_LOG: Any = np.frompyfunc(math.log, 1, 1)
    _MATH_EXP: Any = np.frompyfunc(math.exp, 1, 1)
else:
    _MATH_LOG, _MATH_EXP = _libm_log, _libm_exp


def _map_math(fn: Any, x: np.ndarray) -> np.ndarray:
    flat = np.ascontiguousarray(x, dtype=np.float64).ravel()
    return np.asarray(fn(flat), dtype=np.float64).reshape(np.shape(x))


def _with_python_zeros(scores: np.ndarray, python_rows: np.ndarray) -> np.ndarray:
    """sacrebleu returns a Python float on some branches and a numpy scalar of the statistics'
    dtype on others; ``np.array`` of such a list is float64 as soon as one Python float is in it."""
    if scores.dtype != np.float64 and python_rows.any():
        scores = scores.astype(np.float64)
    return scores


def bleu_scores(stats: np.ndarray, bleu: Any) -> np.ndarray:
    """``sacrebleu.BLEU._compute_score_from_stats(row).score`` for every row of ``stats``."""
    stats = np.atleast_2d(stats)
    dtype = stats.dtype if stats.dtype == np.float32 else np.dtype(np.float64)
    s = stats.astype(dtype, copy=True)
    order = int(bleu.max_ngram_order)
    method = str(bleu.smooth_method)
    smooth_value = bleu.smooth_value
    if smooth_value is None:
        smooth_value = bleu.SMOOTH_DEFAULTS[method]
    rows = s.shape[0]
    # int(stats[0]) and int(stats[1]): exact integers, then Python int arithmetic (exact in f64)
    sys_len = np.trunc(s[:, 0].astype(np.float64))
    ref_len = np.trunc(s[:, 1].astype(np.float64))
    correct = s[:, 2 : 2 + order]
    total = s[:, 2 + order : 2 + 2 * order]

    bp = np.ones(rows)
    short = sys_len < ref_len
    short_pos = short & (sys_len > 0)
    if short_pos.any():
        bp[short_pos] = _map_math(_MATH_EXP, 1 - ref_len[short_pos] / sys_len[short_pos])
    bp[short & (sys_len <= 0)] = 0.0

    any_match = (correct != 0).any(axis=1)
    precisions = np.zeros((rows, order))
    eff_order = np.full(rows, order, dtype=np.int64)
    active = any_match.copy()
    smooth_mteval = np.ones(rows)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for n in range(1, order + 1):
            j = n - 1
            if method == "add-k" and n > 1:
                correct[:, j] += smooth_value
                total[:, j] += smooth_value
            active &= total[:, j] != 0
            if bleu.effective_order:
                eff_order = np.where(active, n, eff_order)
            zero = correct[:, j] == 0
            hit = active & ~zero
            precisions[hit, j] = (100.0 * correct[hit, j] / total[hit, j]).astype(np.float64)
            miss = active & zero
            if method == "exp":
                smooth_mteval = np.where(miss, smooth_mteval * 2, smooth_mteval)
                if miss.any():
                    precisions[miss, j] = (
                        100.0 / (smooth_mteval[miss].astype(dtype) * total[miss, j])
                    ).astype(np.float64)
            elif method == "floor" and miss.any():
                precisions[miss, j] = (100.0 * smooth_value / total[miss, j]).astype(np.float64)
    logs = np.full(precisions.shape, _MY_LOG_FLOOR)
    positive = precisions != 0.0
    logs[positive] = _map_math(_MATH_LOG, precisions[positive])
    acc = np.zeros(rows)
    for j in range(order):  # Python's sum(): left to right, only over the effective orders
        acc = np.where(j < eff_order, acc + logs[:, j], acc)
    score = bp * _map_math(_MATH_EXP, acc / eff_order)
    score[~any_match] = 0.0
    return score


def chrf_scores(stats: np.ndarray, chrf: Any) -> np.ndarray:
    """``sacrebleu.CHRF._compute_score_from_stats(row).score`` for every row of ``stats``."""
    stats = np.atleast_2d(stats)
    dtype = stats.dtype if stats.dtype == np.float32 else np.dtype(np.float64)
    s = stats.astype(dtype, copy=False)
    rows = s.shape[0]
    factor = int(chrf.beta) ** 2
    eps = 1e-16
    avg_p = np.zeros(rows, dtype=dtype)
    avg_r = np.zeros(rows, dtype=dtype)
    eff = np.zeros(rows, dtype=np.int64)
    eps_score = np.zeros(rows, dtype=dtype)
    with np.errstate(divide="ignore", invalid="ignore"):
        for i in range(int(chrf.order)):
            n_hyp, n_ref, n_match = s[:, 3 * i], s[:, 3 * i + 1], s[:, 3 * i + 2]
            prec = np.where(n_hyp > 0, n_match / n_hyp, dtype.type(eps))
            rec = np.where(n_ref > 0, n_match / n_ref, dtype.type(eps))
            both = (n_hyp > 0) & (n_ref > 0)
            avg_p = np.where(both, avg_p + prec, avg_p)
            avg_r = np.where(both, avg_r + rec, avg_r)
            eff += both
            if chrf.eps_smoothing:
                denom = factor * prec + rec
                eps_score = eps_score + np.where(
                    denom > 0, (1 + factor) * prec * rec / denom, dtype.type(eps)
                )
        if chrf.eps_smoothing:
            return 100 * eps_score / int(chrf.order)
        safe = np.maximum(eff, 1).astype(dtype)
        avg_p = np.where(eff > 0, avg_p / safe, dtype.type(0))
        avg_r = np.where(eff > 0, avg_r / safe, dtype.type(0))
        nonzero = (avg_p + avg_r) != 0
        score = (1 + factor) * avg_p * avg_r
        score = score / ((factor * avg_p) + avg_r)
        score = 100 * score
    score = np.where(nonzero, score, dtype.type(0))
    return _with_python_zeros(score, ~nonzero)


def ter_scores(stats: np.ndarray, ter: Any = None) -> np.ndarray:
    """``sacrebleu.TER._compute_score_from_stats(row).score`` for every row of ``stats``."""
    stats = np.atleast_2d(stats)
    dtype = stats.dtype if stats.dtype == np.float32 else np.dtype(np.float64)
    s = stats.astype(dtype, copy=False)
    edits, ref_len = s[:, 0], s[:, 1]
    has_ref = ref_len > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        score = 100 * (edits / ref_len)
    fallback = np.where(edits > 0, 100.0, 0.0).astype(dtype)
    return _with_python_zeros(np.where(has_ref, score, fallback), ~has_ref)


def sacre_score_fn(metric: Any) -> ScoreFn | None:
    """The vectorised corpus score from summed statistics of a sacrebleu-based metric; None for
    any other metric."""
    from paraeval.metrics import sacre

    if isinstance(metric, sacre.IBLEU):
        corpus = metric._corpus_metric()
        a = float(metric.alpha)

        def ibleu(s: np.ndarray) -> np.ndarray:
            half = s.shape[1] // 2
            return a * bleu_scores(s[:, :half], corpus) - (1.0 - a) * bleu_scores(
                s[:, half:], corpus
            )

        return ibleu
    if isinstance(metric, sacre.BLEU):
        corpus = metric._corpus_metric()
        return lambda s: bleu_scores(s, corpus)
    if isinstance(metric, sacre.CHRF):
        corpus = metric._corpus_metric()
        return lambda s: chrf_scores(s, corpus)
    if isinstance(metric, sacre.TER):
        corpus = metric._corpus_metric()
        return lambda s: ter_scores(s, corpus)
    return None


# --------------------------------------------------------------------------- resampling plans
def bootstrap_indices(n_items: int, n_samples: int, seed: int | None) -> np.ndarray:
    """The resamples of ``sacrebleu.significance._paired_bs_test``: one Generator call, so a run
    with seed s draws exactly the indices sacrebleu draws with ``SACREBLEU_SEED=s``."""
    rng = np.random.default_rng(seed)
    return rng.choice(n_items, size=(n_samples, n_items), replace=True)


def ar_masks(n_items: int, n_trials: int, seed: int | None) -> np.ndarray:
    """The swap masks of ``sacrebleu.significance._paired_ar_test`` (True = keep)."""
    rng = np.random.default_rng(seed)
    return rng.integers(2, size=(n_trials, n_items), dtype=bool)


class ArMasks:
    """The randomization masks as float matrices, in row blocks so that memory stays bounded
    rather than one (trials x items) float matrix. Blocks have at least 128 rows, so that
    a block's products equal the rows of the full product bit for bit (gemm, not gemv)."""

    MAX_BYTES = 2**26  # per converted block pair

    def __init__(self, keep: np.ndarray) -> None:
        self.keep = keep
        rows, n = keep.shape
        per_block = max(256, self.MAX_BYTES // (16 * max(1, n)))
        self.bounds = [
            (int(b[0]), int(b[-1]) + 1)
            for b in np.array_split(np.arange(rows), max(1, -(-rows // per_block)))
            if len(b)
        ]
        self._cached = (
            [self._block(lo, hi) for lo, hi in self.bounds] if len(self.bounds) == 1 else None
        )

    def _block(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        part = self.keep[lo:hi]
        return part.astype(np.float64), (~part).astype(np.float64)

    def apply(self, fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
        if self._cached is not None and len(self._cached) == 1:
            return fn(*self._cached[0])
        blocks = self._cached or (self._block(lo, hi) for lo, hi in self.bounds)
        return np.concatenate([fn(k, w) for k, w in blocks])


def resample_counts(idx: np.ndarray) -> np.ndarray:
    """(B, n) how often each item is drawn in each resample."""
    b, n = idx.shape
    flat = (idx + (np.arange(b) * n)[:, None]).ravel()
    return np.bincount(flat, minlength=b * n).reshape(b, n).astype(np.float64)


def p_value(sample_stats: np.ndarray, real_difference: float) -> float:
    """sacrebleu's ``_compute_p_value``: (#{stat > real} + 1) / (N + 1)."""
    c = int(np.sum(sample_stats > real_difference))
    return (c + 1) / (len(sample_stats) + 1)


def paired_bs_p(res_a: np.ndarray, res_b: np.ndarray, real_a: float, real_b: float) -> float:
    """Paired bootstrap p-value from two systems' scores on the same resamples."""
    if not (math.isfinite(real_a) and math.isfinite(real_b)):
        return float("nan")
    diff = abs(float(real_a) - float(real_b))  # a Python float, as in sacrebleu
    sample_diffs = np.abs(res_b - res_a)
    return p_value(sample_diffs - sample_diffs.mean(), diff)


class _Column:
    """How one output column is resampled: from sufficient statistics or from segment scores."""

    def __init__(self, name: str, higher_is_better: bool, signature: str) -> None:
        self.name = name
        self.higher_is_better = higher_is_better
        self.signature = signature

    def point(self, system: str) -> float:
        raise NotImplementedError

    def bootstrap(self, system: str, idx: np.ndarray, counts: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def ar(self, base: str, system: str, masks: ArMasks) -> float:
        """Approximate-randomization p-value of ``system`` against ``base``."""
        return self.ar_all(base, [system], masks)[system]

    def ar_all(self, base: str, systems: list[str], masks: ArMasks) -> dict[str, float]:
        """:meth:`ar` of every system in ``systems`` against ``base`` (NaN where a score is not
        finite)."""
        raise NotImplementedError

    def _testable(self, base: str, systems: list[str]) -> list[str]:
        real_b = self.point(base)
        if not math.isfinite(real_b):
            return []
        return [s for s in systems if math.isfinite(self.point(s))]


class _MeanColumn(_Column):
    def __init__(self, name: str, hib: bool, sig: str, values: Mapping[str, np.ndarray]) -> None:
        super().__init__(name, hib, sig)
        self.values = {s: np.asarray(v, dtype=np.float64) for s, v in values.items()}
        self.finite = {s: np.isfinite(v).astype(np.float64) for s, v in self.values.items()}
        self.zeroed = {s: np.where(np.isfinite(v), v, 0.0) for s, v in self.values.items()}

    def point(self, system: str) -> float:
        v = self.values[system]
        v = v[np.isfinite(v)]
        return float(v.mean()) if v.size else float("nan")

    def bootstrap(self, system: str, idx: np.ndarray, counts: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return (counts @ self.zeroed[system]) / (counts @ self.finite[system])

    def ar_all(self, base: str, systems: list[str], masks: ArMasks) -> dict[str, float]:
        out = dict.fromkeys(systems, float("nan"))
        todo = self._testable(base, systems)
        if not todo:
            return out
        vb, fb = self.zeroed[base], self.finite[base]
        # keep @ vb + swap @ vs == keep @ (vb - vs) + sum(vs): one product instead of four. The
        # masks are read once for all systems: a product with two columns per system is bound
        # by reading the (trials x items) masks, so one wide product is many times faster
        diffs = np.column_stack(
            [col for s in todo for col in (vb - self.zeroed[s], fb - self.finite[s])]
        )
        kept = masks.apply(lambda k, w: k @ diffs)
        for j, s in enumerate(todo):
            vs, fs = self.zeroed[s], self.finite[s]
            num_a, den_a = kept[:, 2 * j] + vs.sum(), kept[:, 2 * j + 1] + fs.sum()
            num_b, den_b = vb.sum() + vs.sum() - num_a, fb.sum() + fs.sum() - den_a
            with np.errstate(invalid="ignore", divide="ignore"):
                out[s] = p_value(
                    np.abs(num_a / den_a - num_b / den_b), abs(self.point(base) - self.point(s))
                )
        return out


class _StatsColumn(_Column):
    """A corpus-level metric with per-segment sufficient statistics."""

    def __init__(
        self,
        name: str,
        hib: bool,
        sig: str,
        stats: Mapping[str, np.ndarray],
        fn: ScoreFn | None,
        metric: Any,
        base_column: str,
    ) -> None:
        super().__init__(name, hib, sig)
        self.stats = {s: np.ascontiguousarray(v, dtype=np.float64) for s, v in stats.items()}
        # integer statistics (BLEU, chrF, single-reference TER) sum exactly in any order, so the
        # resampled and shuffled sums can be taken as matrix products instead of sacrebleu's
        # gathers without changing a bit
        self.integer = all(np.array_equal(v, np.round(v)) for v in self.stats.values())
        self.fn = fn
        self.metric = metric
        self.base_column = base_column
        self._point: dict[str, float] = {}

    def _generic(self, stats: np.ndarray) -> float:
        return float(self.metric.corpus_from_stats(stats)[self.base_column])

    def point(self, system: str) -> float:
        if system not in self._point:
            st = self.stats[system]
            if self.fn is None:
                self._point[system] = self._generic(st)
            else:
                # sacrebleu's sum_of_lists adds the segments left to right: cumsum does too
                total = np.cumsum(st, axis=0)[-1:] if len(st) else np.zeros((1, st.shape[1]))
                self._point[system] = float(self.fn(total)[0])
        return self._point[system]

    def bootstrap(self, system: str, idx: np.ndarray, counts: np.ndarray) -> np.ndarray:
        st = self.stats[system]
        if self.fn is None:
            return np.array([self._generic(st[row]) for row in idx])
        if self.integer and len(st) * float(np.abs(st).max(initial=0.0)) < 2**24:
            # every partial float32 sum is an integer below 2**24, hence exact: same numbers
            return self.fn((counts @ st).astype(np.float32))
        # sacrebleu resamples float32 statistics and sums each resample on its own
        st32 = st.astype(np.float32)
        sums = np.empty((len(idx), st.shape[1]), dtype=np.float32)
        chunk = max(1, int(2**24 // max(1, st.size)))
        for start in range(0, len(idx), chunk):
            sums[start : start + chunk] = st32[idx[start : start + chunk]].sum(axis=1)
        return self.fn(sums)

    def _ar_one(self, base: str, system: str, masks: ArMasks) -> float:
        """The test of one system whose statistics are not all integers, or that has no
        vectorised score."""
        diff = abs(self.point(base) - self.point(system))
        bl, sy = self.stats[base], self.stats[system]
        if self.fn is None:
            a = np.array([self._generic(np.where(m[:, None], bl, sy)) for m in masks.keep])
            b = np.array([self._generic(np.where(m[:, None], sy, bl)) for m in masks.keep])
            return p_value(np.abs(a - b), diff)
        # sacrebleu: pos_sel @ bl + ~pos_sel @ sys with bool masks; float copies of the masks give
        # the same products (tested) and are converted once per run instead of once per call
        shuf_a = masks.apply(lambda k, w: k @ bl + w @ sy)
        shuf_b = masks.apply(lambda k, w: w @ bl + k @ sy)
        return p_value(np.abs(self.fn(shuf_a) - self.fn(shuf_b)), diff)

    def ar_all(self, base: str, systems: list[str], masks: ArMasks) -> dict[str, float]:
        out = dict.fromkeys(systems, float("nan"))
        todo = self._testable(base, systems)
        if not todo:
            return out
        fn = self.fn
        if fn is None or not self.integer:
            out.update({s: self._ar_one(base, s, masks) for s in todo})
            return out
        bl = self.stats[base]
        width = bl.shape[1]
        # integer statistics: the shuffled sums are exact whatever the product's shape, so all
        # systems share one product; they are scored one system at a time, a working set that
        # stays in cache
        diffs = np.concatenate([bl - self.stats[s] for s in todo], axis=1)
        products = masks.apply(lambda k, w: k @ diffs)
        for j, s in enumerate(todo):
            sy = self.stats[s]
            shuf_a = products[:, j * width : (j + 1) * width] + sy.sum(axis=0)
            shuf_b = (bl.sum(axis=0) + sy.sum(axis=0)) - shuf_a
            diff = abs(self.point(base) - self.point(s))
            out[s] = p_value(np.abs(fn(shuf_a) - fn(shuf_b)), diff)
        return out


# --------------------------------------------------------------------------- result
@dataclass
class Comparison:
    table: pd.DataFrame  # system_comparison.csv
    systems: pd.DataFrame  # index system: diversity, adequacy, copy_rate and their item quartiles
    items: pd.DataFrame  # per (system, item): diversity, adequacy (for the per-item spread)
    baseline: str
    config: CompareConfig
    signature: str
    diversity_columns: list[str] = field(default_factory=list)
    adequacy_columns: list[str] = field(default_factory=list)


def _align(segments: pd.DataFrame, systems: list[str], baseline: str) -> tuple[list, dict]:
    """Items every system has (baseline order) and, per system, their row positions within that
    system's rows (the order of its sufficient statistics)."""
    per_system: dict[str, pd.Index] = {}
    for s in systems:
        ids = pd.Index(segments.loc[segments["system"] == s, "item_id"])
        if ids.has_duplicates:
            raise ConfigError(f"system '{s}' has several rows for one item; cannot pair systems")
        per_system[s] = ids
    common = set.intersection(*(set(ix) for ix in per_system.values()))
    items = [i for i in per_system[baseline] if i in common]
    dropped = {s: len(ix) - len(items) for s, ix in per_system.items() if len(ix) != len(items)}
    if dropped:
        log.warning(
            "comparing systems on the %d items they all have (dropped per system: %s)",
            len(items),
            dropped,
        )
    positions = {s: ix.get_indexer(pd.Index(items)) for s, ix in per_system.items()}
    return items, positions


# (column content, systems, baseline, settings) -> that column's rows of system_comparison.csv
_ROWS_MEMO: dict[str, list[dict[str, Any]]] = {}
_ROWS_MEMO_MAX = 1024


def _column_key(col: _Column, systems: list[str], baseline: str, signature: str, n: int) -> str:
    """Content key of one column's comparison rows: everything they are computed from."""
    h = hashlib.blake2b(digest_size=24)
    head = [
        type(col).__name__,
        col.name,
        col.signature,
        col.higher_is_better,
        systems,
        baseline,
        signature,
        n,
    ]
    h.update(repr(head).encode("utf-8"))
    if isinstance(col, _MeanColumn):
        arrays = [col.values[s] for s in systems]
    elif isinstance(col, _StatsColumn):
        h.update(b"fn" if col.fn is not None else b"generic")
        arrays = [col.stats[s] for s in systems]
    else:  # an unknown kind of column is never served from the memo
        h.update(repr(id(col)).encode())
        arrays = []
    for a in arrays:
        h.update(np.ascontiguousarray(a, dtype=np.float64).tobytes())
        h.update(b"|")
    return h.hexdigest()


def _build_columns(scores: Any, agg: Any, systems: list[str], positions: dict) -> list[_Column]:
    seg = agg.segments
    columns: list[_Column] = []
    system_col = seg["system"].to_numpy()
    # each system's rows, found once rather than once per column
    rows_of = {s: np.flatnonzero(system_col == s)[positions[s]] for s in systems}
    for name, info in agg.columns.items():
        if name not in seg.columns:
            continue
        stats_key_suffix = "_src" if info.signature.endswith("|vs:source") else ""
        metric = scores.metrics.get(info.metric)
        stats_key = f"{info.metric}{stats_key_suffix}"
        has_stats = metric is not None and all((stats_key, s) in scores.stats for s in systems)
        plan = sacre_score_fn(metric) if has_stats else None
        overrides = has_stats and type(metric).corpus_from_stats is not _base_corpus_from_stats()
        column = seg[name].to_numpy(dtype=float)
        values = {s: column[rows_of[s]] for s in systems}
        base = name[: -len(stats_key_suffix)] if stats_key_suffix else name
        if plan is None and overrides:
            st = {s: np.asarray(scores.stats[(stats_key, s)])[positions[s]] for s in systems}
            # a corpus score that is the mean of the segment scores (BERTScore) is resampled as a
            # mean: same numbers, vectorised, without one corpus_from_stats call per resample
            if not _is_segment_mean(metric, base, st, values):
                columns.append(
                    _StatsColumn(
                        name, info.higher_is_better, info.signature, st, None, metric, base
                    )
                )
                continue
        elif plan is not None:
            st = {s: np.asarray(scores.stats[(stats_key, s)])[positions[s]] for s in systems}
            columns.append(
                _StatsColumn(name, info.higher_is_better, info.signature, st, plan, metric, base)
            )
            continue
        columns.append(_MeanColumn(name, info.higher_is_better, info.signature, values))
    return columns


def _is_segment_mean(
    metric: Any, column: str, stats: Mapping[str, np.ndarray], values: Mapping[str, np.ndarray]
) -> bool:
    for system, st in stats.items():
        v = values[system]
        if not np.isfinite(v).all():
            return False
        corpus = float(metric.corpus_from_stats(st).get(column, np.nan))
        if not (len(v) and np.isclose(corpus, float(v.mean()), rtol=1e-12, atol=1e-12)):
            return False
    return True


def _base_corpus_from_stats() -> Any:
    from paraeval.metrics.base import Metric

    return Metric.corpus_from_stats


def _clusters(points: dict[str, float], res: dict[str, np.ndarray], hib: bool, alpha: float):
    """Cluster and rank per system (1 = best); NaN for systems without a score."""
    order = sorted(
        (s for s in points if math.isfinite(points[s])),
        key=lambda s: -points[s] if hib else points[s],
    )
    rank = {s: float(i + 1) for i, s in enumerate(order)}
    cluster: dict[str, float] = {}
    remaining = list(order)
    k = 0
    while remaining:
        k += 1
        head = remaining[0]
        # sacrebleu's p-value of two identical scores is 1/(N+1) ("a zero difference is not
        # chance"); for clustering, an equal score is simply not distinguishable from the head
        members = [
            s
            for s in remaining
            if points[s] == points[head]
            or paired_bs_p(res[head], res[s], points[head], points[s]) >= alpha
        ]
        for s in members:
            cluster[s] = float(k)
        remaining = [s for s in remaining if s not in members]
    return rank, cluster


# --------------------------------------------------------------------------- diversity/adequacy
def normalize_text(text: str) -> str:
    return " ".join(str(text).split()).casefold()


def copy_rates(segments: pd.DataFrame) -> pd.Series:
    same = [
        normalize_text(c) == normalize_text(s)
        for c, s in zip(segments["candidate"], segments["source"], strict=True)
    ]
    return (
        pd.Series(same, index=segments.index, dtype=float)
        .groupby(segments["system"], sort=False)
        .mean()
    )


def diversity_columns(scores: Any) -> tuple[list[str], list[str]]:
    """(syntactic similarity-to-source columns, semantic similarity-to-source columns)."""
    syntactic: list[str] = []
    semantic: list[str] = []
    for name, info in scores.columns.items():
        if info.group != "diversity":
            continue
        metric = scores.metrics.get(info.metric)
        own_group = getattr(metric, "group", "syntactic")
        (semantic if own_group == "semantic" else syntactic).append(name)
    return syntactic, semantic


def _minmax(values: pd.Series, higher_is_better: bool) -> pd.Series:
    x = values.astype(float)
    lo, hi = x.min(), x.max()
    if not np.isfinite(lo) or hi == lo:
        return pd.Series(np.where(x.notna(), 1.0, np.nan), index=x.index)
    return (x - lo) / (hi - lo) if higher_is_better else (hi - x) / (hi - lo)


def diversity_adequacy(scores: Any, agg: Any) -> tuple[pd.DataFrame, list[str], list[str]]:
    """Per (item, system) normalized similarity to the source and adequacy."""
    seg, norm = agg.segments, agg.normalized
    syn_src, sem_src = diversity_columns(scores)
    out = seg[["system", "item_id"]].copy()
    with np.errstate(all="ignore"):
        if syn_src:
            similarity = pd.DataFrame(
                {c: _minmax(seg[c], scores.columns[c].higher_is_better) for c in syn_src}
            )
            out["diversity"] = 1.0 - similarity.mean(axis=1, skipna=True)
        else:
            out["diversity"] = np.nan
        adequacy = seg["semantic"] if "semantic" in seg else pd.Series(np.nan, index=seg.index)
        if sem_src:
            adequacy = adequacy.fillna(norm[sem_src].mean(axis=1, skipna=True))
    out["adequacy"] = adequacy
    adequacy_cols = (["semantic"] if "semantic" in seg else []) + sem_src
    return out, syn_src, adequacy_cols


def _system_view(items: pd.DataFrame, segments: pd.DataFrame) -> pd.DataFrame:
    g = items.groupby("system", sort=False)
    view = pd.DataFrame(index=pd.Index(list(g.groups), name="system"))
    for col in ("diversity", "adequacy"):
        view[col] = g[col].mean()
        view[f"{col}_q25"] = g[col].quantile(0.25)
        view[f"{col}_q75"] = g[col].quantile(0.75)
    view["copy_rate"] = copy_rates(segments)
    return view


# --------------------------------------------------------------------------- the stage
def compare(scores: Any, agg: Any, cfg: CompareConfig) -> Comparison:
    """Scores with intervals, paired tests against the baseline, clusters, diversity/adequacy."""
    seg = agg.segments
    systems = list(dict.fromkeys(seg["system"]))
    baseline = cfg.baseline if cfg.baseline is not None else systems[0]
    if baseline not in systems:
        raise ConfigError(f"compare.baseline '{baseline}' is not a system; choose from {systems}")
    items, positions = _align(seg, systems, baseline)
    n = len(items)
    signature = cfg.signature()
    rows: list[dict[str, Any]] = []
    if n == 0:
        log.warning("no item is shared by all systems: no intervals or paired tests")
    else:
        idx = bootstrap_indices(n, cfg.n_bootstrap, cfg.seed)
        counts = resample_counts(idx)
        keep = ar_masks(n, cfg.n_ar, cfg.seed) if len(systems) > 1 else np.zeros((0, n), bool)
        masks = ArMasks(keep)
        lo_q, hi_q = (1 - cfg.confidence) / 2, 1 - (1 - cfg.confidence) / 2
        for col in _build_columns(scores, agg, systems, positions):
            key = _column_key(col, systems, baseline, signature, n)
            hit = _ROWS_MEMO.get(key)
            if hit is not None:
                # an α sweep run in one process changes only iBLEU and the average holding it:
                # every other column's rows are the same numbers, computed once
                rows.extend(dict(r) for r in hit)
                continue
            first = len(rows)
            points = {s: col.point(s) for s in systems}
            res = {s: col.bootstrap(s, idx, counts) for s in systems}
            rank, cluster = _clusters(points, res, col.higher_is_better, cfg.alpha)
            p_ar = col.ar_all(baseline, [s for s in systems if s != baseline], masks)
            for s in systems:
                r = np.asarray(res[s], dtype=np.float64)
                r = r[np.isfinite(r)]
                lo, hi = np.quantile(r, [lo_q, hi_q]) if r.size else (np.nan, np.nan)
                is_base = s == baseline
                rows.append(
                    {
                        "system": s,
                        "metric": col.name,
                        "score": points[s],
                        "ci_low": float(lo),
                        "ci_high": float(hi),
                        "baseline": baseline,
                        "p_bootstrap": np.nan
                        if is_base
                        else paired_bs_p(res[baseline], res[s], points[baseline], points[s]),
                        "p_ar": np.nan if is_base else p_ar[s],
                        "cluster": cluster.get(s, np.nan),
                        "rank": rank.get(s, np.nan),
                        "higher_is_better": col.higher_is_better,
                        "n_items": n,
                        "signature": f"{col.signature}|{signature}",
                    }
                )
            if len(_ROWS_MEMO) >= _ROWS_MEMO_MAX:
                _ROWS_MEMO.pop(next(iter(_ROWS_MEMO)))
            _ROWS_MEMO[key] = [dict(r) for r in rows[first:]]
    table = pd.DataFrame(rows, columns=COMPARISON_COLUMNS)
    if not table.empty:
        order = {m: i for i, m in enumerate(dict.fromkeys(table["metric"]))}
        table = table.sort_values(
            ["metric", "rank"], key=lambda c: c.map(order) if c.name == "metric" else c
        ).reset_index(drop=True)
    item_view, div_cols, adq_cols = diversity_adequacy(scores, agg)
    if not div_cols:
        log.warning(
            "no similarity-to-source column was computed (self_bleu or against_source: true): "
            "diversity is empty"
        )
    view = _system_view(item_view, seg).reindex(systems)
    return Comparison(table, view, item_view, baseline, cfg, signature, div_cols, adq_cols)


def run_compare(
    scores: Any, agg: Any, cfg: Mapping[str, Any], out_dir: Path, figures: Figures | None = None
) -> Comparison:
    """The pipeline's compare stage: adds diversity/adequacy/copy_rate to ``agg.systems`` and
    writes ``system_comparison.csv`` and the comparison plots (queued on ``figures``, a
    :class:`pipeline.figures.Figures`, when given)."""
    from paraeval.pipeline.compare_plots import write_compare_plots
    from paraeval.pipeline.track import write_csv

    settings = {k: v for k, v in cfg.items() if k != "enabled"}
    result = compare(scores, agg, CompareConfig.from_mapping(settings))
    for col in SYSTEM_COLUMNS:
        agg.systems[col] = result.systems[col].reindex(agg.systems.index)
    write_csv(result.table, out_dir / "system_comparison.csv")
    (figures or Figures(background=False)).submit(write_compare_plots, out_dir / "plots", result)
    return result


# --------------------------------------------------------------------------- terminal table
def _fmt(value: float, decimals: int) -> str:
    return "nan" if not math.isfinite(value) else f"{value:.{decimals}f}"


def summary_table(result: Comparison, max_metrics: int = 4) -> str:
    """Systems as rows; the main metrics and the two group averages as ``score [low, high]``.
    ``*`` = paired bootstrap p < alpha against the baseline, ``†`` = approximate randomization
    p < alpha; ``(1)`` etc. is the significance cluster."""
    t = result.table
    if t.empty:
        return "(no comparison: no item shared by all systems)"
    metrics = list(dict.fromkeys(t["metric"]))
    skip_groups = {"diversity", "precomputed"}
    main = [
        m
        for m in metrics
        if m not in AVERAGES
        and not m.endswith("_src")
        and m not in result.diversity_columns
        and m not in skip_groups
        and not m.startswith("metric_")
    ][:max_metrics]
    chosen = main + [m for m in AVERAGES if m in metrics]
    alpha = result.config.alpha
    systems = list(dict.fromkeys(t["system"]))
    cells: dict[str, dict[str, str]] = {s: {} for s in systems}
    for m in chosen:
        sub = t[t["metric"] == m].set_index("system")
        scale = np.nanmax(np.abs(sub[["score", "ci_low", "ci_high"]].to_numpy(dtype=float)))
        d = 1 if math.isfinite(scale) and scale >= 10 else 3
        for s in systems:
            if s not in sub.index:
                cells[s][m] = ""
                continue
            r = sub.loc[s]
            mark = ("*" if r.p_bootstrap < alpha else "") + ("†" if r.p_ar < alpha else "")
            cl = f"({int(r.cluster)})" if math.isfinite(r.cluster) else ""
            cells[s][m] = (
                f"{_fmt(r.score, d)} [{_fmt(r.ci_low, d)}, {_fmt(r.ci_high, d)}]{cl}{mark}"
            )
    frame = pd.DataFrame.from_dict(cells, orient="index")[chosen]
    frame.index = [f"{s} (baseline)" if s == result.baseline else s for s in systems]
    sv = result.systems
    for col in SYSTEM_COLUMNS:
        frame[col] = [_fmt(float(sv.loc[s, col]), 3) for s in systems]
    legend = (
        f"score [{result.config.confidence:.0%} bootstrap interval](cluster); "
        f"* paired bootstrap, † approximate randomization: p < {alpha:g} vs '{result.baseline}'. "
        f"diversity = 1 - normalized similarity to the source (0 = copies its input). "
        f"{result.signature}"
    )
    return frame.to_string() + "\n" + legend
