"""mt-metrics-eval's computations for one WMT24 language pair, re-expressed step by step (the
anchor of ``bench_mtme.py``: mt-metrics-eval cannot be installed here, its PyPI name is another
package's). What ``tasks.WMT24(['en-de']).Run()`` and ``TaskSetResults.AverageCorrMatrix``
compute, in the loop structure of its ``data.py``, ``stats.py``, ``tau_optimization.py``,
``pce.py`` and ``tasks.py``, so that the time is what that code spends. Its global ``np.random``
draws come from a ``RandomState`` passed in; its set iteration orders are sorted.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import glob
import itertools
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import scipy.stats

NO_TRANSLATION = "[No translation supplied]"
Scores = dict[str, list[Any]]  # system -> scores (None: none given)


# --------------------------------------------------------------------------- data.py
def read_text_file(filename: str) -> list[str | None]:
    """``_ReadTextFile``."""
    with open(filename, encoding="utf-8") as f:
        return [None if line.rstrip() == NO_TRANSLATION else line.rstrip() for line in f]


def read_score_file(filename: str) -> Scores:
    scores: Scores = collections.defaultdict(list)
    with open(filename, encoding="utf-8") as f:
        for line in f:
            sysname, score = line.split()
            scores[sysname].append(float(score) if score != "None" else None)
    return scores


@dataclasses.dataclass
class EvalSet:
    """The parts of ``data.EvalSet`` a WMT24 task reads."""

    src: list[str | None]
    refs: dict[str, list[str | None]]
    sys_outputs: dict[str, list[str | None]]
    scores: dict[str, dict[str, Scores]]  # level -> scorer -> system -> scores
    metric_names: set[str]

    def add_metric(self, name: str, level: str, scores: Scores) -> None:
        """``AddMetric``'s checks: known systems, one score per segment, no None, none missing."""
        expected = 1 if level == "sys" else len(self.src)
        for sys_name, values in scores.items():
            if sys_name not in self.sys_outputs or len(values) != expected or None in values:
                raise ValueError(f"bad {name}.{level} scores for {sys_name}")
        refs = parse_metric_name(name, set(self.refs))[1]
        if set(self.sys_outputs) - set(scores) - refs:
            raise ValueError(f"{name}.{level} is missing required scores")
        self.scores.setdefault(level, {})[name] = scores
        self.metric_names.add(name)


def parse_metric_name(name: str, ref_names: set[str]) -> tuple[str, set[str]]:
    basename, refs = name.rsplit("-", maxsplit=1)
    used = set(ref_names) if refs == "all" else set() if refs == "src" else set(refs.split("."))
    return basename, used


def read_eval_set(root: str, lp: str) -> EvalSet:
    """``EvalSet._ReadDataset`` with ``read_stored_metric_scores=True``."""
    src = read_text_file(os.path.join(root, "sources", f"{lp}.txt"))
    refs = {
        f.split(".")[-2]: read_text_file(f)
        for f in glob.glob(os.path.join(root, "references", f"{lp}.*.*"))
    }
    outputs = {
        os.path.splitext(os.path.basename(f))[0]: read_text_file(f)
        for f in glob.glob(os.path.join(root, "system-outputs", lp, "*.*"))
    }
    evs = EvalSet(src, refs, outputs, {}, set())
    for f in sorted(glob.glob(os.path.join(root, "human-scores", f"{lp}.*.score"))):
        _, scorer, level, _ = os.path.basename(f).rsplit(".", maxsplit=3)
        evs.scores.setdefault(level, {})[scorer] = read_score_file(f)
    for f in sorted(glob.glob(os.path.join(root, "metric-scores", lp, "*.score"))):
        name, level, _ = os.path.basename(f).rsplit(".", maxsplit=2)
        evs.add_metric(name, level, read_score_file(f))
    return evs


@dataclasses.dataclass
class Correlation:
    """``stats.Correlation``: gold and metric vectors packed system by system."""

    num_sys: int
    gold_scores: list[Any]
    metric_scores: list[Any]


def get_correlations(evs: EvalSet, level: str, main_refs: set[str], gold: str) -> dict:
    """``GetCorrelations`` (no domain, no sampling, no human systems, full metric names)."""
    sys_names = set(evs.sys_outputs) - main_refs - set(evs.refs)
    gold_scores = {
        s: v for s, v in evs.scores[level][gold].items() if v and any(x is not None for x in v)
    }
    systems = sorted(sys_names.intersection(gold_scores))
    out = {}
    for name in sorted(evs.metric_names):
        if not parse_metric_name(name, set(evs.refs))[1].issubset(main_refs):
            continue
        scores = evs.scores.get(level, {}).get(name)
        if not scores:
            continue
        g = [x for s in systems for x in gold_scores[s]]
        m = [x for s in systems for x in scores[s]]
        out[name] = Correlation(len(systems), g, m)
    return out


