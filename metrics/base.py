"""The metric contract shared by every metric family.

A metric is a small class whose constructor arguments are exactly its YAML settings. It scores the
candidates of ONE system at a time and returns per-segment scores, its own corpus-level score and a
signature that pins everything that changes the number.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar, NamedTuple, Protocol, runtime_checkable

import numpy as np

# Only "syntactic" and "semantic" are averaged: averaging similarity with "diversity" (distance
# from the SOURCE), "paraphrase" (adequacy already combined with diversity: it would count adequacy
# twice and reward copying) or "output_diversity" (a whole system's variety) mixes opposite goals.
GROUPS: tuple[str, ...] = ("syntactic", "semantic", "diversity", "paraphrase", "output_diversity")
AVERAGED_GROUPS: tuple[str, ...] = ("syntactic", "semantic")
MULTI_REF_RULES: tuple[str, ...] = ("max", "mean")
# one system's texts as a metric sees them: candidates, per-segment references, sources
Texts = tuple[Sequence[str], Sequence[Sequence[str]], Sequence[str] | None]


class MetricConfigError(ValueError):
    """A metric setting is invalid; the message is shown to the user as one line."""


class MissingResourceError(RuntimeError):
    """A resource (model, WordNet, checkpoint) is absent; the message says what to install."""


@dataclass
class MetricResult:
    """One system's per-candidate (``segment``) and own corpus scores (``corpus``) per column,
    and optional per-segment sufficient statistics for ``Metric.corpus_from_stats``."""

    segment: dict[str, np.ndarray]
    corpus: dict[str, float]
    signature: str
    stats: np.ndarray | None = None
    extra: dict[str, float] = field(default_factory=dict)


@dataclass
class CorpusCounts:
    """What a metric's corpus-dependent weights come from: a total and counts over a call's texts
    (CIDEr: items and document frequencies; NIST: reference words and n-gram frequencies;
    BERTScore with idf: references and token document frequencies). Both add over any split of
    the call's rows, so shards' counts summed are the whole call's."""

    total: int = 0
    counts: Counter[Any] = field(default_factory=Counter)

    def __add__(self, other: CorpusCounts) -> CorpusCounts:
        out = CorpusCounts(self.total, Counter(self.counts))
        out += other
        return out

    def __iadd__(self, other: CorpusCounts) -> CorpusCounts:
        self.total += other.total
        self.counts.update(other.counts)
        return self


class Sizes(NamedTuple):
    """The shape of a run's data that memory estimates are made from (upper bounds)."""

    rows: int
    sentences: int  # candidates, references and sources: what an encoder encodes
    pairs: int  # candidate-reference pairs
    tokens: int  # tokens per sentence on average


Estimator = Callable[[int, Sizes], int]


class MetricInfo(NamedTuple):
    """What a run reads of a metric without building it (no model or resource is loaded)."""

    name: str
    group: str
    higher_is_better: bool
    needs_references: bool
    needs_sources: bool
    resources: tuple[str, ...]
    segment_local: bool  # a :class:`SegmentLocal`
    sharded: bool  # a :class:`Sharded`
    composed: bool  # a :class:`Composed`
    version: str
    corpus_only: bool  # a :class:`SystemLevel`
    distance_to_source: bool
    needs_own_references: bool


