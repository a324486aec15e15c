"""What a person sees of a run in MLflow, read back through ``MlflowClient``: the experiment opens
on its runs (model-development kind, a user's kind kept), the run's address is printed, the parent
run's description sums the run up, a dozen tags at most and the user's settings as params, every
column's correlation is a metric with a readable name, cache counts and signatures are tables, and
each system run carries a one-line description, the dataset and its group averages and human means
first (what MLflow's compare view opens on)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from paraeval.pipeline.tracking import mlflow_log, run_view
from paraeval.pipeline.tracking.payload import RunPayload, read_run_info
from paraeval.pipeline.tracking.store import run_page
from tests.pipeline.helpers import finished_run

METRICS = ("bleu", "ibleu", "self_bleu", "chrf", "ter")


@pytest.fixture(scope="module")
def finished_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return finished_run(tmp_path_factory.mktemp("mlflow-view"), ",".join(METRICS))


@pytest.fixture(scope="module")
def logged(
    finished_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[mlflow_log.Logged, list[str]]:
    store = tmp_path_factory.mktemp("store")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = mlflow_log.log_payload(
            RunPayload.from_dir(finished_dir), {"store_dir": str(store)}
        )
    assert not result.already
    return result, [str(w.message) for w in caught]


@pytest.mark.slow
def test_experiment_opens_on_runs_and_a_users_kind_is_kept(
    logged: tuple[mlflow_log.Logged, list[str]], finished_dir: Path, tmp_path: Path
) -> None:
    result, _ = logged
    client = MlflowClient(result.uri)
    exp = client.get_experiment(client.get_run(result.run_id).info.experiment_id)
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"
    # a user's own choice of kind is not overridden by a later logging
    store = tmp_path / "store"
    mine = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    exp_id = mine.create_experiment("paraeval")
    mine.set_experiment_tag(exp_id, "mlflow.experimentKind", "genai_development")
    mlflow_log.log_payload(RunPayload.from_dir(finished_dir), {"store_dir": str(store)})
    assert mine.get_experiment(exp_id).tags["mlflow.experimentKind"] == "genai_development"


def test_description_sums_up_the_run(
    logged: tuple[mlflow_log.Logged, list[str]], finished_dir: Path
) -> None:
    result, _ = logged
    note = MlflowClient(result.uri).get_run(result.run_id).data.tags["mlflow.note.content"]
    systems = pd.read_csv(finished_dir / "system_scores.csv").set_index("system")
    # what was evaluated comes first
    assert note.splitlines()[0] == f"**demo.jsonl**: 4 systems × 48 items, {len(METRICS)} metrics"
    best = systems["syntactic"].idxmax()
    assert f"by syntactic: `{best}` {systems.loc[best, 'syntactic']:.3f}" in note
    assert "**Best metric** per human aspect (pearson):" in note
    assert "- meaning: segment `" in note and "- fluency: segment `" in note
    assert "**α of iBLEU** chosen on the dev split" in note
    assert 5 <= len(note.splitlines()) <= 20  # a few lines, not a table
    assert "://" not in note  # nothing of a store or server address


def test_every_columns_correlation_is_a_readable_metric(
    logged: tuple[mlflow_log.Logged, list[str]], finished_dir: Path
) -> None:
    result, _ = logged
    run = MlflowClient(result.uri).get_run(result.run_id)
    corr = pd.read_csv(finished_dir / "correlations.csv")
    headline = corr[corr["coefficient"] == "pearson"].dropna(subset=["value"])
    want = {
        f"corr.{r.aspect.removeprefix('human_')}.{r.level}.{r.metric}": r.value
        for r in headline.itertuples()
    }
    got = {k: v for k, v in run.data.metrics.items() if k.startswith("corr.")}
    assert got == pytest.approx(want)
    # every metric and both averages, with both aspects, at the three levels
    assert len(want) == (len(METRICS) + 1) * 2 * 3  # these metrics: one average, syntactic
    assert run.data.tags["paraeval.correlation.coefficient"] == "pearson"


def test_cache_counts_are_one_table_not_metrics(
    logged: tuple[mlflow_log.Logged, list[str]],
) -> None:
    result, _ = logged
    client = MlflowClient(result.uri)
    run = client.get_run(result.run_id)
    assert not [k for k in run.data.metrics if k.startswith("cache.")]
    table = pd.read_csv(client.download_artifacts(result.run_id, "tables/cache_counts.csv"))
    assert list(table.columns) == ["stage", "hits", "misses"]
    assert set(METRICS) <= set(table["stage"]) and table["stage"].iloc[-1] == "(all metrics)"
    rows = table.set_index("stage")
    per_metric = rows.drop(["(all metrics)", "correlation"])
    assert rows.loc["(all metrics)"].tolist() == per_metric.sum().tolist()
    assert rows.loc["bleu", "hits"] + rows.loc["bleu", "misses"] == 4  # one entry per system


def test_the_run_page_is_the_runs_address_in_the_ui(
    logged: tuple[mlflow_log.Logged, list[str]],
) -> None:
    result, _ = logged
    exp_id = MlflowClient(result.uri).get_run(result.run_id).info.experiment_id
    assert result.page == f"http://127.0.0.1:5000/#/experiments/{exp_id}/runs/{result.run_id}"
    # a server's own address, without the credentials MLflow sends in the environment
    page = run_page("https://alice:secret@mlflow.example.org:8443/", "7", "abc")
    assert page == "https://mlflow.example.org:8443/#/experiments/7/runs/abc"


def test_a_dozen_own_tags_at_most_and_the_users_settings_as_params(
    logged: tuple[mlflow_log.Logged, list[str]], finished_dir: Path
) -> None:
    result, _ = logged
    run = MlflowClient(result.uri).get_run(result.run_id)
    own = {k for k in run.data.tags if not k.startswith("mlflow.")}
    assert own == {
        "paraeval.run_uid",
        "paraeval.content_hash",
        "paraeval.role",
        "paraeval.data",
        "paraeval.output_dir",
        "paraeval.versions",
        "paraeval.correlation.coefficient",
        "paraeval.overrides",
    }
    assert "sacrebleu=" in run.data.tags["paraeval.versions"]
    # every tag a run can have (a sweep's, and the replaced runs of an interrupted logging)
    assert len(mlflow_log.OWN_TAGS) + 1 <= 12
    params = run.data.params
    assert not [k for k in params if "_target_" in k]
    record = read_run_info(finished_dir).params
    assert params == {k: v for k, v in record.items() if not k.endswith("._target_")}
    assert params["metrics.selected"] == ",".join(METRICS)


def test_an_older_record_logs_only_the_tags_of_now(finished_dir: Path, tmp_path: Path) -> None:
    """``version.*``, ``signature.*``, a sweep's id: what a record written before holds."""
    payload = RunPayload.from_dir(finished_dir)
    payload.record.tags.update(
        {"version.numpy": "2", "signature.bleu": "bleu|x", "paraeval.sweep_id": "ab"}
    )
    tags = mlflow_log.parent_tags(payload)
    assert {k for k in tags if not k.startswith("mlflow.")} <= set(mlflow_log.OWN_TAGS)


