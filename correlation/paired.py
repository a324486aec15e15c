"""Paired significance tests of two systems' scores on the same items, as sacrebleu runs them
(paired bootstrap and approximate randomization, AR), for a corpus score from summed statistics
(BLEU, chrF, TER batched, others through their corpus function) or a mean of segment scores.

:func:`bootstrap_indices` and :func:`ar_masks` draw exactly what sacrebleu's ``_paired_bs_test`` /
``_paired_ar_test`` draw from ``np.random.default_rng(seed)`` (seed s = ``SACREBLEU_SEED=s``);
:func:`paired_bs_p` and the ``ar_all`` methods compute its statistics step by step (same float32
sums, p-value ``(c + 1) / (N + 1)``); :func:`paired_bs_clusters` groups systems not
distinguishable from the best one.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping

import numpy as np
from numba import njit

# corpus scores of many summed-statistics rows at once, shape (rows, k) -> (rows,)
BatchedCorpusFn = Callable[[np.ndarray], np.ndarray]
# corpus score of one set of per-segment statistic rows
CorpusFn = Callable[[np.ndarray], float]


def bootstrap_indices(n_items: int, n_samples: int, seed: int | None) -> np.ndarray:
    """The resamples of ``sacrebleu.significance._paired_bs_test``: one Generator call, so a run
    with seed s draws exactly the indices sacrebleu draws with ``SACREBLEU_SEED=s``."""
    rng = np.random.default_rng(seed)
    if n_items <= np.iinfo(np.int32).max:
        # sacrebleu's ``rng.choice(n, size, replace=True)`` is ``rng.integers(0, n, size)``,
        # which draws indices below 2**32 as bounded 32-bit numbers whatever the integer type:
        # the same indices (and generator state) in int32, without the int64 array (320 MB at
        # 40,000 items)
        return rng.integers(0, n_items, size=(n_samples, n_items), dtype=np.int32)
    return rng.choice(n_items, size=(n_samples, n_items), replace=True)


def ar_masks(n_items: int, n_trials: int, seed: int | None) -> np.ndarray:
    """The swap masks of ``sacrebleu.significance._paired_ar_test`` (True = keep)."""
    rng = np.random.default_rng(seed)
    return rng.integers(2, size=(n_trials, n_items), dtype=bool)


# rows of masks drawn at once by ar_mask_bits: a multiple of 32 (see there)
_MASK_BLOCK_ROWS = 32 * 64


def ar_mask_bits(n_items: int, n_trials: int, seed: int | None) -> np.ndarray:
    """``np.packbits(ar_masks(n_items, n_trials, seed), axis=1)`` without the (trials x items)
    booleans (400 MB at 40,000 items and 10,000 trials): drawn and packed a block of rows at a
    time. numpy makes 32 booleans of each 32-bit draw and starts every call on a fresh draw, so
    blocks of a multiple of 32 rows (hence of 32 cells) continue the one call's stream exactly."""
    rng = np.random.default_rng(seed)
    bits = np.empty((n_trials, (n_items + 7) // 8), dtype=np.uint8)
    for start in range(0, n_trials, _MASK_BLOCK_ROWS):
        rows = min(_MASK_BLOCK_ROWS, n_trials - start)
        block = rng.integers(2, size=(rows, n_items), dtype=bool)
        bits[start : start + rows] = np.packbits(block, axis=1)
    return bits


class ArMasks:
    """The randomization masks as float matrices, in row blocks so that memory stays bounded
    rather than one (trials x items) float matrix. Blocks have at least 128 rows, so that
    a block's products equal the rows of the full product bit for bit (gemm, not gemv)."""

    MAX_BYTES = 2**26  # per converted block pair

    def __init__(self, keep: np.ndarray) -> None:
        # kept as bits: the (trials x items) booleans are 400 MB at 40,000 items, the bits 50
        keep = np.asarray(keep, dtype=bool)
        self._setup(np.packbits(keep, axis=1), keep.shape)

    @classmethod
    def draw(cls, n_items: int, n_trials: int, seed: int | None) -> ArMasks:
        """The masks of :func:`ar_masks`, never held as booleans (:func:`ar_mask_bits`)."""
        masks = cls.__new__(cls)
        masks._setup(ar_mask_bits(n_items, n_trials, seed), (n_trials, n_items))
        return masks

    def _setup(self, bits: np.ndarray, shape: tuple[int, int]) -> None:
        self.shape = shape
        self._bits = bits
        self._bits.setflags(write=False)
        self._keep_t: np.ndarray | None = None
        rows, n = shape
        per_block = max(256, self.MAX_BYTES // (16 * max(1, n)))
        self.bounds = [
            (int(b[0]), int(b[-1]) + 1)
            for b in np.array_split(np.arange(rows), max(1, -(-rows // per_block)))
            if len(b)
        ]
        # one block: its float copies are kept for the next calls
        self._cached = self._block(*self.bounds[0]) if len(self.bounds) == 1 else None

    @property
    def nbytes(self) -> int:
        """Bytes held: the packed masks and their float copies where those are kept."""
        return int(self._bits.nbytes) + sum(a.nbytes for a in self._cached or ())

    @property
    def keep(self) -> np.ndarray:
        """The masks (trials x items, True = keep)."""
        return self._rows(0, self.shape[0])

    def _rows(self, lo: int, hi: int) -> np.ndarray:
        return np.unpackbits(self._bits[lo:hi], axis=1, count=self.shape[1]).view(bool)

    @property
    def keep_t(self) -> np.ndarray:
        """The masks as (items x trials), made once: compiled loops over the trials."""
        if self._keep_t is None:
            self._keep_t = np.ascontiguousarray(self.keep.T)
        return self._keep_t

    def _block(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        part = self._rows(lo, hi)
        return part.astype(np.float64), (~part).astype(np.float64)

    def apply(self, fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
        if self._cached is not None:
            return fn(*self._cached)
        # each block converted inside its call: a loop variable would keep the previous block
        # alive while the next one is made (two blocks, 330 MB at 40,000 items)
        return np.concatenate([fn(*self._block(lo, hi)) for lo, hi in self.bounds])


@njit(cache=True, nogil=True)
def _count_draws(idx: np.ndarray, out: np.ndarray) -> None:
    for b in range(idx.shape[0]):
        for j in range(idx.shape[1]):
            out[b, idx[b, j]] += 1.0


def resample_counts(idx: np.ndarray) -> np.ndarray:
    """(B, n) how often each item is drawn in each resample (filled in place: no temporary of
    the resamples' size, which at 40,000 items is hundreds of MB)."""
    out = np.zeros(idx.shape, dtype=np.float64)
    if idx.size:
        _count_draws(idx, out)
    return out


def p_value(sample_stats: np.ndarray, real_difference: float) -> float:
    """sacrebleu's ``_compute_p_value``: (#{stat > real} + 1) / (N + 1)."""
    c = int(np.sum(sample_stats > real_difference))
    return (c + 1) / (len(sample_stats) + 1)


@njit(cache=True, nogil=True)
def _gathered_sums(stats: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``stats[idx[b]].sum(axis=0)`` for every row b: numpy adds the rows of a C-ordered block
    one after another, from the first row, and so does this loop (bit for bit)."""
    rows, n = idx.shape
    k = stats.shape[1]
    out = np.empty((rows, k), dtype=np.float64)
    for b in range(rows):
        for c in range(k):
            out[b, c] = stats[idx[b, 0], c]
        for j in range(1, n):
            row = idx[b, j]
            for c in range(k):
                out[b, c] += stats[row, c]
    return out


@njit(cache=True, nogil=True)
def _masked_sums(
    keep_t: np.ndarray, base: np.ndarray, other: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``np.where(m[:, None], base, other).sum(axis=0)`` and the same with the two swapped, for
    every mask m (the columns of ``keep_t``, items x trials), summed in numpy's order: row after
    row, from the first. Results are (k, trials); the trials are the inner, vectorised loop."""
    n, trials = keep_t.shape
    k = base.shape[1]
    a = np.empty((k, trials), dtype=np.float64)
    b = np.empty((k, trials), dtype=np.float64)
    for c in range(k):
        x, y = base[0, c], other[0, c]
        for t in range(trials):
            keep = keep_t[0, t]
            a[c, t] = x if keep else y
            b[c, t] = y if keep else x
    for i in range(1, n):
        for c in range(k):
            x, y = base[i, c], other[i, c]
            for t in range(trials):
                keep = keep_t[i, t]
                a[c, t] += x if keep else y
                b[c, t] += y if keep else x
    return a, b


def paired_bs_p(res_a: np.ndarray, res_b: np.ndarray, real_a: float, real_b: float) -> float:
    """Paired bootstrap p-value from two systems' scores on the same resamples."""
    if not (math.isfinite(real_a) and math.isfinite(real_b)):
        return float("nan")
    diff = abs(float(real_a) - float(real_b))  # a Python float, as in sacrebleu
    sample_diffs = np.abs(res_b - res_a)
    return p_value(sample_diffs - sample_diffs.mean(), diff)


class PairedScores(ABC):
    """The scores of several systems on the same items, and how they are resampled: from
    sufficient statistics (:class:`StatsScores`) or from segment scores (:class:`MeanScores`)."""

    @abstractmethod
    def point(self, system: str) -> float:
        """The system's score on all items."""

    @abstractmethod
    def bootstrap(self, system: str, idx: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """The system's score on each resample: ``idx`` from :func:`bootstrap_indices`,
        ``counts`` its :func:`resample_counts`."""

    def ar(self, base: str, system: str, masks: ArMasks) -> float:
        """Approximate-randomization p-value of ``system`` against ``base``."""
        return self.ar_all(base, [system], masks)[system]

    def ar_all(self, base: str, systems: list[str], masks: ArMasks) -> dict[str, float]:
        """:meth:`ar` of every system in ``systems`` against ``base`` (NaN where a score is not
        finite)."""
        out = dict.fromkeys(systems, float("nan"))
        for s, stats in self.ar_stats(base, systems, masks).items():
            out[s] = p_value(stats, self.ar_difference(base, s))
        return out

    def ar_difference(self, base: str, system: str) -> float:
        """The observed difference the randomized ones are compared with."""
        return abs(self.point(base) - self.point(system))

    @abstractmethod
    def ar_stats(self, base: str, systems: list[str], masks: ArMasks) -> dict[str, np.ndarray]:
        """The randomized differences of every system of ``systems`` whose score and the base's
        are finite, one per mask (row of ``masks``): the trials are independent, so the masks
        may come a block of rows at a time (:func:`ar_blocks`) and the p-value is
        :func:`p_value` of the blocks' differences together."""

    def _testable(self, base: str, systems: list[str]) -> list[str]:
        if not math.isfinite(self.point(base)):
            return []
        return [s for s in systems if math.isfinite(self.point(s))]


class MeanScores(PairedScores):
    """Scores that are the mean of each system's finite segment scores."""

    def __init__(self, values: Mapping[str, np.ndarray]) -> None:
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

    def ar_stats(self, base: str, systems: list[str], masks: ArMasks) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
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
                out[s] = np.abs(num_a / den_a - num_b / den_b)
        return out


class StatsScores(PairedScores):
    """A corpus-level score from per-segment sufficient statistics (one row per item).

    ``fn`` scores many summed-statistics rows at once (bit-identical to the metric's own corpus
    score); without it, ``corpus`` scores each resampled or shuffled set of rows on its own, for
    a metric whose corpus score need not be a function of summed statistics. ``sums`` (with
    ``corpus``) is for a corpus score that IS a function of the float64 sum of the rows taken in
    row order (``stats.sum(axis=0)``): it scores many such sums at once, equal to ``corpus`` of
    the rows summed, so resamples and shuffles are summed by compiled loops in that order.
    """

    def __init__(
        self,
        stats: Mapping[str, np.ndarray],
        fn: BatchedCorpusFn | None,
        corpus: CorpusFn | None = None,
        sums: BatchedCorpusFn | None = None,
    ) -> None:
        if fn is None and corpus is None:
            raise ValueError("StatsScores needs a batched corpus function or a corpus function")
        self.sums = sums if fn is None else None
        self.stats = {s: np.ascontiguousarray(v, dtype=np.float64) for s, v in stats.items()}
        # integer statistics (BLEU, chrF, single-reference TER) sum exactly in any order, so the
        # resampled and shuffled sums can be taken as matrix products instead of sacrebleu's
        # gathers without changing a bit
        self.integer = all(np.array_equal(v, np.round(v)) for v in self.stats.values())
        self.fn = fn
        self.corpus = corpus
        self._point: dict[str, float] = {}

    def _generic(self, stats: np.ndarray) -> float:
        assert self.corpus is not None
        return float(self.corpus(stats))

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
            if self.sums is not None and len(st) and idx.shape[1]:
                return np.asarray(self.sums(_gathered_sums(st, idx)), dtype=np.float64)
            return np.array([self._generic(st[row]) for row in idx])
        if self.integer and len(st) * float(np.abs(st).max(initial=0.0)) < 2**24:
            # every partial float32 sum is an integer below 2**24, hence exact: same numbers.
            # Summed by a compiled loop rather than ``counts @ st``: exact either way, and a
            # small product is slow where BLAS threads compete for the cores
            return self.fn(_gathered_sums(st, idx).astype(np.float32))
        # sacrebleu resamples float32 statistics and sums each resample on its own
        st32 = st.astype(np.float32)
        sums = np.empty((len(idx), st.shape[1]), dtype=np.float32)
        chunk = max(1, int(2**24 // max(1, st.size)))
        for start in range(0, len(idx), chunk):
            sums[start : start + chunk] = st32[idx[start : start + chunk]].sum(axis=1)
        return self.fn(sums)

    def _ar_one(self, base: str, system: str, masks: ArMasks) -> np.ndarray:
        """The randomized differences of one system whose statistics are not all integers, or
        that has no vectorised score."""
        bl, sy = self.stats[base], self.stats[system]
        if self.fn is None and self.sums is not None and len(bl) and masks.shape[0]:
            shuf_a, shuf_b = _masked_sums(masks.keep_t, bl, sy)
            return np.abs(self.sums(shuf_a.T) - self.sums(shuf_b.T))
        if self.fn is None:
            keep = masks.keep
            a = np.array([self._generic(np.where(m[:, None], bl, sy)) for m in keep])
            b = np.array([self._generic(np.where(m[:, None], sy, bl)) for m in keep])
            return np.abs(a - b)
        # sacrebleu: pos_sel @ bl + ~pos_sel @ sys with bool masks; float copies of the masks give
        # the same products (tested) and are converted once per block instead of once per call
        shuf_a = masks.apply(lambda k, w: k @ bl + w @ sy)
        shuf_b = masks.apply(lambda k, w: w @ bl + k @ sy)
        return np.abs(self.fn(shuf_a) - self.fn(shuf_b))

    def ar_stats(self, base: str, systems: list[str], masks: ArMasks) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        todo = self._testable(base, systems)
        if not todo:
            return out
        fn = self.fn
        if fn is None or not self.integer:
            return {s: self._ar_one(base, s, masks) for s in todo}
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
            out[s] = np.abs(fn(shuf_a) - fn(shuf_b))
        return out


def paired_bs_clusters(
    points: Mapping[str, float],
    resampled: Mapping[str, np.ndarray],
    higher_is_better: bool,
    alpha: float,
) -> tuple[dict[str, float], dict[str, float]]:
    """(rank, cluster) per system, 1 = best; systems without a finite score get neither.

    ``points`` are the systems' scores and ``resampled`` their scores on the same bootstrap
    resamples. The best remaining system and the systems after it in rank order, up to the first
    whose paired bootstrap p-value against it is < ``alpha``, form a cluster; repeated on the
    rest. Clusters are runs of consecutive ranks, so cluster numbers follow rank. "Best" follows
    ``higher_is_better``.
    """
    order = sorted(
        (s for s in points if math.isfinite(points[s])),
        key=lambda s: -points[s] if higher_is_better else points[s],
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
        size = 1
        for s in remaining[1:]:
            p = paired_bs_p(resampled[head], resampled[s], points[head], points[s])
            if p < alpha and points[s] != points[head]:
                break
            size += 1
        for s in remaining[:size]:
            cluster[s] = float(k)
        remaining = remaining[size:]
    return rank, cluster
