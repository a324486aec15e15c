"""Correlate stage: every column against every human aspect; the cache skips known columns."""

from __future__ import annotations

import copy
import json
import logging
import math
import os
import warnings
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import xxhash

from paraeval.correlation import CORRELATION_COLUMNS, correlation_table, significance_table
from paraeval.correlation.bootstrap import is_segment_mean
from paraeval.correlation.resamples import counts
from paraeval.correlation.table import draw_table_resamples
from paraeval.correlation.values import row_nanmean
from paraeval.metrics.base import batched_corpus_fn
from paraeval.pipeline.config.settings import CorrelationSettings
from paraeval.pipeline.data.validate import human_columns, in_order
from paraeval.pipeline.stages.limits import NO_LIMIT, Limit

if TYPE_CHECKING:
    from paraeval.pipeline.stages.aggregate import Aggregated
    from paraeval.pipeline.stages.cache import CorrelationRows
    from paraeval.pipeline.stages.score import Scores

TABLE_WORKERS = min(4, os.cpu_count() or 1)  # the table's threads, as memory_bounds counts

log = logging.getLogger(__name__)


def to_matrices(
    segments: pd.DataFrame, columns: Sequence[str], systems: Sequence[str], items: Sequence[str]
) -> dict[str, np.ndarray]:
    """Each column as a systems x items matrix, NaN where a system has no row for an item."""
    rows = pd.Index(list(systems)).get_indexer(pd.Index(segments["system"]))
    cols = pd.Index(list(items)).get_indexer(pd.Index(segments["item_id"]))
    keep = (rows >= 0) & (cols >= 0)
    cells = rows[keep] * len(items) + cols[keep]
    if np.unique(cells).size != cells.size:
        # two rows for one (system, item): pandas' own error names the duplicate
        segments.pivot(index="system", columns="item_id", values=columns[0])
    out = {}
    for column in columns:
        flat = np.full(len(systems) * len(items), np.nan)
        flat[cells] = segments[column].to_numpy(dtype=float, na_value=np.nan)[keep]
        out[column] = flat.reshape(len(systems), len(items))
    return out


def correlated_columns(agg: Aggregated) -> list[str]:
    return [c for c in agg.columns if c in agg.segments.columns]


def _table_args(
    agg: Aggregated, cfg: CorrelationSettings, rng: np.random.Generator, items: list[str]
) -> dict[str, Any]:
    """The arguments both tables of the correlation package take."""
    seg = agg.segments
    aspects = human_columns(seg)
    systems = list(agg.systems.index)
    cols = correlated_columns(agg)
    matrices = to_matrices(seg, [*cols, *aspects], systems, items)
    by_system = agg.systems.reindex(systems).drop(columns=[*agg.given])  # see system_view
    return {
        "metrics": {c: matrices[c] for c in cols},
        "humans": {a: matrices[a] for a in aspects},
        "system_metrics": {c: by_system[c].to_numpy(dtype=float) for c in cols if c in by_system},
        "item_nan": cfg.item_nan,
        "item_average": cfg.item_average,
        "rng": rng,
    }


def system_view(agg: Aggregated, args: Mapping[str, Any]) -> dict[str, Any]:
    """``args`` on (systems x 1) matrices of system scores, given where given: a given score
    has no items, so resampling them draws systems only."""

    def column(name: str, matrix: np.ndarray) -> np.ndarray:
        given = agg.systems[name] if name in agg.given else args["system_metrics"].get(name)
        return (row_nanmean(matrix) if given is None else np.asarray(given, dtype=float))[:, None]

    metrics = {c: column(c, m) for c, m in args["metrics"].items()}
    humans = {a: column(a, h) for a, h in args["humans"].items()}
    return {**args, "metrics": metrics, "humans": humans, "system_metrics": {}}


