"""An unreachable tracking server does not fail the run; ``paraeval-log`` logs the output directory
later, once, with the content a run logged at the time would have; concurrent loggers share one
SQLite store."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from tests.pipeline.helpers import cli_env, relog, run_cli

SYSTEMS = {"copy", "strong", "medium", "weak"}


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def offline_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    work = tmp_path_factory.mktemp("relog")
    out = work / "out"
    proc = run_cli(
        [
            "metrics=[bleu,ibleu,self_bleu]",
            "tracking=server",
            f"tracking.uri=http://127.0.0.1:{_closed_port()}",
            f"hydra.run.dir={out}",
            "correlation.ci=false",
            "report.print_tables=false",
        ],
        cwd=work,
        PARAEVAL_CACHE_DIR=str(work / "cache"),
    )
    return out, proc


def test_unreachable_server_keeps_outputs_and_says_so_in_one_line(
    offline_run: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    out, proc = offline_run
    assert proc.returncode == 3, proc.stderr[-2000:]  # written, not logged: never a silent 0
    # a warning wrapped at 100 columns continues on lines indented by two spaces
    output = (proc.stdout + proc.stderr).replace("\n  ", " ")
    assert "Traceback" not in output
    lines = [ln for ln in output.splitlines() if "unreachable" in ln]
    assert len(lines) == 1
    assert f"paraeval-log {out}" in lines[0] and "127.0.0.1" in lines[0]
    for name in ("segment_scores.parquet", "system_scores.csv", "correlations.csv"):
        assert (out / name).stat().st_size > 0
    info = json.loads((out / "run_info.json").read_text())
    assert info["params"]["metrics.selected"] == "bleu,ibleu,self_bleu"


def test_relog_logs_once_with_full_content(
    offline_run: tuple[Path, subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    out, _ = offline_run
    store = tmp_path / "store"
    first = relog(str(out), "--store-dir", str(store), cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    assert "logged as run" in first.stdout and "already" not in first.stdout
    second = relog(str(out), "--store-dir", str(store), cwd=tmp_path)
    assert second.returncode == 0, second.stderr[-2000:]
    assert "already logged as run" in second.stdout
    run_id = first.stdout.split("logged as run ")[1].split()[0]
    assert run_id in second.stdout

    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    exp = client.get_experiment_by_name("paraeval")
    assert exp is not None
    runs = client.search_runs([exp.experiment_id])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert [p.info.run_id for p in parents] == [run_id]
    parent = parents[0]
    assert parent.data.params["metrics.selected"] == "bleu,ibleu,self_bleu"
    assert parent.data.params["metrics.ibleu.alpha"] == "0.8"
    tags = parent.data.tags
    assert (
        tags["signature.ibleu"].startswith("ibleu|impl:sacrebleu-")
        and "alpha:0.8" in tags["signature.ibleu"]
    )
    for lib in ("sacrebleu", "scipy", "mlflow"):
        assert tags[f"version.{lib}"]
    assert tags["paraeval.git_commit"] and tags["version.paraeval"]
    assert parent.data.metrics["cache.misses.bleu"] == 4
    assert "alpha_curve.segment.kendall_b.human_meaning.chosen_alpha" in parent.data.metrics
    assert parent.inputs is not None
    (dataset,) = parent.inputs.dataset_inputs
    assert dataset.dataset.name == "demo.jsonl" and "demo.jsonl" in dataset.dataset.source
    assert dataset.dataset.digest == tags["paraeval.dataset_digest"]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == run_id]
    assert {c.data.params["system"] for c in children} == SYSTEMS
    systems = pd.read_csv(out / "system_scores.csv").set_index("system")
    for child in children:
        system = child.data.params["system"]
        assert child.data.metrics["ibleu"] == pytest.approx(systems.loc[system, "ibleu"])
    artifacts = {a.path for a in client.list_artifacts(run_id)}
    assert {"segment_scores.parquet", "run_info.json", "plots"} <= artifacts


def test_dataset_of_a_second_logging_in_one_process_is_the_same(
    offline_run: tuple[Path, subprocess.CompletedProcess[str]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The MLflow dataset (schema, digest) is built once per input and process: a second logging
    of the same input, here into another store, records the very dataset the first did."""
    import mlflow.data.pandas_dataset as pandas_dataset

    from paraeval.pipeline.tracking import mlflow_store as track

    built = []
    real = pandas_dataset.from_pandas

    def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
        built.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(pandas_dataset, "from_pandas", counting)
    out, _ = offline_run
    track._DATASETS.clear()
    record = track.read_run_info(out)
    logged = []
    for name in ("a", "b"):
        tracking = {**record.tracking, "uri": None, "store_dir": str(tmp_path / name)}
        logged.append(track.log_output_dir(out, record, tracking))
    assert len(built) == 1 and len(track._DATASETS) == 1
    datasets = []
    for result in logged:
        run = MlflowClient(result.uri).get_run(result.run_id)
        assert run.inputs is not None
        (dataset,) = run.inputs.dataset_inputs
        datasets.append(dataset.dataset)
    frame = track.dataset_frame(pd.read_parquet(out / "segment_scores.parquet"))
    assert datasets[0].digest == datasets[1].digest == track.frame_digest(frame)
    assert datasets[0].schema == datasets[1].schema and "item_id" in datasets[0].schema
    assert datasets[0].name == datasets[1].name == "demo.jsonl"


def test_relog_errors_are_one_line(tmp_path: Path) -> None:
    proc = relog(str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "run_info.json" in proc.stderr


@pytest.mark.slow
def test_concurrent_loggers_share_a_fresh_sqlite_store(
    offline_run: tuple[Path, subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    """Three processes log three directories into one store that none of them has created yet:
    MLflow's schema creation and SQLite's single writer would collide without the lock."""
    out, _ = offline_run
    dirs = []
    for k in range(3):
        d = tmp_path / f"copy{k}"
        shutil.copytree(out, d)
        info = json.loads((d / "run_info.json").read_text())
        info["run_uid"] = f"copy-{k}"
        (d / "run_info.json").write_text(json.dumps(info))
        dirs.append(d)
    store = tmp_path / "store"
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "paraeval.pipeline.cli.relog", str(d), "--store-dir", str(store)],
            cwd=tmp_path,
            env=cli_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for d in dirs
    ]
    results = [p.communicate(timeout=240) for p in procs]
    for p, (_stdout, stderr) in zip(procs, results, strict=True):
        assert p.returncode == 0, stderr[-2000:]
        assert "locked" not in stderr
    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    exp = client.get_experiment_by_name("paraeval")
    assert exp is not None
    parents = [
        r
        for r in client.search_runs([exp.experiment_id])
        if "mlflow.parentRunId" not in r.data.tags
    ]
    assert len(parents) == 3
    assert len({r.data.tags["paraeval.content_hash"] for r in parents}) == 3
