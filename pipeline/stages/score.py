"""Score stage: every selected metric on every system.

Builds metrics from their config (``_target_`` is the registry), gives each metric every text of the
run once (``prepare``) so encoders see each unique sentence once, then scores system by system.
"""

from __future__ import annotations

import difflib
import inspect
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from paraeval.memo import Memo
from paraeval.metrics.base import Metric, MetricConfigError, MissingResourceError
from paraeval.pipeline.stages.cache import ScoreCache, cache_signature, key_of, texts_digest
from paraeval.pipeline.errors import ConfigError, DataError
from paraeval.pipeline.data.load import in_order, row_groups
from paraeval.pipeline.names import show
from paraeval.pipeline.config.targets import metric_class

log = logging.getLogger(__name__)


@dataclass
class ColumnInfo:
    """What the aggregate and correlate stages need to know about an output column."""

    metric: str
    group: str
    higher_is_better: bool
    signature: str


@dataclass
class Scores:
    segments: pd.DataFrame  # the tidy table + one column per metric output
    corpus: pd.DataFrame  # index: system; columns: metric outputs (corpus-level)
    columns: dict[str, ColumnInfo]
    stats: dict[tuple[str, str], np.ndarray] = field(default_factory=dict)
    metrics: dict[str, Metric] = field(default_factory=dict)


def metric_settings(
    metric_id: str, settings: Mapping[str, Any], allow_external: bool = False
) -> tuple[type[Metric], dict[str, Any]]:
    """The class and keyword arguments of one metric's config node, checked without building
    it: ``_target_`` on the allow-list, every setting a parameter of the class."""
    settings = dict(settings)
    target = settings.pop("_target_", None)
    if not target:
        raise ConfigError(f"metrics.{metric_id} has no _target_")
    # exact names only (pipeline/targets.py); other code only with the user's opt-in
    cls = metric_class(str(target), metric_id, allow_external)
    params = inspect.signature(cls.__init__).parameters
    valid = [p for p in params if p != "self"]
    unknown = [k for k in settings if k not in params]
    if unknown and not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        near = difflib.get_close_matches(unknown[0], valid, n=1, cutoff=0.5)
        hint = f"; did you mean 'metrics.{metric_id}.{near[0]}'?" if near else ""
        raise ConfigError(
            f"metrics.{metric_id}: unknown setting(s) {unknown}{hint}; valid: {valid}"
        )
    return cls, settings


def build_metric(
    metric_id: str, settings: Mapping[str, Any], allow_external: bool = False
) -> Metric:
    """Instantiate one metric from its config node; errors are one line naming the key."""
    cls, settings = metric_settings(metric_id, settings, allow_external)
    try:
        metric = cls(**settings)
    except (MetricConfigError, MissingResourceError) as exc:
        raise ConfigError(str(exc)) from None
    except TypeError as exc:
        raise ConfigError(f"metrics.{metric_id}: {exc}") from None
    if metric.name != metric_id:
        log.debug("metric config key %s builds metric %s", metric_id, metric.name)
    return metric


def build_metrics(
    cfg_metrics: Mapping[str, Any] | None, allow_external: bool = False
) -> dict[str, Metric]:
    if not cfg_metrics:
        raise ConfigError("no metrics selected; e.g. 'metrics=[bleu,chrf]'")
    return {
        str(key): build_metric(str(key), node, allow_external)
        for key, node in cfg_metrics.items()
        if node is not None
    }


def _check_inputs(df: pd.DataFrame, metrics: Mapping[str, Metric]) -> None:
    """Each item has what every metric needs: references, a source. The first metric that lacks
    one names the first such row."""
    no_ref = no_src = None  # computed once, for the first metric that needs them
    for metric_id, metric in metrics.items():
        if metric.needs_references:
            no_ref = df["references"].map(len) == 0 if no_ref is None else no_ref
            if no_ref.any():
                row = df.loc[no_ref].iloc[0]
                file, _, line = str(row.origin).rpartition(":")
                raise DataError(
                    f"item '{row.item_id}' has no reference but metric '{metric_id}' needs one; "
                    f"give references for every item or remove '{metric_id}' from metrics",
                    file=file or None,
                    row=int(line) if line.isdigit() else None,
                    column="references",
                )
        if metric.needs_sources or metric.against_source:
            no_src = df["source"].str.strip() == "" if no_src is None else no_src
            if no_src.any():
                row = df.loc[no_src].iloc[0]
                file, _, line = str(row.origin).rpartition(":")
                raise DataError(
                    f"item '{row.item_id}' has no source but metric '{metric_id}' needs one",
                    file=file or None,
                    row=int(line) if line.isdigit() else None,
                    column="source",
                )


def _positions(column: pd.Series, systems: list[Any]) -> dict[Any, np.ndarray]:
    """Each system's row positions, ascending."""
    found = dict(row_groups(column))
    return {s: found[s] for s in systems}