def view_settings(cfg: CorrelationSettings) -> dict[str, Any]:
    """Matrix coefficients (soft_pairwise_accuracy) keep the segment matrices."""
    coefficients = [c for c in cfg.coefficients if c.matrix_system is None]
    levels = [lv for lv in cfg.levels if lv == "system"]
    return {"levels": levels, "coefficients": coefficients, "unit": "systems"}


def _report(out: pd.DataFrame, n_systems: int, warn_below_n: int) -> None:
    """One warning per kind of undefined or fragile correlation: a NaN is never a surprise."""
    if out.empty:
        return
    if n_systems < 2 and (out["level"] == "system").any():
        log.warning(
            "system-level correlation needs at least 2 systems, the data has %d: its rows in "
            "correlations.csv are NaN; the segment and item levels are computed",
            n_systems,
        )
    # with fewer than 2 systems, the system level is already said above
    nan = out[out["value"].isna() & ((out["level"] != "system") | (n_systems >= 2))]
    if len(nan):
        log.warning(
            "%d of %d correlations are undefined (NaN: constant scores or too few points), e.g. "
            "%s vs %s at %s level (n=%s, n_dropped=%s); see n and n_dropped in correlations.csv",
            len(nan),
            len(out),
            *nan.iloc[0][["metric", "aspect", "level", "n", "n_dropped"]],
        )
    dropped = out[(out["level"] == "item") & out["value"].notna() & (out["n_dropped"] > 0)]
    if len(dropped):
        first = dropped.iloc[0]
        log.warning(
            "item level: items whose own correlation is undefined (constant scores across "
            "systems) were left out, e.g. %d of %d items for %s vs %s; see n_dropped in "
            "correlations.csv",
            *(int(first["n_dropped"]), int(first["n"]) + int(first["n_dropped"])),
            *(first["metric"], first["aspect"]),
        )
    sys_rows = out[(out["level"] == "system") & out["value"].notna()]
    if not sys_rows.empty and (n := int(sys_rows["n"].min())) < warn_below_n:
        log.warning(
            "system-level correlations rest on n=%d systems (fewer than %d): treat them as "
            "anecdotal; p-values for n <= 8 are exact permutation p-values, see n and p_value in "
            "correlations.csv",
            n,
            warn_below_n,
        )


def correlate(
    agg: Aggregated,
    cfg: CorrelationSettings,
    rng: np.random.Generator,
    scores: Scores | None = None,
    rows: CorrelationRows | None = None,
    limit: Limit = NO_LIMIT,
) -> pd.DataFrame:
    """The rows of ``correlations.csv``; ``rows``: the run's cache of correlation rows."""
    if rows is not None:
        out = _correlate_cached(agg, cfg, rng, scores, rows, limit)
    else:
        out = _correlate(agg, cfg, rng, scores, limit)
    _report(out, len(agg.systems.index), int(cfg.warn_below_n))
    return out


def _correlate(
    agg: Aggregated,
    cfg: CorrelationSettings,
    rng: np.random.Generator,
    scores: Scores | None,
    limit: Limit = NO_LIMIT,
) -> pd.DataFrame:
    if not human_columns(agg.segments):
        return pd.DataFrame(columns=list(CORRELATION_COLUMNS))
    items = in_order(agg.segments["item_id"])
    args = _table_args(agg, cfg, rng, items)
    metrics = args["metrics"]
    fns = system_metric_fns(scores, list(agg.systems.index), items, list(metrics)) if scores else {}
    opts = {"levels": cfg.levels, "coefficients": cfg.coefficients, "unit": cfg.unit, "ci": cfg.ci}
    opts |= {"interval": cfg.interval, "confidence": cfg.confidence}
    fns = resampling_fns(fns, metrics, args["system_metrics"])
    table = partial(correlation_table, **args, **opts, system_metric_fns=fns)
    with ThreadPoolExecutor(max_workers=TABLE_WORKERS) as pool:
        if metrics and cfg.ci and cfg.interval == "bootstrap":
            what = ("the correlation table's bootstrap", "correlation.n_resamples", cfg.n_resamples)
            limit.check(*what, _pilot(table, args, 1, map=pool.map), 1 / len(metrics))
        rows = table(n_resamples=cfg.n_resamples, map=limit.counted(pool.map, "bootstrap"))
        if agg.given:  # the system level of a pair with a given score: from the system view
            view_opts = opts | view_settings(cfg) | {"n_resamples": cfg.n_resamples}
            view = correlation_table(**system_view(agg, args), **view_opts)
            by = {(r["metric"], r["aspect"], r["coefficient"]): r for r in view}
            for i, r in enumerate(rows):
                if r["level"] == "system" and agg.given & {r["metric"], r["aspect"]}:
                    rows[i] = by.get((r["metric"], r["aspect"], r["coefficient"]), r)
    out = pd.DataFrame(rows)
    extra = [c for c in out.columns if c not in CORRELATION_COLUMNS]
    return out.reindex(columns=[*CORRELATION_COLUMNS, *extra])