class Metric(ABC):
    """Base class: subclasses set the class constants and implement ``_score``; ``columns``
    defaults to ``(name,)``. ``name`` is a class constant too, except where a setting changes
    the column: an instance then sets its own (``RougeN(n=4).name == "rouge4"``), and the class's
    is its config id.

    ``distance_to_source`` marks a diversity metric whose HIGHER value means FURTHER from the
    source (PINC); ``needs_own_references`` one that contrasts references with sources (iBLEU).
    """

    name: str = ""
    default_group: ClassVar[str] = "syntactic"
    higher_is_better: ClassVar[bool] = True
    needs_references: ClassVar[bool] = True
    needs_sources: ClassVar[bool] = False
    columns: ClassVar[tuple[str, ...]] = ()
    distance_to_source: ClassVar[bool] = False
    # a reference-free run leaves it out: iBLEU is then (2α − 1) · BLEU(candidate, source)
    needs_own_references: ClassVar[bool] = False
    # what scoring loads beyond the texts ("encoder", "WordNet", ...): list_metrics() shows it
    resources: ClassVar[tuple[str, ...]] = ()
    # bumped by hand whenever the metric's numbers change: the score cache's entries carry it
    version: ClassVar[str] = "1"
    # the memory each count setting needs (setting -> estimator of its value on data of Sizes),
    # checked before a run scores anything
    memory: ClassVar[Mapping[str, Estimator]] = MappingProxyType({})

    def __init__(
        self,
        group: str | None = None,
        against_source: bool = False,
        multi_ref: str = "max",
    ) -> None:
        self.group: str = choice_setting(self.name, "group", group or self.default_group, GROUPS)
        self.against_source: bool = bool(against_source)
        self.multi_ref: str = choice_setting(self.name, "multi_ref", multi_ref, MULTI_REF_RULES)

    @classmethod
    def describe(cls, settings: Mapping[str, Any] | None = None) -> MetricInfo:
        """The descriptor of this class with these config settings, read without building."""
        group = (settings or {}).get("group") or cls.default_group
        return MetricInfo(
            cls.name,
            group,
            cls.higher_is_better,
            cls.needs_references,
            cls.needs_sources,
            cls.resources,
            issubclass(cls, SegmentLocal),
            issubclass(cls, Sharded),
            issubclass(cls, Composed),
            cls.version,
            issubclass(cls, SystemLevel),
            cls.distance_to_source,
            cls.needs_own_references,
        )

    @property
    def output_columns(self) -> tuple[str, ...]:
        return self.columns or (self.name,)

    def prepare(self, texts: Iterable[str]) -> None:  # noqa: B027 - optional hook
        """Called once per run with every text the metric will see (all systems, references,
        sources). Metrics with an expensive per-sentence step (encoders) batch it here, once."""

    def score(
        self,
        candidates: Sequence[str],
        references: Sequence[Sequence[str]],
        sources: Sequence[str] | None = None,
    ) -> MetricResult:
        """Score one system. ``references[i]`` is the (possibly empty, possibly ragged) list of
        references of ``candidates[i]``; ``sources[i]`` its source sentence."""
        self._check_call(candidates, references, sources)
        n = len(candidates)
        result = self._score(list(candidates), [list(r) for r in references], sources)
        for col, values in result.segment.items():
            if len(values) != n:
                raise AssertionError(f"{self.name}: column {col} has {len(values)} != {n} scores")
        return result

    def _check_call(
        self,
        candidates: Sequence[str],
        references: Sequence[Sequence[str]],
        sources: Sequence[str] | None = None,
    ) -> None:
        n = len(candidates)
        if len(references) != n:
            raise ValueError(f"{self.name}: {n} candidates but {len(references)} reference lists")
        if sources is not None and len(sources) != n:
            raise ValueError(f"{self.name}: {n} candidates but {len(sources)} sources")
        empty = next((i for i, refs in enumerate(references) if len(refs) == 0), None)
        if self.needs_references and empty is not None:
            msg = f"metric '{self.name}' needs references but segment {empty} has none"
            raise MetricConfigError(msg)
        if self.needs_sources and sources is None:
            raise MetricConfigError(f"metric '{self.name}' needs sources")

    def score_systems(self, calls: Sequence[Texts]) -> list[MetricResult]:
        """:meth:`score` of each (candidates, references, sources) call, in order; the encoder
        metrics stream them in one pass (references the systems share encoded once)."""
        return [self.score(*call) for call in calls]

    @abstractmethod
    def _score(
        self,
        candidates: list[str],
        references: list[list[str]],
        sources: Sequence[str] | None,
    ) -> MetricResult: ...

    @abstractmethod
    def signature(self, nrefs: int | None = None, segment: bool | None = None) -> str:
        """A sacrebleu-style ``key:value|key:value`` string pinning every setting that changes
        the number (implementation and version, tokenizer, casing, multi-reference rule ...).
        With ``segment`` False or True, of the corpus or the segment scores alone (BLEU's differ
        in effective order) on data whose segments each have ``nrefs`` references (None: a
        varying number), where the reference implementation names it (sacrebleu's ``nrefs``);
        None: what pins both, the score cache's key."""

    def _mean_result(self, seg: np.ndarray) -> MetricResult:
        """The result of one column whose corpus score is the mean of its segment scores."""
        return MetricResult({self.name: seg}, {self.name: mean_corpus(seg)}, self.signature())

    def corpus_from_stats(self, stats: np.ndarray) -> dict[str, float]:
        """Corpus score from (a subset or resample of) per-segment sufficient statistics.
        Metrics whose corpus score is the mean of segment scores need not override this."""
        raise NotImplementedError(f"{self.name} has no sufficient statistics")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.signature()})"


