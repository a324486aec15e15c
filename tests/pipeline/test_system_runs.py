"""What a run logs to MLflow, read back through ``MlflowClient``: the per-system child runs
(created, filled in with ``log_batch`` and ended through MLflow's public client) carry each
system's scores from ``system_scores.csv`` and ``system_comparison.csv``; the α curve is the parent
run's metric histories, one step per α, and each system's iBLEU per α its child's."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from paraeval.pipeline.stages.compare import comparison_order
from paraeval.pipeline.tracking import mlflow_log
from paraeval.pipeline.tracking.payload import RunPayload, read_run_info
from tests.pipeline.helpers import finished_run

SYSTEMS = {"copy", "strong", "medium", "weak"}
STATS = ("ci_low", "ci_high", "p_bootstrap", "p_ar", "cluster")


@pytest.fixture(scope="module")
def finished_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return finished_run(tmp_path_factory.mktemp("system-runs"), "bleu,ibleu,self_bleu,chrf")


@pytest.fixture(scope="module")
def logged(finished_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> mlflow_log.Logged:
    store = tmp_path_factory.mktemp("store")
    payload = RunPayload.from_dir(finished_dir)
    result = mlflow_log.log_payload(payload, {"store_dir": str(store)})
    assert not result.already
    return result


def _children(client: MlflowClient, parent_id: str) -> dict[str, object]:
    parent = client.get_run(parent_id)
    runs = client.search_runs(
        [parent.info.experiment_id],
        filter_string=f"tags.`mlflow.parentRunId` = '{parent_id}'",
    )
    return {run.data.params["system"]: run for run in runs}


@pytest.mark.slow
def test_child_runs_carry_each_systems_scores(
    finished_dir: Path, logged: mlflow_log.Logged
) -> None:
    client = MlflowClient(logged.uri)
    record = read_run_info(finished_dir)
    systems = pd.read_csv(finished_dir / "system_scores.csv").set_index("system")
    systems = systems.drop(columns=["control"])  # a role: the run's tag, not a score
    comparison = pd.read_csv(finished_dir / "system_comparison.csv")
    children = _children(client, logged.run_id)
    assert set(children) == SYSTEMS
    for system, found in children.items():
        run = client.get_run(found.info.run_id)  # type: ignore[attr-defined]
        assert run.info.status == "FINISHED" and run.info.lifecycle_stage == "active"
        assert run.info.run_name == system
        assert record.started_ms <= run.info.start_time < record.started_ms + len(SYSTEMS)
        assert run.info.end_time == record.ended_ms
        assert run.info.artifact_uri.endswith(f"{run.info.run_id}/artifacts")
        assert run.data.params == {"system": system}
        tags = {k: v for k, v in run.data.tags.items() if k != "mlflow.user"}
        assert tags == {
            "mlflow.parentRunId": logged.run_id,
            "mlflow.runName": system,
            "mlflow.note.content": tags["mlflow.note.content"],  # test_mlflow_view's
            "paraeval.system": system,
            # the demo's copy is a control; the run's versions and signatures are the parent's
            "paraeval.role": "control" if system == "copy" else "system",
        }
        scores = systems.to_dict("index")[system]
        want = {str(k): float(v) for k, v in scores.items() if math.isfinite(float(v))}
        for row in comparison[comparison["system"] == system].to_dict("records"):
            for stat in STATS:
                if math.isfinite(float(row[stat])):
                    want[f"{row['metric']}.{stat}"] = float(row[stat])
        # the latest value of ibleu_by_alpha is its last step's (α = 1): checked below
        got = {k: v for k, v in run.data.metrics.items() if k != "ibleu_by_alpha"}
        assert got == want
        # scores and comparison statistics (a control has no rank or cluster)
        assert len(want) > (15 if system == "copy" else 20)
        history = client.get_metric_history(run.info.run_id, "bleu")
        assert [(h.value, h.step) for h in history] == [(want["bleu"], 0)]


def test_the_system_runs_start_in_the_order_of_the_terminal_and_the_page(
    finished_dir: Path, logged: mlflow_log.Logged
) -> None:
    """One system order everywhere: the runs a millisecond apart in the comparison's order, which
    the terminal, the page and the ranking figure show; the copy control last."""
    comparison = pd.read_csv(finished_dir / "system_comparison.csv")
    order = comparison_order(comparison)
    assert order[-1] == "copy" and set(order) == SYSTEMS
    children = _children(MlflowClient(logged.uri), logged.run_id)
    by_start = sorted(children, key=lambda s: children[s].info.start_time)  # type: ignore[attr-defined]
    assert by_start == order


def test_alpha_curve_is_a_metric_history_of_the_parent_run(
    finished_dir: Path, logged: mlflow_log.Logged
) -> None:
    client = MlflowClient(logged.uri)
    curve = pd.read_csv(finished_dir / "alpha_curve.csv", float_precision="round_trip")
    line = curve[
        (curve["level"] == "segment")
        & (curve["aspect"] == "human_meaning")
        & (curve["split"] == "test")
    ].sort_values("alpha")
    key = "alpha_curve.segment.pearson.human_meaning.test_by_alpha"
    history = sorted(client.get_metric_history(logged.run_id, key), key=lambda m: m.step)
    assert len(history) == len(line) == 21
    assert [m.step for m in history] == [round(a * 100) for a in line["alpha"]]
    assert [m.step for m in history] == list(range(0, 101, 5))
    assert [m.value for m in history] == list(line["value"])
    # every (level, coefficient, aspect, split) of the table has its curve
    keys = {
        f"alpha_curve.{r.level}.{r.coefficient}.{r.aspect}.{r.split}_by_alpha"
        for r in curve.itertuples()
    }
    metrics = client.get_run(logged.run_id).data.metrics
    assert keys <= set(metrics) and len(keys) == 8
    # the chosen α and its values stay single metrics beside the curves
    assert "alpha_curve.segment.pearson.human_meaning.chosen_alpha" in metrics


def test_each_systems_ibleu_by_alpha_is_a_metric_history_of_its_run(
    finished_dir: Path, logged: mlflow_log.Logged
) -> None:
    client = MlflowClient(logged.uri)
    scores = pd.read_csv(finished_dir / "alpha_systems.csv", float_precision="round_trip")
    children = _children(client, logged.run_id)
    for system, run in children.items():
        mine = scores[scores["system"] == system].sort_values("alpha")
        run_id = run.info.run_id  # type: ignore[attr-defined]
        history = sorted(client.get_metric_history(run_id, "ibleu_by_alpha"), key=lambda m: m.step)
        assert len(history) == len(mine) == 21
        assert [(m.step, m.value) for m in history] == [
            (round(a * 100), v) for a, v in zip(mine["alpha"], mine["ibleu"], strict=True)
        ]
        # at the configured α (0.8) the curve meets the system's own iBLEU score
        at = {m.step: m.value for m in history}[80]
        assert at == pytest.approx(run.data.metrics["ibleu"])  # type: ignore[attr-defined]


def test_alpha_steps_keep_every_alpha_apart() -> None:
    assert mlflow_log.alpha_steps([0.0, 0.05, 1.0]) == {0.0: 0, 0.05: 5, 1.0: 100}
    fine = mlflow_log.alpha_steps([0.0, 0.001, 0.002])
    assert fine == {0.0: 0, 0.001: 10, 0.002: 20}


def test_a_deleted_experiment_is_refused_as_mlflow_refuses_it(tmp_path: Path) -> None:
    from mlflow.exceptions import MlflowException

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    exp_id = client.create_experiment("gone")
    client.delete_experiment(exp_id)
    runs = [mlflow_log.SystemRun("a", {"paraeval.system": "a"}, {"bleu": 1.0}, {"system": "a"})]
    with pytest.raises(MlflowException, match="active"):
        mlflow_log.log_system_runs(client, exp_id, runs, None, None)
