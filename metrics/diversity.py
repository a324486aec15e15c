"""Diversity metrics of paraphrase generation: distance from the source, and variety of a system.

- ``pinc`` (Chen & Dolan 2011, group ``diversity``): per candidate, the mean over n = 1..4 of
  ``1 − |ngrams_n(c) ∩ ngrams_n(s)| / |ngrams_n(c)|`` with ``s`` the SOURCE, on n-gram sets or
  clipped counts (``ngrams``); orders the candidate has no n-gram of are left out (as the paper's
  script), an empty candidate scores 0. Higher = further from the source.

The others (group ``output_diversity``) describe a whole system (:class:`SystemLevel`):

- ``distinct_1``, ``distinct_2`` (Li et al. 2016): distinct n-grams / n-grams over all outputs.
- ``inter_bleu``: ``mean_i sacrebleu.sentence_bleu(out_i, [out_j for j != i])``, the "Self-BLEU"
  of Zhu et al. 2018 (``self_bleu`` is BLEU against the source); LOWER = more varied.
- ``semantic_diversity``: the mean ``1 − cos(e_i, e_j)`` over pairs of a system's outputs, on the
  shared encoder's sentence embeddings.

n-grams are words after sacrebleu's tokenizer (``tokenize``) and optional lowercasing, as in BLEU.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
from sacrebleu.metrics.bleu import BLEU as SacreBLEU

from paraeval.metrics._ngram import ngram_counts, ngrams
from paraeval.metrics._sacre_base import (
    SACREBLEU_VERSION,
    check_bleu_settings,
    sacrebleu_signature,
)
from paraeval.metrics.base import (
    Metric,
    MetricConfigError,
    MetricResult,
    SystemLevel,
    choice_setting,
    make_signature,
)
from paraeval.metrics.encoder import EncoderMetric, Encoders, own_encoder
from paraeval.metrics.encoder_match import unit_sums
from paraeval.metrics.encoder_model import DEFAULT_MODEL

NGRAM_MODES = ("set", "count")


def _bleu(name: str, tokenize: str, smooth_method: str = "exp", **settings: Any) -> SacreBLEU:
    """sacrebleu's BLEU, its settings checked as one config error naming the metric."""
    check_bleu_settings(name, tokenize, smooth_method)
    return SacreBLEU(tokenize=tokenize, smooth_method=smooth_method, **settings)


def _words(bleu: SacreBLEU, text: str) -> list[str]:
    """The words sacrebleu's BLEU counts n-grams of (lowercasing, then its tokenizer)."""
    if bleu.lowercase:
        text = text.lower()
    return bleu.tokenizer(text.rstrip()).split()


class _Tokenized(Metric):
    """Shared settings: sacrebleu tokenizer and casing."""

    needs_references = False

    def __init__(
        self,
        tokenize: str = "13a",
        lowercase: bool = False,
        group: str | None = None,
    ) -> None:
        super().__init__(group=group)
        self.tokenize = tokenize
        self.lowercase = bool(lowercase)
        self._tok = _bleu(self.name, tokenize, lowercase=self.lowercase, effective_order=True)

    def words(self, text: str) -> list[str]:
        return _words(self._tok, text)

    def _signature(self, fields: dict[str, object], tail: dict[str, object] | None = None) -> str:
        impl, case = f"paraeval~sacrebleu-{SACREBLEU_VERSION}", "lc" if self.lowercase else "mixed"
        return make_signature(
            self.name, impl=impl, **fields, case=case, tok=self.tokenize, **(tail or {})
        )


