"""Score stage; ``prepare`` gets every text once, so encoders see each sentence once."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from paraeval.metrics.base import Composed, Metric, MetricResult, SegmentLocal, row_slices
from paraeval.pipeline.data.validate import in_order, origin_error, row_groups
from paraeval.pipeline.engine.base import Engine, Later, LocalEngine, Origin

# the metric builders are imported from here too (the config check, the tests)
from paraeval.pipeline.engine.build import build_metric as build_metric
from paraeval.pipeline.engine.build import build_metrics as build_metrics
from paraeval.pipeline.engine.texts import RunTexts, Texts
from paraeval.pipeline.names import show
from paraeval.pipeline.stages.cache import ScoreCache, cache_signature, key_of, texts_digest

log = logging.getLogger(__name__)
# distinct segments per call of a segment-local metric (ParaBank-Eval's 14,323 rows fit in one)
ROWS_PER_CALL = 16_384


@dataclass
class ColumnInfo:
    """What the aggregate and correlate stages need to know about an output column."""

    metric: str
    group: str
    higher_is_better: bool
    signature: str  # of the corpus scores
    segment_signature: str = ""  # of the segment scores, where they differ ("": the same)


@dataclass
class Scores:
    segments: pd.DataFrame  # the tidy table + one column per metric output
    corpus: pd.DataFrame  # index: system; columns: metric outputs (corpus-level)
    columns: dict[str, ColumnInfo]
    stats: dict[tuple[str, str], np.ndarray] = field(default_factory=dict)
    metrics: dict[str, Metric] = field(default_factory=dict)


def _check_inputs(df: pd.DataFrame, metrics: Mapping[str, Metric]) -> None:
    no_ref = no_src = None  # computed once, for the first metric that needs them
    for metric_id, metric in metrics.items():
        if metric.needs_references:
            no_ref = df["references"].map(len) == 0 if no_ref is None else no_ref
            hint = f"; give references for every item or remove '{metric_id}' from metrics"
            _raise_first(df, no_ref, metric_id, "references", "reference", hint)
        if metric.needs_sources or metric.against_source:
            no_src = df["source"].str.strip() == "" if no_src is None else no_src
            _raise_first(df, no_src, metric_id, "source", "source")


def _raise_first(
    df: pd.DataFrame, missing: pd.Series, metric_id: str, column: str, what: str, hint: str = ""
) -> None:
    if missing.any():
        row = df.loc[missing].iloc[0]
        raise origin_error(
            f"item '{row.item_id}' has no {what} but metric '{metric_id}' needs one{hint}",
            row.origin,
            column,
        )


class _Work:
    """Texts held as codes, lists built per call: memory does not grow with the table."""

    def __init__(
        self,
        df: pd.DataFrame,
        systems: list[str],
        positions: dict[str, np.ndarray],
        cache: ScoreCache | None,
        rows_per_call: int,
        engine: Engine,
    ) -> None:
        self.systems, self.positions, self.cache = systems, positions, cache
        self.rows_per_call, self.engine = rows_per_call, engine
        self.codes = RunTexts(df)
        engine.texts = self.codes.unique
        self._digests: dict[tuple[str, bool], str] = {}
        # results by (the metric's cache signature, the texts' digest)
        self._done: dict[tuple[str, str], Later] = {}
        # what was computed, not read from the cache: (metric, system, against the source, it)
        self._fresh: list[tuple[Metric, str, bool, Later]] = []

    def texts(self, system: str, vs_source: bool) -> Texts:
        """One system's texts; against the source, the references are the source."""
        return self.codes.texts(self.positions[system], vs_source)

    def digest(self, system: str, vs_source: bool) -> str:
        key = (system, vs_source)
        if key not in self._digests:
            self._digests[key] = texts_digest(*self.texts(system, vs_source))
        return self._digests[key]

    def results(
        self, name: str, metric: Metric, vs_source: bool, origin: Origin
    ) -> dict[str, Later]:
        """Every system's result of ``metric``, computed when first read (``name``: for counts)."""
        out: dict[str, Later] = {}
        if self.cache is not None:
            signature = cache_signature(metric)
            for system in self.systems:
                key = key_of(signature, self.digest(system, vs_source))
                hit = self.cache.get(name, metric, key, len(self.positions[system]))
                if hit is not None:
                    out[system] = Later.now(hit)
        todo = [s for s in self.systems if s not in out]
        if todo:
            fresh = self._compute(metric, vs_source, todo, origin)
            out |= fresh
            self._fresh += [(metric, s, vs_source, fresh[s]) for s in todo]
        return out

    def store(self) -> None:
        """The results computed so far into the score cache: an interrupted run keeps them."""
        for metric, system, vs_source, later in self._fresh:
            if later.done and self.cache is not None:
                texts = self.texts(system, vs_source)
                self.cache.put(metric, *texts, later.get(), self.digest(system, vs_source))
        self._fresh = [fresh for fresh in self._fresh if not fresh[3].done]

    def _compute(
        self, metric: Metric, vs_source: bool, systems: list[str], origin: Origin
    ) -> dict[str, Later]:
        if isinstance(metric, Composed):
            # a part against the sources is scored on the system's texts against the source
            done = [
                self._compute(part, vs_source or on_src, systems, origin.part(i))
                for i, (part, on_src) in enumerate(metric.parts())
            ]
            return {s: _from_parts(metric, [d[s] for d in done]) for s in systems}
        signature = cache_signature(metric)
        keys = {s: (signature, self.digest(s, vs_source)) for s in systems}
        # one system per distinct call that is not asked for yet
        firsts = {key: s for s, key in reversed(keys.items())}
        todo = [s for s in systems if firsts[keys[s]] == s and keys[s] not in self._done]
        if todo:
            if isinstance(metric, SegmentLocal):
                done = self._score_segments(metric, todo, vs_source, origin)
            else:
                calls = [self.texts(s, vs_source) for s in todo]
                done = self.engine.score_systems(metric, origin, calls)
            for system, result in zip(todo, done, strict=True):
                self._done[keys[system]] = result
        return {s: self._done[keys[s]] for s in systems}

    def _score_segments(
        self, metric: SegmentLocal, systems: list[str], vs_source: bool, origin: Origin
    ) -> list[Later]:
        """The distinct segments of ``systems`` scored, each system's result selected from them."""
        rows = np.concatenate([self.positions[s] for s in systems])
        firsts, where = self.codes.segments(rows, vs_source)

        def calls() -> Iterator[Texts]:
            for part in row_slices(len(firsts), self.rows_per_call):
                yield self.codes.texts(firsts[part], vs_source)

        whole = self.engine.score_calls(metric, origin, calls)
        ends = np.cumsum([len(self.positions[s]) for s in systems])
        return [
            whole.then(lambda result, picked=picked: metric.select(result, picked))
            for picked in np.split(where, ends[:-1])
        ]


