"""BLEU, iBLEU, self-BLEU, chrF and TER on sacrebleu's per-segment statistics.

iBLEU and self-BLEU are made of BLEUs (:meth:`Metric.parts`), so the score stage computes each
BLEU once and iBLEU for any α recombines them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, TypeVar

import numpy as np
from sacrebleu.metrics.base import Metric as SacreMetric
from sacrebleu.metrics.bleu import BLEU as SacreBLEU
from sacrebleu.metrics.bleu import MAX_NGRAM_ORDER as SACREBLEU_MAX_NGRAM_ORDER
from sacrebleu.metrics.chrf import CHRF as SacreCHRF
from sacrebleu.metrics.ter import TER as SacreTER

from paraeval.metrics._sacre_base import (
    SacreBase,
    check_bleu_settings,
    sacrebleu_signature,
    segment_statistics,
)
from paraeval.metrics.base import (
    Metric,
    MetricConfigError,
    MetricResult,
    ngram_memory,
    number_setting,
    order_setting,
)

# a score or an array of scores: iBLEU's combination works on both alike
Scores = TypeVar("Scores", float, np.ndarray)


class BLEU(SacreBase):
    """sacrebleu BLEU. Segment scores follow ``sacrebleu.sentence_bleu`` (effective order on by
    default), the corpus score ``sacrebleu.corpus_bleu`` (effective order off). Each carries
    sacrebleu's own signature of what computed it (:meth:`signature`)."""

    name = "bleu"
    memory = ngram_memory("max_ngram_order")

    TOKENIZE = SacreBLEU.TOKENIZER_DEFAULT
    SMOOTH_METHOD = "exp"
    MAX_NGRAM_ORDER = SACREBLEU_MAX_NGRAM_ORDER

    def __init__(
        self,
        tokenize: str = TOKENIZE,
        lowercase: bool = False,
        smooth_method: str = SMOOTH_METHOD,
        smooth_value: float | None = None,
        effective_order: bool = True,
        max_ngram_order: int = MAX_NGRAM_ORDER,
        group: str | None = None,
        against_source: bool = False,
    ) -> None:
        super().__init__(group=group, against_source=against_source)
        check_bleu_settings(self.name, tokenize, smooth_method)
        self.max_ngram_order = order_setting(self.name, "max_ngram_order", max_ngram_order)
        self.effective_order = bool(effective_order)
        self._settings: dict[str, Any] = dict(
            tokenize=tokenize,
            lowercase=bool(lowercase),
            smooth_method=smooth_method,
            smooth_value=smooth_value,
            max_ngram_order=max_ngram_order,
        )
        self._metric: SacreBLEU = SacreBLEU(effective_order=False, **self._settings)
        self._sentence = SacreBLEU(effective_order=self.effective_order, **self._settings)

    def _segment_metric(self) -> SacreMetric:
        return self._sentence

    def _plain_bleu(self) -> BLEU:
        """BLEU with this metric's settings: the part iBLEU and self-BLEU are made of."""
        return BLEU(effective_order=self.effective_order, **self._settings)

    def corpus_from_stats_batched(self, stats: np.ndarray) -> np.ndarray:
        # imported here: the batched formulas compile with numba, which a user scoring with
        # BLEU().score() should not pay for
        from paraeval.metrics._sacre_batched import bleu_scores

        return bleu_scores(stats, self._metric)

    def _bleu_signature(self, bleu: SacreBLEU, nrefs: int | None) -> str:
        """sacrebleu's signature of ``bleu``; sacrebleu's does not name the n-gram order, so an
        order other than 4 is added after it."""
        sig, order = sacrebleu_signature(bleu, nrefs), self.max_ngram_order
        return sig if order == self.MAX_NGRAM_ORDER else f"{sig}|ngram:{order}"

    def signature(self, nrefs: int | None = None, segment: bool | None = None) -> str:
        """``bleu|`` and sacrebleu's signature of the corpus score (``eff:no``) or of
        ``sentence_bleu`` with this effective order; the key pins both (and iBLEU's at every α)."""
        if segment is None:
            eff = "yes" if self.effective_order else "no"
            return f"{self.name}|{self._bleu_signature(self._metric, nrefs)}|segment_eff:{eff}"
        bleu = self._sentence if segment else self._metric
        return f"{self.name}|{self._bleu_signature(bleu, nrefs)}"


class SelfBLEU(BLEU):
    """BLEU of each candidate against its SOURCE (higher = closer to copying the input)."""

    name = "self_bleu"
    default_group = "diversity"
    needs_references = False
    needs_sources = True

    def signature(self, nrefs: int | None = None, segment: bool | None = None) -> str:
        # one reference, the source; the key as BLEU's
        return super().signature(None if segment is None else 1, segment)

    def _score(
        self,
        candidates: list[str],
        references: list[list[str]],
        sources: Sequence[str] | None,
    ) -> MetricResult:
        assert sources is not None
        return super()._score(candidates, [[s] for s in sources], sources)

    def parts(self) -> tuple[tuple[Metric, bool], ...]:
        return ((self._plain_bleu(), True),)

    def from_parts(self, results: Sequence[MetricResult]) -> MetricResult:
        (bleu,) = results
        seg, corpus = bleu.segment[BLEU.name], bleu.corpus[BLEU.name]
        return MetricResult({self.name: seg}, {self.name: corpus}, self.signature(), bleu.stats)


