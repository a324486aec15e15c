"""Paraphrase scores that combine adequacy with diversity from the source (group ``paraphrase``).

All three read BERTScore F1 from the shared encoder pass (:mod:`metrics.bertscore`), so adding
them to a run with ``bertscore`` encodes nothing again.

- ``parascore`` (Shen et al. 2022): ``max(F(source, c), F(refs, c)) + w·DS(source, c)``, equal to
  the ``parascore`` toolkit's ``ParaScorer.base_score``; ``parascore_free``: ``F(source, c) +
  w·DS(source, c)``. ``DS``: with ``d`` the character Levenshtein distance over the longer length,
  ``γ`` when ``d ≥ γ``, else ``−1 + ((γ + 1) / γ)·d`` (γ = 0.35, w = 0.05).
- ``bert_ibleu`` (Niu et al. 2021): ``((β / F(source, c) + 1 / (1 − BLEU/100)) / (β + 1))⁻¹``,
  β = 4, BLEU being ``self_bleu``'s sentence BLEU; a component ≤ 0 gives 0 (a copy scores 0).

Corpus scores are the segment means. Higher is better for all three. In a run, each is made of
:meth:`~paraeval.metrics.base.Metric.parts` that the score stage computes once for every metric
that shares them: the BERTScore against the sources (and ParaScore's against the references, which
is ``bertscore``'s own), ParaScore's edit distance (:class:`EditRatio`), BERT-iBLEU's self-BLEU.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import ClassVar

import numpy as np

from paraeval.metrics._lcs import edit_distances
from paraeval.metrics.base import (
    Metric,
    MetricConfigError,
    MetricResult,
    SegmentLocal,
    Texts,
    make_signature,
    number_setting,
)
from paraeval.metrics.bertscore import BERTScore
from paraeval.metrics.encoder import Encoders
from paraeval.metrics.encoder_model import DEFAULT_MODEL
from paraeval.metrics.encoder_precision import check_precision

F1 = "bertscore_f1"


def edit_ratios(pairs: Sequence[tuple[str, str]]) -> np.ndarray:
    """Each pair's Levenshtein distance over the length of its longer string (0 for two empty
    strings), computed once per distinct pair."""
    distinct = list(dict.fromkeys(pairs))
    distance = edit_distances(distinct)
    longest = np.array([max(len(a), len(b)) for a, b in distinct], dtype=float)
    ratio = np.divide(distance, longest, out=np.zeros(len(distinct)), where=longest > 0)
    where = {pair: k for k, pair in enumerate(distinct)}
    return ratio[[where[p] for p in pairs]] if pairs else np.zeros(0)


def diversity_terms(d: np.ndarray, gamma: float) -> np.ndarray:
    """ParaScore's DS of each value: γ when d ≥ γ, else −1 + ((γ + 1)/γ)·d."""
    d = np.asarray(d, dtype=float)
    return np.where(d >= gamma, gamma, -1.0 + ((gamma + 1.0) / gamma) * d)


class EditRatio(SegmentLocal):
    """ParaScore's diversity ``d`` of each candidate: its character edit distance to its first
    reference over the longer length. A part of ParaScore, scored against the sources (whose
    references are then the sources); corpus score: the mean."""

    name = "edit_ratio"
    default_group = "diversity"
    distance_to_source = True

    def _score(
        self,
        candidates: list[str],
        references: list[list[str]],
        sources: Sequence[str] | None,
    ) -> MetricResult:
        seg = edit_ratios([(c, refs[0]) for c, refs in zip(candidates, references, strict=True)])
        return self._mean_result(seg)

    def signature(self, nrefs: int | None = None, segment: bool | None = None) -> str:
        return make_signature(self.name, impl="paraeval", unit="char_levenshtein", norm="longer")


def _f1(result: MetricResult) -> np.ndarray:
    return np.asarray(result.segment[F1], dtype=float)


