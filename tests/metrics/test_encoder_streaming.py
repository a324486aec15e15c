"""The encoder metrics stream a pool in steps through a bounded memo, with the numbers of one
call per system; and the precision setting."""

from __future__ import annotations

import logging
import re

import numpy as np
import pytest
import torch

from paraeval.metrics.base import MetricConfigError
from paraeval.metrics.bertscore import COLUMNS, BERTScore
from paraeval.metrics.cosine import Cosine
from paraeval.metrics.encoder import Encoders
from paraeval.metrics.encoder_precision import precision_verdict
from paraeval.metrics.paraphrase import ParaScore
from tests.metrics._semantic_texts import pairs

CANDS, REFS = pairs(60, seed=13)
OTHER, _ = pairs(60, seed=14)
SOURCES = [r[0] for r in REFS]
# bf16 against fp32 on the CPU, measured on 200 pairs: BERTScore P, R, F1 and cosine differ by
# at most 9e-4 (fp16: 2e-4); pinned with room for other texts
BF16_TOLERANCE = 5e-3


def _table(metric: BERTScore, cands: list[str]) -> np.ndarray:
    res = metric.score(cands, REFS)
    return np.stack([res.segment[c] for c in COLUMNS], axis=1)


@pytest.mark.slow
def test_small_steps_and_a_tiny_memo_give_the_numbers_of_one_call() -> None:
    whole = BERTScore(use_cache=False)
    expected = [_table(whole, CANDS), _table(whole, OTHER)]
    cos_expected = Cosine(use_cache=False).score(CANDS, REFS).segment["cosine"]
    streamed = BERTScore(use_cache=False)
    streamed.encoder.step = 64
    streamed.encoder.memo.max_bytes = 100_000  # a handful of sentences
    got = streamed.score_systems([(CANDS, REFS, None), (OTHER, REFS, None)])
    for res, exp in zip(got, expected, strict=True):
        table = np.stack([res.segment[c] for c in COLUMNS], axis=1)
        np.testing.assert_allclose(table, exp, atol=1e-6, rtol=0)
    cosine = Cosine(use_cache=False)
    cosine.encoder.step = 16
    cos = cosine.score(CANDS, REFS).segment["cosine"]
    np.testing.assert_allclose(cos, cos_expected, atol=1e-6, rtol=0)
    assert streamed.encoder.memo.nbytes <= 100_000


@pytest.mark.slow
def test_paraphrase_scores_of_several_systems_in_one_pass() -> None:
    metric = ParaScore(use_cache=False)
    one = [metric.score(c, REFS, SOURCES).segment["parascore"] for c in (CANDS, OTHER)]
    both = metric.score_systems([(CANDS, REFS, SOURCES), (OTHER, REFS, SOURCES)])
    for a, b in zip(one, both, strict=True):
        np.testing.assert_allclose(b.segment["parascore"], a, atol=1e-6, rtol=0)


@pytest.mark.slow
def test_precision_is_named_only_when_not_fp32_and_bf16_stays_close() -> None:
    fp32 = BERTScore(use_cache=False)
    encoders = Encoders()
    bf16 = BERTScore(use_cache=False, precision="bf16", encoders=encoders)
    assert "+" not in fp32.signature() and "+bf16|" in bf16.signature()
    assert bf16.encoder is not fp32.encoder
    bf16.encoder.half_pays = 0.0  # bf16 kept, however fast it is here
    a, b = _table(fp32, CANDS), _table(bf16, CANDS)
    assert 0 < np.abs(a - b).max() <= BF16_TOLERANCE
    assert b.dtype == np.float64 and "+bf16|" in bf16.signature()
    cos32 = Cosine(use_cache=False).score(CANDS, REFS).segment["cosine"]
    cos16 = Cosine(use_cache=False, precision="bf16", encoders=encoders).score(CANDS, REFS)
    assert np.abs(cos32 - cos16.segment["cosine"]).max() <= BF16_TOLERANCE
    # the CPU has no TF32: the numbers of fp32
    if fp32.encoder.device == "cpu":
        np.testing.assert_array_equal(
            _table(BERTScore(use_cache=False, precision="tf32"), CANDS), a
        )


def test_an_unknown_precision_is_a_config_error() -> None:
    with pytest.raises(MetricConfigError, match=r"metric 'cosine': precision must be one of"):
        Cosine(precision="int8")


def test_the_device_cosines_run_on_the_cpu_equal_numpys() -> None:
    from paraeval.metrics.encoder_match import cosine_rows, cosine_rows_torch

    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(50, 384)), rng.normal(size=(50, 384))
    a[3] = 0.0
    on_torch = cosine_rows_torch(torch.from_numpy(a), torch.from_numpy(b))
    np.testing.assert_allclose(on_torch, cosine_rows(a, b), atol=1e-12)
    assert on_torch[3] == 0.0


def test_half_precision_runs_where_it_pays_and_else_fp32_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # the verdict by hand: less than 1.5x faster is a warning naming both figures, and fp32
    level, message, pays = precision_verdict("bf16", 0.30, 0.10, "eager")
    assert level == logging.WARNING and not pays
    assert "0.300 s at bf16 (eager attention) against 0.100 s at fp32" in message
    assert not precision_verdict("fp16", 0.08, 0.10)[2]  # 1.25x: not enough
    assert precision_verdict("bf16", 0.05, 0.10)[::2] == (logging.INFO, True)
    # a run at bf16 times its first batch once, and says what it measured
    with caplog.at_level(logging.INFO, logger="paraeval.metrics.encoder_precision"):
        metric = BERTScore(use_cache=False, precision="bf16")
        metric.encoder.half_pays = 1e9  # it cannot pay: fp32 runs
        first = metric.score(CANDS[:8], REFS[:8]).segment
        metric.score(CANDS[16:24], [[r] for r in CANDS[:8]])
    said = [r for r in caplog.records if "precision=bf16" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.WARNING, [r.getMessage() for r in said]
    assert re.search(r"at bf16 \((sdpa|eager) attention\)", said[0].getMessage())
    # the numbers and the signature are fp32's
    fp32 = BERTScore(use_cache=False).score(CANDS[:8], REFS[:8]).segment
    for column in COLUMNS:
        np.testing.assert_array_equal(first[column], fp32[column])
    assert "+bf16" not in metric.signature() and metric.encoder.precision == "fp32"
    # fp32 is never timed
    caplog.clear()
    BERTScore(use_cache=False).score(CANDS[:4], [[r] for r in CANDS[4:8]])
    assert not [r for r in caplog.records if "precision=" in r.getMessage()]
