"""What the sacrebleu metrics (:mod:`paraeval.metrics.sacre`) share: sacrebleu's per-segment
sufficient statistics; segment scores from each row, the corpus score (and a bootstrap resample's)
from the summed statistics, never a mean of sentence scores.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np
import sacrebleu
from sacrebleu.metrics.base import Metric as SacreMetric
from sacrebleu.metrics.bleu import BLEU as SacreBLEU

from paraeval.metrics.base import MetricConfigError, MetricResult, SegmentLocal

SACREBLEU_VERSION = sacrebleu.__version__


def _ref_streams(references: Sequence[Sequence[str]]) -> list[list[str | None]]:
    """Per-segment reference lists -> sacrebleu's reference streams; a ragged count is padded with
    None, which sacrebleu skips (its ``nrefs:var`` case)."""
    width = max((len(r) for r in references), default=0)
    return [[refs[k] if k < len(refs) else None for refs in references] for k in range(width)]


def segment_statistics(
    metric: SacreMetric,
    hyps: Sequence[str],
    references: Sequence[Sequence[str]],
    extract: Callable[[SacreMetric, list[str], Any], Any] | None = None,
) -> np.ndarray:
    """sacrebleu's per-segment statistics, one row per hypothesis. ``extract(metric, hyps,
    streams)`` replaces ``metric._extract_corpus_statistics`` where a compiled equivalent
    exists."""
    pairs = [(h, tuple(r)) for h, r in zip(hyps, references, strict=True)]
    if not pairs:
        return np.zeros((0, 0))
    # a segment's statistics depend on its own hypothesis and references only: a pair that
    # occurs several times in the call is extracted once
    todo = list(dict.fromkeys(pairs))
    # sacrebleu skips None references (its variable-reference case) though its hints say str
    streams: Any = _ref_streams([list(r) for _, r in todo])
    todo_hyps = [h for h, _ in todo]
    stats = (extract or type(metric)._extract_corpus_statistics)(metric, todo_hyps, streams)
    rows = dict(zip(todo, np.asarray(stats, dtype=float), strict=True))
    return np.stack([rows[p] for p in pairs])


def sacrebleu_signature(metric: SacreMetric, nrefs: int | None) -> str:
    """sacrebleu's own signature of ``metric`` (``get_signature().format()``) for data whose
    segments each have ``nrefs`` references (None: a varying number, sacrebleu's ``var``).
    sacrebleu knows the count only after scoring, so a copy is given the count it would find."""
    probe = copy.copy(metric)
    probe.num_refs = -1 if nrefs is None else int(nrefs)
    return str(probe.get_signature().format())


class SacreBase(SegmentLocal):
    """Shared machinery: build a sacrebleu object, extract statistics, score from statistics."""

    integer_stats: ClassVar[bool] = True
    _metric: SacreMetric  # sacrebleu's object of the corpus score

    def _corpus_metric(self) -> SacreMetric:
        return self._metric

    def signature(self, nrefs: int | None = None, segment: bool | None = None) -> str:
        """``name|`` and sacrebleu's own signature of the corpus score."""
        return f"{self.name}|{sacrebleu_signature(self._metric, nrefs)}"

    def _segment_metric(self) -> SacreMetric:
        return self._corpus_metric()

    def _stats(self, hyps: Sequence[str], refs: Sequence[Sequence[str]]) -> np.ndarray:
        return segment_statistics(self._corpus_metric(), hyps, refs)

    def _from_stats(self, metric: SacreMetric, row: np.ndarray) -> float:
        values = [round(x) for x in row] if self.integer_stats else [float(x) for x in row]
        return float(metric._compute_score_from_stats(values).score)

    def _segment_scores(self, stats: np.ndarray) -> np.ndarray:
        if len(stats) == 0:
            return np.zeros(0, dtype=float)
        # equal rows (a candidate several systems share) have equal scores: each scored once
        unique, inverse = np.unique(stats, axis=0, return_inverse=True)
        m = self._segment_metric()
        scores = np.array([self._from_stats(m, row) for row in unique], dtype=float)
        return scores[inverse.reshape(-1)]

    def _corpus_score(self, stats: np.ndarray) -> float:
        if len(stats) == 0:
            return float("nan")
        return self._from_stats(self._corpus_metric(), stats.sum(axis=0))

    def corpus_from_stats(self, stats: np.ndarray) -> dict[str, float]:
        return {self.name: self._corpus_score(stats)}

    def _score_pair(
        self, candidates: list[str], references: list[list[str]]
    ) -> tuple[np.ndarray, np.ndarray, float]:
        stats = self._stats(candidates, references)
        return stats, self._segment_scores(stats), self._corpus_score(stats)

    def _score(
        self,
        candidates: list[str],
        references: list[list[str]],
        sources: Sequence[str] | None,
    ) -> MetricResult:
        stats, seg, corpus = self._score_pair(candidates, references)
        return MetricResult({self.name: seg}, {self.name: corpus}, self.signature(), stats)

    def select(self, result: MetricResult, rows: np.ndarray) -> MetricResult:
        # a segment's statistics and score are its own; the corpus score sums the rows kept
        assert result.stats is not None
        stats = result.stats[rows]
        seg = np.asarray(result.segment[self.name])[rows]
        corpus = {self.name: self._corpus_score(stats)}
        return MetricResult({self.name: seg}, corpus, result.signature, stats)


def check_bleu_settings(name: str, tokenize: str, smooth_method: str) -> None:
    """sacrebleu's BLEU settings as one config error naming the metric (sacrebleu's own would
    be a traceback)."""
    allowed = {"tokenize": SacreBLEU.TOKENIZERS, "smooth_method": SacreBLEU.SMOOTH_DEFAULTS}
    for setting, value in (("tokenize", tokenize), ("smooth_method", smooth_method)):
        if value not in allowed[setting]:
            choices = sorted(allowed[setting])
            raise MetricConfigError(
                f"metric '{name}': unknown {setting} '{value}'; choose one of {choices}"
            )
