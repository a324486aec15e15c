"""The metric contract shared by every metric family.

A metric is a small class whose constructor arguments are exactly its YAML settings. It scores the
candidates of ONE system at a time and returns per-segment scores, its own corpus-level score and a
signature that pins everything that changes the number.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Literal

import numpy as np

Group = Literal["syntactic", "semantic", "diversity", "paraphrase", "output_diversity"]
MultiRef = Literal["max", "mean"]

# Only "syntactic" and "semantic" are averaged. The other groups are reported and correlated but
# never averaged, because averaging them with similarity metrics would mix opposite goals:
# - "diversity": closeness to (or distance from) the SOURCE: self-BLEU, the ``_src`` twins, PINC;
# - "paraphrase": scores that already combine adequacy with diversity from the source (ParaScore,
#   BERT-iBLEU): averaging them with the semantic metrics would count adequacy twice and reward
#   copying the source through the back door;
# - "output_diversity": how varied a system's outputs are among themselves (distinct-n,
#   inter-BLEU, semantic diversity): a property of a whole system, with no per-segment score.
GROUPS: tuple[str, ...] = ("syntactic", "semantic", "diversity", "paraphrase", "output_diversity")
AVERAGED_GROUPS: tuple[str, ...] = ("syntactic", "semantic")
MULTI_REF_RULES: tuple[str, ...] = ("max", "mean")


class MetricConfigError(ValueError):
    """A metric setting is invalid; the message is shown to the user as one line."""


class MissingResourceError(RuntimeError):
    """A resource (model, WordNet, checkpoint) is absent; the message says what to install."""


@dataclass
class MetricResult:
    """What one metric returns for one system.

    ``segment`` maps each output column id to one score per candidate (same order as the input);
    ``corpus`` maps the same ids to the metric's own corpus-level score (for BLEU: from summed
    statistics, never the mean of sentence scores). ``stats`` optionally holds per-segment
    sufficient statistics (shape ``(n_segments, k)``) from which ``Metric.corpus_from_stats``
    recomputes the corpus score of any subset or resample of segments.
    """

    segment: dict[str, np.ndarray]
    corpus: dict[str, float]
    signature: str
    stats: np.ndarray | None = None
    extra: dict[str, float] = field(default_factory=dict)


class Metric(ABC):
    """Base class. Subclasses set the class constants and implement ``_score``.

    Class constants (override in subclasses):

    - ``name``: the metric id (``bleu``, ``rougeL`` ...), also its config file name.
    - ``default_group``: ``syntactic`` or ``semantic``; the ``group`` setting overrides it.
    - ``higher_is_better``: direction, used to flip lower-is-better metrics before normalization.
    - ``needs_references`` / ``needs_sources``: inputs the metric cannot do without.
    - ``columns``: output column ids; defaults to ``(name,)``. BERTScore has three.
    - ``supports_multi_ref_rule``: False where the reference implementation has its own rule
      (sacrebleu's counts, bert-score's max) and ``multi_ref`` is therefore not a setting.
    - ``corpus_only``: the metric describes a whole system (distinct-n ...): its segment
      columns are NaN and only its corpus score is meaningful (system tables, system level).
    - ``distance_to_source``: a ``diversity``-group metric whose HIGHER value means FURTHER from
      the source (PINC), the reverse of self-BLEU; the diversity view turns it around.
    """

    name: ClassVar[str] = ""
    default_group: ClassVar[str] = "syntactic"
    higher_is_better: ClassVar[bool] = True
    needs_references: ClassVar[bool] = True
    needs_sources: ClassVar[bool] = False
    columns: ClassVar[tuple[str, ...]] = ()
    supports_multi_ref_rule: ClassVar[bool] = False
    corpus_only: ClassVar[bool] = False
    distance_to_source: ClassVar[bool] = False
    # Each segment's scores (and statistics) depend on that segment's own candidate, references
    # and source only, and :meth:`select` gives the result of any subset of a call's segments:
    # the score stage then scores the segments that several systems share once, in one call for
    # all systems (pipeline/stages/score.py). False where a segment's number depends on the
    # others of its call (CIDEr's and NIST's corpus weights, BERTScore's idf and batch padding).
    segment_local: ClassVar[bool] = False

    def __init__(
        self,
        group: str | None = None,
        against_source: bool = False,
        multi_ref: str = "max",
    ) -> None:
        group = group or self.default_group
        if group not in GROUPS:
            raise MetricConfigError(
                f"metric '{self.name}': group must be one of {list(GROUPS)}, got '{group}'"
            )
        if multi_ref not in MULTI_REF_RULES:
            raise MetricConfigError(
                f"metric '{self.name}': multi_ref must be one of {list(MULTI_REF_RULES)}, "
                f"got '{multi_ref}'"
            )
        self.group: str = group
        self.against_source: bool = bool(against_source)
        self.multi_ref: str = multi_ref

    # ------------------------------------------------------------------ public API
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
        n = len(candidates)
        if len(references) != n:
            raise ValueError(f"{self.name}: {n} candidates but {len(references)} reference lists")
        if sources is not None and len(sources) != n:
            raise ValueError(f"{self.name}: {n} candidates but {len(sources)} sources")
        if self.needs_references:
            for i, refs in enumerate(references):
                if len(refs) == 0:
                    raise MetricConfigError(
                        f"metric '{self.name}' needs references but segment {i} has none"
                    )
        if self.needs_sources and sources is None:
            raise MetricConfigError(f"metric '{self.name}' needs sources")
        result = self._score(list(candidates), [list(r) for r in references], sources)
        for col, values in result.segment.items():
            if len(values) != n:
                raise AssertionError(f"{self.name}: column {col} has {len(values)} != {n} scores")
        return result

    @abstractmethod
    def _score(
        self,
        candidates: list[str],
        references: list[list[str]],
        sources: Sequence[str] | None,
    ) -> MetricResult: ...

    @abstractmethod
    def signature(self) -> str:
        """A sacrebleu-style ``key:value|key:value`` string pinning every setting that changes
        the number (implementation and version, tokenizer, casing, multi-reference rule ...)."""

    def select(self, result: MetricResult, rows: np.ndarray) -> MetricResult:
        """What :meth:`score` returns for the segments at positions ``rows`` (in that order,
        repeats allowed) of the call that returned ``result``, scored on their own, bit for
        bit. Only for a :attr:`segment_local` metric."""
        raise NotImplementedError(f"{self.name} is not segment-local")

    def parts(self) -> tuple[tuple[Metric, bool], ...]:
        """Metrics whose results on this metric's texts make up its result
        (:meth:`from_parts`), each with whether it scores the candidates against their sources
        instead of their references. Empty (the default) where the metric computes its result
        itself. The score stage computes a part that several metrics share once."""
        return ()

    def from_parts(self, results: Sequence[MetricResult]) -> MetricResult:
        """This metric's result from the results of :meth:`parts` on its texts, in that order:
        equal to :meth:`score`'s."""
        raise NotImplementedError(f"{self.name} is not made of parts")

    def corpus_from_stats(self, stats: np.ndarray) -> dict[str, float]:
        """Corpus score from (a subset or resample of) per-segment sufficient statistics.
        Metrics whose corpus score is the mean of segment scores need not override this."""
        raise NotImplementedError(f"{self.name} has no sufficient statistics")

    def corpus_from_stats_batched(self, stats: np.ndarray) -> np.ndarray:
        """The corpus score of every row of ``stats``, each row a SUM of per-segment statistics,
        equal bit for bit to the metric's own corpus score of those statistics (sacrebleu's
        metrics; float32 rows are scored in float32, as in sacrebleu's paired bootstrap).
        Optional: see :func:`batched_corpus_fn`."""
        raise NotImplementedError(f"{self.name} has no batched corpus score")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.signature()})"


