"""Every count and size setting, checked once the data is loaded and before any scoring, when the
data's shape is known: a count that is not a positive integer, or whose memory, estimated from
that shape, exceeds what the machine has available, is a config error naming the setting, the
estimate and the limit.

The estimates are small functions next to the code that allocates (each documented there, each
tested against that code's measured peak): this module only gathers the data's shape, asks them,
and compares with :func:`available_memory`. Settings whose memory does not grow with the data
(``report.max_rows``, ``correlation.significance.block_size``) are checked for their type only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from paraeval.pipeline.config.bounds import NGRAM_ORDERS
from paraeval.pipeline.errors import ConfigError

if TYPE_CHECKING:
    from paraeval.pipeline.config.settings import Settings

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
        # upper bounds, without hashing every text: each row's candidate, each item's source
        # and every reference
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

    def describe(self) -> str:
        return (
            f"{self.rows:,} rows: {self.items:,} items x {self.systems:,} systems, "
            f"{self.aspects} human aspect(s)"
        )


def available_memory() -> int | None:
    """Bytes this process may still take: the kernel's ``MemAvailable`` (``/proc/meminfo``), or
    where there is none the free physical pages (``os.sysconf``), and no more than what the
    control group's limit leaves (``memory.max`` less ``memory.current``, cgroup v2); None where
    neither source answers."""
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
    """Every count setting of the run with the memory it needs on ``shape``."""
    from paraeval.correlation.significance import permutation_nbytes
    from paraeval.correlation.spa import sign_matrix_nbytes
    from paraeval.correlation.table import table_nbytes
    from paraeval.metrics.base import ngram_stats_nbytes
    from paraeval.metrics.bertscore import step_nbytes
    from paraeval.metrics.encoder_pass import batch_nbytes
    from paraeval.pipeline.stages.alpha import alpha_curve_nbytes
    from paraeval.pipeline.stages.compare import compare_nbytes
    from paraeval.pipeline.stages.correlate_settings import (
        check_correlation_config,
        coefficient_objects,
    )

    out: list[Estimate] = []
    cfg = settings.correlation
    levels, names = check_correlation_config(cfg)
    coefficients = coefficient_objects(cfg, names)
    resamples = int(cfg.get("n_resamples", 1000))
    if (
        shape.aspects
        and cfg.get("ci", True)
        and str(cfg.get("interval", "bootstrap")) == "bootstrap"
    ):
        unit = str(cfg.get("unit", "auto"))
        out.append(
            (
                "correlation.n_resamples",
                resamples,
                table_nbytes(
                    shape.aspects, levels, coefficients, shape.systems, shape.items, resamples, unit
                ),
            )
        )
    sig = cfg.get("significance") or {}
    if shape.aspects and sig.get("enabled") and str(sig.get("method")) == "permutation":
        k = int(sig.get("n_resamples", 1000))
        sig_unit = str(sig.get("unit", "items"))
        out.append(
            (
                "correlation.significance.n_resamples",
                k,
                permutation_nbytes(k, shape.systems, shape.items, sig_unit),
            )
        )
    for coef in coefficients:
        if coef.name == "soft_pairwise_accuracy" and "system" in levels and shape.aspects:
            node = (cfg.get("coefficient_settings") or {}).get(coef.name) or {}
            perms = int(node.get("n_permutations", 1000))
            # one p-value matrix per resample too: the table's resamples count once more
            out.append(
                (
                    f"correlation.coefficient_settings.{coef.name}.n_permutations",
                    perms,
                    sign_matrix_nbytes(shape.items, perms, shape.systems),
                )
            )
    compare = settings.compare
    if compare is not None:
        for key, boot, trials in (
            ("compare.n_bootstrap", compare.n_bootstrap, 0),
            ("compare.n_ar", 0, compare.n_ar),
        ):
            out.append(
                (
                    key,
                    boot or trials,
                    compare_nbytes(shape.items, shape.systems, shape.columns, boot, trials),
                )
            )
    for metric_id, node in settings.metrics.items():
        batch = node.get("batch_size")
        if isinstance(batch, int) and not isinstance(batch, bool):
            out.append(
                (
                    f"metrics.{metric_id}.batch_size",
                    batch,
                    batch_nbytes(batch, shape.sentences),
                )
            )
        step = node.get("bert_score_batch_size")
        if isinstance(step, int) and not isinstance(step, bool):
            out.append(
                (
                    f"metrics.{metric_id}.bert_score_batch_size",
                    step,
                    step_nbytes(step, shape.pairs, shape.tokens),
                )
            )
        for key in NGRAM_ORDERS:
            order = node.get(key)
            if isinstance(order, int) and not isinstance(order, bool):
                out.append(
                    (
                        f"metrics.{metric_id}.{key}",
                        order,
                        ngram_stats_nbytes(shape.rows, order),
                    )
                )
    curve = settings.alpha_curve
    if curve.enabled and "ibleu" in settings.metrics:
        grid = curve.alphas()
        out.append(
            (
                "alpha_curve.grid",
                f"{len(grid)} values",
                alpha_curve_nbytes(len(grid), shape.rows, len(curve.levels), shape.aspects),
            )
        )
    return out


def check_memory(settings: Settings, table: pd.DataFrame, limit: int | None = None) -> None:
    """A ConfigError for the first setting whose estimated memory on ``table`` exceeds ``limit``
    (default: :func:`available_memory`; nothing is checked where it is unknown)."""
    limit = available_memory() if limit is None else limit
    if limit is None:
        return
    shape = Shape.of(table, len(settings.metrics))
    for key, value, needed in estimates(settings, shape):
        if needed > limit:
            raise ConfigError(
                f"{key}={value} needs about {_gb(needed)} of memory for {shape.describe()}, "
                f"more than the {_gb(limit)} this machine has available; lower {key}"
            )
