"""The paraphrase-specific metrics in a run: groups kept out of the averages, system-level diversity
columns in system_scores.csv and the per-system MLflow runs, PINC in the diversity view, the
paraphrase score in the headline table and its frontier figure."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import sacrebleu
from mlflow.tracking import MlflowClient
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

import paraeval
from paraeval.pipeline.data.load import demo_path, read_table

CHEAP = {
    "correlation": {"n_resamples": 100, "significance": {"n_resamples": 100}},
    "compare": {"n_bootstrap": 100, "n_ar": 200},
    "report": {"progress": False},
    "alpha_curve": {"enabled": False},
}
METRICS = [
    "bleu",
    "self_bleu",
    "cosine",
    "parascore",
    "bert_ibleu",
    "pinc",
    "distinct_1",
    "distinct_2",
    "inter_bleu",
    "semantic_diversity",
]


@pytest.fixture(scope="module")
def ev(tmp_path_factory: pytest.TempPathFactory) -> paraeval.Evaluation:
    cache = tmp_path_factory.mktemp("cache")
    return paraeval.evaluate(read_table(demo_path()), METRICS, cache={"dir": str(cache)}, **CHEAP)


def test_new_groups_stay_out_of_the_averages(ev: paraeval.Evaluation) -> None:
    sig = ev.signatures
    assert sig["syntactic"].endswith("|of:bleu")
    assert sig["semantic"].endswith("|of:cosine")
    table = ev.signature_table().set_index("column")
    groups = table["group"].to_dict()
    assert groups["parascore"] == groups["bert_ibleu"] == "paraphrase"
    assert groups["pinc"] == groups["self_bleu"] == "diversity"
    for col in ("distinct_1", "distinct_2", "inter_bleu", "semantic_diversity"):
        assert groups[col] == "output_diversity"
    # the semantic average is the normalized cosine alone, whatever the other columns are
    seg = ev.segments
    cos = seg["cosine"]
    expected = (cos - cos.min()) / (cos.max() - cos.min())
    np.testing.assert_allclose(seg["semantic"], expected, atol=1e-12)


def test_system_level_diversity_columns(ev: paraeval.Evaluation) -> None:
    frame = read_table(demo_path())
    tok = Tokenizer13a()
    systems = ev.systems
    for system, sub in frame.groupby("system"):
        outs = sub.sort_index()["candidate"].tolist()
        words = [tok(o.rstrip()).split() for o in outs]
        uni = [w for ws in words for w in ws]
        bi = [tuple(ws[i : i + 2]) for ws in words for i in range(len(ws) - 1)]
        assert systems.loc[system, "distinct_1"] == pytest.approx(len(set(uni)) / len(uni))
        assert systems.loc[system, "distinct_2"] == pytest.approx(len(set(bi)) / len(bi))
        inter = [
            sacrebleu.sentence_bleu(o, [x for j, x in enumerate(outs) if j != i]).score
            for i, o in enumerate(outs)
        ]
        assert systems.loc[system, "inter_bleu"] == pytest.approx(np.mean(inter), abs=1e-9)
        assert 0 < systems.loc[system, "semantic_diversity"] < 1
    # system-level only: no segment scores, no segment-level correlation, a system-level one
    assert ev.segments["distinct_1"].isna().all()
    corr = ev.correlations
    rows = corr[corr["metric"] == "distinct_2"]
    assert np.isfinite(rows.loc[rows["level"] == "system", "value"]).all()
    assert not np.isfinite(rows.loc[rows["level"] == "segment", "value"]).any()
    # nothing to resample per item: not in the comparison table
    assert "distinct_2" not in set(ev.comparison["metric"])
    assert "parascore" in set(ev.comparison["metric"])


def test_pinc_counts_as_distance_in_the_diversity_view(ev: paraeval.Evaluation) -> None:
    view = ev.compared.systems
    assert view.loc["copy", "diversity"] == pytest.approx(0.0)
    assert ev.systems.loc["copy", "pinc"] == 0.0
    seg = ev.segments

    def minmax(x: pd.Series) -> pd.Series:
        return (x - x.min()) / (x.max() - x.min())

    # similarity to the source: self-BLEU as it is, PINC turned around
    similarity = (minmax(seg["self_bleu"]) + (1 - minmax(seg["pinc"]))) / 2
    expected = (1 - similarity).groupby(seg["system"], sort=False).mean()
    np.testing.assert_allclose(view["diversity"], expected.reindex(view.index), atol=1e-12)


@pytest.mark.slow
def test_the_paraphrase_table_reads_the_comparison(ev: paraeval.Evaluation, tmp_path: Path) -> None:
    view = ev.paraphrase
    assert view is not None
    # references of their own: adequacy against them, ParaScore's reference-based form
    assert (view.adequacy, view.diversity, view.paraphrase) == ("cosine", "pinc", "parascore")
    t = view.table.set_index("system")
    comparison = ev.comparison
    for column, measure in (
        ("cosine", "adequacy"),
        ("pinc", "diversity"),
        ("parascore", "paraphrase"),
    ):
        rows = comparison[comparison["metric"] == column].set_index("system")
        np.testing.assert_allclose(t[measure], rows.loc[t.index, "score"], atol=1e-12)
        np.testing.assert_allclose(t[f"{measure}_low"], rows.loc[t.index, "ci_low"], atol=1e-12)
    paraphrase = comparison[comparison["metric"] == "parascore"].set_index("system")
    np.testing.assert_array_equal(t["cluster"], paraphrase.loc[t.index, "cluster"])
    assert t.loc["copy", "copy_rate"] == 1.0 and t.loc["copy", "edit_distance"] == 0.0
    out = ev.write(tmp_path / "out")
    assert (out / "plots" / "paraphrase_frontier.png").stat().st_size > 0
    written = pd.read_csv(out / "paraphrase.csv")
    assert list(written["system"]) == list(view.table["system"])
    scores = pd.read_csv(out / "system_scores.csv").set_index("system")
    for col in ("parascore", "bert_ibleu", "pinc", "distinct_1", "inter_bleu"):
        assert col in scores.columns


@pytest.mark.slow
def test_system_runs_in_mlflow_carry_the_diversity_columns(
    ev: paraeval.Evaluation, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    run_id = ev.log(tmp_path / "out", tracking={"store_dir": str(store), "uri": None})
    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    parent = client.get_run(run_id)
    children = client.search_runs(
        [parent.info.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{run_id}'"
    )
    by_system = {r.data.tags["paraeval.system"]: r for r in children}
    assert set(by_system) == {"copy", "strong", "medium", "weak"}
    for system, run in by_system.items():
        for col in ("distinct_1", "distinct_2", "inter_bleu", "semantic_diversity", "parascore"):
            assert run.data.metrics[col] == pytest.approx(ev.systems.loc[system, col], rel=1e-9)
        score = ev.paraphrase.table.set_index("system").loc[system, "paraphrase"]
        assert f"`{system}`: paraphrase score {score:.3f}" in run.data.tags["mlflow.note.content"]
    assert not [k for k in parent.data.tags if k.startswith(("sig.", "signature."))]
    path = client.download_artifacts(run_id, "tables/signatures.json")
    assert "inter_bleu" in set(pd.read_json(path, orient="split")["column"])
