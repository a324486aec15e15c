"""Correlate stage: every metric column and both group averages against every human aspect.
Scores become system x item matrices (NaN where a system has no output or no rating), the shape
the ``correlation`` package works on. With the run's cache, each column's rows are looked up
first (:mod:`.cache_rows`) and only the others are computed."""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import xxhash

from paraeval.correlation import (
    AUTO_UNIT,
    correlation_table,
    draw_table_resamples,
    significance_table,
)
from paraeval.correlation import CORRELATION_COLUMNS as _CORRELATION_COLUMNS
from paraeval.pipeline.data.load import HUMAN_PREFIX, in_order
from paraeval.pipeline.errors import ConfigError
from paraeval.pipeline.stages.correlate_resampling import resampling_fns, system_metric_fns
from paraeval.pipeline.stages.correlate_settings import (
    SMALL_N_DEFAULT,
    check_correlation_config,
    coefficient_objects,
    configured_coefficients,
    early_stop,
)

if TYPE_CHECKING:
    from paraeval.pipeline.stages.aggregate import Aggregated
    from paraeval.pipeline.stages.cache_rows import CorrelationRows
    from paraeval.pipeline.stages.score import Scores

__all__ = [
    "CORRELATION_COLUMNS",
    "advance_like_correlate",
    "check_correlation_config",
    "configured_coefficients",
    "correlate",
    "correlated_columns",
    "significance",
    "system_metric_fns",
    "to_matrices",
    "to_matrix",
]

log = logging.getLogger(__name__)

# the column order of correlations.csv is the correlation package's
CORRELATION_COLUMNS = list(_CORRELATION_COLUMNS)


def to_matrix(
    segments: pd.DataFrame, column: str, systems: Sequence[str], items: Sequence[str]
) -> np.ndarray:
    """The column as a systems x items matrix (NaN where a system has no row for an item)."""
    return to_matrices(segments, [column], systems, items)[column]


def to_matrices(
    segments: pd.DataFrame, columns: Sequence[str], systems: Sequence[str], items: Sequence[str]
) -> dict[str, np.ndarray]:
    """:func:`to_matrix` of several columns: each row's cell is found once for all of them."""
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


def _aspects(seg: pd.DataFrame) -> list[str]:
    return [c for c in seg.columns if str(c).startswith(HUMAN_PREFIX)]


Matrices = dict[str, np.ndarray]


def _inputs(agg: Aggregated) -> tuple[list[str], list[str], Matrices, Matrices, Matrices]:
    """(systems, items, metric matrices, human matrices, system-level metric scores)."""
    seg = agg.segments
    aspects = _aspects(seg)
    systems = list(agg.systems.index)
    items = in_order(seg["item_id"])
    cols = correlated_columns(agg)
    matrices = to_matrices(seg, [*cols, *aspects], systems, items)
    by_system = agg.systems.reindex(systems)
    system_metrics = {c: by_system[c].to_numpy(dtype=float) for c in cols if c in by_system}
    metrics = {c: matrices[c] for c in cols}
    return systems, items, metrics, {a: matrices[a] for a in aspects}, system_metrics


def _report_undefined(out: pd.DataFrame, n_systems: int) -> None:
    """One warning per kind of undefined correlation, so a NaN in correlations.csv is never a
    surprise."""
    if out.empty:
        return
    if n_systems < 2 and (out["level"] == "system").any():
        log.warning(
            "system-level correlation needs at least 2 systems, the data has %d: its rows in "
            "correlations.csv are NaN; the segment and item levels are computed",
            n_systems,
        )
    undefined = out["value"].isna()
    if n_systems < 2:
        undefined &= out["level"] != "system"  # already said above
    nan = out[undefined]
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
            int(first["n_dropped"]),
            int(first["n"]) + int(first["n_dropped"]),
            first["metric"],
            first["aspect"],
        )


def _report_small_n(out: pd.DataFrame, warn_below_n: int) -> None:
    """One warning when system-level values rest on fewer than ``warn_below_n`` systems, where a
    perfect correlation is easily reached by chance."""
    if out.empty or "level" not in out:
        return
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
    cfg: Mapping[str, Any],
    rng: np.random.Generator,
    scores: Scores | None = None,
    rows: CorrelationRows | None = None,
) -> pd.DataFrame:
    """The rows of ``correlations.csv``; ``rows``: the run's cache of correlation rows. The
    warnings about undefined values and few systems are said of the table returned, whether it
    was computed or served by the cache."""
    if rows is not None:
        out = _correlate_cached(agg, cfg, rng, scores, rows)
    else:
        out = _correlate(agg, cfg, rng, scores)
    _report_undefined(out, len(agg.systems.index))
    _report_small_n(out, int(cfg.get("warn_below_n", SMALL_N_DEFAULT)))
    return out


def _correlate(
    agg: Aggregated, cfg: Mapping[str, Any], rng: np.random.Generator, scores: Scores | None
) -> pd.DataFrame:
    levels, coefficients = check_correlation_config(cfg)
    if not _aspects(agg.segments):
        return pd.DataFrame(columns=CORRELATION_COLUMNS)
    systems, items, metrics, humans, system_metrics = _inputs(agg)
    rows = correlation_table(
        metrics,
        humans,
        levels=tuple(levels),
        coefficients=tuple(coefficient_objects(cfg, coefficients)),
        system_metrics=system_metrics,
        ci=bool(cfg.get("ci", True)),
        interval=str(cfg.get("interval", "bootstrap")),
        n_resamples=int(cfg.get("n_resamples", 1000)),
        confidence=float(cfg.get("confidence", 0.95)),
        unit=str(cfg.get("unit", AUTO_UNIT)),
        item_nan=str(cfg.get("item_nan", "skip")),
        item_average=str(cfg.get("item_average", "macro")),
        rng=rng,
        system_metric_fns=resampling_fns(
            system_metric_fns(scores, systems, items, list(metrics)) if scores else {},
            metrics,
            system_metrics,
        ),
    )
    out = pd.DataFrame(rows)
    for col in CORRELATION_COLUMNS:
        if col not in out:
            out[col] = np.nan
    return out[CORRELATION_COLUMNS + [c for c in out.columns if c not in CORRELATION_COLUMNS]]