class Sharded(Metric):
    """The sharding protocol of a metric whose call's rows affect each other only through
    :class:`CorpusCounts` of the call's texts (CIDEr, NIST, BERTScore): an engine cuts a call
    (:meth:`split`), counts each shard (:meth:`counts`), adds the counts, scores each shard with
    the sum (:meth:`score_shard`) and joins the shards (:meth:`reduce`), equal to :meth:`score`."""

    @property
    def uses_counts(self) -> bool:
        """Whether :meth:`counts` gives anything (an engine counts only where it does)."""
        return True

    def split(self, references: Sequence[Sequence[str]], rows: int) -> list[slice]:
        """Where a call with these references may be cut into shards of about ``rows`` rows
        (every ``rows`` rows; a metric whose batches are not independent cuts between them)."""
        return row_slices(len(references), rows)

    @abstractmethod
    def counts(
        self, candidates: Sequence[str], references: Sequence[Sequence[str]]
    ) -> CorpusCounts:
        """The counts of these rows."""

    @abstractmethod
    def score_shard(
        self,
        counts: CorpusCounts,
        candidates: Sequence[str],
        references: Sequence[Sequence[str]],
        sources: Sequence[str] | None = None,
    ) -> MetricResult:
        """These rows scored as part of a call whose :meth:`counts` are ``counts``: their
        segment scores and statistics (the corpus score comes from :meth:`reduce`)."""

    def reduce(self, shards: Sequence[MetricResult]) -> MetricResult:
        """A call's result from :meth:`score_shard` of its consecutive shards, in order."""
        segment, stats = joined_segments(shards)
        if stats is None:
            corpus = {col: mean_corpus(values) for col, values in segment.items()}
        else:
            corpus = self.corpus_from_stats(stats)
        return MetricResult(segment, corpus, self.signature(), stats)


class SegmentLocal(Metric):
    """A metric each of whose segments' numbers depend on its own inputs only: the score stage
    scores segments shared by several systems once and :meth:`select` gives each system's.
    Not CIDEr/NIST (corpus weights) or BERTScore (idf), where the call's other segments matter."""

    def select(self, result: MetricResult, rows: np.ndarray) -> MetricResult:
        """What :meth:`score` returns, bit for bit, for the segments at positions ``rows``
        (repeats allowed) of the call that returned ``result``; here that of a metric with one
        column whose corpus score is :func:`mean_corpus` of it."""
        seg = np.asarray(result.segment[self.name])[rows]
        return MetricResult({self.name: seg}, {self.name: mean_corpus(seg)}, result.signature)


class SystemLevel(Metric):
    """A metric of a whole system's outputs (distinct-n): NaN segment scores and one corpus score
    per system, so there are no items to resample or pair."""

    default_group = "output_diversity"
    needs_references = False

    @abstractmethod
    def system_score(self, candidates: list[str]) -> float: ...

    def _score(
        self,
        candidates: list[str],
        references: list[list[str]],
        sources: Sequence[str] | None,
    ) -> MetricResult:
        seg = np.full(len(candidates), np.nan)
        corpus = self.system_score(candidates) if candidates else float("nan")
        return MetricResult({self.name: seg}, {self.name: corpus}, self.signature())


@runtime_checkable
class Composed(Protocol):
    """A metric whose result is made of other metrics' results on its texts (iBLEU, ParaScore):
    the score stage scores each part once, shared with whatever else needs it."""

    def parts(self) -> tuple[tuple[Metric, bool], ...]:
        """The parts, each with whether it scores against the sources."""

    def from_parts(self, results: Sequence[MetricResult]) -> MetricResult:
        """This metric's result from its parts' results, in order: equal to :meth:`score`'s."""


@runtime_checkable
class BatchedCorpus(Protocol):
    def corpus_from_stats_batched(self, stats: np.ndarray) -> np.ndarray:
        """The corpus score of every row of summed statistics ``stats``, bit-equal to the
        metric's own (float32 rows in float32, as in sacrebleu's paired bootstrap)."""