def run_texts(df: pd.DataFrame) -> list[str]:
    """Every text of the run, each once, in a stable order."""
    texts: dict[str, None] = {}
    for col in ("candidate", "source"):
        texts.update(dict.fromkeys(df[col].tolist()))
    for refs in df["references"]:
        texts.update(dict.fromkeys(refs))
    return list(texts)


# The texts' digest of every (system, against-source) call of a table, by the table's load
# token: the jobs of a sweep score the same loaded data, and hashing its texts is most of a
# cache-served score stage
_DIGESTS: Memo[str, dict[tuple[str, bool], str]] = Memo("score.digests", max_entries=4)


def score(
    df: pd.DataFrame,
    metrics: Mapping[str, Metric],
    progress: bool = True,
    cache: ScoreCache | None = None,
    texts_key: str | None = None,
) -> Scores:
    """Every metric on every system. ``texts_key`` (:func:`paraeval.pipeline.data.load.take_load_token`
    of ``df``) keys this process's memo of the texts' digests, which the cache looks up by."""
    systems = in_order(df["system"])
    _check_inputs(df, metrics)
    corpus_rows: dict[str, dict[str, float]] = {s: {} for s in systems}
    columns: dict[str, ColumnInfo] = {}
    stats: dict[tuple[str, str], np.ndarray] = {}
    # every text of the run, gathered only when a metric has something to compute (a tenth of a
    # second at ParaBank's 14,000 rows, for nothing in a cache-served sweep job)
    texts: list[str] | None = None
    positions = _positions(df["system"], systems)
    jobs = [(mid, m, False) for mid, m in metrics.items()]
    jobs += [(mid, m, True) for mid, m in metrics.items() if m.against_source]
    # each system's texts, taken when first needed: every metric sees the same texts
    calls: dict[tuple[str, bool], tuple[list[str], list[list[str]], list[str]]] = {}

    def texts_of(system: str, vs_source: bool) -> tuple[list[str], list[list[str]], list[str]]:
        call = calls.get((system, vs_source))
        if call is None:
            sub = df.iloc[positions[system]]
            srcs = sub["source"].tolist()
            refs = [[x] for x in srcs] if vs_source else sub["references"].tolist()
            call = calls[(system, vs_source)] = (sub["candidate"].tolist(), refs, srcs)
        return call

    digests: dict[tuple[str, bool], str] = {}
    if cache is not None:
        kept = (_DIGESTS.get(texts_key) if texts_key is not None else None) or {}
        for system in systems:
            for vs_source in sorted({v for _, _, v in jobs}):
                digest = kept.get((system, vs_source))
                digests[(system, vs_source)] = digest or texts_digest(*texts_of(system, vs_source))
        if texts_key is not None and digests.keys() - kept.keys():
            _DIGESTS.put(texts_key, {**kept, **digests})
    signatures = {mid: cache_signature(m) for mid, m in metrics.items()} if cache else {}
    seg_values: dict[str, np.ndarray] = {}
    # no bar when stderr is not a terminal (a log file would collect every redraw)
    bar = tqdm(
        total=len(jobs) * len(systems),
        desc="scoring",
        unit="system",
        disable=None if progress else True,
        leave=False,
    )
    prepared: set[str] = set()
    for metric_id, metric, vs_source in jobs:
        suffix = "_src" if vs_source else ""
        for system in systems:
            bar.set_postfix_str(show(f"{metric_id}{suffix} / {system}"))
            result = None
            if cache is not None:
                key = key_of(signatures[metric_id], digests[(system, vs_source)])
                n = len(positions[system])
                result = cache.get_by_key(metric_id + suffix, metric, key, n)
            if result is None:
                cands, refs, srcs = texts_of(system, vs_source)
                # encoders batch every text of the run once, and only when something is computed
                if metric_id not in prepared:
                    if texts is None:
                        texts = run_texts(df)
                    metric.prepare(texts)
                    prepared.add(metric_id)
                result = metric.score(cands, refs, srcs)
                if cache is not None:
                    cache.put(metric, cands, refs, srcs, result, digests[(system, vs_source)])
            for col, values in result.segment.items():
                name = f"{col}{suffix}"
                column = seg_values.setdefault(name, np.full(len(df), np.nan))
                column[positions[system]] = np.asarray(values, dtype=float)
                corpus_rows[system][name] = result.corpus[col]
                columns[name] = ColumnInfo(
                    metric=metric_id,
                    group="diversity" if vs_source else metric.group,
                    higher_is_better=metric.higher_is_better,
                    signature=result.signature + ("|vs:source" if vs_source else ""),
                )
            if result.stats is not None:
                stats[(f"{metric_id}{suffix}", system)] = result.stats
            bar.update(1)
    base = df.drop(columns=[c for c in seg_values if c in df.columns])
    segments = pd.concat([base, pd.DataFrame(seg_values, index=df.index)], axis=1)
    corpus = pd.DataFrame.from_dict(corpus_rows, orient="index")
    corpus = corpus.reindex(index=pd.Index(systems, name="system"), columns=list(seg_values))
    bar.close()
    return Scores(segments, corpus, columns, stats, dict(metrics))