# the version of the row cache's keys: bumped when what a key covers changes
ROWS_FORMAT = "paraeval-correlation-rows/1"


def _frame_bytes(frame: pd.DataFrame) -> bytes:
    return bytes(pd.util.hash_pandas_object(frame, index=False).to_numpy().tobytes())


def row_keys(
    agg: Aggregated,
    cfg: CorrelationSettings,
    rng: np.random.Generator,
    scores: Scores | None,
    code: str,
) -> dict[str, str]:
    """The row cache's key of each correlated column: everything its rows are computed from."""
    seg = agg.segments
    # xxh3-128, not blake2b: fast, and a local cache needs no protection against made collisions
    shared = xxhash.xxh3_128()
    systems = [str(s) for s in agg.systems.index]
    for part in ([ROWS_FORMAT, code], cfg.node, rng.bit_generator.state, systems):
        shared.update(json.dumps(part, sort_keys=True, default=str).encode())
    shared.update(_frame_bytes(seg[["item_id", "system", *human_columns(seg)]]))
    if agg.given:
        shared.update(agg.systems[sorted(agg.given)].to_numpy(dtype=float).tobytes())
    keys: dict[str, str] = {}
    for col in correlated_columns(agg):
        info = agg.columns[col]
        h = shared.copy()
        h.update(json.dumps([col, info.metric, info.signature, info.higher_is_better]).encode())
        h.update(_frame_bytes(seg[[col]]))
        if col in agg.systems.columns:
            h.update(np.asarray(agg.systems[col], dtype=float).tobytes())
        suffix = "_src" if col.endswith("_src") else ""
        for system in agg.systems.index:
            st = scores.stats.get((f"{info.metric}{suffix}", system)) if scores else None
            if st is not None:
                h.update(np.ascontiguousarray(st, dtype=float).tobytes())
        keys[col] = h.hexdigest()
    return keys


