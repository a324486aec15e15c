"""Compare stage (docs/meta-evaluation.md), on the items every system has."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from paraeval.correlation.bootstrap import is_segment_mean
from paraeval.correlation.paired import (
    MeanScores,
    PairedScores,
    StatsScores,
    p_value,
    paired_bs_clusters,
    paired_bs_p,
)
from paraeval.correlation.paired_blocks import (
    ar_block_nbytes,
    ar_blocks,
    bootstrap_block_nbytes,
    bootstrap_blocks,
)
from paraeval.metrics.base import (
    AVERAGED_GROUPS,
    Metric,
    batched_corpus_fn,
    has_corpus_from_stats,
)
from paraeval.pipeline.config.nodes import CompareSettings
from paraeval.pipeline.data.validate import in_order
from paraeval.pipeline.errors import ConfigError
from paraeval.pipeline.stages.limits import NO_LIMIT, Limit
from paraeval.pipeline.stages.roles import copy_rates

if TYPE_CHECKING:
    from tqdm import tqdm

    from paraeval.pipeline.stages.aggregate import Aggregated
    from paraeval.pipeline.stages.score import Scores

log = logging.getLogger(__name__)

COMPARISON_COLUMNS = ["system", "metric", "score", "ci_low", "ci_high", "baseline"]
COMPARISON_COLUMNS += ["p_bootstrap", "p_ar", "cluster", "rank", "control"]
COMPARISON_COLUMNS += ["higher_is_better", "n_items", "signature"]
SYSTEM_COLUMNS = ("diversity", "adequacy", "copy_rate")


@dataclass
class _Column:
    name: str
    higher_is_better: bool
    signature: str
    scores: PairedScores


@dataclass
class Comparison:
    table: pd.DataFrame  # system_comparison.csv
    systems: pd.DataFrame  # index system: diversity, adequacy, copy_rate and their item quartiles
    items: pd.DataFrame  # per (system, item): diversity, adequacy (for the per-item spread)
    baseline: str
    config: CompareSettings
    signature: str
    diversity_columns: list[str] = field(default_factory=list)


def _align(segments: pd.DataFrame, systems: list[str], baseline: str) -> tuple[list, dict]:
    """Shared items in baseline order; per system, their positions in its statistics' order."""
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
    return items, {s: ix.get_indexer(pd.Index(items)) for s, ix in per_system.items()}


def _build_columns(
    scores: Scores, agg: Aggregated, systems: list[str], positions: dict[str, np.ndarray]
) -> list[_Column]:
    """Resampled from sufficient statistics unless the corpus score is the segment mean."""
    seg = agg.segments
    columns: list[_Column] = []
    system_col = seg["system"].to_numpy()
    rows_of = {s: np.flatnonzero(system_col == s)[positions[s]] for s in systems}
    for name, info in agg.columns.items():
        if name not in seg.columns:
            continue
        stats_key_suffix = "_src" if info.signature.endswith("|vs:source") else ""
        metric = scores.metrics.get(info.metric)
        if metric is not None and metric.describe().corpus_only:
            continue  # one score per system (distinct-n ...): no items to resample or pair
        stats_key = f"{info.metric}{stats_key_suffix}"
        has_stats = metric is not None and all((stats_key, s) in scores.stats for s in systems)
        batched = batched_corpus_fn(metric) if has_stats else None
        overrides = has_stats and has_corpus_from_stats(metric)
        column = seg[name].to_numpy(dtype=float)
        values = {s: column[rows_of[s]] for s in systems}
        base = name.removesuffix(stats_key_suffix)
        paired: PairedScores | None = None
        if batched is not None or overrides:
            st = {s: np.asarray(scores.stats[(stats_key, s)])[positions[s]] for s in systems}
            if batched is not None:
                paired = StatsScores(st, batched)
            else:
                corpus = partial(_corpus_value, metric, base)
                # a segment-mean corpus score (BERTScore) resamples as a mean unless a NaN
                finite = all(len(v) and np.isfinite(v).all() for v in values.values())
                corpora = np.array([corpus(st[s]) for s in systems]) if finite else None
                if corpora is None or not is_segment_mean(
                    np.stack([values[s] for s in systems]), corpora
                ):
                    # a corpus score of the summed rows, many at once (NIST)
                    own = metric is not None and base == metric.name
                    sums = getattr(metric, "corpus_from_sums", None) if own else None
                    paired = StatsScores(st, None, corpus, sums=sums)
        if paired is None:
            paired = MeanScores(values)
        columns.append(_Column(name, info.higher_is_better, info.signature, paired))
    return columns


def _by_blocks(
    n_rows: int,
    columns: list[_Column],
    blocks: Iterator[tuple[Any, ...]],
    fn: Callable[..., dict[str, np.ndarray]],
    bar: tqdm | None = None,
) -> dict[str, dict[str, np.ndarray]]:
    """One array of the first block's type, so float32 sums stay float32."""
    out: dict[str, dict[str, np.ndarray]] = {col.name: {} for col in columns}
    for rows, *block in blocks:
        for col in columns:
            held = out[col.name]
            for s, part in fn(col, *block).items():
                part = np.asarray(part)
                if s not in held:
                    held[s] = np.empty(n_rows, dtype=part.dtype)
                held[s][rows] = part
        del block  # not alive while the next block is made
        if bar is not None:
            bar.update(rows.stop - rows.start)
    return out


