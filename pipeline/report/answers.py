"""What report.html answers first, as tables: the systems ranked by each group average, the
metrics that agree best with each human aspect (direction-aware), the α choice; and the
metric-vs-metric significance table behind the second."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pandas as pd

from paraeval.pipeline.report.plots import AVERAGES
from paraeval.pipeline.stages.headline import headline_coefficient, headline_level

if TYPE_CHECKING:
    from paraeval.pipeline.stages.evaluation import Evaluation

# the answer shows a metric cluster's members, at least this many metrics and at most that many
MIN_BEST, MAX_BEST = 3, 8


def sacrebleu_p(p: object, alpha: float = 0.05) -> str:
    """A p-value as sacrebleu's paired tests print it: four decimals, ``*`` when significant
    (``p <= alpha``); ``–`` when there is none (the baseline)."""
    try:
        v = float(p)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "–"
    return "–" if not math.isfinite(v) else f"{v:.4f}" + ("*" if v <= alpha else "")


def ranked_columns(ev: Evaluation) -> list[str]:
    """The comparison's columns the systems are ranked by: the group averages, else the first
    two compared columns."""
    if ev.compared is None or ev.compared.table.empty:
        return []
    metrics = list(dict.fromkeys(ev.compared.table["metric"]))
    return [m for m in AVERAGES if m in metrics] or metrics[:2]


def system_ranking(ev: Evaluation, metric: str) -> pd.DataFrame:
    """One compared column's systems best first: rank, score, interval, cluster and the paired
    p-values against the baseline (sacrebleu's format)."""
    assert ev.compared is not None
    alpha = ev.compared.config.alpha
    t = ev.compared.table
    sub = t[t["metric"] == metric].sort_values(["rank", "score"], ascending=[True, False])
    baseline = sub["system"] == ev.compared.baseline
    controls = sub["control"].astype(bool) if "control" in sub else pd.Series(False, sub.index)
    return pd.DataFrame(
        {
            "rank": sub["rank"].to_numpy(),
            "system": [
                f"{s} (control)" if c else str(s)
                for s, c in zip(sub["system"], controls, strict=True)
            ],
            "score": sub["score"].to_numpy(dtype=float),
            "ci_low": sub["ci_low"].to_numpy(dtype=float),
            "ci_high": sub["ci_high"].to_numpy(dtype=float),
            "cluster": sub["cluster"].to_numpy(),
            "p (bootstrap)": [
                "baseline" if b else sacrebleu_p(p, alpha)
                for b, p in zip(baseline, sub["p_bootstrap"], strict=True)
            ],
            "p (AR)": [
                "baseline" if b else sacrebleu_p(p, alpha)
                for b, p in zip(baseline, sub["p_ar"], strict=True)
            ],
        }
    )


@dataclass
class Agreement:
    """Every metric's agreement with each human aspect at the headline coefficient and level,
    ranked direction-aware: by significance cluster, then by the correlation with a
    lower-is-better metric's sign turned."""

    coefficient: str = ""
    level: str = ""
    alpha: float = 0.05
    method: str = ""
    by_aspect: dict[str, pd.DataFrame] = field(default_factory=dict)

    def best(self, aspect: str) -> pd.DataFrame:
        """The best cluster's metrics (at least MIN_BEST, at most MAX_BEST)."""
        ranked = self.by_aspect[aspect]
        first = ranked["cluster"].min() if ranked["cluster"].notna().any() else math.nan
        in_best = int((ranked["cluster"] == first).sum()) if math.isfinite(first) else 0
        return ranked.head(min(max(in_best, MIN_BEST), MAX_BEST))


def agreement(ev: Evaluation) -> Agreement:
    corr = ev.correlations
    if corr.empty:
        return Agreement()
    cfg = ev.settings.correlation
    coefficient = headline_coefficient(cfg, corr["coefficient"])
    sub = corr[corr["coefficient"] == coefficient]
    level = headline_level(cfg, sub["level"])
    sub = sub[sub["level"] == level]
    sig_cfg = cfg.get("significance") or {}
    sig = ev.significance
    if not sig.empty:
        sig = sig[(sig["coefficient"] == coefficient) & (sig["level"] == level)]
    info = ev.aggregated.columns if ev.aggregated is not None else {}
    out = Agreement(
        coefficient,
        level,
        float(sig_cfg.get("alpha", 0.05)),  # type: ignore[arg-type]
        str(sig["method"].iloc[0]) if not sig.empty else "",
    )
    for aspect, rows in sub.groupby("aspect", sort=False):
        sign = [-1.0 if m in info and not info[m].higher_is_better else 1.0 for m in rows["metric"]]
        frame = pd.DataFrame(
            {
                "metric": rows["metric"].to_numpy(),
                "value": rows["value"].to_numpy(dtype=float),
                "ci_low": rows["ci_low"].to_numpy(dtype=float),
                "ci_high": rows["ci_high"].to_numpy(dtype=float),
                "agreement": rows["value"].to_numpy(dtype=float) * sign,
                "n": rows["n"].to_numpy() if "n" in rows else math.nan,
            }
        )
        pairs = sig[sig["aspect"] == aspect] if not sig.empty else sig
        frame["cluster"] = frame["metric"].map(_clusters(pairs)) if not pairs.empty else math.nan
        frame = frame.sort_values(
            ["cluster", "agreement"], ascending=[True, False], na_position="last", kind="stable"
        ).reset_index(drop=True)
        if not pairs.empty:
            frame["p vs best"] = _p_against(pairs, frame["metric"], [frame["metric"].iloc[0]])
            nexts = [*frame["metric"].iloc[1:], None]
            frame["p vs next"] = _p_against(pairs, frame["metric"], nexts)
        out.by_aspect[str(aspect)] = frame
    return out


def _clusters(pairs: pd.DataFrame) -> dict[str, float]:
    clusters: dict[str, float] = {}
    for side in ("a", "b"):
        for m, c in zip(pairs[f"metric_{side}"], pairs[f"cluster_{side}"], strict=True):
            clusters.setdefault(str(m), float(c) if c is not None else math.nan)
    return clusters


def _p_against(pairs: pd.DataFrame, metrics: pd.Series, others: list[str | None]) -> list[float]:
    """The test's p-value of each metric against another (the first of ``others`` for all when
    it holds one name); NaN against itself or none."""
    p = {
        frozenset((str(a), str(b))): float(v)
        for a, b, v in zip(pairs["metric_a"], pairs["metric_b"], pairs["p_value"], strict=True)
    }
    partners = others * len(metrics) if len(others) == 1 else others
    return [
        p.get(frozenset((str(m), str(o))), math.nan) if o is not None and o != m else math.nan
        for m, o in zip(metrics, partners, strict=True)
    ]


def alpha_choice(ev: Evaluation) -> pd.DataFrame:
    """``alpha_choice.csv``, the columns a reader needs (empty when no α curve was computed)."""
    if ev.alpha_curve is None or ev.alpha_curve.choice.empty:
        return pd.DataFrame()
    choice = ev.alpha_curve.choice.copy()
    choice["aspect"] = choice["aspect"].astype(str).str.removeprefix("human_")
    keep = ["aspect", "level", "coefficient", "chosen_alpha", "dev", "test"]
    keep += ["configured_alpha", "test_at_configured", "n_dev_items", "n_test_items"]
    return choice[[c for c in keep if c in choice.columns]]
