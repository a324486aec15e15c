"""NIST (Doddington 2002), equal to ``nltk.translate.nist_score``.

Information-weighted n-gram precision summed over n = 1..N, times the length penalty
``exp(β·log²(min(len_sys/len_ref, 1)))`` (0.5 at a ratio of 2/3). Segment scores are NLTK's
``sentence_nist`` (weights from the segment's references), the corpus score ``corpus_nist``
(weights from every reference of the call); multiple references follow NLTK's per-order rule.

One deliberate difference: an order with no hypothesis n-grams contributes 0, as in NIST's mteval
script, where NLTK raises ``ZeroDivisionError``; every score NLTK returns is reproduced.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import nltk
import numpy as np

from paraeval.metrics._ngram import WordTokenizer, ngrams
from paraeval.metrics.base import (
    CorpusCounts,
    MetricConfigError,
    MetricResult,
    Sharded,
    joined_segments,
    make_signature,
    ngram_memory,
)

Toks = tuple[str, ...]
Gram = tuple[str, ...]
# Overlaps and sentence scores a metric object keeps across calls, up to this many: the systems
# of a run share most candidates and every reference, but NIST's corpus weights forbid one call.
_PAIRS_MAX = 500_000


def nist_length_penalty(ref_len: int, hyp_len: int) -> float:
    """Doddington's penalty, as ``nltk.translate.nist_score.nist_length_penalty``."""
    if ref_len == 0:
        return 0.0
    ratio = hyp_len / ref_len
    if 0 < ratio < 1:
        beta = math.log(0.5) / math.log(1.5) ** 2  # 0.5 at a ratio of 2/3
        return math.exp(beta * math.log(ratio) ** 2)
    return max(min(ratio, 1.0), 0.0)


class _Weights(dict[Gram, float]):
    """Information weights over a reference n-gram table, computed on demand per n-gram (NLTK
    computes them for every reference n-gram; only the overlapping ones are ever used)."""

    def __init__(self, freq: Counter[Gram], total: int) -> None:
        super().__init__()
        self.freq = freq
        self.total = total

    def __missing__(self, gram: Gram) -> float:
        prefix = gram[:-1]
        numerator = self.freq[prefix] if prefix and prefix in self.freq else self.total
        w = self[gram] = math.log(numerator / self.freq[gram], 2)
        return w


