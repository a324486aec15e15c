"""What a person reads of a run in MLflow's UI, built from a run's tables (no MLflow here)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from paraeval.pipeline.data.validate import HUMAN_PREFIX
from paraeval.pipeline.names import show, slug
from paraeval.pipeline.stages.correlate import RANKED_GROUPS, best_agreeing

# MLflow 3's UI opens this kind of experiment (a UI enum) on the runs table, not GenAI overview
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
MODEL_DEVELOPMENT = "custom_model_development"
DESCRIPTION_TAG = "mlflow.note.content"  # the run page's Markdown description
COEFFICIENT_TAG = "paraeval.correlation.coefficient"
REFERENCE_FREE_TAG = "paraeval.reference_free"  # the record's sentence: a run is reference-free

CACHE_PREFIX = "cache."
CACHE_TOTAL = "(all metrics)"

_ALLOWED = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./ ")


def key(*parts: str) -> str:
    """Parts MLflow would refuse as a key are slugged."""
    return ".".join(part if _safe(part) else slug(part) for part in parts)


def _safe(part: str) -> bool:
    """MLflow allows alphanumerics, ``_ - . /`` and space, but no key that resolves as a path."""
    return all(ch in _ALLOWED for ch in part) and ".." not in part and not part.startswith("/")


def finite(value: Any) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def aspect_name(aspect: str) -> str:
    return aspect.removeprefix(HUMAN_PREFIX)


def headline_coefficient(correlations: pd.DataFrame, chosen: str | None = None) -> str | None:
    """``chosen``, else the table's first coefficient (a run recorded before the choice was)."""
    if correlations.empty:
        return None
    present = set(correlations["coefficient"].astype(str))
    return chosen if chosen in present else str(correlations["coefficient"].iloc[0])


def _headline_rows(correlations: pd.DataFrame, chosen: str | None = None) -> pd.DataFrame:
    coefficient = headline_coefficient(correlations, chosen)
    if coefficient is None:
        return correlations
    return correlations[correlations["coefficient"] == coefficient]


def correlation_metrics(correlations: pd.DataFrame, chosen: str | None = None) -> dict[str, float]:
    """``corr.<aspect>.<level>.<column>``: MLflow's charts group by prefix, one aspect and level."""
    out = {}
    for row in _headline_rows(correlations, chosen).to_dict("records"):
        if finite(row["value"]):
            parts = (aspect_name(str(row["aspect"])), str(row["level"]), str(row["metric"]))
            out[f"corr.{key(*parts)}"] = float(row["value"])
    return out


def split_cache(metrics: Mapping[str, float]) -> tuple[dict[str, float], pd.DataFrame]:
    """As one table, ``(all metrics)`` last: a count is looked up, not charted across runs."""
    rest: dict[str, float] = {}
    counts: dict[str, dict[str, float]] = {}
    for name, value in metrics.items():
        kind, _, stage = name.removeprefix(CACHE_PREFIX).partition(".")
        if name.startswith(CACHE_PREFIX) and kind in ("hits", "misses"):
            counts.setdefault(stage or CACHE_TOTAL, {})[kind] = float(value)
        else:
            rest[name] = float(value)
    if not counts:
        return rest, pd.DataFrame()
    table = pd.DataFrame([{"stage": s, **c} for s, c in counts.items()])
    total = table["stage"] == CACHE_TOTAL
    table = pd.concat([table[~total], table[total]], ignore_index=True)
    return rest, table.astype({c: "int64" for c in ("hits", "misses") if c in table})


def system_metric_order(values: Mapping[str, float]) -> dict[str, float]:
    """Group averages first: MLflow's parallel-coordinates plot opens on the first logged metric."""

    def rank(name: str) -> int:
        if name in RANKED_GROUPS:
            return 0
        if name.startswith(HUMAN_PREFIX):
            return 1
        if name == "n_items":
            return 4
        return 3 if "." in name else 2

    return {k: values[k] for k in sorted(values, key=rank)}


def _name(text: object) -> str:
    return "`" + show(text).replace("`", "'") + "`"


def truthy(values: pd.Series) -> pd.Series:
    return values.astype(str).str.lower().isin(("true", "1", "1.0"))


def paraphrase_line(paraphrase: pd.DataFrame) -> str | None:
    needed = {"system", "control", "cluster", "paraphrase"}
    if paraphrase.empty or not needed <= set(paraphrase):
        return None
    ranked = paraphrase[~truthy(paraphrase["control"])]
    clusters = pd.to_numeric(ranked["cluster"], errors="coerce")
    if not clusters.notna().any():
        return None
    first = ranked[clusters == clusters.min()]
    names = ", ".join(_name(s) for s in first["system"])
    if len(first) == 1:
        score = float(first["paraphrase"].iloc[0])
        return f"**Best system** {names} {score:.3f}, alone in the paraphrase score's first cluster"
    return (
        f"**No single best system**: {len(first)} share the paraphrase score's first cluster "
        f"({names})"
    )


