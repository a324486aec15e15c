"""CIDEr-D (Vedantam et al. 2015), equal to ``pycocoevalcap.cider`` (the COCO caption scorer).

TF-IDF vectors of 1..4-grams, document frequencies over the references of the call (one document
per item; with ``against_source``, over its sources); per order a clipped cosine times the length
penalty ``exp(−δ²/(2σ²))``, σ = 6, averaged over orders and references, times 10. As in the COCO
code δ counts BIGRAMS (its ``n == 1`` test is on the zero-based order index). Corpus score: the
segment mean. ``tokenize`` and ``lowercase`` make the space-split tokens pycocoevalcap expects.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np

from paraeval.metrics._ngram import WordTokenizer, ngram_counts
from paraeval.metrics.base import (
    CorpusCounts,
    MetricConfigError,
    MetricResult,
    Sharded,
    make_signature,
)

Toks = tuple[str, ...]
Gram = tuple[str, ...]
# pycocoevalcap's ``counts2vec``: per-order tf-idf dicts, their norms, the bigram count
Vec = tuple[list[dict[Gram, float]], list[float], int]


# Sets of reference lists whose segment scores a metric object keeps across calls: the systems of
# a run share their references, but CIDEr's document frequencies forbid one call for all.
_CORPORA_KEPT = 8


class CIDEr(Sharded):
    """CIDEr-D with corpus document frequencies (pycocoevalcap's ``Cider``)."""

    name = "cider"
    MAX_ORDER = 4
    SIGMA = 6.0
    TOKENIZE = "13a"

    def __init__(
        self,
        max_order: int = MAX_ORDER,
        sigma: float = SIGMA,
        tokenize: str = TOKENIZE,
        lowercase: bool = True,
        group: str | None = None,
        against_source: bool = False,
    ) -> None:
        super().__init__(group=group, against_source=against_source)
        if int(max_order) < 1:
            raise MetricConfigError(f"metric 'cider': max_order must be >= 1, got {max_order}")
        if float(sigma) <= 0:
            raise MetricConfigError(f"metric 'cider': sigma must be > 0, got {sigma}")
        self.max_order = int(max_order)
        self.sigma = float(sigma)
        self.tokenize = tokenize
        self.lowercase = bool(lowercase)
        self.tokenizer = WordTokenizer(tokenize, lowercase)
        self._cooked: dict[Toks, dict[Gram, int]] = {}
        # per set of reference lists (the document frequencies): (candidate, references) -> score
        self._by_corpus: dict[tuple[tuple[str, ...], ...], dict[tuple[str, tuple[str, ...]], float]]
        self._by_corpus = {}

    def signature(self, nrefs: int | None = None, segment: bool | None = None) -> str:
        return make_signature(
            self.name,
            impl="paraeval=pycocoevalcap-1.2",
            variant="CIDEr-D",
            nrefs="var",
            refs="mean",
            n=self.max_order,
            sigma=f"{self.sigma:g}",
            df="corpus-refs",
            tok=self.tokenize,
            case="lc" if self.lowercase else "mixed",
        )

    def _cook(self, toks: Toks) -> dict[Gram, int]:
        hit = self._cooked.get(toks)
        if hit is None:
            hit = ngram_counts(toks, self.max_order)
            if len(self._cooked) > 200_000:
                self._cooked.clear()
            self._cooked[toks] = hit
        return hit

    def _vec(self, counts: dict[Gram, int], weight: dict[Gram, float], unseen: float) -> Vec:
        """``weight`` maps a reference n-gram to its idf, ``unseen`` is the idf of any other."""
        n_ord = self.max_order
        vec: list[dict[Gram, float]] = [{} for _ in range(n_ord)]
        norm = [0.0] * n_ord
        length = 0
        get = weight.get
        for gram, tf in counts.items():
            k = len(gram) - 1
            v = float(tf) * get(gram, unseen)
            vec[k][gram] = v
            norm[k] += v * v
            if k == 1:
                length += tf
        return vec, [math.sqrt(x) for x in norm], length

    def _sim(self, hyp: Vec, ref: Vec) -> np.ndarray:
        vec_h, norm_h, len_h = hyp
        vec_r, norm_r, len_r = ref
        delta = float(len_h - len_r)
        penalty = np.e ** (-(delta**2) / (2 * self.sigma**2))
        val = np.zeros(self.max_order)
        for k in range(self.max_order):
            acc = 0.0
            vr = vec_r[k]
            for gram, v in vec_h[k].items():
                r = vr.get(gram, 0.0)
                acc += min(v, r) * r
            if norm_h[k] != 0 and norm_r[k] != 0:
                acc /= norm_h[k] * norm_r[k]
            if math.isnan(acc):  # pycocoevalcap asserts this never happens
                raise AssertionError("CIDEr: NaN similarity")
            val[k] = acc * penalty
        return val

    def _cooked_call(
        self, candidates: Sequence[str], references: Sequence[Sequence[str]]
    ) -> tuple[list[dict[Gram, int]], list[list[dict[Gram, int]]]]:
        cands, refss = self.tokenizer.segments(list(candidates), references)
        return [self._cook(t) for t in cands], [[self._cook(t) for t in refs] for refs in refss]

    def counts(
        self, candidates: Sequence[str], references: Sequence[Sequence[str]]
    ) -> CorpusCounts:
        """Items, and each n-gram's document frequency: the items whose references have it."""
        return self._document_frequencies(self._cooked_call(candidates, references)[1])

    @staticmethod
    def _document_frequencies(refss: list[list[dict[Gram, int]]]) -> CorpusCounts:
        df: Counter[Gram] = Counter()
        for refs in refss:
            df.update(set[Gram]().union(*refs))
        return CorpusCounts(len(refss), df)

    def score_shard(
        self,
        counts: CorpusCounts,
        candidates: Sequence[str],
        references: Sequence[Sequence[str]],
        sources: Sequence[str] | None = None,
    ) -> MetricResult:
        self._check_call(candidates, references, sources)
        hyps, refss = self._cooked_call(candidates, references)
        seg = self._segments(counts, list(candidates), references, hyps, refss, {})
        return MetricResult({self.name: seg}, {}, self.signature())

    def _segments(
        self,
        counts: CorpusCounts,
        candidates: list[str],
        references: Sequence[Sequence[str]],
        hyps: list[dict[Gram, int]],
        refss: list[list[dict[Gram, int]]],
        done: dict[tuple[str, tuple[str, ...]], float],
    ) -> np.ndarray:
        """Segment scores under the document frequencies ``counts``; ``done``: scores already
        computed under the same frequencies, by (candidate, references)."""
        n_items = counts.total
        ref_len = float(np.log(float(n_items))) if n_items else 0.0
        # idf = log(#items) - log(max(1, df)); df takes only the values 1..#items
        log_df = [float(np.log(max(1.0, float(k)))) for k in range(n_items + 1)]
        weight = {gram: ref_len - log_df[d] for gram, d in counts.counts.items()}
        # a reference shared by several items is vectorised once
        ref_vecs: dict[int, Vec] = {}
        seg = np.zeros(len(hyps), dtype=float)
        for i, (hyp, refs) in enumerate(zip(hyps, refss, strict=True)):
            pair = (candidates[i], tuple(references[i]))
            hit = done.get(pair)
            if hit is not None:
                seg[i] = hit
                continue
            vh = self._vec(hyp, weight, ref_len)
            score = np.zeros(self.max_order)
            for ref in refs:
                vr = ref_vecs.get(id(ref))
                if vr is None:
                    vr = ref_vecs[id(ref)] = self._vec(ref, weight, ref_len)
                score += self._sim(vh, vr)
            seg[i] = done[pair] = float(np.mean(score) / len(refs) * 10.0)
        return seg

    def _score(
        self,
        candidates: list[str],
        references: list[list[str]],
        sources: Sequence[str] | None,
    ) -> MetricResult:
        hyps, refss = self._cooked_call(candidates, references)
        # the document frequencies depend on the call's reference lists only: calls with the
        # same lists (systems that paraphrase the same items) share segment scores, so a
        # candidate several of them produced is scored once
        corpus_key = tuple(sorted(tuple(refs) for refs in references))
        done = self._by_corpus.pop(corpus_key, None)
        if done is None:
            done = {}
            while len(self._by_corpus) >= _CORPORA_KEPT:
                self._by_corpus.pop(next(iter(self._by_corpus)))
        self._by_corpus[corpus_key] = done  # most recently used last
        counts = self._document_frequencies(refss)
        seg = self._segments(counts, candidates, references, hyps, refss, done)
        return self.reduce([MetricResult({self.name: seg}, {}, self.signature())])
