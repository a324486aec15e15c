"""The iBLEU α curve from the run's BLEU statistics (iBLEU is linear in α). α is chosen on a seeded
dev split of the items and reported on the rest: choosing it on the scored judgments overfits."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import product

import numpy as np
import pandas as pd

from paraeval.correlation.levels import correlate
from paraeval.metrics.base import Decomposed, Metric
from paraeval.pipeline.config.nodes import AlphaCurveSettings
from paraeval.pipeline.data.validate import in_order
from paraeval.pipeline.stages.correlate import to_matrices

log = logging.getLogger(__name__)
CURVE_COLUMNS = ["level", "coefficient", "aspect", "alpha", "split", "value", "n"]


@dataclass
class AlphaCurve:
    curve: pd.DataFrame  # CURVE_COLUMNS
    choice: pd.DataFrame  # one row per (level, aspect): chosen α, dev and test value
    # alpha, system, ibleu, bleu_references, bleu_source: iBLEU's system scores for every α
    system_scores: pd.DataFrame = field(default_factory=pd.DataFrame)


def split_items(
    items: Sequence[str], dev_fraction: float, seed: int
) -> tuple[list[str], list[str]]:
    """Seeded dev/test split of item ids; both parts non-empty when there are two items or more."""
    ordered = sorted(dict.fromkeys(str(i) for i in items))
    n = len(ordered)
    perm = np.random.default_rng(seed).permutation(n)
    n_dev = min(max(round(dev_fraction * n), 1), max(n - 1, 1))
    return sorted(ordered[i] for i in perm[:n_dev]), sorted(ordered[i] for i in perm[n_dev:])


def alpha_curve_nbytes(n_alphas: int, n_rows: int, n_levels: int, n_aspects: int) -> int:
    """Four float64 arrays per row, and a record (~256 bytes) per α, level, aspect and split."""
    return 4 * 8 * n_rows + 256 * 2 * n_alphas * max(1, n_levels) * max(1, n_aspects)


def alpha_curve(
    segments: pd.DataFrame,
    stats: Mapping[tuple[str, str], np.ndarray],
    metric: Decomposed,
    metric_id: str,
    aspects: Sequence[str],
    settings: AlphaCurveSettings,
    scored: pd.DataFrame | None = None,
) -> AlphaCurve:
    """Per α, iBLEU's correlations on dev and test, and the α chosen on dev per (level, aspect).
    ``scored`` (default ``segments``): rows scored for every α, so controls still get scores."""
    systems = in_order(segments["system"])
    items = [str(i) for i in in_order(segments["item_id"])]
    item_pos = {item: j for j, item in enumerate(items)}
    n_rows = len(segments)
    row_sys = np.empty(n_rows, dtype=int)
    row_item = segments["item_id"].astype(str).map(item_pos).to_numpy(dtype=int)
    ref_seg, src_seg = np.full((2, n_rows), np.nan)
    system_col = segments["system"].to_numpy()
    sys_rows: dict[str, np.ndarray] = {}
    sys_stats: dict[str, np.ndarray] = {}
    for si, system in enumerate(systems):
        rows = np.flatnonzero(system_col == system)
        st = np.asarray(stats[(metric_id, system)], dtype=float)
        if len(st) != len(rows):
            raise ValueError(f"iBLEU statistics of '{system}' do not match its segments")
        row_sys[rows] = si
        sys_rows[system] = rows
        sys_stats[system] = st
        if len(rows):
            ref_seg[rows], src_seg[rows] = metric.segment_components(st)

    dev, test = split_items(items, settings.dev_fraction, settings.seed)
    parts = zip(("dev", "test"), (dev, test), strict=True)
    split_cols = {k: np.array([item_pos[i] for i in v], dtype=int) for k, v in parts}
    # corpus BLEU (vs refs, vs source) of each system over the items of each split: α-independent
    corpus: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for split, cols in split_cols.items():
        in_split = np.isin(np.arange(len(items)), cols)
        r, s = np.full((2, len(systems)), np.nan)
        for si, system in enumerate(systems):
            mask = in_split[row_item[sys_rows[system]]]
            if mask.any():
                r[si], s[si] = metric.corpus_components(sys_stats[system][mask])
        corpus[split] = (r, s)

    humans = to_matrices(segments, aspects, systems, in_order(segments["item_id"]))
    coef = settings.coefficient
    records = []
    for alpha in settings.grid:
        m = np.full((len(systems), len(items)), np.nan)
        m[row_sys, row_item] = metric.combine(ref_seg, src_seg, alpha)
        for split, cols in split_cols.items():
            system_metric = metric.combine(*corpus[split], alpha)
            for (aspect, h), level in product(humans.items(), settings.levels):
                with np.errstate(all="ignore"):
                    c = correlate(m[:, cols], h[:, cols], level, coef, system_metric=system_metric)
                records.append((level, coef, aspect, alpha, split, c.value, c.n))
    curve = pd.DataFrame(records, columns=CURVE_COLUMNS)
    scored = segments if scored is None else scored
    by_system = system_scores(scored, stats, metric, metric_id, settings.grid)
    return AlphaCurve(curve, _choose(curve, metric, settings, len(dev), len(test)), by_system)


def system_scores(
    segments: pd.DataFrame,
    stats: Mapping[tuple[str, str], np.ndarray],
    metric: Decomposed,
    metric_id: str,
    alphas: Sequence[float],
) -> pd.DataFrame:
    """iBLEU's corpus score of every system at every α, on all items."""
    records = []
    for system in in_order(segments["system"]):
        st = np.asarray(stats[(metric_id, system)], dtype=float)
        if not len(st):
            continue
        ref, src = metric.corpus_components(st)
        for alpha in alphas:
            ibleu = float(metric.combine(ref, src, alpha))
            records.append((float(alpha), system, ibleu, float(ref), float(src)))
    columns = ["alpha", "system", "ibleu", "bleu_references", "bleu_source"]
    return pd.DataFrame(records, columns=columns)


