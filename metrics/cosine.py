"""Cosine similarity of sentence embeddings from the shared encoder pass (:mod:`metrics.encoder`),
equal to ``cos(SentenceTransformer(path).encode(c), SentenceTransformer(path).encode(r))``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from paraeval.metrics.base import (
    Metric,
    MetricResult,
    make_signature,
    mean_corpus,
    reduce_over_references,
    select_mean,
)
from paraeval.metrics.encoder import DEFAULT_MODEL, get_encoder


def _cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    num = np.einsum("ij,ij->i", a, b)
    den = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)


class Cosine(Metric):
    """Cosine between the candidate's and each reference's sentence embedding; the multi-reference
    rule (``max`` or ``mean``) combines references. Corpus score: mean of segment scores."""

    name = "cosine"
    default_group = "semantic"
    higher_is_better = True
    supports_multi_ref_rule = True
    segment_local = True
    MODEL = DEFAULT_MODEL
    BATCH_SIZE = 64

    def __init__(
        self,
        model: str = MODEL,
        batch_size: int = BATCH_SIZE,
        device: str | None = None,
        cache_dir: str | None = None,
        use_cache: bool = True,
        multi_ref: str = "max",
        group: str | None = None,
        against_source: bool = False,
    ) -> None:
        super().__init__(group=group, against_source=against_source, multi_ref=multi_ref)
        self.encoder = get_encoder(model, device, batch_size, cache_dir, use_cache)
        self.model = model

    def prepare(self, texts: Iterable[str]) -> None:
        self.encoder.ensure(list(texts), progress=True)

    def signature(self) -> str:
        return make_signature(
            self.name,
            impl="paraeval",
            model=self.encoder.signature,
            pool=self.encoder.pooling,
            refs=self.multi_ref,
        )

    def _score(
        self,
        candidates: list[str],
        references: list[list[str]],
        sources: Sequence[str] | None,
    ) -> MetricResult:
        flat_refs = [r for refs in references for r in refs]
        self.encoder.ensure(candidates + flat_refs, progress=False)
        cand = self.encoder.sentence_embeddings(candidates)
        ref = self.encoder.sentence_embeddings(flat_refs)
        owner = np.repeat(np.arange(len(candidates)), [len(r) for r in references])
        sims = _cosine_rows(cand[owner], ref) if len(flat_refs) else np.zeros(0)
        bounds = np.cumsum([0] + [len(r) for r in references])
        per_ref = [sims[bounds[i] : bounds[i + 1]] for i in range(len(candidates))]
        seg = reduce_over_references(per_ref, self.multi_ref)
        return MetricResult({self.name: seg}, {self.name: mean_corpus(seg)}, self.signature())

    def select(self, result: MetricResult, rows: np.ndarray) -> MetricResult:
        return select_mean(self, result, rows)