# --------------------------------------------------------------------------- PINC
class PINC(_Tokenized):
    """PINC (Chen & Dolan 2011): the share of the candidate's n-grams (n = 1..``max_order``) not in
    its source, averaged over the orders. Corpus score: the mean of the segment scores."""

    name = "pinc"
    default_group = "diversity"
    needs_sources = True
    distance_to_source = True
    MAX_ORDER = 4

    def __init__(
        self,
        max_order: int = MAX_ORDER,
        ngrams: str = "set",
        tokenize: str = "13a",
        lowercase: bool = False,
        group: str | None = None,
    ) -> None:
        super().__init__(tokenize=tokenize, lowercase=lowercase, group=group)
        if int(max_order) < 1:
            raise MetricConfigError(f"metric 'pinc': max_order must be >= 1, got {max_order}")
        self.max_order = int(max_order)
        self.ngrams = choice_setting(self.name, "ngrams", ngrams, NGRAM_MODES)

    def signature(self, nrefs: int | None = None, segment: bool | None = None) -> str:
        return self._signature({"n": self.max_order, "ngrams": self.ngrams})

    def pinc(self, candidate: str, source: str) -> float:
        cand, src = self.words(candidate), self.words(source)
        parts: list[float] = []
        for n in range(1, self.max_order + 1):
            c_grams = ngrams(cand, n)
            if not c_grams:
                continue
            s_grams = ngrams(src, n)
            if self.ngrams == "set":
                c_set, s_set = set(c_grams), set(s_grams)
                overlap, total = len(c_set & s_set), len(c_set)
            else:
                c_cnt, s_cnt = Counter(c_grams), Counter(s_grams)
                overlap = sum((c_cnt & s_cnt).values())
                total = len(c_grams)
            parts.append(1.0 - overlap / total)
        return float(np.mean(parts)) if parts else 0.0

    def _score(
        self,
        candidates: list[str],
        references: list[list[str]],
        sources: Sequence[str] | None,
    ) -> MetricResult:
        assert sources is not None
        seg = np.array([self.pinc(c, s) for c, s in zip(candidates, sources, strict=True)])
        return self._mean_result(seg)


# --------------------------------------------------------------------------- system level
class _Distinct(SystemLevel, _Tokenized):
    """distinct-n over a system's outputs: distinct n-grams / all n-grams (0 when there is none)."""

    order: ClassVar[int] = 1

    def signature(self, nrefs: int | None = None, segment: bool | None = None) -> str:
        return self._signature({"n": self.order}, {"level": "system"})

    def system_score(self, candidates: list[str]) -> float:
        grams = [g for c in candidates for g in ngrams(self.words(c), self.order)]
        return len(set(grams)) / len(grams) if grams else 0.0


class Distinct1(_Distinct):
    """distinct-1: distinct unigrams / unigrams over all outputs of a system."""

    name = "distinct_1"
    order = 1


class Distinct2(_Distinct):
    """distinct-2: distinct bigrams / bigrams over all outputs of a system."""

    name = "distinct_2"
    order = 2