def test_signatures_are_a_table_not_tags(
    logged: tuple[mlflow_log.Logged, list[str]], finished_dir: Path
) -> None:
    result, _ = logged
    client = MlflowClient(result.uri)
    run = client.get_run(result.run_id)
    assert not [k for k in run.data.tags if k.startswith(("sig.", "signature."))]
    listed = run.data.tags["mlflow.loggedArtifacts"]
    assert '"tables/signatures.json"' in listed
    path = client.download_artifacts(result.run_id, "tables/signatures.json")
    table = pd.read_json(path, orient="split")
    csv = pd.read_csv(finished_dir / "signatures.csv", keep_default_na=False)
    assert table["signature"].tolist() == csv["signature"].tolist()
    assert set(METRICS) < set(table["metric"])  # and the group average


def test_system_runs_carry_a_line_the_dataset_and_compare_metrics_first(
    logged: tuple[mlflow_log.Logged, list[str]],
) -> None:
    result, messages = logged
    client = MlflowClient(result.uri)
    parent = client.get_run(result.run_id)
    assert parent.inputs is not None
    (parent_input,) = parent.inputs.dataset_inputs
    assert parent_input.dataset.source_type == "local"
    assert "demo.jsonl" in parent_input.dataset.source
    # a path given as a string makes MLflow warn that two sources could read it
    assert not [m for m in messages if "interpreted in multiple ways" in m]
    children = client.search_runs(
        [parent.info.experiment_id],
        filter_string=f"tags.`mlflow.parentRunId` = '{result.run_id}'",
    )
    assert len(children) == 4
    for found in children:
        child = client.get_run(found.info.run_id)
        assert child.inputs is not None
        (child_input,) = child.inputs.dataset_inputs
        assert child_input.dataset.digest == parent_input.dataset.digest
        # one line: the system, its role and its group average (no paraphrase table here)
        note = child.data.tags["mlflow.note.content"]
        name, role = child.data.tags["paraeval.system"], child.data.tags["paraeval.role"]
        score = child.data.metrics["syntactic"]
        assert note == f"{role.capitalize()} `{name}`: syntactic {score:.3f}"
        # the store returns a run's metrics in the order they were logged, and MLflow's
        # compare page opens its parallel-coordinates plot on the first one runs share
        order = list(child.data.metrics)
        assert order[:3] == ["syntactic", "human_meaning", "human_fluency"]
        assert order.index("n_items") > order.index("bleu.ci_low") > order.index("bleu")


