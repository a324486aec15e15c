"""Properties every syntactic metric must have, checked with hypothesis:

- a candidate identical to one of its references gets the metric's best value;
- per-segment scores move with their items when the input is permuted, and the corpus score does
  not change.

NIST has no attainable best value (information-weighted precision is unbounded), so it is checked
for the permutation property only; METEOR's best value for an n-word reference is
``1 − 0.5·(1/n)³`` (one chunk of n matches), CIDEr-D's is 10.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from paraeval.metrics.base import Metric
from paraeval.metrics.cider import CIDEr
from paraeval.metrics.meteor import METEOR
from paraeval.metrics.nist import NIST
from paraeval.metrics.rouge import (
    Rouge1,
    Rouge2,
    RougeL,
    RougeLsum,
    RougeN,
    RougeS,
    RougeSU,
    RougeW,
)
from paraeval.metrics.sacre import BLEU, CHRF, TER

VOCAB = [f"w{i}" for i in range(12)] + ["cat", "dog", "runs", "running", "big", "large"]
word = st.sampled_from(VOCAB)
sentence = st.lists(word, min_size=4, max_size=12).map(" ".join)
item = st.tuples(sentence, st.lists(sentence, min_size=1, max_size=3))

METRICS: list[Metric] = [
    Rouge1(),
    Rouge2(),
    RougeN(n=3),
    RougeN(n=4),
    RougeL(),
    RougeLsum(),
    RougeW(),
    RougeS(),
    RougeSU(),
    BLEU(),
    CHRF(),
    CHRF(word_order=2),
    TER(),
    METEOR(),
    NIST(),
    CIDEr(),
]
BEST = {"bleu": 100.0, "chrf": 100.0, "ter": 0.0}
FAST = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.slow
@FAST
@given(items=st.lists(item, min_size=1, max_size=5), data=st.data())
def test_identical_candidate_gets_best_value(
    items: list[tuple[str, list[str]]], data: st.DataObject
) -> None:
    refs = [r for _, r in items]
    # the candidate copies one of its references (chosen by hypothesis)
    cands = [r[data.draw(st.integers(0, len(r) - 1))] for r in refs]
    for metric in METRICS:
        if metric.name in ("nist", "cider"):
            continue
        seg = metric.score(cands, refs).segment[metric.name]
        if metric.name == "meteor":
            best = np.array([1 - 0.5 * (1 / len(c.split())) ** 3 for c in cands])
        else:
            best = np.full(len(cands), BEST.get(metric.name, 1.0))
        np.testing.assert_allclose(seg, best, rtol=0, atol=1e-9, err_msg=metric.name)


@FAST
@given(sentence)
def test_identical_candidate_gets_best_cider(text: str) -> None:
    # a second item with words of its own keeps every n-gram of the first below df = #items
    other = "zz1 zz2 zz3 zz4 zz5"
    seg = CIDEr().score([text, "zz9"], [[text], [other]]).segment["cider"]
    assert abs(seg[0] - 10.0) <= 1e-9


@FAST
@given(
    items=st.lists(st.tuples(sentence, st.lists(sentence, min_size=1, max_size=3)), min_size=2),
    seed=st.integers(0, 2**31 - 1),
)
def test_segment_scores_follow_a_permutation(items: list[tuple[str, list[str]]], seed: int) -> None:
    cands = [c for c, _ in items]
    refs = [r for _, r in items]
    perm = np.random.default_rng(seed).permutation(len(items))
    for metric in METRICS:
        a = metric.score(cands, refs)
        b = metric.score([cands[i] for i in perm], [refs[i] for i in perm])
        np.testing.assert_allclose(
            b.segment[metric.name], a.segment[metric.name][perm], rtol=0, atol=1e-12
        )
        assert abs(b.corpus[metric.name] - a.corpus[metric.name]) <= 1e-9, metric.name


OURS = [m for m in METRICS if type(m).__module__ != "paraeval.metrics.sacre"]


def test_empty_inputs_do_not_crash() -> None:
    """No segments: an empty column and a NaN corpus score; blank texts: 0 (where NLTK would
    divide by zero, see the NIST deviation test)."""
    for metric in OURS:
        none = metric.score([], [])
        assert none.segment[metric.name].shape == (0,) and np.isnan(none.corpus[metric.name])
        blank = metric.score(["", " \n "], [[""], ["  ", "\n"]])
        assert list(blank.segment[metric.name]) == [0.0, 0.0], metric.name


def test_against_source_and_group_are_settings() -> None:
    for cls in (Rouge1, RougeL, RougeW, RougeS, RougeSU, NIST, CIDEr, METEOR):
        metric = cls(against_source=True, group="diversity")
        assert metric.against_source and metric.group == "diversity"
        assert cls().group == "syntactic" and not cls().against_source
