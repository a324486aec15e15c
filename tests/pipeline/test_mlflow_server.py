"""The pipeline against a real ``mlflow server`` over HTTP (SQLite backend, temporary artifact
root), then the runs read back through the same server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.pipeline.helpers import relog, run_cli
from tests.pipeline.servers import mlflow_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with mlflow_server(tmp_path_factory.mktemp("mlflow-server")) as url:
        yield url


@pytest.mark.slow
def test_pipeline_logs_to_a_server_over_http(server: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = run_cli(
        [
            "metrics=[bleu,ibleu,self_bleu]",
            "tracking=server",
            f"tracking.uri={server}",
            "tracking.experiment=remote",
            f"hydra.run.dir={out}",
            "correlation.ci=false",
            "report.print_tables=false",
        ],
        cwd=tmp_path,
        PARAEVAL_CACHE_DIR=str(tmp_path / "cache"),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "MLflow logging failed" not in proc.stderr and "unreachable" not in proc.stderr

    client = MlflowClient(server)
    exp = client.get_experiment_by_name("remote")
    assert exp is not None
    runs = client.search_runs([exp.experiment_id])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert len(parents) == 1
    parent = parents[0]
    # the run's address is the server's own
    page = f"{server.rstrip('/')}/#/experiments/{exp.experiment_id}/runs/{parent.info.run_id}"
    assert f"\nRun page:     {page}\n" in proc.stdout
    assert len([k for k in parent.data.tags if not k.startswith("mlflow.")]) <= 12
    assert parent.data.params["metrics.selected"] == "bleu,ibleu,self_bleu"
    assert parent.data.tags["paraeval.output_dir"] == str(out.resolve())
    assert "corr.meaning.segment.syntactic" in parent.data.metrics
    assert parent.inputs is not None
    assert parent.inputs.dataset_inputs[0].dataset.name == "demo.jsonl"
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert {c.data.params["system"] for c in children} == {"copy", "strong", "medium", "weak"}
    # artifacts went through the server (mlflow-artifacts:), not to a local path of the client
    assert parent.info.artifact_uri.startswith("mlflow-artifacts:")
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"segment_scores.parquet", "system_scores.csv", "run_info.json"} <= artifacts
    local = client.download_artifacts(parent.info.run_id, "system_scores.csv", str(tmp_path))
    assert Path(local).read_bytes() == (out / "system_scores.csv").read_bytes()

    # logging the same directory again through the server creates nothing new
    again = relog(str(out), cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"already logged as run {parent.info.run_id}" in again.stdout
    assert f"\n  {page}\n" in again.stdout
    assert len(client.search_runs([exp.experiment_id])) == len(runs)
