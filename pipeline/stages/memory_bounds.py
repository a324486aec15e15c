"""Memory of data-sized count settings, checked before scoring; estimates live by the allocator."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from paraeval.metrics.base import Sizes
from paraeval.pipeline.config.settings import Settings
from paraeval.pipeline.config.targets import metric_settings
from paraeval.pipeline.errors import ConfigError

# characters per wordpiece token, at least, in the sentences of a pool (an estimate's bound)
CHARS_PER_TOKEN = 3


@dataclass(frozen=True)
class Shape:
    """What the memory of a setting is estimated from."""

    rows: int
    systems: int
    items: int
    aspects: int
    columns: int  # the output columns a metric set gives, at most (3 per metric and 2 averages)
    sentences: int  # candidates, references and sources, at most: what an encoder encodes
    pairs: int  # candidate-reference pairs
    tokens: int  # tokens per sentence on average, at most (from the characters)

    @classmethod
    def of(cls, table: pd.DataFrame, n_metrics: int) -> Shape:
        # upper bounds, without hashing every text
        n_refs = int(table["references"].map(len).sum()) if "references" in table else 0
        chars = float(table["candidate"].astype(str).str.len().mean()) if len(table) else 0.0
        items = int(table["item_id"].nunique())
        return cls(
            rows=len(table),
            systems=int(table["system"].nunique()),
            items=items,
            aspects=sum(str(c).startswith("human_") for c in table.columns),
            columns=3 * n_metrics + 2 + sum(str(c).startswith("metric_") for c in table.columns),
            sentences=len(table) + items + n_refs,
            pairs=max(len(table), n_refs),
            tokens=min(512, int(chars / CHARS_PER_TOKEN) + 2),
        )


def available_memory() -> int | None:
    """``MemAvailable`` (else free pages), capped by the cgroup v2 limit; None when unknown."""
    found: int | None = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                found = int(line.split()[1]) * 1024
                break
    except (OSError, ValueError, IndexError):
        pass
    if found is None:
        try:
            found = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            return None
    group = Path("/sys/fs/cgroup")
    try:
        limit = (group / "memory.max").read_text().strip()
        if limit != "max":
            used = int((group / "memory.current").read_text().strip())
            found = min(found, max(0, int(limit) - used))
    except (OSError, ValueError):
        pass
    return found


def _gb(nbytes: float) -> str:
    return f"{nbytes / 1e9:,.1f} GB" if nbytes >= 1e8 else f"{nbytes / 1e6:,.0f} MB"


Estimate = tuple[str, object, int]  # setting, its value, bytes it needs


def estimates(settings: Settings, shape: Shape) -> list[Estimate]:
    """Every count setting of the run with the memory it needs on ``shape``, in check order."""
    from paraeval.correlation.significance import permutation_nbytes
    from paraeval.correlation.spa import sign_matrix_nbytes
    from paraeval.correlation.table import table_nbytes
    from paraeval.pipeline.stages.alpha import alpha_curve_nbytes
    from paraeval.pipeline.stages.compare import compare_nbytes
    from paraeval.pipeline.stages.correlate import TABLE_WORKERS

    out: list[Estimate] = []
    cfg, sig, compare = settings.correlation, settings.correlation.significance, settings.compare
    systems, items, aspects = shape.systems, shape.items, shape.aspects
    if aspects and cfg.bootstrap:
        shape_of = (cfg.levels, cfg.coefficients, systems, items, cfg.n_resamples, cfg.unit)
        nbytes = table_nbytes(aspects, *shape_of, TABLE_WORKERS)
        out.append(("correlation.n_resamples", cfg.n_resamples, nbytes))
    if aspects and sig is not None and sig.method == "permutation":
        nbytes = max(permutation_nbytes(sig.n_resamples, systems, items, t.unit) for t in sig.tasks)
        out.append(("correlation.significance.n_resamples", sig.n_resamples, nbytes))
    for coef in cfg.coefficients:
        if coef.name == "soft_pairwise_accuracy" and "system" in cfg.levels and aspects:
            perms = int(dict(coef.options)["n_permutations"])
            # one p-value matrix per resample too: the table's resamples count once more
            key = f"correlation.coefficient_settings.{coef.name}.n_permutations"
            out.append((key, perms, sign_matrix_nbytes(items, perms, systems)))
    if compare is not None:
        for key, boot, trials in (
            ("compare.n_bootstrap", compare.n_bootstrap, 0),
            ("compare.n_ar", 0, compare.n_ar),
        ):
            nbytes = compare_nbytes(items, systems, shape.columns, boot, trials)
            out.append((key, boot or trials, nbytes))
    sizes = Sizes(shape.rows, shape.sentences, shape.pairs, shape.tokens)
    for metric_id, node in settings.metrics.items():
        cls, _ = metric_settings(metric_id, node, settings.allow_external_metrics)
        for key, nbytes_of in cls.memory.items():
            value = node.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                out.append((f"metrics.{metric_id}.{key}", value, nbytes_of(value, sizes)))
    curve = settings.alpha_curve
    if curve.enabled and "ibleu" in settings.metrics:
        n = len(curve.grid)
        nbytes = alpha_curve_nbytes(n, shape.rows, len(curve.levels), aspects)
        out.append(("alpha_curve.grid", f"{n} values", nbytes))
    return out


def check_memory(settings: Settings, table: pd.DataFrame, limit: int | None = None) -> None:
    """A ConfigError for the first setting whose estimated memory exceeds ``limit`` (if known)."""
    limit = available_memory() if limit is None else limit
    if limit is None:
        return
    shape = Shape.of(table, len(settings.metrics))
    for key, value, needed in estimates(settings, shape):
        if needed > limit:
            raise ConfigError(
                f"{key}={value} needs about {_gb(needed)} of memory for {shape.rows:,} rows: "
                f"{shape.items:,} items x {shape.systems:,} systems, {shape.aspects} human "
                f"aspect(s), more than the {_gb(limit)} this machine has available; lower {key}"
            )