def has_corpus_from_stats(metric: Metric) -> bool:
    """Whether the metric recomputes its corpus score from sufficient statistics."""
    return type(metric).corpus_from_stats is not Metric.corpus_from_stats


def batched_corpus_fn(metric: Metric | None) -> Callable[[np.ndarray], np.ndarray] | None:
    """The metric's :meth:`Metric.corpus_from_stats_batched` when it has one, else None: a
    resample's corpus score is then a function of its summed statistics, many resamples per call."""
    if metric is None or (
        type(metric).corpus_from_stats_batched is Metric.corpus_from_stats_batched
    ):
        return None
    return metric.corpus_from_stats_batched


def mean_corpus(segment: np.ndarray) -> float:
    """The corpus score of a metric that reports the mean of its segment scores (NaN for none)."""
    return float(np.mean(segment)) if len(segment) else float("nan")


def select_mean(metric: Metric, result: MetricResult, rows: np.ndarray) -> MetricResult:
    """:meth:`Metric.select` of a metric with one column whose corpus score is
    :func:`mean_corpus` of it."""
    seg = np.asarray(result.segment[metric.name])[rows]
    return MetricResult({metric.name: seg}, {metric.name: mean_corpus(seg)}, result.signature)


def reduce_over_references(per_ref: list[np.ndarray], rule: str) -> np.ndarray:
    """Combine per-reference score arrays (one array of scores per reference of one segment)."""
    out = np.empty(len(per_ref), dtype=float)
    for i, scores in enumerate(per_ref):
        if len(scores) == 0:
            out[i] = np.nan
        elif rule == "max":
            out[i] = float(np.max(scores))
        else:
            out[i] = float(np.mean(scores))
    return out


def make_signature(name: str, **fields: object) -> str:
    """``name|key:value|...`` with keys in the given order; booleans as yes/no like sacrebleu."""
    parts = [name]
    for key, value in fields.items():
        if isinstance(value, bool):
            value = "yes" if value else "no"
        parts.append(f"{key}:{value}")
    return "|".join(parts)
