"""Correlate stage: every metric column and both group averages against every human aspect.

Scores become system x item matrices (NaN where a system has no output or no rating), the shape
the ``correlation`` package works on; one switch chooses the level.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from paraeval.correlation import CORRELATION_COLUMNS as _CORRELATION_COLUMNS
from paraeval.correlation.bootstrap import is_segment_mean
from paraeval.memo import Memo, array_key, frozen, nbytes_of
from paraeval.metrics.base import batched_corpus_fn
from paraeval.pipeline.errors import ConfigError
from paraeval.pipeline.data.load import HUMAN_PREFIX, in_order

if TYPE_CHECKING:
    from paraeval.correlation import Coefficient

    # types only: the score stage imports the cache, which imports this module
    from paraeval.pipeline.stages.aggregate import Aggregated
    from paraeval.pipeline.stages.score import Scores

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
    rows = pd.Index(list(systems)).get_indexer(segments["system"])
    cols = pd.Index(list(items)).get_indexer(segments["item_id"])
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


def _resampling_fns(
    fns: dict[str, Callable[[np.ndarray], np.ndarray]],
    metrics: Mapping[str, np.ndarray],
    system_metrics: Mapping[str, np.ndarray],
) -> dict[str, Callable[[np.ndarray], np.ndarray]]:
    """The system-level recomputation each column needs under item resampling.

    A corpus score that is the mean of the segment scores (BERTScore, METEOR ...) needs none: the
    correlation package's own vectorised path resamples means. Otherwise the column's function
    from sufficient statistics is used; a metric without statistics cannot be recomputed, so its
    interval resamples the segment means (said in the log) rather than failing the run.
    """
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


def correlated_columns(agg: Aggregated) -> list[str]:
    return [c for c in agg.columns if c in agg.segments.columns]


def system_metric_fns(
    scores: Scores,
    systems: Sequence[str],
    items: Sequence[str],
    only: Sequence[str] | None = None,
) -> dict[str, Callable[[np.ndarray], np.ndarray]]:
    """For columns whose corpus score is not the mean of segment scores (BLEU, chrF, TER, iBLEU
    ...), a function from resampled item indices to the systems' corpus scores, recomputed from
    summed per-segment sufficient statistics (never by rescoring text)."""
    position = {item: k for k, item in enumerate(items)}
    seg = scores.segments
    out: dict[str, Callable[[np.ndarray], np.ndarray]] = {}
    # item position -> row of that system's statistics (-1: the system lacks the item); the same
    # for every column, so found once
    system_col = seg["system"].to_numpy()
    item_col = seg["item_id"].to_numpy()
    rows: list[np.ndarray] = []
    for s in systems:
        ids = item_col[system_col == s]
        pos = np.full(len(items), -1)
        pos[[position[i] for i in ids]] = np.arange(len(ids))
        rows.append(pos)
    wanted = None if only is None else set(only)
    for column, info in scores.columns.items():
        if wanted is not None and column not in wanted:
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


# summed statistics of every (resample, system): they do not depend on how the corpus score is
# made of them, so the jobs of an α sweep (iBLEU's statistics do not hold α) share them
_SUMMED: Memo[str, np.ndarray] = Memo(
    "correlate.summed", max_entries=64, max_bytes=2**26, size=nbytes_of
)


def _batched(
    rows: list[np.ndarray], stats: list[np.ndarray], fast: Any, n_items: int
) -> Callable[[np.ndarray], np.ndarray]:
    """A block of resamples at once (the bootstrap passes blocks of rows of the indices):
    multiplicities (B, items) times each system's statistics gives the summed statistics of
    every (resample, system), scored in one vectorised call; each row on its own."""

    # every system's statistics on one item axis (zeros where a system lacks the item), so that
    # all systems are summed in one product: one wide product is several times faster than one
    # narrow product per system
    width = stats[0].shape[1] if stats else 0
    aligned = np.zeros((n_items, len(stats), width))
    for s, (pos, st) in enumerate(zip(rows, stats, strict=True)):
        ok = pos >= 0
        aligned[ok, s] = st[pos[ok]]
    aligned = aligned.reshape(n_items, len(stats) * width)
    aligned_key = array_key(aligned)

    def batch(item_idx: np.ndarray) -> np.ndarray:
        from paraeval.correlation.bootstrap import counts

        key = f"{aligned_key}|{array_key(item_idx)}"
        summed = _SUMMED.get(key)
        if summed is None:
            weights = counts(np.asarray(item_idx), n_items)
            # einsum, not BLAS: see FixedPairs.statistic on threads and oversubscription. The
            # statistics and multiplicities are integers, so the sums are exact in any order.
            summed = _SUMMED.put(key, frozen(np.einsum("bi,ik->bk", weights, aligned)))
        b = summed.shape[0]
        flat = summed.reshape(b * len(stats), width)
        return np.asarray(fast(flat), dtype=float).reshape(b, len(stats))

    return batch


SMALL_N_DEFAULT = 10


def check_correlation_config(cfg: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """(levels, coefficients) of ``correlation``; an unknown name is a ConfigError, and so is a
    choice that computes nothing: no listed coefficient defined at any listed level, or a
    significance coefficient not defined at its level (the registry in
    ``correlation.coefficients`` says where each is), an unknown or invalid coefficient setting,
    or Williams' test with a coefficient it is not derived for. Called before scoring as well, so
    a typo costs seconds, not a scoring pass."""
    from paraeval.correlation import (
        COEFFICIENTS,
        INTERVALS,
        ITEM_NAN,
        LEVELS,
        PERMUTATION_UNITS,
        UNITS,
    )

    levels_node = cfg.get("levels", ["segment", "system"])
    coef_node = cfg.get("coefficients", ["pearson", "spearman", "kendall_b"])
    # `correlation.levels=system` (a plain string) means the one level, not its letters
    levels = [levels_node] if isinstance(levels_node, str) else list(levels_node)
    coefficients = [coef_node] if isinstance(coef_node, str) else list(coef_node)
    for level in levels:
        if level not in LEVELS:
            raise ConfigError(
                f"correlation.levels: unknown level '{level}'; choose from {list(LEVELS)}"
            )
    for coef in coefficients:
        if coef not in COEFFICIENTS:
            raise ConfigError(
                f"correlation.coefficients: unknown coefficient '{coef}'; choose from "
                f"{list(COEFFICIENTS)}"
            )
    if (
        levels
        and coefficients
        and not any(level in COEFFICIENTS[coef].levels for level in levels for coef in coefficients)
    ):
        raise ConfigError(
            f"correlation: none of the coefficients {coefficients} is defined at the levels "
            f"{levels}; "
            + "; ".join(f"{c} at {list(COEFFICIENTS[c].levels)}" for c in coefficients)
        )
    choices = {"unit": UNITS, "item_nan": ITEM_NAN, "interval": INTERVALS}
    for key, valid in choices.items():
        if key in cfg and str(cfg[key]) not in valid:
            raise ConfigError(f"correlation.{key} must be one of {list(valid)}, got '{cfg[key]}'")
    _check_number("correlation.confidence", cfg.get("confidence", 0.95), 0.0, 1.0, open_=True)
    _check_number("correlation.n_resamples", cfg.get("n_resamples", 1000), 1, None)
    _check_number("correlation.warn_below_n", cfg.get("warn_below_n", SMALL_N_DEFAULT), 0, None)
    configured = configured_coefficients(cfg)
    sig = cfg.get("significance") or {}
    if sig.get("enabled", False):
        for key, valid in (("level", LEVELS), ("coefficient", COEFFICIENTS)):
            if key in sig and str(sig[key]) not in valid:
                raise ConfigError(
                    f"correlation.significance.{key} must be one of {list(valid)}, got '{sig[key]}'"
                )
        sig_level = str(sig.get("level", "segment"))
        sig_coef = configured.get(str(sig.get("coefficient", "pearson")))
        if sig_coef is None:
            sig_coef = COEFFICIENTS[str(sig.get("coefficient", "pearson"))]
        if sig_level not in sig_coef.levels:
            raise ConfigError(
                f"correlation.significance: coefficient '{sig_coef.name}' is not defined at the "
                f"'{sig_level}' level; it is defined at {list(sig_coef.levels)}"
            )
        method = str(sig.get("method", "williams"))
        if method not in ("williams", "permutation"):
            raise ConfigError(
                f"correlation.significance.method must be williams or permutation, got '{method}'"
            )
        if method == "williams" and not sig_coef.williams:
            raise ConfigError(
                "correlation.significance: Williams' test compares correlation coefficients "
                "(pearson, spearman, kendall_b, kendall_c or a registered correlation), not "
                f"'{sig_coef.name}'; use correlation.significance.method=permutation"
            )
        if method == "williams" and sig_level == "item":
            raise ConfigError(
                "correlation.significance: Williams' test has no form for the item level (a mean "
                "of per-item correlations); use correlation.significance.method=permutation"
            )
        if "unit" in sig and str(sig["unit"]) not in PERMUTATION_UNITS:
            raise ConfigError(
                f"correlation.significance.unit must be one of {list(PERMUTATION_UNITS)}, "
                f"got '{sig['unit']}'"
            )
        _check_number("correlation.significance.n_resamples", sig.get("n_resamples", 1000), 1, None)
        _check_number("correlation.significance.alpha", sig.get("alpha", 0.05), 0.0, 1.0)
    return levels, coefficients


def configured_coefficients(cfg: Mapping[str, Any]) -> dict[str, Coefficient]:
    """Every coefficient named in ``correlation.coefficient_settings`` built with its settings
    (``correlation.configure``); a ConfigError names an unknown coefficient or setting or a bad
    value."""
    from paraeval.correlation import COEFFICIENTS, configure

    node = cfg.get("coefficient_settings") or {}
    if not isinstance(node, Mapping):
        raise ConfigError(
            "correlation.coefficient_settings must map coefficient names to their settings"
        )
    out: dict[str, Coefficient] = {}
    for name, settings in node.items():
        if name not in COEFFICIENTS:
            raise ConfigError(
                f"correlation.coefficient_settings: unknown coefficient '{name}'; choose from "
                f"{list(COEFFICIENTS)}"
            )
        if settings is not None and not isinstance(settings, Mapping):
            raise ConfigError(
                f"correlation.coefficient_settings.{name} must be a mapping of settings, "
                f"got {settings!r}"
            )
        try:
            out[str(name)] = configure(str(name), dict(settings or {}))
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"correlation.coefficient_settings.{name}: {exc}") from None
    return out


def _coefficient_objects(cfg: Mapping[str, Any], names: Sequence[str]) -> list[Coefficient]:
    from paraeval.correlation import get_coefficient

    configured = configured_coefficients(cfg)
    return [configured.get(n) or get_coefficient(n) for n in names]


def _check_number(
    key: str, value: Any, low: float, high: float | None, open_: bool = False
) -> None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{key} must be a number, got '{value}'") from None
    too_low = number <= low if open_ else number < low
    too_high = high is not None and (number >= high if open_ else number > high)
    if too_low or too_high or number != number:
        if open_:
            span = f"({low:g}, {high:g})" if high is not None else f"({low:g}, inf)"
        else:
            span = f"[{low:g}, {high:g}]" if high is not None else f"[{low:g}, inf)"
        raise ConfigError(f"{key} must be in {span}, got {value}")


def _report_undefined(out: pd.DataFrame, n_systems: int) -> None:
    """One warning line per kind of undefined correlation, so a NaN in correlations.csv is never
    a surprise: too few systems for the system level, constant scores elsewhere."""
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
        first = nan.iloc[0]
        log.warning(
            "%d of %d correlations are undefined (NaN: constant scores or too few points), e.g. "
            "%s vs %s at %s level (n=%s, n_dropped=%s); see n and n_dropped in correlations.csv",
            len(nan),
            len(out),
            first["metric"],
            first["aspect"],
            first["level"],
            first["n"],
            first["n_dropped"],
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
    """One warning when system-level values rest on fewer than ``warn_below_n`` systems: with a
    handful of systems a correlation of +1 or an accuracy of 1 is easily reached by chance
    (the exact p-value of a perfect Spearman order of 3 systems is 1/3)."""
    if out.empty or "level" not in out:
        return
    sys_rows = out[(out["level"] == "system") & out["value"].notna()]
    if sys_rows.empty:
        return
    n = int(sys_rows["n"].min())
    if n < warn_below_n:
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
) -> pd.DataFrame:
    from paraeval.correlation import correlation_table

    levels, coefficients = check_correlation_config(cfg)
    seg = agg.segments
    aspects = [c for c in seg.columns if c.startswith(HUMAN_PREFIX)]
    if not aspects:
        return pd.DataFrame(columns=CORRELATION_COLUMNS)
    systems = list(agg.systems.index)
    items = in_order(seg["item_id"])
    cols = correlated_columns(agg)
    matrices = to_matrices(seg, [*cols, *aspects], systems, items)
    metrics = {c: matrices[c] for c in cols}
    humans = {a: matrices[a] for a in aspects}
    system_metrics = {
        c: agg.systems[c].reindex(systems).to_numpy(dtype=float)
        for c in cols
        if c in agg.systems.columns
    }
    rows = correlation_table(
        metrics,
        humans,
        levels=tuple(levels),
        coefficients=tuple(_coefficient_objects(cfg, coefficients)),
        system_metrics=system_metrics,
        ci=bool(cfg.get("ci", True)),
        interval=str(cfg.get("interval", "bootstrap")),
        n_resamples=int(cfg.get("n_resamples", 1000)),
        confidence=float(cfg.get("confidence", 0.95)),
        unit=str(cfg.get("unit", "items")),
        item_nan=str(cfg.get("item_nan", "skip")),
        rng=rng,
        system_metric_fns=_resampling_fns(
            system_metric_fns(scores, systems, items, cols) if scores else {},
            metrics,
            system_metrics,
        ),
    )
    out = pd.DataFrame(rows)
    for col in CORRELATION_COLUMNS:
        if col not in out:
            out[col] = np.nan
    _report_undefined(out, len(systems))
    _report_small_n(out, int(cfg.get("warn_below_n", SMALL_N_DEFAULT)))
    return out[CORRELATION_COLUMNS + [c for c in out.columns if c not in CORRELATION_COLUMNS]]


def advance_like_correlate(
    agg: Aggregated, cfg: Mapping[str, Any], rng: np.random.Generator
) -> None:
    """Draw from ``rng`` exactly what :func:`correlate` would draw, computing nothing: the
    generator then stands where the stages after the correlation expect it."""
    from paraeval.correlation import draw_table_resamples

    levels, coefficients = check_correlation_config(cfg)
    seg = agg.segments
    aspects = [c for c in seg.columns if c.startswith(HUMAN_PREFIX)]
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
        str(cfg.get("unit", "items")),
        bool(cfg.get("ci", True)) and str(cfg.get("interval", "bootstrap")) != "fisher",
    )


def significance(agg: Aggregated, cfg: Mapping[str, Any], rng: np.random.Generator) -> pd.DataFrame:
    """Pairwise tests between metrics' correlations with the same human aspect, with clusters of
    metrics not distinguishable from the best."""
    from paraeval.correlation import significance_table

    sig = dict(cfg.get("significance") or {})
    if not sig.get("enabled", False):
        return pd.DataFrame()
    seg = agg.segments
    aspects = [c for c in seg.columns if c.startswith(HUMAN_PREFIX)]
    if not aspects:
        return pd.DataFrame()
    systems = list(agg.systems.index)
    items = in_order(seg["item_id"])
    cols = correlated_columns(agg)
    matrices = to_matrices(seg, [*cols, *aspects], systems, items)
    metrics = {c: matrices[c] for c in cols}
    humans = {a: matrices[a] for a in aspects}
    system_metrics = {
        c: agg.systems[c].reindex(systems).to_numpy(dtype=float)
        for c in cols
        if c in agg.systems.columns
    }
    method = str(sig.get("method", "williams"))
    if method not in ("williams", "permutation"):
        raise ConfigError(
            f"correlation.significance.method must be williams or permutation, got '{method}'"
        )
    rows = significance_table(
        metrics,
        humans,
        level=str(sig.get("level", "segment")),
        coefficient=_coefficient_objects(cfg, [str(sig.get("coefficient", "pearson"))])[0],
        method=method,
        rng=rng,
        n_resamples=int(sig.get("n_resamples", 1000)),
        unit=str(sig.get("unit", "items")),
        alpha=float(sig.get("alpha", 0.05)),
        system_metrics=system_metrics,
    )
    return pd.DataFrame(rows)