def test_a_system_runs_line_leads_with_its_paraphrase_score() -> None:
    table = pd.DataFrame(
        {"system": ["a", "copy"], "paraphrase": [0.8166, 0.95], "cluster": [1.0, float("nan")]}
    )
    values = {"syntactic": 0.4}
    line = run_view.system_line("a", "system", values, table)
    assert line == "System `a`: paraphrase score 0.817, cluster 1"
    assert run_view.system_line("copy", "control", values, table) == (
        "Control `copy`: paraphrase score 0.950"
    )


def test_best_metric_is_direction_aware() -> None:
    """A lower-is-better metric (TER, WMD) agrees with a rating when its correlation is
    negative: -0.9 beats +0.5."""
    corr = pd.DataFrame(
        {
            "metric": ["bleu", "wmd", "self_bleu", "semantic"],
            "aspect": ["human_meaning"] * 4,
            "level": ["segment"] * 4,
            "coefficient": ["kendall"] * 4,
            "value": [0.5, -0.9, 0.95, 0.97],
        }
    )
    signatures = pd.DataFrame(
        {
            "column": ["bleu", "wmd", "self_bleu", "semantic"],
            "group": ["syntactic", "semantic", "diversity", "average"],
            "higher_is_better": [True, False, True, True],
        }
    )
    lines = run_view.best_metric_lines(corr, signatures)
    # diversity columns and the group averages do not compete
    assert lines == [
        "**Best metric** per human aspect (kendall):",
        "- meaning: segment `wmd` ↓ -0.900",
    ]


@pytest.mark.slow
def test_the_logged_coefficient_is_the_one_the_report_leads_with(tmp_path: Path) -> None:
    """Kendall first in the table, the significance test on Pearson: the report, the terminal and
    the heatmap lead with Pearson, and so do the run's correlation metrics and description."""
    out = finished_run(
        tmp_path,
        "bleu,chrf",
        "correlation.coefficients=[kendall_b,pearson]",
        "correlation.significance.coefficient=pearson",
    )
    corr = pd.read_csv(out / "correlations.csv")
    assert corr["coefficient"].iloc[0] == "kendall_b"
    result = mlflow_log.log_payload(RunPayload.from_dir(out), {"store_dir": str(tmp_path / "s")})
    run = MlflowClient(result.uri).get_run(result.run_id)
    tags = run.data.tags
    assert tags["paraeval.correlation.coefficient"] == "pearson"
    assert "**Best metric** per human aspect (pearson):" in tags["mlflow.note.content"]
    pearson = corr[(corr["coefficient"] == "pearson") & (corr["metric"] == "chrf")]
    row = pearson[(pearson["aspect"] == "human_meaning") & (pearson["level"] == "segment")]
    assert run.data.metrics["corr.meaning.segment.chrf"] == pytest.approx(row["value"].iloc[0])
    # the run's source, as MLflow's run page shows it
    assert tags["mlflow.source.type"] == "LOCAL" and tags["mlflow.source.name"]