def assign_ranks(sig_matrix: np.ndarray, pval: float) -> list[int]:
    """``AssignRanks``."""
    n = sig_matrix.shape[0]
    ranks, current_rank, start_index = [0] * n, 1, 0
    for i in range(n):
        if any(sig_matrix[:, i][start_index:i] <= pval):
            current_rank += 1
            start_index = i
        ranks[i] = current_rank
    return ranks


# --------------------------------------------------------------------------- stats.py
def reshape(vector: Any, num_sys: int, average_by: str) -> np.ndarray:
    """``_Reshape``: one row ('none'), a row per system ('sys') or per item ('item')."""
    if average_by == "none":
        return np.asarray(vector).reshape(1, -1)
    rows = np.asarray(vector).reshape(num_sys, -1)
    return rows if average_by == "sys" else rows.transpose()


def filter_gold_nones(gold: Any, model: Any) -> tuple[Any, Any]:
    filt = [(v1, v2) for v1, v2 in zip(gold, model, strict=True) if v1 is not None]
    return tuple(zip(*filt, strict=True)) if filt else ([], [])  # type: ignore[return-value]


def reshape_and_filter(c1: Correlation, c2: Correlation, average_by: str) -> tuple:
    """``_ReshapeAndFilter``: groups (rows, columns or all), gold None left out."""
    gold = reshape(c1.gold_scores, c1.num_sys, average_by)
    s1 = reshape(c1.metric_scores, c1.num_sys, average_by)
    s2 = reshape(c2.metric_scores, c2.num_sys, average_by)
    lens, gf, f1, f2 = [], [], [], []
    okay = gold != None  # noqa: E711 (an elementwise test of an object array)
    for ok, g, a, b in zip(okay, gold, s1, s2, strict=True):
        if ok.sum():
            lens.append(int(ok.sum()))
            gf.extend(g[ok])
            f1.extend(a[ok])
            f2.extend(b[ok])
    return lens, np.asarray(gf), np.asarray(f1), np.asarray(f2)


class TauStats:
    """``tau_optimization.TauSufficientStats`` (con, dis, ties human/metric/both)."""

    def __init__(self, con: int = 0, dis: int = 0, th: int = 0, tm: int = 0, tb: int = 0):
        self.con, self.dis, self.th, self.tm, self.tb = con, dis, th, tm, tb
        self.num_pairs = con + dis + th + tm + tb

    def acc_23(self) -> float:
        return (self.con + self.tb) / self.num_pairs

    def add(self, o: TauStats, sign: int) -> None:
        self.con += sign * o.con
        self.dis += sign * o.dis
        self.th += sign * o.th
        self.tm += sign * o.tm
        self.tb += sign * o.tb
        self.num_pairs += sign * o.num_pairs


class RankedPair:
    """``tau_optimization._RankedPair``."""

    def __init__(self, h1: float, h2: float, m1: float, m2: float, row: int):
        self.row, self.diff = row, abs(m1 - m2)
        if h1 == h2 and m1 == m2:
            self.stats = TauStats(tb=1)
        elif h1 == h2:
            self.stats = TauStats(th=1)
        elif m1 == m2:
            self.stats = TauStats(tm=1)
        elif (h1 > h2 and m1 > m2) or (h1 < h2 and m1 < m2):
            self.stats = TauStats(con=1)
        else:
            self.stats = TauStats(dis=1)
        self.tie_stats = TauStats(tb=1) if h1 == h2 else TauStats(tm=1)