def _correlate_cached(
    agg: Aggregated,
    cfg: CorrelationSettings,
    rng: np.random.Generator,
    scores: Scores | None,
    cache: CorrelationRows,
    limit: Limit,
) -> pd.DataFrame:
    """Valid: ``correlation_table`` draws per (aspect, level) before any metric is looked at."""
    aspects = human_columns(agg.segments)
    cols = correlated_columns(agg)
    if not aspects or not cols:
        return _correlate(agg, cfg, rng, scores)
    keys = row_keys(agg, cfg, rng, scores, cache.code)
    cached = {col: found for col in cols if (found := cache.get(keys[col])) is not None}
    todo = [c for c in cols if c not in cached]
    if todo:
        sub = copy.copy(agg)
        sub.columns = {c: agg.columns[c] for c in todo}
        fresh = _correlate(sub, cfg, rng, scores, limit)
    else:
        # all cached: draw what the table would, so the generator ends as in an uncached run
        advance_like_correlate(agg, cfg, rng)
        fresh = next(iter(cached.values())).iloc[:0]
    cache.count(len(cols) - len(todo), len(todo))
    parts = [fresh[fresh["metric"] == col] for col in todo]
    for col, rows in zip(todo, parts, strict=True):
        cache.put(keys[col], rows)
    parts += [cached[c] for c in cols if c in cached]
    out = pd.concat(parts, ignore_index=True) if parts else fresh.iloc[:0]
    out = out[list(fresh.columns)] if set(fresh.columns) <= set(out.columns) else out
    # the order of an uncached run: aspect, level, then metric, coefficients as computed
    order = {"metric": cols, "level": cfg.levels, "aspect": aspects}
    rank = [out[k].map({v: i for i, v in enumerate(vs)}).to_numpy() for k, vs in order.items()]
    out = out.iloc[np.lexsort((np.arange(len(out)), *rank))]
    return out.reset_index(drop=True)


def advance_like_correlate(
    agg: Aggregated, cfg: CorrelationSettings, rng: np.random.Generator
) -> None:
    """Draw from ``rng`` exactly what :func:`correlate` would draw, computing nothing."""
    seg = agg.segments
    aspects = human_columns(seg)
    if not aspects or not correlated_columns(agg):
        return
    tables = [(cfg.levels, cfg.coefficient_names, cfg.unit, seg["item_id"].nunique())]
    if agg.given:  # then the system view's, as _correlate draws them
        tables.append((*view_settings(cfg).values(), 1))
    n_sys, drawn = len(agg.systems.index), cfg.ci and cfg.interval != "fisher"
    for levels, coefs, unit, n_items in tables:
        draw_table_resamples(
            rng, len(aspects), levels, coefs, n_sys, n_items, cfg.n_resamples, unit, drawn
        )


def significance(
    agg: Aggregated,
    cfg: CorrelationSettings,
    rng: np.random.Generator,
    draws: dict[tuple[str, ...], np.ndarray] | None = None,
    limit: Limit = NO_LIMIT,
) -> pd.DataFrame:
    """Pairwise tests between metrics' correlations with the same aspect, with clusters: the
    rows of every task in turn; ``draws`` receives each tested pair's permutation draws."""
    sig = cfg.significance
    if sig is None or not human_columns(agg.segments):
        return pd.DataFrame()
    table_args = _table_args(agg, cfg, rng, in_order(agg.segments["item_id"]))
    permuted = sig.n_resamples if sig.method == "permutation" else None
    opts = {"method": sig.method, "n_resamples": sig.n_resamples, "alpha": sig.alpha}
    opts |= {"alternative": sig.alternative, "early_stop": sig.early_stop, "draws": draws}
    opts["lower_is_better"] = {c for c, info in agg.columns.items() if not info.higher_is_better}
    rows: list[dict[str, Any]] = []
    for task in sig.tasks:
        args = table_args | {"unit": task.unit, "level": task.level}
        if agg.given and task.level == "system" and task.coefficient.matrix_system is None:
            args = system_view(agg, args) | {"unit": "systems"}  # every pair on given scores
        table = partial(significance_table, **args, **opts, coefficient=task.coefficient)
        pairs = math.comb(len(args["metrics"]), 2)
        if permuted is not None and pairs:  # the permutations' time, by a pilot on one pair
            setting = "correlation.significance.n_resamples"
            what = ("the significance test's permutations", setting, permuted)
            limit.check(*what, _pilot(table, args, 2, early_stop=None, draws=None), 1 / pairs)
        with limit.bar("metric pairs", pairs * len(args["humans"])) as bar:
            rows += table(progress=bar.update)
    return pd.DataFrame(rows)