class NIST(Sharded):
    """NIST score (nltk ``sentence_nist`` per segment, ``corpus_nist`` for the corpus)."""

    name = "nist"
    memory = ngram_memory("max_order")
    MAX_ORDER = 5
    TOKENIZE = "13a"

    def __init__(
        self,
        max_order: int = MAX_ORDER,
        tokenize: str = TOKENIZE,
        lowercase: bool = False,
        group: str | None = None,
        against_source: bool = False,
    ) -> None:
        super().__init__(group=group, against_source=against_source)
        if int(max_order) < 1:
            raise MetricConfigError(f"metric 'nist': max_order must be >= 1, got {max_order}")
        self.max_order = int(max_order)
        self.tokenizer = WordTokenizer(tokenize, lowercase)
        self.tokenize = tokenize
        self.lowercase = bool(lowercase)
        self._counts: dict[Toks, list[Counter[Gram]]] = {}
        self._overlaps: dict[tuple[Toks, Toks], list[Counter[Gram]]] = {}
        self._sentence: dict[tuple[Toks, tuple[Toks, ...]], float] = {}

    def signature(self, nrefs: int | None = None, segment: bool | None = None) -> str:
        return make_signature(
            self.name,
            impl=f"paraeval=nltk-{nltk.__version__}",
            nrefs="var",
            refs="nltk-best-per-order",
            n=self.max_order,
            tok=self.tokenize,
            case="lc" if self.lowercase else "mixed",
            zero_order="0",
        )

    # --------------------------------------------------------------- counting
    def _orders(self, toks: Toks) -> list[Counter[Gram]]:
        hit = self._counts.get(toks)
        if hit is None:
            hit = [Counter(ngrams(toks, i)) for i in range(1, self.max_order + 1)]
            if len(self._counts) > 200_000:
                self._counts.clear()
            self._counts[toks] = hit
        return hit

    def _overlap(self, hyp: Toks, ref: Toks) -> list[Counter[Gram]]:
        hit = self._overlaps.get((hyp, ref))
        if hit is None:
            hit = [h & r for h, r in zip(self._orders(hyp), self._orders(ref), strict=True)]
            self._overlaps[(hyp, ref)] = hit
        return hit

    def _ref_table(self, refs: Sequence[Toks], freq: Counter[Gram]) -> int:
        """Adds the references' n-grams to ``freq``; their words."""
        for ref in refs:
            for counter in self._orders(ref):
                freq.update(counter)
        return sum(map(len, refs))

    # ---------------------------------------------------------------- scoring
    def _segment_stats(
        self,
        hyp: Toks,
        refs: Sequence[Toks],
        overlaps: list[list[Counter[Gram]]],
        weights: _Weights,
    ) -> list[float]:
        """The statistics row: per order the numerator and denominator of the chosen reference,
        then the summed reference and hypothesis lengths."""
        nums: list[float] = []
        dens: list[int] = []
        l_ref = 0
        for i, hyp_grams in enumerate(self._orders(hyp)):
            den = sum(hyp_grams.values())
            ref_nums = [sum(weights[g] * c for g, c in overlap[i].items()) for overlap in overlaps]
            # NLTK's rule: per order the reference of the highest precision, then numerator, length
            _, num, ref_len = max(
                (0 if den == 0 else num / den, num, len(ref))
                for num, ref in zip(ref_nums, refs, strict=True)
            )
            nums.append(num)
            dens.append(den)
            l_ref += ref_len
        return [*nums, *dens, l_ref, len(hyp) * self.max_order]

    def _score_from(self, row: Sequence[float]) -> float:
        """The score of one segment's or of summed statistics (counts are whole numbers)."""
        m = self.max_order
        l_ref = round(row[2 * m])
        if l_ref == 0:
            return 0.0
        precision = 0.0
        for num, den in zip(row[:m], map(round, row[m : 2 * m]), strict=True):
            precision += 0.0 if den == 0 else num / den
        return precision * nist_length_penalty(l_ref, round(row[2 * m + 1]))

    def counts(
        self, candidates: Sequence[str], references: Sequence[Sequence[str]]
    ) -> CorpusCounts:
        """Reference words, and each n-gram's frequency over every reference."""
        _, ref_lists = self.tokenizer.segments(list(candidates), references)
        freq: Counter[Gram] = Counter()
        total = sum(self._ref_table(refs, freq) for refs in ref_lists)
        return CorpusCounts(total, freq)

    def score_shard(
        self,
        counts: CorpusCounts,
        candidates: Sequence[str],
        references: Sequence[Sequence[str]],
        sources: Sequence[str] | None = None,
    ) -> MetricResult:
        self._check_call(candidates, references, sources)
        hyps, ref_lists = self.tokenizer.segments(list(candidates), references)
        refss = [tuple(refs) for refs in ref_lists]
        overlaps = self._call_overlaps(hyps, refss)
        seg = self._sentences(hyps, refss, overlaps)
        weights = _Weights(counts.counts, counts.total)
        stats = np.zeros((len(hyps), 2 * self.max_order + 2), dtype=float)
        for k, (hyp, refs) in enumerate(zip(hyps, refss, strict=True)):
            stats[k] = self._segment_stats(hyp, refs, overlaps[k], weights)
        return MetricResult({self.name: seg}, {}, self.signature(), stats)

    def reduce(self, shards: Sequence[MetricResult]) -> MetricResult:
        segment, stats = joined_segments(shards)
        assert stats is not None
        total = np.zeros(stats.shape[1])
        for row in stats:  # summed in order, as one call sums its segments
            total += row
        corpus = self._score_from(total.tolist()) if len(stats) else float("nan")
        return MetricResult(segment, {self.name: corpus}, self.signature(), stats)

    def _call_overlaps(
        self, hyps: list[Toks], refss: list[tuple[Toks, ...]]
    ) -> list[list[list[Counter[Gram]]]]:
        if len(self._overlaps) > _PAIRS_MAX or len(self._sentence) > _PAIRS_MAX:
            self._overlaps.clear()
            self._sentence.clear()
        # clipped n-gram overlaps do not depend on the weights: counted once per (hypothesis,
        # reference), across calls too (a candidate several systems share)
        return [
            [self._overlap(hyp, ref) for ref in refs] for hyp, refs in zip(hyps, refss, strict=True)
        ]

    def _sentences(
        self,
        hyps: list[Toks],
        refss: list[tuple[Toks, ...]],
        overlaps: list[list[list[Counter[Gram]]]],
    ) -> np.ndarray:
        """Sentence scores: each segment's weights come from its own references."""
        seg = np.zeros(len(hyps), dtype=float)
        for k, (hyp, refs) in enumerate(zip(hyps, refss, strict=True)):
            value = self._sentence.get((hyp, refs))
            if value is None:
                freq: Counter[Gram] = Counter()
                total = self._ref_table(refs, freq)
                row = self._segment_stats(hyp, refs, overlaps[k], _Weights(freq, total))
                value = self._sentence[(hyp, refs)] = self._score_from(row)
            seg[k] = value
        return seg

    def _score(
        self,
        candidates: list[str],
        references: list[list[str]],
        sources: Sequence[str] | None,
    ) -> MetricResult:
        counts = self.counts(candidates, references)
        return self.reduce([self.score_shard(counts, candidates, references, sources)])

    def corpus_from_sums(self, totals: np.ndarray) -> np.ndarray:
        """:meth:`corpus_from_stats` bit for bit of many summed rows (``stats.sum(axis=0)``);
        :func:`nist_length_penalty` runs once per distinct (reference, hypothesis) length."""
        t = np.atleast_2d(np.asarray(totals, dtype=np.float64))
        m = self.max_order
        precision = np.zeros(len(t))
        with np.errstate(divide="ignore", invalid="ignore"):
            for i in range(m):
                den = np.round(t[:, m + i])
                precision = precision + np.where(den == 0, 0.0, t[:, i] / den)
        ref_len = np.round(t[:, 2 * m]).astype(np.int64)
        hyp_len = np.round(t[:, 2 * m + 1]).astype(np.int64)
        # one key per (reference length, hypothesis length): a 1-d unique is fast
        width = int(hyp_len.max(initial=0)) - int(hyp_len.min(initial=0)) + 1
        keys = ref_len * width + (hyp_len - hyp_len.min(initial=0))
        _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        penalty = np.array(
            [nist_length_penalty(int(ref_len[i]), int(hyp_len[i])) for i in first], dtype=float
        )
        score = precision * penalty[np.asarray(inverse).ravel()]
        return np.where(ref_len == 0, 0.0, score)

    def corpus_from_stats(self, stats: np.ndarray) -> dict[str, float]:
        if len(stats) == 0:
            return {self.name: float("nan")}
        return {self.name: self._score_from(np.asarray(stats, dtype=float).sum(axis=0).tolist())}
