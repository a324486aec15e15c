"""Cosine similarity of sentence embeddings from the shared encoder pass (:mod:`metrics.encoder`),
equal to ``cos(SentenceTransformer(path).encode(c), SentenceTransformer(path).encode(r))``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from paraeval.metrics.base import MetricResult, SegmentLocal, make_signature, reduce_pairs
from paraeval.metrics.encoder import EncoderMetric, Encoders, own_encoder
from paraeval.metrics.encoder_match import locality_order, pair_cosines, pair_lists
from paraeval.metrics.encoder_model import DEFAULT_MODEL


class Cosine(SegmentLocal, EncoderMetric):
    """Cosine between the candidate's and each reference's sentence embedding; the multi-reference
    rule (``max`` or ``mean``) combines references. Corpus score: mean of segment scores."""

    name = "cosine"
    default_group = "semantic"
    higher_is_better = True
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
        precision: str = "fp32",
        encoders: Encoders | None = None,
    ) -> None:
        super().__init__(group=group, against_source=against_source, multi_ref=multi_ref)
        settings = (model, device, batch_size, cache_dir, use_cache, precision)
        self.encoder = own_encoder(encoders, self.name, *settings)
        self.model = model

    def signature(self, nrefs: int | None = None, segment: bool | None = None) -> str:
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
        flat_cands, flat_refs = pair_lists(candidates, references)
        sims = np.zeros(len(flat_refs))
        order = locality_order(flat_refs)
        enc = self.encoder
        for start in range(0, len(order), enc.step):
            idx = order[start : start + enc.step]
            texts = [t for i in idx for t in (flat_cands[i], flat_refs[i])]
            found = enc.fetch(texts, sentence=True)
            cand = found.rows([flat_cands[i] for i in idx])
            ref = found.rows([flat_refs[i] for i in idx])
            sims[idx] = pair_cosines(found.sent, cand, ref)
        seg = reduce_pairs(sims, references, self.multi_ref)
        return self._mean_result(seg)
