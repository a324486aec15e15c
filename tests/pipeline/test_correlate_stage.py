"""The correlate stage on real scores: system-level intervals recompute corpus scores correctly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from paraeval.pipeline.config.compose import config_dir
from paraeval.pipeline.config.nodes import DataSettings
from paraeval.pipeline.data.load import load_data
from paraeval.pipeline.stages.aggregate import aggregate
from paraeval.pipeline.stages.correlate import system_metric_fns
from paraeval.pipeline.stages.score import build_metrics, score
from tests.pipeline.helpers import correlation_settings


@pytest.fixture(scope="module")
def demo_scores(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    GlobalHydra.instance().clear()
    cache = tmp_path_factory.mktemp("cache")
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        cfg = compose(
            "config",
            overrides=["metrics=[bleu,chrf,nist,bertscore,meteor]", f"cache.dir={cache}"],
        )
    from omegaconf import OmegaConf

    df = load_data(DataSettings.from_node(OmegaConf.to_container(cfg.data, resolve=True)))
    metrics = build_metrics(OmegaConf.to_container(cfg.metrics, resolve=True))
    scores = score(df, metrics, progress=False)
    return scores, aggregate(scores)


@pytest.mark.slow
def test_resampled_corpus_scores_match_direct_recomputation(demo_scores) -> None:  # type: ignore[no-untyped-def]
    scores, agg = demo_scores
    systems = list(agg.systems.index)
    items = list(dict.fromkeys(agg.segments["item_id"]))
    fns = system_metric_fns(scores, systems, items)
    assert {"bleu", "chrf", "nist", "bertscore_f1"} <= set(fns)
    # the identity resample gives back each system's corpus score
    everything = np.arange(len(items))
    for column in ("bleu", "chrf", "nist", "bertscore_f1"):
        np.testing.assert_allclose(
            fns[column](everything), agg.systems.loc[systems, column].to_numpy(), rtol=1e-9
        )
    # a resample with repetitions: BERTScore's corpus score is the mean of the resampled
    # segments (not their sum), BLEU's is sacrebleu's corpus BLEU of the resampled segments
    rng = np.random.default_rng(7)
    idx = rng.integers(0, len(items), size=len(items))
    seg = agg.segments.set_index(["system", "item_id"])
    for k, system in enumerate(systems):
        picked = [items[i] for i in idx]
        f1 = seg.loc[[(system, i) for i in picked], "bertscore_f1"].to_numpy()
        assert fns["bertscore_f1"](idx)[k] == pytest.approx(f1.mean(), rel=1e-9)
        import sacrebleu

        rows = seg.loc[[(system, i) for i in picked]]
        refs = rows["references"].tolist()
        width = max(len(r) for r in refs)
        streams = [[r[j] if j < len(r) else None for r in refs] for j in range(width)]
        # sacrebleu skips None references (its variable-reference case) though its hints say str
        expected = sacrebleu.corpus_bleu(rows["candidate"].tolist(), streams).score
        assert fns["bleu"](idx)[k] == pytest.approx(expected, abs=1e-9)


def test_batched_resampling_equals_one_call_per_resample(demo_scores) -> None:  # type: ignore[no-untyped-def]
    """The all-resamples path gives the same corpus scores as calling the function per resample,
    and the correlation table is the same with and without it."""
    from paraeval.correlation import correlation_table
    from paraeval.pipeline.stages.correlate import to_matrices

    scores, agg = demo_scores
    systems = list(agg.systems.index)
    items = list(dict.fromkeys(agg.segments["item_id"]))
    fns = system_metric_fns(scores, systems, items)
    batched = [c for c, f in fns.items() if hasattr(f, "batch")]
    assert {"bleu", "chrf"} <= set(batched)
    idx = np.random.default_rng(11).integers(0, len(items), size=(40, len(items)))
    for column in batched:
        per_call = np.stack([fns[column](row) for row in idx])
        np.testing.assert_allclose(fns[column].batch(idx), per_call, rtol=1e-12, atol=1e-12)
    # an item no system has: its rows contribute nothing, on both paths
    gappy = system_metric_fns(scores, systems, [*items, "no-such-item"])
    idx = np.random.default_rng(12).integers(0, len(items) + 1, size=(40, len(items) + 1))
    for column in batched:
        per_call = np.stack([gappy[column](row) for row in idx])
        np.testing.assert_allclose(gappy[column].batch(idx), per_call, rtol=1e-12, atol=1e-12)

    seg = agg.segments
    matrices = to_matrices(seg, ["bleu", "chrf", "human_meaning"], systems, items)
    metrics = {c: matrices[c] for c in ("bleu", "chrf")}
    humans = {"human_meaning": matrices["human_meaning"]}
    corpus = {c: agg.systems.loc[systems, c].to_numpy(dtype=float) for c in metrics}
    plain = {c: (lambda ix, f=fns[c]: f(ix)) for c in metrics}  # no .batch attribute

    def table(fn_map):  # type: ignore[no-untyped-def]
        return correlation_table(
            metrics,
            humans,
            levels=("system",),
            system_metrics=corpus,
            n_resamples=60,
            rng=np.random.default_rng(3),
            system_metric_fns=fn_map,
        )

    fast, slow = table({c: fns[c] for c in metrics}), table(plain)
    assert [r["metric"] for r in fast] == [r["metric"] for r in slow]
    for a, b in zip(fast, slow, strict=True):
        assert a["ci_low"] == pytest.approx(b["ci_low"], abs=1e-12)
        assert a["ci_high"] == pytest.approx(b["ci_high"], abs=1e-12)
        assert np.isfinite(a["ci_low"]) and a["ci_low"] <= a["ci_high"]


def test_system_level_intervals_contain_the_estimate(demo_scores, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from paraeval.pipeline.stages.correlate import correlate

    scores, agg = demo_scores
    cfg = correlation_settings(
        {"levels": ["system"], "coefficients": ["pearson"], "ci": True, "n_resamples": 300}
    )
    corr = correlate(agg, cfg, np.random.default_rng(3), scores)
    finite = corr.dropna(subset=["value", "ci_low", "ci_high"])
    assert len(finite) >= 10
    inside = (finite["ci_low"] <= finite["value"] + 1e-9) & (
        finite["value"] <= finite["ci_high"] + 1e-9
    )
    assert inside.all(), finite.loc[~inside, ["metric", "aspect", "value", "ci_low", "ci_high"]]


def test_batched_resamples_equal_each_resample_on_its_own(demo_scores) -> None:  # type: ignore[no-untyped-def]
    """The system level recomputes a block of resamples from summed statistics in one product:
    the corpus scores each resample gets on its own."""
    scores, agg = demo_scores
    systems = list(agg.systems.index)
    items = list(dict.fromkeys(agg.segments["item_id"]))
    idx = np.random.default_rng(13).integers(0, len(items), size=(30, len(items)))
    fns = system_metric_fns(scores, systems, items)
    for column in ("bleu", "chrf"):
        batch = fns[column].batch(idx)
        per_call = np.stack([fns[column](row) for row in idx])
        np.testing.assert_allclose(batch, per_call, rtol=1e-12, atol=1e-12)