class IBLEU(BLEU):
    """iBLEU (Sun & Zhou 2012): α·BLEU(c, R) − (1−α)·BLEU(c, S), from sentence (segment) or
    corpus BLEUs with the statistics of ``bleu`` and ``self_bleu``: changing α rescores nothing."""

    name = "ibleu"
    needs_sources = True
    needs_own_references = True
    ALPHA = 0.8

    def __init__(
        self,
        alpha: float = ALPHA,
        tokenize: str = BLEU.TOKENIZE,
        lowercase: bool = False,
        smooth_method: str = BLEU.SMOOTH_METHOD,
        smooth_value: float | None = None,
        effective_order: bool = True,
        max_ngram_order: int = BLEU.MAX_NGRAM_ORDER,
        group: str | None = None,
        against_source: bool = False,
    ) -> None:
        bleu = (tokenize, lowercase, smooth_method, smooth_value, effective_order, max_ngram_order)
        super().__init__(*bleu, group, against_source)
        self.alpha = number_setting(self.name, "alpha", alpha)
        if not 0.0 <= self.alpha <= 1.0:  # NaN too
            raise MetricConfigError(f"metric 'ibleu': alpha must be in [0, 1], got {self.alpha}")

    def signature(self, nrefs: int | None = None, segment: bool | None = None) -> str:
        """α, then sacrebleu's signatures of its two BLEUs: against the references and against
        the source (one reference); the key is BLEU's with α."""
        if segment is None:
            return BLEU.signature(self, nrefs) + f"|alpha:{self.alpha:g}"
        bleu = self._sentence if segment else self._metric
        ref, src = self._bleu_signature(bleu, nrefs), self._bleu_signature(bleu, 1)
        return f"{self.name}|alpha:{self.alpha:g}|ref:[{ref}]|src:[{src}]"

    # ------------------------------------------------------------------ the α combination
    # everything that recombines the parts (score cache, α curve, batched corpus score) goes
    # through these methods: the formula and its operation order live here only.
    COMPONENTS: ClassVar[tuple[str, str]] = ("bleu_ref", "bleu_src")

    def combine(self, bleu_ref: Scores, bleu_src: Scores, alpha: float | None = None) -> Scores:
        """α·BLEU(c, R) − (1−α)·BLEU(c, S), elementwise on arrays; by default at the own α."""
        a = self.alpha if alpha is None else float(alpha)
        return a * bleu_ref - (1.0 - a) * bleu_src

    @staticmethod
    def split_stats(stats: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """iBLEU's statistics are BLEU's against the references, then BLEU's against the source,
        side by side: the two halves."""
        half = stats.shape[1] // 2 if stats.ndim == 2 else 0
        return stats[:, :half], stats[:, half:]

    def segment_components(self, stats: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Sentence BLEU against the references and against the source, per segment."""
        ref, src = self.split_stats(stats)
        return self._segment_scores(ref), self._segment_scores(src)

    def corpus_components(self, stats: np.ndarray) -> tuple[float, float]:
        """Corpus BLEU against the references and against the source."""
        ref, src = self.split_stats(stats)
        return self._corpus_score(ref), self._corpus_score(src)

    def components(self, result: MetricResult) -> MetricResult:
        """The α-free parts of an iBLEU result (segment and corpus ``bleu_ref``/``bleu_src``),
        the segment parts rebuilt from the statistics its own segment scores came from."""
        if (stats := result.stats) is None:
            raise ValueError("an iBLEU result without statistics has no components")
        seg_ref, seg_src = self.segment_components(stats)
        ref, src = self.COMPONENTS
        return MetricResult(
            segment={ref: seg_ref, src: seg_src},
            corpus={ref: float(result.extra[ref]), src: float(result.extra[src])},
            signature=self.components_signature(),
            stats=stats,
        )

    def components_signature(self) -> str:
        """The signature of :meth:`components`: iBLEU's without α, which they do not depend on."""
        return BLEU.signature(self) + "|components:" + ",".join(self.COMPONENTS)

    def from_components(self, parts: MetricResult) -> MetricResult:
        """The iBLEU result at this metric's α from :meth:`components`."""
        ref, src = self.COMPONENTS
        seg = self.combine(parts.segment[ref], parts.segment[src])
        return self._combined(seg, parts.corpus[ref], parts.corpus[src], parts.stats)

    def _score(
        self,
        candidates: list[str],
        references: list[list[str]],
        sources: Sequence[str] | None,
    ) -> MetricResult:
        assert sources is not None
        stats_r, seg_r, corp_r = self._score_pair(candidates, references)
        stats_s, seg_s, corp_s = self._score_pair(candidates, [[s] for s in sources])
        stats = np.hstack([stats_r, stats_s]) if len(candidates) else np.zeros((0, 0))
        return self._combined(self.combine(seg_r, seg_s), corp_r, corp_s, stats)

    def parts(self) -> tuple[tuple[Metric, bool], ...]:
        plain = self._plain_bleu()
        return ((plain, False), (plain, True))

    def from_parts(self, results: Sequence[MetricResult]) -> MetricResult:
        ref, src = results
        seg_r, seg_s = ref.segment[BLEU.name], src.segment[BLEU.name]
        assert ref.stats is not None and src.stats is not None
        stats = np.hstack([ref.stats, src.stats]) if len(seg_r) else np.zeros((0, 0))
        seg = self.combine(seg_r, seg_s)
        return self._combined(seg, ref.corpus[BLEU.name], src.corpus[BLEU.name], stats)

    def _combined(
        self,
        seg: np.ndarray,
        corp_r: float,
        corp_s: float,
        stats: np.ndarray | None,
        signature: str | None = None,
    ) -> MetricResult:
        ref, src = self.COMPONENTS
        return MetricResult(
            {self.name: seg},
            {self.name: self.combine(corp_r, corp_s)},
            signature or self.signature(),
            stats,
            extra={ref: corp_r, src: corp_s},
        )

    def select(self, result: MetricResult, rows: np.ndarray) -> MetricResult:
        assert result.stats is not None
        stats, seg = result.stats[rows], np.asarray(result.segment[self.name])[rows]
        return self._combined(seg, *self.corpus_components(stats), stats, result.signature)

    def corpus_from_stats(self, stats: np.ndarray) -> dict[str, float]:
        return {self.name: self.combine(*self.corpus_components(stats))}

    def corpus_from_stats_batched(self, stats: np.ndarray) -> np.ndarray:
        ref, src = self.split_stats(stats)
        from paraeval.metrics._sacre_batched import bleu_scores

        return self.combine(bleu_scores(ref, self._metric), bleu_scores(src, self._metric))


class CHRF(SacreBase):
    """sacrebleu chrF; ``word_order: 2`` gives chrF++."""

    name = "chrf"
    CHAR_ORDER = SacreCHRF.CHAR_ORDER
    WORD_ORDER = SacreCHRF.WORD_ORDER
    BETA = SacreCHRF.BETA

    def __init__(
        self,
        char_order: int = CHAR_ORDER,
        word_order: int = WORD_ORDER,
        beta: int = BETA,
        lowercase: bool = False,
        whitespace: bool = False,
        eps_smoothing: bool = False,
        group: str | None = None,
        against_source: bool = False,
    ) -> None:
        super().__init__(group=group, against_source=against_source)
        self.beta = int(beta)
        self._metric: SacreCHRF = SacreCHRF(
            char_order=int(char_order),
            word_order=int(word_order),
            beta=self.beta,
            lowercase=bool(lowercase),
            whitespace=bool(whitespace),
            eps_smoothing=bool(eps_smoothing),
        )

    def corpus_from_stats_batched(self, stats: np.ndarray) -> np.ndarray:
        from paraeval.metrics._sacre_batched import chrf_scores

        return chrf_scores(stats, self._metric)

    def signature(self, nrefs: int | None = None, segment: bool | None = None) -> str:
        """``chrf|`` and sacrebleu's signature; sacrebleu names β in the score's name (chrF2),
        not in the signature, so a β other than 2 is added after it."""
        sig = super().signature(nrefs, segment)
        return sig if self.beta == self.BETA else f"{sig}|beta:{self.beta}"


class TER(SacreBase):
    """sacrebleu TER (lower is better); its edit-rate search runs compiled
    (:mod:`paraeval.metrics._ter`), with statistics equal to sacrebleu's."""

    name = "ter"
    higher_is_better = False
    integer_stats = False

    def __init__(
        self,
        normalized: bool = False,
        no_punct: bool = False,
        asian_support: bool = False,
        case_sensitive: bool = False,
        group: str | None = None,
        against_source: bool = False,
    ) -> None:
        super().__init__(group=group, against_source=against_source)
        self._metric: SacreTER = SacreTER(
            normalized=bool(normalized),
            no_punct=bool(no_punct),
            asian_support=bool(asian_support),
            case_sensitive=bool(case_sensitive),
        )

    def _stats(self, hyps: Sequence[str], refs: Sequence[Sequence[str]]) -> np.ndarray:
        # the edit-rate search compiled (numba), imported here like the batched formulas
        from paraeval.metrics._ter import ter_statistics

        return segment_statistics(self._metric, hyps, refs, ter_statistics)

    def corpus_from_stats_batched(self, stats: np.ndarray) -> np.ndarray:
        from paraeval.metrics._sacre_batched import ter_scores

        return ter_scores(stats, self._metric)