def _from_parts(metric: Composed, parts: list[Later]) -> Later:
    return Later(lambda: metric.from_parts([p.get() for p in parts]))


def score(
    df: pd.DataFrame,
    metrics: Mapping[str, Metric],
    progress: bool = True,
    cache: ScoreCache | None = None,
    rows_per_call: int | None = None,
    engine: Engine | None = None,
) -> Scores:
    """Every metric on every system; ``engine``: default this process."""
    systems = in_order(df["system"])
    _check_inputs(df, metrics)
    corpus_rows: dict[str, dict[str, float]] = {s: {} for s in systems}
    columns: dict[str, ColumnInfo] = {}
    stats: dict[tuple[str, str], np.ndarray] = {}
    positions = dict(row_groups(df["system"]))  # each system's row positions, ascending
    jobs = [(mid, m, False) for mid, m in metrics.items()]
    jobs += [(mid, m, True) for mid, m in metrics.items() if m.against_source]
    per_call = ROWS_PER_CALL if rows_per_call is None else rows_per_call
    work = _Work(df, systems, positions, cache, per_call, engine or LocalEngine())
    ref_counts = set(df["references"].map(len)) if len(df) else set()
    nrefs = ref_counts.pop() if len(ref_counts) == 1 else None  # None: sacrebleu's nrefs:var
    seg_values: dict[str, np.ndarray] = {}
    # no bar when stderr is not a terminal (a log file would collect every redraw)
    bar = tqdm(
        total=len(jobs) * len(systems),
        desc="scoring",
        unit="system",
        disable=None if progress else True,
        leave=False,
    )
    # every result asked for first, then read: an engine may compute them all at once
    asked = [work.results(mid + ("_src" if vs else ""), m, vs, Origin(mid)) for mid, m, vs in jobs]
    for (metric_id, metric, vs_source), later in zip(jobs, asked, strict=True):
        suffix = "_src" if vs_source else ""
        bar.set_postfix_str(show(f"{metric_id}{suffix}"))
        results: dict[str, MetricResult] = {s: r.get() for s, r in later.items()}
        work.store()
        # scored against the source, a candidate has one reference
        refs_here = 1 if vs_source else nrefs
        vs = "|vs:source" if vs_source else ""
        corpus_sig, segment_sig = (metric.signature(refs_here, seg) + vs for seg in (False, True))
        group = "diversity" if vs_source else metric.group
        segment_sig = "" if segment_sig == corpus_sig else segment_sig
        for system in systems:
            result = results[system]
            for col, values in result.segment.items():
                name = f"{col}{suffix}"
                column = seg_values.setdefault(name, np.full(len(df), np.nan))
                column[positions[system]] = np.asarray(values, dtype=float)
                corpus_rows[system][name] = result.corpus[col]
                columns[name] = ColumnInfo(
                    metric_id, group, metric.higher_is_better, corpus_sig, segment_sig
                )
            if result.stats is not None:
                stats[(f"{metric_id}{suffix}", system)] = result.stats
        bar.update(len(systems))
    base = df.drop(columns=[c for c in seg_values if c in df.columns])
    segments = pd.concat([base, pd.DataFrame(seg_values, index=df.index)], axis=1)
    corpus = pd.DataFrame.from_dict(corpus_rows, orient="index")
    corpus = corpus.reindex(index=pd.Index(systems, name="system"), columns=list(seg_values))
    bar.close()
    return Scores(segments, corpus, columns, stats, dict(metrics))