def tau_optimization(metric: np.ndarray, human: np.ndarray) -> tuple[float, float]:
    """``tau_optimization.tau_optimization`` with ``acc_23``, sample_rate 1: (tau, threshold)."""
    pairs, rows = [], set()
    for row, (r1, r2) in enumerate(zip(np.array(human), np.array(metric), strict=True)):
        filt = [
            (v1, v2) for v1, v2 in zip(r1, r2, strict=True) if v1 is not None and v2 is not None
        ]
        if not filt:
            continue
        h, m = zip(*filt, strict=True)
        for i in range(len(h)):
            for j in range(i + 1, len(h)):
                pairs.append(RankedPair(h[i], h[j], m[i], m[j], row))
                rows.add(row)
    row_stats = {row: TauStats() for row in rows}
    for pair in pairs:
        row_stats[pair.row].add(pair.stats, 1)
    thresholds = [0.0]
    total = sum(s.acc_23() for s in row_stats.values())
    taus = [total / len(rows)]
    pairs.sort(key=lambda p: p.diff)
    for pair in pairs:
        stats = row_stats[pair.row]
        total -= stats.acc_23()
        stats.add(pair.stats, -1)
        stats.add(pair.tie_stats, 1)
        total += stats.acc_23()
        if thresholds[-1] == pair.diff:
            taus[-1] = total / len(rows)
        else:
            thresholds.append(pair.diff)
            taus.append(total / len(rows))
    best = int(np.nanargmax(taus))
    return taus[best], thresholds[best]


def kendall_with_ties_opt(gold: Any, metric: Any, num_sys: int, average_by: str = "item"):
    """``KendallWithTiesOpt`` (variant acc23, sample_rate 1): (tau, epsilon)."""
    return tau_optimization(
        reshape(metric, num_sys, average_by), reshape(gold, num_sys, average_by)
    )


def pairwise_p_values(seg_scores: np.ndarray, num_permutations: int = 1000, seed: int = 4):
    """``pce.compute_pairwise_p_values``."""
    num_systems, num_segments = seg_scores.shape
    rng = np.random.default_rng(seed)
    signs = rng.random(size=(num_permutations, num_segments), dtype=np.float32)
    np.rint(signs, out=signs, casting="same_kind")
    signs *= 2.0
    signs -= 1.0
    seg_scores = seg_scores.astype(np.float32)
    sys_scores = np.sum(seg_scores, axis=1)
    partial = np.matmul(signs, seg_scores.T)
    p_vals = np.empty((num_systems, num_systems)) * np.nan
    for ii in range(num_systems):
        for jj in range(ii + 1, num_systems):
            null_delta = partial[:, ii] - partial[:, jj]
            p_vals[ii, jj] = (
                np.sum(null_delta >= sys_scores[ii] - sys_scores[jj]) / num_permutations
            )
    return p_vals


def pairwise_confidence_error(gold: Any, metric: Any, num_sys: int, filter_nones: bool = False):
    """``PairwiseConfidenceError``: 1 - PCE of the two (systems x segments) matrices."""
    if filter_nones:
        gold, metric = filter_gold_nones(gold, metric)
    g = pairwise_p_values(reshape(gold, num_sys, "sys"))
    m = pairwise_p_values(reshape(metric, num_sys, "sys"))
    upper = np.triu_indices(g.shape[0], 1)
    return (1.0 - np.mean(np.abs(g - m)[upper]),)


def pce_wrapper(corrs: dict[str, Correlation]) -> Callable:
    """``CompareMetricsWithPairwiseConfidenceError``'s correlation function."""
    first = next(iter(corrs.values()))
    nones = first.gold_scores.count(None) > 0
    return functools.partial(pairwise_confidence_error, num_sys=first.num_sys, filter_nones=nones)


def nan_average(values: list[float]) -> float:
    """The permutation tests' average of group values, NaN left out (0 when none is left)."""
    vals = np.asarray(values)
    vals = vals[~np.isnan(vals)]
    return float(np.average(vals)) if len(vals) else 0.0


@dataclasses.dataclass
class EarlyStop:
    """``PermutationSigDiffParams`` as a WMT24 task sets it."""

    block_size: int = 100
    early_min: float = 0.02
    early_max: float = 0.5


def permutation_sig_diff(
    c1: Correlation,
    c2: Correlation,
    corr_fcn: Callable,
    rs: np.random.RandomState,
    k: int = 1000,
    params: EarlyStop | None = None,
) -> tuple[float, float, int, list]:
    """``PermutationSigDiff`` (average_by 'none', as the pce task calls it)."""
    params = params or EarlyStop()
    lens, gold, ms1, ms2 = reshape_and_filter(c1, c2, "none")
    ms1, ms2 = scipy.stats.zscore(ms1), scipy.stats.zscore(ms2)
    starts = np.r_[0, np.cumsum(lens)]
    bounds = list(itertools.pairwise(starts))

    def corr(ms: np.ndarray) -> float:
        return nan_average([corr_fcn(gold[b:e], ms[b:e])[0] for b, e in bounds])

    draws: list = []
    delta = corr(ms2) - corr(ms1)
    i, count = 1, 0
    for i in range(1, k + 1):
        w1 = rs.binomial(1, 0.5, len(ms1))
        w2 = 1 - w1
        a, b = corr(w1 * ms1 + w2 * ms2), corr(w2 * ms1 + w1 * ms2)
        draws.append((b, a))
        count += b - a >= delta
        if i % params.block_size == 0:
            pval = count / i
            if pval < params.early_min or pval > params.early_max:
                break
    return count / i, delta, i, draws


