"""The whole pipeline on real human judgments (../shared/data; skips with a reason if absent)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from paraeval.pipeline.cli.app import run
from paraeval.pipeline.config.compose import config_dir

pytestmark = pytest.mark.realdata


def _cfg(overrides: list[str]):  # type: ignore[no-untyped-def]
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        return compose("config", overrides=overrides)


@pytest.mark.slow
def test_parabank_copy_system_tops_every_similarity_metric(
    shared_data: Path, tmp_path: Path
) -> None:
    cfg = _cfg(
        [
            "data=parabank",
            f"data.path={shared_data / 'parabank_eval'}",
            "data.max_items=100",
            "metrics=[bleu,chrf,ter,cosine]",
            "tracking=none",
            "correlation.ci=false",
            "correlation.significance.enabled=false",
            "compare.enabled=false",
            "alpha_curve.enabled=false",
            "report.print_tables=false",
            f"cache.dir={tmp_path / 'cache'}",
        ]
    )
    result = run(cfg, tmp_path / "out")
    systems = result.systems
    assert len(systems) == 36
    # references are the source here: copying the source is the most similar output possible
    for metric in ("bleu", "chrf", "cosine", "syntactic", "semantic"):
        assert systems[metric].idxmax() == "sys00", metric
    assert systems["ter"].idxmin() == "sys00"
    corr = pd.read_csv(tmp_path / "out" / "correlations.csv")
    seg = corr[
        (corr.level == "segment")
        & (corr.aspect == "human_meaning")
        & (corr.coefficient == "pearson")
    ].set_index("metric")
    # meaning similarity to the source is what these metrics approximate: clearly positive,
    # the embedding metric above the character n-gram metric above BLEU on this data
    assert seg.loc["cosine", "value"] > 0.3
    assert seg.loc["bleu", "value"] > 0.1
    assert seg.loc["ter", "value"] < -0.1
    assert (seg["n"] > 3400).all()


@pytest.mark.slow
def test_stsb_segment_correlation(shared_data: Path, tmp_path: Path) -> None:
    cfg = _cfg(
        [
            "data=stsb",
            f"data.path={shared_data / 'stsbenchmark'}",
            "data.split=dev",
            "metrics=[chrf,cosine]",
            "correlation.levels=[segment]",
            "tracking=none",
            "correlation.ci=false",
            "correlation.significance.enabled=false",
            "compare.enabled=false",
            "alpha_curve.enabled=false",
            "report.print_tables=false",
            f"cache.dir={tmp_path / 'cache'}",
        ]
    )
    result = run(cfg, tmp_path / "out")
    corr = result.correlations.set_index(["metric", "coefficient"])
    # all-MiniLM-L6-v2 reaches a Spearman of about 0.82 on STS-B in published evaluations
    assert 0.75 < corr.loc[("cosine", "spearman"), "value"] < 0.9
    assert corr.loc[("cosine", "spearman"), "value"] > corr.loc[("chrf", "spearman"), "value"]


@pytest.mark.slow
def test_parabank_paraphrase_metrics_on_the_copy_system(shared_data: Path, tmp_path: Path) -> None:
    cfg = _cfg(
        [
            "data=parabank",
            f"data.path={shared_data / 'parabank_eval'}",
            "data.max_items=40",
            "metrics=[parascore_free,bert_ibleu,pinc,distinct_2]",
            "tracking=none",
            "correlation.ci=false",
            "correlation.significance.enabled=false",
            "compare.enabled=false",
            "alpha_curve.enabled=false",
            "report.print_tables=false",
            f"cache.dir={tmp_path / 'cache'}",
        ]
    )
    result = run(cfg, tmp_path / "out")
    systems = result.systems
    # sys00 copies the source: nothing new (PINC 0), BERT-iBLEU 0 (BLEU 100), ParaScore
    # F1 (1) + 0.05·(−1)
    assert systems.loc["sys00", "pinc"] == 0.0 and systems["pinc"].drop("sys00").min() > 0
    assert systems.loc["sys00", "bert_ibleu"] == 0.0
    assert systems["bert_ibleu"].drop("sys00").min() > 0
    assert systems.loc["sys00", "parascore_free"] == pytest.approx(0.95, abs=1e-6)
    assert systems["distinct_2"].between(0, 1).all()
    corr = pd.read_csv(tmp_path / "out" / "correlations.csv")
    seg = corr[
        (corr.level == "segment")
        & (corr.aspect == "human_meaning")
        & (corr.coefficient == "pearson")
    ].set_index("metric")
    # the raters judged meaning preservation: distance from the source goes against it
    assert seg.loc["pinc", "value"] < -0.2
    assert seg.loc["parascore_free", "value"] > 0.3