def best_systems_line(systems: pd.DataFrame, comparison: pd.DataFrame) -> str | None:
    if systems.empty or "system" not in systems:
        return None
    if "control" in systems:
        systems = systems[~truthy(systems["control"])]
    parts = []
    for column in [c for c in RANKED_GROUPS if c in systems]:
        scores = pd.to_numeric(systems[column], errors="coerce")
        if scores.notna().sum() == 0:
            continue
        best = systems.iloc[int(np.nanargmax(scores.to_numpy(dtype=float)))]
        text = f"by {column}: {_name(best['system'])} {float(best[column]):.3f}"
        if not comparison.empty and {"metric", "system", "cluster"} <= set(comparison):
            rows = comparison[comparison["metric"] == column].set_index("system")["cluster"]
            cluster = rows.get(best["system"])
            if cluster is not None and finite(cluster):
                tied = [str(s) for s, c in rows.items() if c == cluster and s != best["system"]]
                with_ = ", ".join(_name(s) for s in tied)
                text += f" (top cluster shared with {with_})" if tied else " (alone in its cluster)"
        parts.append(text)
    return "**Best system** " + "; ".join(parts) if parts else None


def best_metric_lines(
    correlations: pd.DataFrame, signatures: pd.DataFrame, chosen: str | None = None
) -> list[str]:
    rows = _headline_rows(correlations, chosen)
    if rows.empty:
        return []
    lower: list[str] = []
    if not signatures.empty and "higher_is_better" in signatures:
        flags = truthy(signatures.set_index("column")["higher_is_better"])
        lower = [str(c) for c, up in flags.items() if not up]
    columns = list(dict.fromkeys(rows["metric"].astype(str)))
    ranked = [c for c in columns if c not in RANKED_GROUPS]
    if not signatures.empty and "group" in signatures:
        groups = signatures.set_index("column")["group"].astype(str)
        ranked = [c for c in columns if groups.get(c) in RANKED_GROUPS]
    coefficient = headline_coefficient(correlations, chosen)
    lines = [f"**Best metric** per human aspect ({coefficient}):"]
    best = best_agreeing(rows, str(coefficient), lower, ranked)
    for aspect, by_aspect in best.groupby("aspect", sort=False):
        parts = [
            f"{r.level} {_name(r.metric)}{' ↓' if r.metric in lower else ''} {float(r.value):+.3f}"
            for r in by_aspect.itertuples()
        ]
        lines.append(f"- {aspect_name(str(aspect))}: " + " · ".join(parts))
    return lines if len(lines) > 1 else []


def alpha_lines(metrics: Mapping[str, Any]) -> list[str]:
    """Ordered by name: a run's record keeps its metrics sorted."""
    chosen: dict[tuple[str, str], dict[str, float]] = {}
    coefficients = set()
    for name, value in metrics.items():
        parts = name.split(".")
        if parts[0] == "alpha_curve" and len(parts) == 5:
            _, level, coefficient, aspect, what = parts
            chosen.setdefault((aspect, level), {})[what] = float(value)
            coefficients.add(coefficient)
    by_aspect: dict[str, list[str]] = {}
    for (aspect, level), v in sorted(chosen.items(), key=lambda kv: (kv[0][0], _level(kv[0][1]))):
        if finite(v.get("chosen_alpha")):
            test = f" (test {v['test']:+.3f})" if finite(v.get("test")) else ""
            by_aspect.setdefault(aspect, []).append(f"{v['chosen_alpha']:g} at {level} level{test}")
    if not by_aspect:
        return []
    head = f"**α of iBLEU** chosen on the dev split ({', '.join(sorted(coefficients))}):"
    return [head] + [f"- {aspect_name(a)}: " + " · ".join(p) for a, p in by_aspect.items()]


def _level(level: str) -> tuple[int, str]:
    order = ("segment", "item", "system")
    return (order.index(level) if level in order else len(order), level)


def system_line(system: str, role: str, values: Mapping[str, Any], paraphrase: pd.DataFrame) -> str:
    text = f"{role.capitalize()} {_name(system)}"
    if {"system", "paraphrase", "cluster"} <= set(paraphrase):
        row = paraphrase[paraphrase["system"].astype(str) == system].to_dict("records")
        if row and finite(row[0]["paraphrase"]):
            cluster = f", cluster {row[0]['cluster']:g}" if finite(row[0]["cluster"]) else ""
            return f"{text}: paraphrase score {float(row[0]['paraphrase']):.3f}{cluster}"
    scores = [f"{g} {values[g]:.3f}" for g in RANKED_GROUPS if g in values]
    return f"{text}: " + " · ".join(scores) if scores else text