class KendallPreproc:
    """``KendallPreproc``: the gold side's pair matrices (and its Fenwick tree data)."""

    def __init__(self, y: np.ndarray):
        self.y = np.asarray(y)
        y1, y2 = np.meshgrid(self.y, self.y.T)
        self.y_diffs = y1 - y2
        self.y_is_tie = self.y_diffs == 0.0
        self.perm = np.argsort(self.y)
        y_sorted = self.y[self.perm]
        self.y_cumsum = np.r_[True, y_sorted[1:] != y_sorted[:-1]].cumsum(dtype=np.intp)
        _, counts = np.unique(np.asarray(y_sorted), return_counts=True)
        self.ytie = sum(n * (n - 1) // 2 for n in counts)


class PairwiseDiffs:
    """``PairwiseDiffs``: metric differences, those within epsilon set to ties."""

    def __init__(self, x: np.ndarray | None = None, epsilon: float = 0.0):
        if x is not None:
            x = np.asarray(x)
            x1, x2 = np.meshgrid(x, x.T)
            self.x_diffs = x1 - x2
            self.x_is_tie = np.abs(self.x_diffs) <= epsilon
            self.x_diffs[self.x_is_tie] = 0.0

    def combine(self, other: PairwiseDiffs, w1: np.ndarray, w2: np.ndarray) -> PairwiseDiffs:
        ret = PairwiseDiffs()
        ret.x_diffs = w1 * self.x_diffs + w2 * other.x_diffs
        ret.x_is_tie = w1 * self.x_is_tie + w2 * other.x_is_tie
        return ret


def acc23_matrix(gold: KendallPreproc, metric: PairwiseDiffs) -> float:
    """``KendallVariants(None, None, 'acc23', preproc, 0, metric_preproc)``: the matrix path."""
    x_diffs, x_is_tie = metric.x_diffs, metric.x_is_tie
    y_diffs, y_is_tie = gold.y_diffs, gold.y_is_tie
    n = len(gold.y)
    num_pairs = n * (n - 1) // 2
    con = int(((x_diffs > 0) & (y_diffs > 0) | (x_diffs < 0) & (y_diffs < 0)).sum() / 2)
    t_x = int((x_is_tie & ~y_is_tie).sum() / 2)
    t_y = int((~x_is_tie & y_is_tie).sum() / 2)
    t_xy = int(((x_is_tie & y_is_tie).sum() - n) / 2)
    dis = num_pairs - (con + t_x + t_y + t_xy)
    return (con + t_xy) / (con + dis + t_x + t_y + t_xy)


def pairwise_permutation_sig_diff(
    c1: Correlation,
    c2: Correlation,
    rs: np.random.RandomState,
    k: int = 1000,
    params: EarlyStop | None = None,
    epsilon1: float | None = None,
    epsilon2: float | None = None,
) -> tuple[float, float, int, list]:
    """``PairwisePermutationSigDiff`` (acc23, average_by 'item', sample_rate 1)."""
    params = params or EarlyStop()
    if epsilon1 is None:
        epsilon1 = kendall_with_ties_opt(c1.gold_scores, c1.metric_scores, c1.num_sys)[1]
    if epsilon2 is None:
        epsilon2 = kendall_with_ties_opt(c2.gold_scores, c2.metric_scores, c2.num_sys)[1]
    lens, gold, ms1, ms2 = reshape_and_filter(c1, c2, "item")
    starts = np.r_[0, np.cumsum(lens)]
    bounds = list(itertools.pairwise(starts))
    pg = [KendallPreproc(gold[b:e]) for b, e in bounds]
    p1 = [PairwiseDiffs(ms1[b:e], epsilon1) for b, e in bounds]
    p2 = [PairwiseDiffs(ms2[b:e], epsilon2) for b, e in bounds]

    def corr(preprocs: list[PairwiseDiffs]) -> float:
        return nan_average([acc23_matrix(g, m) for g, m in zip(pg, preprocs, strict=True)])

    draws: list = []
    delta = corr(p2) - corr(p1)
    i, count = 1, 0
    for i in range(1, k + 1):
        h1, h2 = [], []
        for n, m1, m2 in zip(lens, p1, p2, strict=True):
            w1 = np.triu(rs.binomial(1, 0.5, (n, n)))
            w1 = w1 + w1.T
            w2 = 1 - w1
            h1.append(m1.combine(m2, w1, w2))
            h2.append(m2.combine(m1, w1, w2))
        a, b = corr(h1), corr(h2)
        draws.append((b, a))
        if b - a >= delta:
            count += 1
            # mt-metrics-eval checks only here, after a draw that counts
            if i % params.block_size == 0:
                pval = count / i
                if pval < params.early_min or pval > params.early_max:
                    break
    return count / i, delta, i, draws


# --------------------------------------------------------------------------- tasks.py
@dataclasses.dataclass
class TaskResult:
    """``TaskResults``: values best first with cluster ranks, p-values, draws of each pair."""

    corr_ranks: dict[str, list]
    matrix: np.ndarray
    draws_index: np.ndarray
    draws_list: np.ndarray
    range: tuple[float, float] = (0.0, 1.0)  # pce and acc23 are accuracies

    def draws(self, m1: str, m2: str) -> np.ndarray:
        metrics = list(self.corr_ranks)
        i, j = metrics.index(m1), metrics.index(m2)
        if i < j:
            return self.draws_list[self.draws_index[i, j] : self.draws_index[j, i]]
        return self.draws_list[self.draws_index[j, i] : self.draws_index[i, j]][:, [1, 0]]


def compare_metrics(
    values: dict[str, float],
    pair_test: Callable[[str, str], tuple[float, list]],
    pval: float = 0.05,
) -> TaskResult:
    """``CompareMetrics*`` and ``ComputeSigMatrix``: ``pair_test(better, worse)`` gives the
    p-value and draws of a pair (mt-metrics-eval's test of metric2 against metric1)."""
    ranked = dict(sorted(((m, [v, 0]) for m, v in values.items()), key=lambda x: (-x[1][0], x[0])))
    n, metrics = len(ranked), list(ranked)
    sig, index, draws_list = np.zeros((n, n)), np.zeros((n, n), dtype=np.int32), []
    for i in range(n):
        for j in range(i + 1, n):
            p, draws = pair_test(metrics[i], metrics[j])
            sig[i, j] = p
            index[i, j] = len(draws_list)
            index[j, i] = len(draws_list) + len(draws)
            draws_list.extend(draws)
    for m, r in zip(metrics, assign_ranks(sig, pval), strict=True):
        ranked[m][1] = r
    return TaskResult(ranked, sig, index, np.asarray(draws_list))


def average_corrs(results: Sequence[TaskResult], weights: Sequence[float]) -> dict[str, float]:
    """``TaskSetResults.AverageCorrs``: each value mapped to [0, 1] by its range, weighted."""
    corrs: dict[str, list[float]] = {}
    for res, weight in zip(results, weights, strict=True):
        b, e = res.range
        for metric, (value, _) in res.corr_ranks.items():
            corrs.setdefault(metric, []).append((value - b) / (e - b) * weight)
    full = {m: sum(v) for m, v in corrs.items() if len(v) == len(results)}
    return dict(sorted(full.items(), key=lambda x: -x[1]))


def average_corr_matrix(
    results: Sequence[TaskResult], weights: Sequence[float] | None = None, pval: float = 0.05
) -> tuple[dict[str, tuple[float, int]], np.ndarray]:
    """``TaskSetResults.AverageCorrMatrix``: overall values, p-values from the summed per-task
    null draws (shorter lists tiled), clusters by ``AssignRanks``."""
    weights = weights or [1 / len(results)] * len(results)
    avg = average_corrs(results, weights)
    n, metrics = len(avg), list(avg)
    sig = np.zeros((n, n))
    for i in range(n):
        for j in range(i + 1, n):
            m1, m2 = metrics[i], metrics[j]
            max_draws = max(len(r.draws(m1, m2)) for r in results)
            per_task = np.zeros((len(results), max_draws))
            for t, r in enumerate(results):
                b, e = r.range
                d = weights[t] * (r.draws(m1, m2) - b) / (e - b)
                d = d[:, 0] - d[:, 1]
                per_task[t] = np.tile(d, int(np.ceil(max_draws / len(d))))[:max_draws]
            sig[i, j] = np.mean(np.sum(per_task, axis=0) >= avg[m1] - avg[m2])
    ranks = assign_ranks(sig, pval)
    return {m: (c, r) for (m, c), r in zip(avg.items(), ranks, strict=True)}, sig