def _choose(
    curve: pd.DataFrame, metric: Decomposed, settings: AlphaCurveSettings, n_dev: int, n_test: int
) -> pd.DataFrame:
    configured = float(metric.alpha)
    choices = []
    for keys, sub in curve.groupby(["level", "aspect"], sort=False):
        level, aspect = (str(k) for k in keys)  # type: ignore[union-attr]
        dev_curve = sub[sub.split == "dev"].set_index("alpha")["value"]
        test_curve = sub[sub.split == "test"].set_index("alpha")["value"]
        finite = dev_curve[np.isfinite(dev_curve.to_numpy(dtype=float))]
        # ties go to the smallest α: np.argmax returns the first maximum of the sorted grid
        chosen = float(finite.index[int(np.argmax(finite.to_numpy()))]) if len(finite) else np.nan
        close = [a for a in test_curve.index if abs(float(a) - configured) < 1e-9]
        choices.append(
            {
                "level": level,
                "coefficient": settings.coefficient,
                "aspect": aspect,
                "chosen_alpha": chosen,
                "dev": float(dev_curve.get(chosen, np.nan)),
                "test": float(test_curve.get(chosen, np.nan)),
                "configured_alpha": configured,
                "test_at_configured": float(test_curve[close[0]]) if close else np.nan,
                "n_dev_items": n_dev,
                "n_test_items": n_test,
                "seed": settings.seed,
            }
        )
    return pd.DataFrame(choices)


def curve_metrics(result: AlphaCurve) -> dict[str, float]:
    """MLflow metrics: the chosen α and its dev and test correlation per (level, aspect)."""
    return {
        f"alpha_curve.{row['level']}.{row['coefficient']}.{row['aspect']}.{key}": float(row[key])
        for row in result.choice.to_dict("records")
        for key in ("chosen_alpha", "dev", "test")
    }


def compute_alpha_curve(
    settings: AlphaCurveSettings,
    segments: pd.DataFrame,
    stats: Mapping[tuple[str, str], np.ndarray],
    metrics: Mapping[str, Metric],
    aspects: Sequence[str],
    scored: pd.DataFrame | None = None,
) -> AlphaCurve | None:
    """The α curve when enabled and possible (iBLEU, human ratings, two items or more)."""
    if not settings.enabled:
        return None
    found = next(((k, m) for k, m in metrics.items() if isinstance(m, Decomposed)), None)
    if found is None:
        log.info("alpha curve skipped: needs iBLEU among the metrics")
        return None
    if not aspects:
        log.info("alpha curve skipped: no human ratings")
        return None
    if segments["item_id"].nunique() < 2:
        log.info("alpha curve skipped: needs at least two items to split into dev and test")
        return None
    metric_id, metric = found
    result = alpha_curve(segments, stats, metric, metric_id, aspects, settings, scored)
    for row in result.choice.itertuples(index=False):
        log.info(
            "alpha curve (%s, %s, %s): alpha %.2f chosen on %d dev items; test %s %.3f "
            "(configured alpha %.2f: %.3f)",
            *(row.level, row.coefficient, row.aspect, row.chosen_alpha, row.n_dev_items),
            *(row.coefficient, row.test, row.configured_alpha, row.test_at_configured),
        )
    return result