class InterBLEU(SystemLevel):
    """Mean sentence BLEU of each output against the system's other outputs (Texygen's
    Self-BLEU; not BLEU against the source). Lower = the outputs differ more from one another."""

    name = "inter_bleu"
    higher_is_better = False
    MAX_ORDER = 4  # sacrebleu BLEU's max_ngram_order

    def __init__(
        self,
        tokenize: str = "13a",
        lowercase: bool = False,
        smooth_method: str = "exp",
        smooth_value: float | None = None,
        effective_order: bool = True,
        group: str | None = None,
    ) -> None:
        super().__init__(group=group)
        flags = {"lowercase": bool(lowercase), "effective_order": bool(effective_order)}
        self._bleu = _bleu(self.name, tokenize, smooth_method, smooth_value=smooth_value, **flags)

    def signature(self, nrefs: int | None = None, segment: bool | None = None) -> str:
        # sacrebleu's signature of the sentence BLEU; each output has the system's other
        # outputs as references, a count that varies with the system
        sentence = sacrebleu_signature(self._bleu, None)
        return make_signature(
            self.name,
            impl="paraeval",
            refs="other_outputs",
            sentence=f"[{sentence}]",
            level="system",
        )

    def sentence_scores(self, candidates: Sequence[str]) -> np.ndarray:
        """Sentence BLEU of each output against all the others, in one pass: the clipping count
        among the OTHER outputs is the largest, or the second largest where output i holds it."""
        n = len(candidates)
        order = self.MAX_ORDER
        counts: list[Counter[tuple[str, ...]]] = []
        lengths = np.zeros(n, dtype=np.int64)
        for i, text in enumerate(candidates):
            words = _words(self._bleu, text)
            lengths[i] = len(words)
            counts.append(ngram_counts(words, order))
        # per n-gram: largest count, how many outputs hold it, second largest
        top: dict[tuple[str, ...], list[int]] = {}
        for grams in counts:
            for g, c in grams.items():
                entry = top.get(g)
                if entry is None:
                    top[g] = [c, 1, 0]
                elif c > entry[0]:
                    entry[2], entry[0], entry[1] = entry[0], c, 1
                elif c == entry[0]:
                    entry[1] += 1
                elif c > entry[2]:
                    entry[2] = c
        scores = np.zeros(n)
        for i in range(n):
            matches = [0] * order
            totals = [max(0, int(lengths[i]) - k) for k in range(order)]
            for g, c in counts[i].items():
                best, holders, second = top[g]
                others = best if (c < best or holders > 1) else second
                matches[len(g) - 1] += min(c, others)
            diff = np.abs(lengths - lengths[i]).astype(float)
            diff[i] = np.inf
            ref_len = int(lengths[diff == diff.min()].min()) if n > 1 else 0
            stats = [int(lengths[i]), ref_len, *matches, *totals]
            scores[i] = self._bleu._compute_score_from_stats(stats).score
        return scores

    def system_score(self, candidates: list[str]) -> float:
        if len(candidates) < 2:
            return float("nan")
        return float(self.sentence_scores(candidates).mean())


class SemanticDiversity(SystemLevel, EncoderMetric):
    """Mean pairwise ``1 − cos`` between the sentence embeddings of a system's outputs."""

    name = "semantic_diversity"

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        batch_size: int = 64,
        device: str | None = None,
        cache_dir: str | None = None,
        use_cache: bool = True,
        group: str | None = None,
        precision: str = "fp32",
        encoders: Encoders | None = None,
    ) -> None:
        super().__init__(group=group)
        settings = (model, device, batch_size, cache_dir, use_cache, precision)
        self.encoder = own_encoder(encoders, self.name, *settings)
        self.model = model

    def signature(self, nrefs: int | None = None, segment: bool | None = None) -> str:
        return make_signature(
            self.name,
            impl="paraeval",
            model=self.encoder.signature,
            pool=self.encoder.pooling,
            pairs="all",
            level="system",
        )

    @staticmethod
    def mean_pairwise_distance(total: np.ndarray, squares: float, n: int) -> float:
        """Mean of ``1 − cos`` over the n(n−1)/2 pairs of n vectors, from :func:`unit_sums` of
        them (a zero vector has cosine 0 with all): the sum of the pairwise cosines is
        ``(|Σ u_i|² − Σ |u_i|²) / 2`` for unit rows ``u``."""
        if n < 2:
            return float("nan")
        pair_sum = (float(total @ total) - squares) / 2.0
        return 1.0 - pair_sum / (n * (n - 1) / 2.0)

    def system_score(self, candidates: list[str]) -> float:
        """:meth:`mean_pairwise_distance` of the candidates' embeddings, summed step by step on
        the encoder's device (memory holds one step's embeddings)."""
        n = len(candidates)
        if n < 2:
            return float("nan")
        enc = self.encoder
        total, squares = 0.0, 0.0
        for start in range(0, n, enc.step):
            part = candidates[start : start + enc.step]
            sums, sq = unit_sums(enc.fetch(part, sentence=True).sent_of(part))
            total, squares = total + sums, squares + sq
        return self.mean_pairwise_distance(np.asarray(total), squares, n)
