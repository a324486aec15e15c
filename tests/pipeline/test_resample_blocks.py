"""Bootstrap work in blocks of resamples (bounded memory) gives the numbers of all resamples at
once, on real data: ParaBank-Eval's 36 systems (with missing cells and tied ratings) scored by
BLEU, every default level and coefficient, intervals and the system comparison."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import paraeval.correlation.paired as paired
import paraeval.correlation.resamples as resamples
from paraeval.pipeline.api import compose_config
from paraeval.pipeline.data.load import load_parabank
from paraeval.pipeline.stages.aggregate import aggregate
from paraeval.pipeline.stages.compare import compare
from paraeval.pipeline.stages.correlate import correlate
from paraeval.pipeline.stages.score import Scores, build_metrics, score
from tests.pipeline.helpers import compare_settings, correlation_settings

pytestmark = pytest.mark.realdata

N_RESAMPLES = 300


@pytest.fixture(scope="module")
def parabank_bleu(shared_data: Path) -> tuple[Scores, object]:
    table = load_parabank(str(shared_data / "parabank_eval"))
    cfg = compose_config(["metrics=[bleu]", "tracking=none"])
    scores = score(table, build_metrics(cfg.metrics), progress=False)
    return scores, cfg


def _correlations(scores: Scores, cfg: object) -> pd.DataFrame:
    settings = correlation_settings({"n_resamples": N_RESAMPLES})
    return correlate(aggregate(scores), settings, np.random.default_rng(7), scores)


@pytest.mark.slow
def test_blocks_of_resamples_give_the_correlations_of_one_block(
    parabank_bleu: tuple[Scores, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    scores, cfg = parabank_bleu
    n_items = scores.segments["item_id"].nunique()
    # at this size every resample is in one block, as before blocks existed
    assert N_RESAMPLES * n_items <= resamples.WEIGHT_BLOCK_ELEMENTS
    whole = _correlations(scores, cfg)
    # blocks of 7 resamples for the item multiplicities, 3 for the counts and the draws: every
    # blocked path (segment pooled sums, Kendall's pair matrices reused across blocks, item
    # means, BLEU recomputed from statistics at the system level) and block edges inside the
    # random stream
    monkeypatch.setattr(resamples, "WEIGHT_BLOCK_ELEMENTS", 7 * n_items)
    monkeypatch.setattr(resamples, "CHUNK_ELEMENTS", 3 * n_items)
    blocked = _correlations(scores, cfg)
    assert len(whole) == 36  # bleu, syntactic x 2 aspects x 3 levels x 3 coefficients
    assert whole["ci_low"].notna().all()
    pd.testing.assert_frame_equal(blocked, whole, check_exact=True)


def test_mask_blocks_give_the_comparison_of_one_block(
    parabank_bleu: tuple[Scores, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    scores, _ = parabank_bleu
    cfg = compare_settings(n_bootstrap=200, n_ar=3000)
    whole = compare(scores, aggregate(scores), cfg).table
    # 3000 trials in mask blocks of 64 rows instead of one block
    monkeypatch.setattr(paired, "_MASK_BLOCK_ROWS", 64)
    blocked = compare(scores, aggregate(scores), cfg).table
    n_systems = scores.segments["system"].nunique()
    assert blocked["p_ar"].notna().sum() == 2 * (n_systems - 1)  # bleu and syntactic
    pd.testing.assert_frame_equal(blocked, whole, check_exact=True)