def _against_sources(call: Texts) -> Texts:
    cands, _, sources = call
    assert sources is not None
    return cands, [[s] for s in sources], sources


class _OnBERTScore(Metric):
    """BERTScore F1 of candidates against sources or references, from a BERTScore on the shared
    encoder (no idf, no rescaling: ParaScore's and BERT-iBLEU's definitions)."""

    default_group = "paraphrase"
    higher_is_better = True
    needs_sources = True
    needs_references = False
    resources = ("encoder",)
    memory = BERTScore.memory

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        layer: int | None = None,
        batch_size: int = 64,
        bert_score_batch_size: int = 64,
        device: str | None = None,
        cache_dir: str | None = None,
        use_cache: bool = True,
        group: str | None = None,
        precision: str = "fp32",
        encoders: Encoders | None = None,
    ) -> None:
        super().__init__(group=group)
        self.bertscore = BERTScore(
            encoders=encoders,
            precision=check_precision(precision, self.name),
            model=model,
            layer=layer,
            batch_size=batch_size,
            bert_score_batch_size=bert_score_batch_size,
            device=device,
            cache_dir=cache_dir,
            use_cache=use_cache,
        )

    def prepare(self, texts: Iterable[str]) -> None:
        self.bertscore.prepare(texts)

    def _bertscore_sig(self) -> str:
        b = self.bertscore
        pad = f"bs{b.bert_score_batch_size}" if b.bert_score_batch_size else "none"
        return f"bertscore[f1,{b.encoder.signature},L{b.layer},idf:no,rescale:no,pad:{pad}]"

    def _score(
        self,
        candidates: list[str],
        references: list[list[str]],
        sources: Sequence[str] | None,
    ) -> MetricResult:
        return self.score_systems([(candidates, references, sources)])[0]

    def score_systems(self, calls: Sequence[Texts]) -> list[MetricResult]:
        """What the score stage does with the parts, in one process: each part scores every call
        in one pass (the BERTScore ones streamed), a part against the sources having them for
        references, and :meth:`from_parts` puts each call's together."""
        for call in calls:
            self._check_call(*call)
        done = [
            part.score_systems([_against_sources(call) if on_source else call for call in calls])
            for part, on_source in self.parts()
        ]
        return [self.from_parts([results[k] for results in done]) for k in range(len(calls))]