# the version of the row cache's keys: bumped when what a key covers changes
ROWS_FORMAT = "paraeval-correlation-rows/1"


def _frame_bytes(frame: pd.DataFrame) -> bytes:
    return bytes(pd.util.hash_pandas_object(frame, index=False).to_numpy().tobytes())


def row_keys(
    agg: Aggregated,
    cfg: Mapping[str, Any],
    rng: np.random.Generator,
    scores: Scores | None,
    code: str,
) -> dict[str, str]:
    """The row cache's key of each correlated column: everything its rows are computed from
    (``code``: the correlation code's digest)."""
    seg = agg.segments
    # xxh3-128, not blake2b: fast on every column's scores, and a local cache needs no
    # protection against made collisions
    shared = xxhash.xxh3_128()
    shared.update(json.dumps([ROWS_FORMAT, code]).encode())
    shared.update(json.dumps(dict(cfg), sort_keys=True, default=str).encode())
    shared.update(json.dumps(rng.bit_generator.state, sort_keys=True, default=str).encode())
    shared.update(json.dumps([str(s) for s in agg.systems.index]).encode())
    shared.update(_frame_bytes(seg[["item_id", "system", *_aspects(seg)]]))
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
    cfg: Mapping[str, Any],
    rng: np.random.Generator,
    scores: Scores | None,
    cache: CorrelationRows,
) -> pd.DataFrame:
    """:func:`_correlate` with each column's rows served by the cache where it has them. Valid
    because ``correlation_table`` draws its resamples per (aspect, level) before any metric is
    looked at: a column's rows do not depend on which other columns are present, and the generator
    ends in the same state whatever the columns."""
    aspects = _aspects(agg.segments)
    cols = correlated_columns(agg)
    if not aspects or not cols:
        return _correlate(agg, cfg, rng, scores)
    keys = row_keys(agg, cfg, rng, scores, cache.code)
    cached = {col: found for col in cols if (found := cache.get(keys[col])) is not None}
    todo = [c for c in cols if c not in cached]
    if todo:
        sub = copy.copy(agg)
        sub.columns = {c: agg.columns[c] for c in todo}
        fresh = _correlate(sub, cfg, rng, scores)
    else:
        # every row is cached: draw what the table would draw, so the generator ends in the
        # state of an uncached run
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
    order = {
        "aspect": {a: i for i, a in enumerate(aspects)},
        "level": {lv: i for i, lv in enumerate(cfg.get("levels", ["segment", "system"]))},
        "metric": {c: i for i, c in enumerate(cols)},
    }
    rank = pd.DataFrame({k: out[k].map(v) for k, v in order.items()})
    out = out.iloc[np.lexsort((np.arange(len(out)), rank["metric"], rank["level"], rank["aspect"]))]
    return out.reset_index(drop=True)


def advance_like_correlate(
    agg: Aggregated, cfg: Mapping[str, Any], rng: np.random.Generator
) -> None:
    """Draw from ``rng`` exactly what :func:`correlate` would draw, computing nothing: the
    generator then stands where the stages after the correlation expect it."""
    levels, coefficients = check_correlation_config(cfg)
    seg = agg.segments
    aspects = _aspects(seg)
    if not aspects or not correlated_columns(agg):
        return
    draw_table_resamples(
        rng,
        len(aspects),
        levels,
        coefficients,
        len(agg.systems.index),
        seg["item_id"].nunique(),
        int(cfg.get("n_resamples", 1000)),
        str(cfg.get("unit", AUTO_UNIT)),
        bool(cfg.get("ci", True)) and str(cfg.get("interval", "bootstrap")) != "fisher",
    )


def significance(agg: Aggregated, cfg: Mapping[str, Any], rng: np.random.Generator) -> pd.DataFrame:
    """Pairwise tests between metrics' correlations with the same human aspect, with clusters of
    metrics not distinguishable from the best."""
    sig = dict(cfg.get("significance") or {})
    if not sig.get("enabled", False) or not _aspects(agg.segments):
        return pd.DataFrame()
    _, _, metrics, humans, system_metrics = _inputs(agg)
    method = str(sig.get("method", "williams"))
    if method not in ("williams", "permutation"):
        raise ConfigError(
            f"correlation.significance.method must be williams or permutation, got '{method}'"
        )
    rows = significance_table(
        metrics,
        humans,
        level=str(sig.get("level", "segment")),
        coefficient=coefficient_objects(cfg, [str(sig.get("coefficient", "pearson"))])[0],
        method=method,
        rng=rng,
        n_resamples=int(sig.get("n_resamples", 1000)),
        unit=str(sig.get("unit", "items")),
        alpha=float(sig.get("alpha", 0.05)),
        item_nan=str(cfg.get("item_nan", "skip")),
        item_average=str(cfg.get("item_average", "macro")),
        system_metrics=system_metrics,
        alternative=str(sig.get("alternative", "two-sided")),
        lower_is_better={c for c, info in agg.columns.items() if not info.higher_is_better},
        early_stop=early_stop(sig),
    )
    return pd.DataFrame(rows)
