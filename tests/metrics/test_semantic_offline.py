"""The whole semantic suite runs with the network blocked and HF_HUB_OFFLINE=1."""

from __future__ import annotations

import os
import socket
import time

import numpy as np
import pytest

from paraeval.metrics.base import MissingResourceError
from paraeval.metrics.bertscore import BERTScore
from paraeval.metrics.bleurt import BLEURT
from paraeval.metrics.cosine import Cosine
from paraeval.metrics.encoder import Encoders
from paraeval.metrics.wmd import WMD
from tests.metrics._semantic_texts import pairs


def test_network_is_blocked_and_hub_is_offline() -> None:
    assert os.environ.get("HF_HUB_OFFLINE") == "1"
    with (
        pytest.raises(RuntimeError, match="network"),
        socket.create_connection(("93.184.216.34", 443), timeout=1),
    ):
        pass


def test_semantic_suite_runs_offline_with_one_pass(tmp_path) -> None:
    cands_a, refs = pairs(30, seed=5)
    cands_b, _ = pairs(30, seed=6)
    sources = [r[0] for r in refs]
    cfg = {"cache_dir": str(tmp_path), "use_cache": True, "encoders": Encoders()}
    metrics = [
        BERTScore(**cfg),
        BERTScore(rescale_with_baseline=True, **cfg),
        Cosine(**cfg),
        WMD(embedding="contextual", **cfg),
        WMD(**cfg),
    ]
    every = cands_a + cands_b + [r for group in refs for r in group] + sources
    for m in metrics:
        m.prepare(every)
    enc = metrics[0].encoder  # type: ignore[attr-defined]
    assert all(getattr(m, "encoder", None) is enc for m in metrics)
    for cands in (cands_a, cands_b):
        for m in metrics:
            res = m.score(cands, refs, sources)
            for col in m.output_columns:
                assert np.isfinite(res.segment[col]).all()
    assert enc.forward_sentences == len(set(every))


@pytest.mark.parametrize(
    "build",
    [
        lambda: BERTScore(model="sentence-transformers/all-mpnet-base-v2", layer=6),
        lambda: Cosine(model="roberta-large"),
        lambda: WMD(model="org/some-model"),
    ],
)
def test_hub_model_name_fails_fast_with_a_clear_error(build) -> None:
    start = time.perf_counter()
    with pytest.raises(MissingResourceError) as err:
        build()
    assert time.perf_counter() - start < 2.0
    message = str(err.value)
    assert "does not exist" in message and "local model directory" in message
    assert "\n" not in message


def test_bleurt_without_checkpoint_is_one_line() -> None:
    with pytest.raises(MissingResourceError) as err:
        BLEURT()
    assert "\n" not in str(err.value)