class _ParaScoreBase(_OnBERTScore):
    refs_rule: ClassVar[str]
    GAMMA = 0.35
    WEIGHT = 0.05

    def __init__(
        self,
        gamma: float = GAMMA,
        weight: float = WEIGHT,
        model: str = DEFAULT_MODEL,
        layer: int | None = None,
        batch_size: int = 64,
        bert_score_batch_size: int = 64,
        device: str | None = None,
        cache_dir: str | None = None,
        use_cache: bool = True,
        group: str | None = None,
        precision: str = "fp32",
        encoders: Encoders | None = None,
    ) -> None:
        bert = (model, layer, batch_size, bert_score_batch_size, device, cache_dir, use_cache)
        super().__init__(*bert, group, precision, encoders)
        self.gamma = number_setting(self.name, "gamma", gamma)
        self.weight = number_setting(self.name, "weight", weight)
        if not 0.0 < self.gamma <= 1.0:
            raise MetricConfigError(f"metric '{self.name}': gamma must be in (0, 1], got {gamma}")
        self.edit = EditRatio()

    def signature(self, nrefs: int | None = None, segment: bool | None = None) -> str:
        return make_signature(
            self.name,
            impl="paraeval",
            sim=self._bertscore_sig(),
            refs=self.refs_rule,
            ds="char_levenshtein",
            gamma=f"{self.gamma:g}",
            w=f"{self.weight:g}",
        )

    def distances(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """The normalized character edit distance of :meth:`from_parts`."""
        return edit_ratios(pairs)

    def from_parts(self, results: Sequence[MetricResult]) -> MetricResult:
        """The best BERTScore F1 of the parts, then the diversity term of the last (the edit)."""
        *f1s, edit = results
        ds = diversity_terms(np.asarray(edit.segment[EditRatio.name]), self.gamma)
        return self._mean_result(np.maximum.reduce([_f1(r) for r in f1s]) + self.weight * ds)


class ParaScore(_ParaScoreBase):
    """ParaScore (Shen et al. 2022), reference-based: max(F(source, c), F(refs, c)) + w·DS."""

    name = "parascore"
    needs_references = True
    refs_rule = "max(source,max_refs)"

    def parts(self) -> tuple[tuple[Metric, bool], ...]:
        return ((self.bertscore, True), (self.bertscore, False), (self.edit, True))


class ParaScoreFree(_ParaScoreBase):
    """ParaScore, reference-free: F(source, c) + w·DS."""

    name = "parascore_free"
    refs_rule = "source"

    def parts(self) -> tuple[tuple[Metric, bool], ...]:
        return ((self.bertscore, True), (self.edit, True))


def bert_ibleu(f1: np.ndarray, bleu: np.ndarray, beta: float) -> np.ndarray:
    """((β/F + 1/(1 − BLEU/100)) / (β + 1))⁻¹, 0 where a component is ≤ 0."""
    f1 = np.asarray(f1, dtype=float)
    novelty = 1.0 - np.asarray(bleu, dtype=float) / 100.0
    ok = (f1 > 0) & (novelty > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        value = (beta + 1.0) / (beta / f1 + 1.0 / novelty)
    return np.where(ok, value, 0.0)


class BERTiBLEU(_OnBERTScore):
    """BERT-iBLEU (Niu et al. 2021): harmonic mean of BERTScore F1 and 1 − BLEU/100 against the
    source, weighted β : 1."""

    name = "bert_ibleu"
    BETA = 4.0

    def __init__(
        self,
        beta: float = BETA,
        tokenize: str = "13a",
        lowercase: bool = False,
        smooth_method: str = "exp",
        smooth_value: float | None = None,
        effective_order: bool = True,
        model: str = DEFAULT_MODEL,
        layer: int | None = None,
        batch_size: int = 64,
        bert_score_batch_size: int = 64,
        device: str | None = None,
        cache_dir: str | None = None,
        use_cache: bool = True,
        group: str | None = None,
        precision: str = "fp32",
        encoders: Encoders | None = None,
    ) -> None:
        from paraeval.metrics.sacre import SelfBLEU

        bert = (model, layer, batch_size, bert_score_batch_size, device, cache_dir, use_cache)
        super().__init__(*bert, group, precision, encoders)
        self.beta = number_setting(self.name, "beta", beta)
        if not self.beta > 0:
            raise MetricConfigError(f"metric 'bert_ibleu': beta must be > 0, got {beta}")
        try:
            self.self_bleu = SelfBLEU(
                tokenize=tokenize,
                lowercase=lowercase,
                smooth_method=smooth_method,
                smooth_value=smooth_value,
                effective_order=effective_order,
            )
        except MetricConfigError as exc:
            raise MetricConfigError(str(exc).replace("'self_bleu'", "'bert_ibleu'")) from None

    def signature(self, nrefs: int | None = None, segment: bool | None = None) -> str:
        # sacrebleu's signature of the sentence BLEU against the source (one reference)
        bleu = self.self_bleu.signature(1, segment=True).split("|", 1)[1]
        return make_signature(
            self.name,
            impl="paraeval",
            sim=self._bertscore_sig(),
            bleu=f"[{bleu}]",
            vs="source",
            beta=f"{self.beta:g}",
        )

    def parts(self) -> tuple[tuple[Metric, bool], ...]:
        return ((self.bertscore, True), (self.self_bleu, False))

    def from_parts(self, results: Sequence[MetricResult]) -> MetricResult:
        f_src, bleu = results
        return self._mean_result(bert_ibleu(_f1(f_src), bleu.segment["self_bleu"], self.beta))
