"""How a metric column's system-level scores are recomputed when the correlation's bootstrap
resamples items: from summed sufficient statistics (BLEU, chrF, TER, iBLEU ...), never by
rescoring text; as segment means where the corpus score is one."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from paraeval.correlation.bootstrap import counts, is_segment_mean
from paraeval.metrics.base import batched_corpus_fn

if TYPE_CHECKING:
    from paraeval.pipeline.stages.score import Scores

log = logging.getLogger(__name__)


def resampling_fns(
    fns: dict[str, Callable[[np.ndarray], np.ndarray]],
    metrics: Mapping[str, np.ndarray],
    system_metrics: Mapping[str, np.ndarray],
) -> dict[str, Callable[[np.ndarray], np.ndarray]]:
    """The system-level recomputation each column needs under item resampling: none for a
    corpus score that is the segment mean, else its function from sufficient statistics, else
    (no statistics: said in the log) the mean of the resampled segment scores."""
    out: dict[str, Callable[[np.ndarray], np.ndarray]] = {}
    for name, matrix in metrics.items():
        if name not in system_metrics or is_segment_mean(matrix, system_metrics[name]):
            continue
        if name in fns:
            out[name] = fns[name]
            continue
        log.info(
            "%s: system-level interval resamples segment means (no sufficient statistics)", name
        )

        def fn(idx: np.ndarray, matrix: np.ndarray = matrix) -> np.ndarray:
            # a system-only column (distinct-n ...) has no segment scores: NaN, without a
            # "mean of empty slice" warning per resample
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                return np.nanmean(matrix[:, np.asarray(idx)], axis=1)

        out[name] = fn
    return out


def system_metric_fns(
    scores: Scores, systems: Sequence[str], items: Sequence[str], only: Sequence[str] | None = None
) -> dict[str, Callable[[np.ndarray], np.ndarray]]:
    """Per column with sufficient statistics, a function from resampled item indices to the
    systems' corpus scores, recomputed from the statistics (never by rescoring text)."""
    position = {item: k for k, item in enumerate(items)}
    seg = scores.segments
    out: dict[str, Callable[[np.ndarray], np.ndarray]] = {}
    # per system: item position -> row of its statistics (-1: lacks the item), for all columns
    system_col = seg["system"].to_numpy()
    item_col = seg["item_id"].to_numpy()
    rows: list[np.ndarray] = []
    for s in systems:
        ids = item_col[system_col == s]
        pos = np.full(len(items), -1)
        pos[[position[i] for i in ids]] = np.arange(len(ids))
        rows.append(pos)
    for column, info in scores.columns.items():
        if only is not None and column not in only:
            continue
        metric = scores.metrics.get(info.metric)
        suffix = "_src" if column.endswith("_src") and info.group == "diversity" else ""
        key = f"{info.metric}{suffix}"
        per_system = [scores.stats.get((key, s)) for s in systems]
        if metric is None or any(st is None for st in per_system):
            continue
        fast = batched_corpus_fn(metric)
        stats = [np.asarray(st, dtype=float) for st in per_system]

        def fn(
            idx: np.ndarray,
            rows: list[np.ndarray] = rows,
            stats: list[np.ndarray] = stats,
            metric: Any = metric,
            column: str = column,
            fast: Any = fast,
        ) -> np.ndarray:
            if fast is not None:
                counts = np.bincount(np.asarray(idx), minlength=len(items)).astype(float)
                summed = []
                for pos, st in zip(rows, stats, strict=True):
                    ok = pos >= 0
                    summed.append(counts[ok] @ st[pos[ok]])
                return np.asarray(fast(np.stack(summed)), dtype=float)
            # any other metric gets the resampled rows themselves: its corpus score need not
            # be a function of summed statistics
            values = []
            for pos, st in zip(rows, stats, strict=True):
                picked = pos[np.asarray(idx)]
                picked = picked[picked >= 0]
                values.append(
                    metric.corpus_from_stats(st[picked])[column.removesuffix("_src")]
                    if len(picked)
                    else np.nan
                )
            return np.asarray(values, dtype=float)

        if fast is not None:
            fn.batch = _batched(rows, stats, fast, len(items))  # type: ignore[attr-defined]
        out[column] = fn
    return out


def _batched(
    rows: list[np.ndarray], stats: list[np.ndarray], fast: Any, n_items: int
) -> Callable[[np.ndarray], np.ndarray]:
    """A block of resamples at once: multiplicities (B, items) times the statistics give the
    summed statistics of every (resample, system), scored in one vectorised call."""

    # every system's statistics on one item axis (zeros where it lacks the item): one wide
    # product is several times faster than one per system
    width = stats[0].shape[1] if stats else 0
    by_system = np.zeros((n_items, len(stats), width))
    for s, (pos, st) in enumerate(zip(rows, stats, strict=True)):
        ok = pos >= 0
        by_system[ok, s] = st[pos[ok]]
    aligned = by_system.reshape(n_items, len(stats) * width)

    def batch(item_idx: np.ndarray) -> np.ndarray:
        # einsum, not BLAS: see FixedPairs.statistic on threads and oversubscription. The
        # statistics and multiplicities are integers, so the sums are exact in any order.
        summed = np.einsum("bi,ik->bk", counts(np.asarray(item_idx), n_items), aligned)
        b = summed.shape[0]
        flat = summed.reshape(b * len(stats), width)
        return np.asarray(fast(flat), dtype=float).reshape(b, len(stats))

    return batch
