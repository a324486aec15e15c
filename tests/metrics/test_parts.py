"""The contract of a metric made of parts (iBLEU, self-BLEU, ParaScore, BERT-iBLEU): what the
score stage computes once and shares, put together by ``from_parts``, is what ``score`` gives.
ParaScore and BERT-iBLEU score through their parts themselves (so the two agree by construction):
their numbers are checked against the ParaScore toolkit and by hand in test_paraphrase.py."""

from __future__ import annotations

import numpy as np
import pytest

import paraeval.metrics
from paraeval.metrics import METRICS
from paraeval.metrics.paraphrase import _OnBERTScore
from tests.metrics._semantic_texts import pairs

CANDS, REF_LISTS = pairs(24, seed=5)
# sources of their own: each candidate's words in another order
SRCS = [" ".join(sorted(c.split())) for c in CANDS]
# a copy of the source, an empty candidate
CANDS[0], CANDS[1] = SRCS[0], ""

MADE_OF_PARTS = [name for name in METRICS if getattr(paraeval.metrics, name).describe().composed]


# those whose score is computed otherwise than from their parts
SCORED_APART = [
    n for n in MADE_OF_PARTS if not issubclass(getattr(paraeval.metrics, n), _OnBERTScore)
]


def test_the_metrics_made_of_parts() -> None:
    assert {"IBLEU", "SelfBLEU", "ParaScore", "ParaScoreFree", "BERTiBLEU"} <= set(MADE_OF_PARTS)
    assert {"IBLEU", "SelfBLEU"} <= set(SCORED_APART)


@pytest.mark.parametrize("name", SCORED_APART)
def test_from_parts_equals_score(name: str) -> None:
    metric = getattr(paraeval.metrics, name)()
    whole = metric.score(CANDS, REF_LISTS, SRCS)
    results = []
    for part, on_source in metric.parts():
        # against the sources, a part's references are the sources, as the score stage gives them
        refs = [[s] for s in SRCS] if on_source else REF_LISTS
        results.append(part.score(CANDS, refs, SRCS))
    joined = metric.from_parts(results)
    assert set(joined.segment) == set(whole.segment)
    for column, values in whole.segment.items():
        np.testing.assert_allclose(joined.segment[column], values, rtol=0, atol=1e-12)
    for column, value in whole.corpus.items():
        assert joined.corpus[column] == pytest.approx(value, rel=0, abs=1e-12)
    assert joined.signature == whole.signature
