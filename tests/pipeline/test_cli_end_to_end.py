"""The CLI end to end on the embedded demo, tracking into a temporary SQLite store."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tests.pipeline.helpers import assert_aligned, run_cli

SYSTEMS = {"copy", "strong", "medium", "weak"}


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    work = tmp_path_factory.mktemp("cli")
    store = work / "store"
    out = work / "out"
    proc = run_cli(
        [
            "metrics.ibleu.alpha=0.7",
            f"tracking.store_dir={store}",
            f"hydra.run.dir={out}",
            "correlation.n_resamples=200",
        ],
        cwd=work,
        # a cache of its own: scored from another test's cache, the stage takes under a second
        # on a fast machine and prints no time (test_terminal_summary reads it)
        PARAEVAL_CACHE_DIR=str(work / "cache"),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    # stdout, then stderr after a marker line
    return out, store, proc.stdout + "\n<<stderr>>\n" + proc.stderr


@pytest.mark.slow
def test_output_files_and_columns(demo_run: tuple[Path, Path, str]) -> None:
    out, _, _ = demo_run
    seg = pd.read_parquet(out / "segment_scores.parquet")
    assert len(seg) == 48 * 4
    for col in (
        "item_id",
        "system",
        "source",
        "references",
        "candidate",
        "human_meaning",
        "human_fluency",
        "bleu",
        "ibleu",
        "self_bleu",
        "chrf",
        "ter",
        "cosine",
        "syntactic",
        "semantic",
    ):
        assert col in seg.columns, col
    systems = pd.read_csv(out / "system_scores.csv")
    assert set(systems["system"]) == SYSTEMS
    for col in (
        "bleu",
        "ibleu",
        "chrf",
        "ter",
        "cosine",
        "syntactic",
        "semantic",
        "human_meaning",
        "human_fluency",
    ):
        assert col in systems.columns, col
    corr = pd.read_csv(out / "correlations.csv")
    assert list(corr.columns[:10]) == [
        "metric",
        "aspect",
        "level",
        "coefficient",
        "value",
        "ci_low",
        "ci_high",
        "p_value",
        "n",
        "n_dropped",
    ]
    assert {"segment", "system"} <= set(corr["level"])
    assert {"pearson", "spearman", "kendall_b"} <= set(corr["coefficient"])
    assert {"syntactic", "semantic", "bleu", "cosine"} <= set(corr["metric"])
    seg_bleu = corr[
        (corr.metric == "bleu") & (corr.level == "segment") & (corr.aspect == "human_meaning")
    ]
    # the demo's copy is a control: out of the correlations
    assert (seg_bleu["n"] == 144).all()
    assert (out / "plots" / "correlation_heatmap.png").stat().st_size > 1000
    assert (out / ".hydra" / "config.yaml").is_file()
    # the copy system copies: self-BLEU 100, and the weak system is worst on meaning
    sys_idx = systems.set_index("system")
    assert sys_idx.loc["copy", "self_bleu"] == pytest.approx(100.0)
    assert sys_idx["human_meaning"].idxmin() == "weak"


def test_terminal_summary(demo_run: tuple[Path, Path, str]) -> None:
    _, store, output = demo_run
    stdout, _, stderr = output.partition("\n<<stderr>>\n")
    lines = stdout.splitlines()
    # the summary fits 100 columns and a screen; the full tables are in the files. The last
    # lines name the outputs, the store and the run's address in full (a path is never cut)
    where = lines[-4:]
    assert where[0].startswith("Outputs:") and where[1].startswith("MLflow store:"), where
    run_id = where[1].split("(run ")[1].rstrip(")")
    assert where[3] == f"Run page:     http://127.0.0.1:5000/#/experiments/1/runs/{run_id}"
    assert len(lines) <= 60, len(lines)
    assert max(len(line) for line in lines[:-4]) <= 100, max(lines[:-4], key=len)
    # the paraphrase table takes the systems' place, the copy apart
    assert "Paraphrase: meaning kept and wording changed" in stdout
    assert "Systems (4, corpus level)" not in stdout
    assert any(line.startswith("copy (control)") for line in lines)
    assert "Correlation with human ratings (pearson)" in stdout
    assert "System comparison" in stdout
    # lower-is-better columns are marked
    assert any(line.startswith("ter ↓") for line in lines)
    assert any(line.startswith("wmd ↓") for line in lines)
    assert "mlflow ui --backend-store-uri sqlite:///" in stdout
    assert str(store) in stdout
    assert stdout.rstrip().splitlines()[0].startswith("Outputs:") is False
    # stderr (not a terminal here): paraeval's warnings and status lines, each whole on one line;
    # no timestamps, no third-party lines
    for line in stderr.splitlines():
        assert line.startswith("paraeval: "), line
        assert "Creating initial MLflow" not in line and "INFO" not in line, line
    assert "paraeval: warning: 3 empty or whitespace-only candidates" in stderr
    assert "score: " in stderr  # the scoring stage took more than a second


def test_terminal_tables_are_aligned(demo_run: tuple[Path, Path, str]) -> None:
    stdout = demo_run[2].partition("\n<<stderr>>\n")[0]
    # paraphrase, correlations, comparison: numbers right-justified, marks in a column of their own
    assert assert_aligned(stdout) == 3


def test_mlflow_contents(demo_run: tuple[Path, Path, str]) -> None:
    from mlflow.tracking import MlflowClient

    _out, store, _ = demo_run
    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    exp = client.get_experiment_by_name("paraeval")
    assert exp is not None
    runs = client.search_runs([exp.experiment_id])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert len(parents) == 1
    parent = parents[0]
    assert parent.data.params["metrics.ibleu.alpha"] == "0.7"
    assert parent.data.params["metrics.selected"] == (
        "bleu,ibleu,self_bleu,chrf,ter,nist,meteor,rouge1,rouge2,rougeL,rougeLsum,rougeW,rougeS,"
        "rougeSU,cider,bertscore,cosine,wmd,parascore,parascore_free,bert_ibleu,pinc"
    )
    corr_keys = [k for k in parent.data.metrics if k.startswith("corr.")]
    # the headline coefficient's correlation of every column (each metric's columns and the
    # group averages) with every aspect at every level
    corr = pd.read_csv(_out / "correlations.csv")
    headline = corr[(corr["coefficient"] == "pearson") & corr["value"].notna()]
    assert {"syntactic", "semantic", "bertscore_f1", "wmd"} <= set(headline["metric"])
    assert sorted(corr_keys) == sorted(
        f"corr.{r.aspect.removeprefix('human_')}.{r.level}.{r.metric}"
        for r in headline.itertuples()
    )
    assert {k.split(".")[2] for k in corr_keys} == {"segment", "item", "system"}
    # every correlation and the comparison as MLflow tables (load_table searches the global store)
    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{store / 'mlflow.db'}")
    table = client.load_table(
        exp.experiment_id, artifact_file="tables/correlations.json", run_ids=[parent.info.run_id]
    )
    assert len(table) == len(pd.read_csv(_out / "correlations.csv"))
    comparison = client.load_table(
        exp.experiment_id,
        artifact_file="tables/system_comparison.json",
        run_ids=[parent.info.run_id],
    )
    assert set(comparison["system"]) == SYSTEMS
    # a readable name, the dataset named after the file with its path as source, real times
    assert parent.info.run_name == "demo.jsonl: metrics.ibleu.alpha=0.7,correlation.n_resamples=200"
    dataset = parent.inputs.dataset_inputs[0].dataset
    assert dataset.name == "demo.jsonl" and "demo.jsonl" in dataset.source
    assert parent.info.end_time - parent.info.start_time >= 2000  # the run takes seconds
    assert parent.data.tags["paraeval.versions"].startswith("paraeval=")
    assert len([k for k in parent.data.tags if not k.startswith("mlflow.")]) <= 12
    # the user's settings, not the classes they name
    assert "metrics.bleu.tokenize" in parent.data.params
    assert not [k for k in parent.data.params if k.endswith("_target_")]
    # sacrebleu's own signature of the corpus score, with the data's reference count
    signatures = client.load_table(
        exp.experiment_id, artifact_file="tables/signatures.json", run_ids=[parent.info.run_id]
    ).set_index("column")["signature"]
    assert signatures["bleu"].startswith("bleu|nrefs:") and "|eff:no|" in signatures["bleu"]
    assert signatures["ibleu"].startswith("ibleu|alpha:0.7|ref:[nrefs:")
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert {c.data.params["system"] for c in children} == SYSTEMS
    comparison_csv = pd.read_csv(_out / "system_comparison.csv")
    for child in children:
        system = child.data.params["system"]
        assert child.info.run_name == system
        m = child.data.metrics
        assert "bleu" in m and "syntactic" in m
        row = comparison_csv[
            (comparison_csv.system == system) & (comparison_csv.metric == "bleu")
        ].iloc[0]
        for stat in ("ci_low", "ci_high", "p_bootstrap", "p_ar", "cluster"):
            if pd.notna(row[stat]):
                assert m[f"bleu.{stat}"] == pytest.approx(float(row[stat]), rel=1e-12), stat
        if system == "copy":  # the demo's control: never ranked, said on its run
            assert "bleu.cluster" not in m and child.data.tags["paraeval.role"] == "control"
        else:
            assert m["bleu.cluster"] >= 1 and child.data.tags["paraeval.role"] == "system"
        # a millisecond apart, in the comparison's order
        assert 0 <= child.info.start_time - parent.info.start_time < len(children)
        line = child.data.tags["mlflow.note.content"]  # one line, the paraphrase score first
        assert "\n" not in line and f" `{system}`: paraphrase score " in line
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"segment_scores.parquet", "system_scores.csv", "correlations.csv"} <= artifacts
