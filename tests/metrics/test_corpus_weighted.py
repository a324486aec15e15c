"""Corpus-weighted metrics in shards (what ``engine=ray`` does with them): each shard counted,
the counts added, each shard scored with the sum and the shards joined give :meth:`score`'s
result (n-gram metrics bit for bit, BERTScore within 1e-6), for any shard size; and every metric
that says it is corpus-weighted implements the whole contract."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import numpy as np
import pytest

import paraeval.metrics
from paraeval.metrics import METRICS
from paraeval.metrics.base import CorpusCounts, MetricResult, Sharded
from paraeval.metrics.bertscore import BERTScore
from paraeval.metrics.cider import CIDEr
from paraeval.metrics.nist import NIST
from tests.metrics.varied import unzip, varied_sets

SETS = varied_sets(150, seed=3)
CANDS, REFS, SRCS = unzip(SETS)


def sharded(metric: Sharded, rows: int, n: int = len(CANDS)) -> MetricResult:
    """The first ``n`` rows scored as an engine scores them, in shards of about ``rows`` rows."""
    bounds = metric.split(REFS[:n], rows)
    parts = [(CANDS[b], REFS[b], SRCS[b]) for b in bounds]
    counts = [metric.counts(c, r) for c, r, _ in parts]
    total = functools.reduce(lambda a, b: a + b, counts, CorpusCounts())
    return metric.reduce([metric.score_shard(total, *p) for p in parts])


def assert_equal(got: MetricResult, want: MetricResult, tolerance: float) -> None:
    assert got.segment.keys() == want.segment.keys()
    for col in want.segment:
        a, b = np.asarray(got.segment[col]), np.asarray(want.segment[col])
        if tolerance == 0:
            np.testing.assert_array_equal(a, b, err_msg=col)
        else:
            np.testing.assert_allclose(a, b, rtol=0, atol=tolerance, err_msg=col)
    assert got.corpus.keys() == want.corpus.keys()
    for col, value in want.corpus.items():
        assert abs(got.corpus[col] - value) <= tolerance, (col, got.corpus[col], value)
    assert got.signature == want.signature
    if want.stats is not None:
        assert got.stats is not None
        np.testing.assert_allclose(got.stats, want.stats, rtol=0, atol=tolerance)


@pytest.mark.slow
@pytest.mark.parametrize("rows", [1, 7, 40, 1000])
@pytest.mark.parametrize(
    "make", [CIDEr, NIST, functools.partial(CIDEr, max_order=2), functools.partial(NIST, 3)]
)
def test_ngram_shards_equal_one_call_bit_for_bit(make: Callable[[], Sharded], rows: int) -> None:
    metric = make()
    assert_equal(sharded(metric, rows), make().score(CANDS, REFS, SRCS), 0.0)


@pytest.mark.slow
@pytest.mark.parametrize("rows", [3, 1000])
@pytest.mark.parametrize("idf", [True, False])
def test_bertscore_shards_equal_one_call_within_1e_6(idf: bool, rows: int) -> None:
    # batches of 4 pairs: the cuts must fall where bert-score's padding batches end
    metric = BERTScore(idf=idf, bert_score_batch_size=4)
    n = 40  # the encoder is the slow part
    assert_equal(sharded(metric, rows, n), metric.score(CANDS[:n], REFS[:n], SRCS[:n]), 1e-6)


def test_counts_add_over_any_split() -> None:
    metric = NIST()
    whole = metric.counts(CANDS, REFS)
    halves = metric.counts(CANDS[:61], REFS[:61]) + metric.counts(CANDS[61:], REFS[61:])
    assert halves == whole
    words = metric.tokenizer.many([r for refs in REFS for r in refs])
    assert whole.total == sum(len(w) for w in words) > 0


def test_cider_counts_documents_once_per_item() -> None:
    counts = CIDEr().counts(["x", "y"], [["the cat", "the cat sat"], ["a cat"]])
    assert counts.total == 2
    assert counts.counts[("cat",)] == 2  # both items have it, one of them twice
    assert counts.counts[("the",)] == 1


def test_bertscore_counts_only_with_idf() -> None:
    assert BERTScore(idf=False).counts(CANDS, REFS) == CorpusCounts()
    assert not BERTScore(idf=False).uses_counts
    counts = BERTScore(idf=True).counts(CANDS[:5], REFS[:5])
    assert counts.total == sum(len(r) for r in REFS[:5])  # one document per pair


def pair_cuts(bounds: Sequence[slice]) -> list[int]:
    return [sum(len(r) for r in REFS[: b.stop]) for b in bounds[:-1]]


@pytest.mark.parametrize("rows", [1, 5, 33])
def test_bertscore_cuts_where_its_batches_end(rows: int) -> None:
    bounds = BERTScore(bert_score_batch_size=4).split(REFS, rows)
    assert [b.start for b in bounds[1:]] == [b.stop for b in bounds[:-1]]
    assert bounds[0].start == 0 and bounds[-1].stop == len(REFS)
    assert len(bounds) > 1
    assert all(cut % 4 == 0 for cut in pair_cuts(bounds))
    assert all(b.stop - b.start >= rows for b in bounds[:-1])
    # without the padding rule, plain cuts every ``rows`` rows
    plain = BERTScore(bert_score_batch_size=0).split(REFS, rows)
    assert [b.start for b in plain] == list(range(0, len(REFS), rows))


def test_every_sharded_metric_implements_the_protocol() -> None:
    weighted = []
    for name in METRICS:
        cls = getattr(paraeval.metrics, name)
        if not issubclass(cls, Sharded):
            continue
        weighted.append(name)
        assert not cls.describe().segment_local, name
        assert cls.describe().sharded, name
        metric = cls()
        part = (CANDS[:9], REFS[:9], SRCS[:9])
        result = metric.reduce([metric.score_shard(metric.counts(*part[:2]), *part)])
        assert set(result.segment) == set(metric.output_columns), name
    assert {"CIDEr", "NIST", "BERTScore"} <= set(weighted)