def _pilot(
    table: Callable[..., object], args: dict[str, Any], size: int, **kw: Any
) -> Callable[[int], object]:
    """``table`` with k resamples on the first ``size`` metrics, drawing from a generator's copy."""
    names = list(args["metrics"])[:size]
    first = {
        k: {m: args[k][m] for m in names if m in args[k]} for k in ("metrics", "system_metrics")
    }
    return lambda k: table(**first, n_resamples=k, rng=copy.deepcopy(args["rng"]), **kw)


def resampling_fns(
    fns: dict[str, Callable[[np.ndarray], np.ndarray]],
    metrics: Mapping[str, np.ndarray],
    system_metrics: Mapping[str, np.ndarray],
) -> dict[str, Callable[[np.ndarray], np.ndarray]]:
    """None for a segment mean, else from sufficient statistics (``fns``), else a resampled mean."""
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
            # a system-only column (distinct-n ...): NaN, without a warning per resample
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                return np.nanmean(matrix[:, np.asarray(idx)], axis=1)

        out[name] = fn
    return out


def system_metric_fns(
    scores: Scores, systems: Sequence[str], items: Sequence[str], only: Sequence[str] | None = None
) -> dict[str, Callable[[np.ndarray], np.ndarray]]:
    """Per column with sufficient statistics: resampled item indices -> systems' corpus scores."""
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
            # the resampled rows: a corpus score need not be a function of summed statistics
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
    """Multiplicities (B, items) times statistics on one item axis (zeros where lacking)."""
    width = stats[0].shape[1] if stats else 0
    by_system = np.zeros((n_items, len(stats), width))
    for s, (pos, st) in enumerate(zip(rows, stats, strict=True)):
        ok = pos >= 0
        by_system[ok, s] = st[pos[ok]]
    aligned = by_system.reshape(n_items, len(stats) * width)

    def batch(item_idx: np.ndarray) -> np.ndarray:
        # einsum, not BLAS (see FixedPairs.pearson); integer inputs: sums exact in any order
        summed = np.einsum("bi,ik->bk", counts(np.asarray(item_idx), n_items), aligned)
        b = summed.shape[0]
        flat = summed.reshape(b * len(stats), width)
        return np.asarray(fast(flat), dtype=float).reshape(b, len(stats))

    return batch


# the metric groups whose columns compete for "best metric" (not diversity: distance from source)
RANKED_GROUPS = ("syntactic", "semantic")


def _headline(tested: str | None, configured: Iterable[str], present: Iterable[str]) -> str:
    """The test's choice first: its clusters go with the values shown."""
    present = list(dict.fromkeys(str(c) for c in present))
    if not present:
        return ""
    if tested in present:
        return str(tested)
    return next((c for c in configured if c in present), present[0])


def headline_coefficient(cfg: CorrelationSettings, present: Iterable[str]) -> str:
    """The coefficient every summary leads with; ``""`` when none was computed."""
    sig = cfg.significance
    return _headline(sig.coefficient.name if sig else None, cfg.coefficient_names, present)


def headline_level(cfg: CorrelationSettings, present: Iterable[str]) -> str:
    """The level every summary leads with (``present``: the headline coefficient's levels)."""
    sig = cfg.significance
    return _headline(sig.level if sig else None, cfg.levels, present)


def best_agreeing(
    correlations: pd.DataFrame, coefficient: str, lower: Collection[str], ranked: Collection[str]
) -> pd.DataFrame:
    """Per (aspect, level); a ``lower``-is-better column's correlation counts with sign turned."""
    sub = correlations[
        (correlations["coefficient"] == coefficient) & correlations["metric"].isin(list(ranked))
    ].copy()
    values = pd.to_numeric(sub["value"], errors="coerce")
    sub["agreement"] = values.where(~sub["metric"].isin(list(lower)), -values)
    sub = sub.dropna(subset=["agreement"])
    if sub.empty:
        return sub
    best = sub.loc[sub.groupby(["aspect", "level"], sort=False)["agreement"].idxmax()]
    return best.reset_index(drop=True)