def compare_nbytes(
    n_items: int, n_systems: int, n_columns: int, n_bootstrap: int, n_ar: int
) -> int:
    """The larger block, per-resample scores and differences (float64), and interval copies."""
    blocks = max(bootstrap_block_nbytes(n_items, n_bootstrap), ar_block_nbytes(n_items, n_ar))
    held = 8 * n_columns * (n_systems * n_bootstrap + max(0, n_systems - 1) * n_ar)
    return blocks + held + 4 * 8 * max(n_bootstrap, n_ar)


def _corpus_value(metric: Metric, column: str, stats: np.ndarray) -> float:
    return float(metric.corpus_from_stats(stats).get(column, np.nan))


def compare(
    scores: Scores,
    agg: Aggregated,
    cfg: CompareSettings,
    controls: Sequence[str] = (),
    limit: Limit = NO_LIMIT,
) -> Comparison:
    """Resamples and paired tests follow sacrebleu step by step: BLEU/chrF/TER p-values equal
    ``sacrebleu --paired-bs/--paired-ar`` with ``SACREBLEU_SEED`` = the run's (non-zero) seed.
    Baseline: ``cfg.baseline``, else the first control, else the first system."""
    seg = agg.segments
    systems = in_order(seg["system"])
    first = next((s for s in systems if s in controls), systems[0])
    baseline = cfg.baseline if cfg.baseline is not None else first
    items, positions = _align(seg, systems, baseline)
    n = len(items)
    signature = cfg.signature()
    rows: list[dict[str, Any]] = []
    if n == 0:
        log.warning("no item is shared by all systems: no intervals or paired tests")
    else:
        # one item: intervals of zero width, p-values significant (1/(N+1)) on no evidence
        tested = n > 1
        if not tested:
            log.warning(
                "the systems share a single item: their scores are ranked, without intervals, "
                "paired tests or significance clusters"
            )
        columns = _build_columns(scores, agg, systems, positions)
        others = [s for s in systems if s != baseline]
        ranked = [s for s in systems if s not in controls]
        total = cfg.n_bootstrap + (cfg.n_ar if tested and others else 0)

        def resample(k: int, cols: list[_Column], bar: tqdm | None = None) -> tuple[dict, dict]:
            """``k`` resamples in the settings' mix, a block at a time (each draw has its own
            generator: a pilot, or the order, changes none)."""
            n_boot = -(-k * cfg.n_bootstrap // total)
            boot = _by_blocks(
                n_boot,
                cols,
                bootstrap_blocks(n, n_boot, cfg.seed),
                lambda col, idx, counts: {s: col.scores.bootstrap(s, idx, counts) for s in systems},
                bar,
            )
            blocks = ar_blocks(n, k - n_boot, cfg.seed) if k > n_boot else iter(())
            ar = lambda col, masks: col.scores.ar_stats(baseline, others, masks)  # noqa: E731
            return boot, _by_blocks(k - n_boot, cols, blocks, ar, bar)

        what = ("the comparison's resamples", "compare.n_bootstrap + compare.n_ar", total)
        limit.check(*what, partial(resample, cols=columns[:1]), 1 / max(len(columns), 1))
        with limit.bar("comparison resamples", total) as bar:
            boot, trials = resample(total, columns, bar)
        lo_q, hi_q = (1 - cfg.confidence) / 2, 1 - (1 - cfg.confidence) / 2
        for col in columns:
            paired = col.scores
            # a given system score has no items to resample: the systems ranked, never tested
            checked = tested and col.name not in agg.given
            points = {s: paired.point(s) for s in systems}
            points = agg.systems[col.name].to_dict() if col.name in agg.given else points
            res = boot.pop(col.name)
            rank, cluster = paired_bs_clusters(
                {s: points[s] for s in ranked},
                {s: res[s] for s in ranked},
                col.higher_is_better,
                cfg.alpha,
            )
            ar = trials.pop(col.name, {}).items() if checked else ()
            p_ar = {s: p_value(st, paired.ar_difference(baseline, s)) for s, st in ar}
            for s in systems:
                r = np.asarray(res[s], dtype=np.float64)
                r = r[np.isfinite(r)] if checked else r[:0]
                lo, hi = np.quantile(r, [lo_q, hi_q]) if r.size else (np.nan, np.nan)
                untested = s == baseline or not checked
                pair = (res[baseline], res[s], points[baseline], points[s])
                values = [s, col.name, points[s], float(lo), float(hi), baseline]
                values += [np.nan if untested else paired_bs_p(*pair), p_ar.get(s, np.nan)]
                values += [cluster.get(s, np.nan) if checked else np.nan, rank.get(s, np.nan)]
                values += [s in controls, col.higher_is_better, n, f"{col.signature}|{signature}"]
                rows.append(dict(zip(COMPARISON_COLUMNS, values, strict=True)))
    table = pd.DataFrame(rows, columns=COMPARISON_COLUMNS)
    if not table.empty:
        order = {m: i for i, m in enumerate(dict.fromkeys(table["metric"]))}
        table = table.sort_values(
            ["metric", "rank"], key=lambda c: c.map(order) if c.name == "metric" else c
        ).reset_index(drop=True)
    item_view, div_cols = diversity_adequacy(scores, agg)
    view = system_view(item_view, seg).reindex(systems)
    return Comparison(table, view, item_view, baseline, cfg, signature, div_cols)


def diversity_columns(scores: Scores) -> tuple[list[str], list[str]]:
    """(syntactic similarity-to-source columns, semantic similarity-to-source columns)."""
    syntactic: list[str] = []
    semantic: list[str] = []
    for name, info in scores.columns.items():
        if info.group == "diversity":
            own_group = getattr(scores.metrics.get(info.metric), "group", "syntactic")
            (semantic if own_group == "semantic" else syntactic).append(name)
    return syntactic, semantic


def _similarity_direction(scores: Scores, column: str) -> bool:
    """Whether higher means closer to the source (turned around for a distance: PINC)."""
    info = scores.columns[column]
    metric = scores.metrics.get(info.metric)
    return info.higher_is_better != (metric is not None and metric.describe().distance_to_source)


def _minmax(values: pd.Series, higher_is_better: bool) -> pd.Series:
    x = values.astype(float)
    lo, hi = x.min(), x.max()
    if not np.isfinite(lo) or hi == lo:
        return pd.Series(np.where(x.notna(), 1.0, np.nan), index=x.index)
    return (x - lo) / (hi - lo) if higher_is_better else (hi - x) / (hi - lo)


def diversity_adequacy(scores: Scores, agg: Aggregated) -> tuple[pd.DataFrame, list[str]]:
    """``diversity``: 1 − mean syntactic similarity to the source, min-max over the pool (0 = a
    copy); ``adequacy``: the ``semantic`` average, else the semantic ``_src`` twins."""
    seg, norm = agg.segments, agg.normalized
    syn_src, sem_src = diversity_columns(scores)
    out = seg[["system", "item_id"]].copy()
    with np.errstate(all="ignore"):
        if syn_src:
            similarity = pd.DataFrame(
                {c: _minmax(seg[c], _similarity_direction(scores, c)) for c in syn_src}
            )
            out["diversity"] = 1.0 - similarity.mean(axis=1, skipna=True)
        else:
            log.warning(
                "no similarity-to-source column was computed (self_bleu or against_source: true): "
                "diversity is empty"
            )
            out["diversity"] = np.nan
        adequacy = seg["semantic"] if "semantic" in seg else pd.Series(np.nan, index=seg.index)
        if sem_src:
            adequacy = adequacy.fillna(norm[sem_src].mean(axis=1, skipna=True))
    out["adequacy"] = adequacy
    return out, syn_src


def system_view(items: pd.DataFrame, segments: pd.DataFrame) -> pd.DataFrame:
    g = items.groupby("system", sort=False)
    view = pd.DataFrame(index=pd.Index(list(g.groups), name="system"))
    for col in ("diversity", "adequacy"):
        view[col] = g[col].mean()
        view[f"{col}_q25"] = g[col].quantile(0.25)
        view[f"{col}_q75"] = g[col].quantile(0.75)
    view["copy_rate"] = copy_rates(segments)
    return view


def system_order(table: pd.DataFrame, lower: dict[str, bool]) -> list[str]:
    """Best mean rank over the group averages (else all columns) first; unscored last, by name."""
    chosen = [c for c in AVERAGED_GROUPS if (table["metric"] == c).any()]
    chosen = chosen or list(dict.fromkeys(table["metric"]))
    ranks = [
        table[table["metric"] == c].set_index("system")["score"].rank(ascending=lower[c])
        for c in chosen
    ]
    mean = pd.concat(ranks, axis=1).mean(axis=1, skipna=True)
    systems = sorted(set(table["system"]), key=str)
    return sorted(systems, key=lambda s: (not math.isfinite(mean.get(s, math.nan)), mean.get(s, 0)))


def directions(table: pd.DataFrame, source: frozenset[str] = frozenset()) -> dict[str, bool]:
    """Whether each column reads lower-is-better: a similarity to the source reads "lower = more
    diverse", whatever the table ranked by."""
    first = table.drop_duplicates("metric").set_index("metric")["higher_is_better"]
    return {c: (not bool(first[c])) or c in source for c in first.index}


def source_columns(groups: Mapping[str, str]) -> frozenset[str]:
    """The columns (column -> group) that measure similarity to the source."""
    return frozenset(c for c, g in groups.items() if g == "diversity" or c.endswith("_src"))


def comparison_order(table: pd.DataFrame, source: frozenset[str] = frozenset()) -> list[str]:
    """The one system order of the terminal, the page, the ranking figure and the MLflow system
    runs: the controls last, as in every ranking."""
    order = system_order(table, directions(table, source)) if not table.empty else []
    controls = set(table.loc[table["control"].astype(bool), "system"]) if "control" in table else ()
    return [s for s in order if s not in controls] + [s for s in order if s in controls]
