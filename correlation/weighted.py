"""Coefficients of weighted samples, batched over leading axes: the forms the levels, the
bootstrap and the permutation tests use (``Coefficient.weighted``).

``x``, ``y`` and ``w`` broadcast to ``(..., n)``; ``w`` = 0 marks a missing value. Weights are
multiplicities: each result equals the coefficient of the sample in which value s appears ``w_s``
times. With few values (systems inside an item, systems at the system level) they are computed
from pair tensors ``(..., n, n)``; where the weights are integers, Kendall's pair sums and the
mid-ranks come from compiled passes (:mod:`correlation._pairs`) with the same numbers.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from paraeval.correlation._pairs import kendall_pair_sums, midrank_sums
from paraeval.correlation.values import Coefficient

MetricTies = Literal["discordant", "skip"]
METRIC_TIES: tuple[str, ...] = ("discordant", "skip")
MarginRule = Literal["at_least", "above"]
MARGIN_RULES: tuple[str, ...] = ("at_least", "above")
HumanTies = Literal["count", "skip"]
HUMAN_TIES: tuple[str, ...] = ("count", "skip")


def kendall_like_classes(
    dm: np.ndarray,
    dh: np.ndarray,
    *,
    metric_ties: MetricTies = "discordant",
    human_margin: float = 0.0,
    margin_rule: MarginRule = "above",
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


def pair_midranks(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Mid-ranks of the expanded sample (value s repeated w_s times), for every position. Integer
    weights take the compiled pass (:func:`_pairs.midrank_sums`): exact sums, the same numbers
    (comparisons with NaN are false in both forms)."""
    laid = _integer_rows((x,), w, finite=False)
    if laid is not None:
        shape, (xs,), ws = laid
        below, tied = (a.reshape(shape) for a in midrank_sums(xs, ws))
    else:
        less = (x[..., None, :] < x[..., :, None]).astype(float)
        equal = (x[..., None, :] == x[..., :, None]).astype(float)
        below = np.einsum("...st,...t->...s", less, w)
        tied = np.einsum("...st,...t->...s", equal, w)
    return below + (tied + 1.0) / 2.0


def _weighted_setup(x: np.ndarray, w: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Total weight and whether either support is constant, over the last axis."""
    total = w.sum(axis=-1)
    const = _support_constant(x, w) | _support_constant(y, w)
    return total, const


def weighted_pearson(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    total, const = _weighted_setup(x, w, y)
    r = _weighted_pearson(x, y, w)
    return np.where(const | (total < 3), np.nan, r)


def weighted_spearman(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    total, const = _weighted_setup(x, w, y)
    r = _weighted_pearson(pair_midranks(x, w), pair_midranks(y, w), w)
    return np.where(const | (total < 3), np.nan, r)


def weighted_accuracy(
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
    sums = integer_pair_sums(x, y, w) if variant == "b" else None
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


def integer_pair_sums(
    x: np.ndarray, y: np.ndarray, w: np.ndarray | float
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Kendall's pair sums by the compiled pass (:func:`_pairs.kendall_pair_sums`) where they are
    sums of exact integers (finite values, integer weights): the same numbers as the sums of
    the broadcast (rows, n, n) products, without them. None otherwise."""
    laid = _integer_rows((x, y), w, finite=True)
    if laid is None:
        return None
    shape, (xs, ys), ws = laid
    s, tied_x, tied_y = kendall_pair_sums(xs, ys, ws)
    return s.reshape(shape[:-1]), tied_x.reshape(shape[:-1]), tied_y.reshape(shape[:-1])


def weighted_kendall_b(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    return _weighted_kendall(x, y, w, "b")


def weighted_kendall_c(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    return _weighted_kendall(x, y, w, "c")


def weighted_kendall_like(
    x: np.ndarray, y: np.ndarray, w: np.ndarray, **settings: Any
) -> np.ndarray:
    c, d = pair_kendall_like_counts(x, y, w, **settings)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(c + d > 0, (c - d) / (c + d), np.nan)


def pair_kendall_like_counts(
    x: np.ndarray, y: np.ndarray, w: np.ndarray, **settings: Any
) -> tuple[np.ndarray, np.ndarray]:
    """Weighted concordant/discordant counts of the WMT Kendall-like statistic over the last axis.

    Same rules and ``settings`` as :func:`kendall_like_classes`. Weights are
    multiplicities: copies of one system are a pair tied on both sides, counted (as discordant)
    only where human ties are counted (``human_margin=0`` under ``"at_least"``).
    """
    x, y, w = _masked(x, y, w)
    ww = w[..., :, None] * w[..., None, :]
    conc, disc = kendall_like_classes(
        x[..., :, None] - x[..., None, :], y[..., :, None] - y[..., None, :], **settings
    )
    c = (ww * conc).sum(axis=(-2, -1)) / 2.0
    # the diagonal (each value against itself, w_s^2 ordered pairs) stands for w_s (w_s - 1)
    # copies' pairs: take the w_s self-pairs back out
    self_disc = np.diagonal(disc, axis1=-2, axis2=-1)
    d = ((ww * disc).sum(axis=(-2, -1)) - (w * self_disc).sum(axis=-1)) / 2.0
    return c, d


def pair_statistic(
    coef: Coefficient, x: np.ndarray, y: np.ndarray, w: np.ndarray | float
) -> np.ndarray:
    """``coefficient`` over the last axis of weighted samples; NaN where undefined.

    Weights are multiplicities: the result equals the coefficient of the sample in which value s
    appears ``w_s`` times. Non-finite values must carry weight 0. A coefficient without a
    ``weighted`` form is computed on every expanded sample in turn.
    """
    x, y, w = _masked(x, y, w)
    if coef.weighted is not None:
        return coef.weighted(x, y, w)
    return _expanded_statistic(coef, x, y, w)


def _masked(
    x: np.ndarray, y: np.ndarray, w: np.ndarray | float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Broadcast together; a non-finite value gets weight 0, and a value of weight 0 is 0."""
    x, y, w = np.broadcast_arrays(x, y, w)
    w = np.where(np.isfinite(x) & np.isfinite(y), w, 0.0)
    return np.where(w > 0, x, 0.0), np.where(w > 0, y, 0.0), w


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