@runtime_checkable
class SourceDistance(Protocol):
    """A metric whose diversity term is a distance to the source counted up to ``gamma``
    (ParaScore): the paraphrase table shows that distance next to the metric's score."""

    gamma: float

    def distances(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """Each (candidate, source) pair's distance."""


@runtime_checkable
class Decomposed(Protocol):
    """A metric whose result is its α-free components combined with a weight (iBLEU): the score
    cache keeps the components, so that another α reuses them, and the α curve recombines them."""

    alpha: float

    def components(self, result: MetricResult) -> MetricResult: ...
    def components_signature(self) -> str: ...
    def from_components(self, parts: MetricResult) -> MetricResult: ...
    def segment_components(self, stats: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...
    def corpus_components(self, stats: np.ndarray) -> tuple[float, float]: ...
    def combine(self, ref: Any, src: Any, alpha: float | None = None) -> Any: ...


def ngram_memory(setting: str) -> Mapping[str, Estimator]:
    """:attr:`Metric.memory` of an n-gram metric whose order is the setting ``setting``: its
    per-segment statistics (matches and totals per order and two lengths, float64) and a copy."""
    return MappingProxyType({setting: lambda order, sizes: 2 * 8 * sizes.rows * (2 * order + 2)})


def has_corpus_from_stats(metric: Metric) -> bool:
    """Whether the metric recomputes its corpus score from sufficient statistics."""
    return type(metric).corpus_from_stats is not Metric.corpus_from_stats


def batched_corpus_fn(metric: Metric | None) -> Callable[[np.ndarray], np.ndarray] | None:
    """The metric's :meth:`BatchedCorpus.corpus_from_stats_batched` when it has one, else None: a
    resample's corpus score is then a function of its summed statistics, many resamples per call."""
    return metric.corpus_from_stats_batched if isinstance(metric, BatchedCorpus) else None


def joined_segments(
    shards: Sequence[MetricResult],
) -> tuple[dict[str, np.ndarray], np.ndarray | None]:
    """The segment columns and statistics of consecutive shards' results, concatenated."""
    segment = {
        col: np.concatenate([np.asarray(s.segment[col]) for s in shards])
        for col in shards[0].segment
    }
    stats = [s.stats for s in shards if s.stats is not None]
    return segment, (np.concatenate(stats) if stats else None)


def row_slices(n: int, rows: int) -> list[slice]:
    """Consecutive slices of at most ``rows`` (at least 1) over ``range(n)``; for none, one empty
    slice (an empty call is one empty shard: the metric says what it gives for none)."""
    size = max(1, int(rows))
    return [slice(s, min(s + size, n)) for s in range(0, n, size)] or [slice(0, 0)]


def mean_corpus(segment: np.ndarray) -> float:
    """The corpus score of a metric that reports the mean of its segment scores (NaN for none)."""
    return float(np.mean(segment)) if len(segment) else float("nan")


def reduce_over_references(per_ref: list[np.ndarray], rule: str) -> np.ndarray:
    """Combine per-reference score arrays (one array of scores per reference of one segment)."""
    reduce = np.max if rule == "max" else np.mean
    return np.array([float(reduce(s)) if len(s) else np.nan for s in per_ref], dtype=float)


def reduce_pairs(values: np.ndarray, references: Sequence[Sequence[str]], rule: str) -> np.ndarray:
    """:func:`reduce_over_references` of the values of a call's (candidate, reference) pairs,
    given in the order of :func:`~paraeval.metrics.encoder_match.pair_lists`."""
    bounds = np.cumsum([0, *(len(r) for r in references)])
    per_ref = [values[bounds[i] : bounds[i + 1]] for i in range(len(references))]
    return reduce_over_references(per_ref, rule)


def distinct_pairs(
    candidates: Sequence[str], references: Sequence[Sequence[str]]
) -> list[tuple[str, str]]:
    """A call's (candidate, reference) pairs, each once, in order: where a pair's score depends on
    its two texts only, a pair several systems share is scored once."""
    pairs = ((c, r) for c, refs in zip(candidates, references, strict=True) for r in refs)
    return list(dict.fromkeys(pairs))


def choice_setting(metric: str, setting: str, value: Any, allowed: Sequence[str]) -> Any:
    """A setting that must be one of ``allowed``, or the one-line config error naming it."""
    if value not in allowed:
        raise MetricConfigError(
            f"metric '{metric}': {setting} must be one of {list(allowed)}, got '{value}'"
        )
    return value


def order_setting(metric: str, setting: str, value: Any) -> int:
    """An n-gram order: an int of at least 1 (a bool is an int to Python, and a float order (3.0)
    would only hide a typo), or the one-line config error naming it."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise MetricConfigError(f"metric '{metric}': {setting} must be an integer, got {value!r}")
    if value < 1:
        raise MetricConfigError(f"metric '{metric}': {setting} must be at least 1, got {value}")
    return value


def number_setting(metric: str, setting: str, value: Any) -> float:
    """A numeric setting as a float, or the one-line config error naming it."""
    try:
        return float(value)
    except (TypeError, ValueError):
        raise MetricConfigError(
            f"metric '{metric}': {setting} must be a number, got {value!r}"
        ) from None


def make_signature(name: str, **fields: object) -> str:
    """``name|key:value|...`` with keys in the given order; booleans as yes/no like sacrebleu."""
    shown = {k: ("yes" if v else "no") if isinstance(v, bool) else v for k, v in fields.items()}
    return "|".join([name, *(f"{k}:{v}" for k, v in shown.items())])
