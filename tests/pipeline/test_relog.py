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
from typing import Any

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from paraeval.pipeline.tracking.payload import RunPayload, frame_digest
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


@pytest.mark.slow
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


@pytest.mark.slow
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
    for lib in ("paraeval", "sacrebleu", "scipy", "mlflow"):
        assert f"{lib}=" in tags["paraeval.versions"]
    assert len(tags["mlflow.source.git.commit"]) == 40  # this checkout's
    exp_id = parent.info.experiment_id
    assert f"\n  http://127.0.0.1:5000/#/experiments/{exp_id}/runs/{run_id}\n" in second.stdout
    cache = pd.read_csv(client.download_artifacts(run_id, "tables/cache_counts.csv"))
    assert cache.set_index("stage").loc["bleu", "misses"] == 4
    assert not any(name.startswith("cache.") for name in parent.data.metrics)
    assert "alpha_curve.segment.pearson.human_meaning.chosen_alpha" in parent.data.metrics
    assert parent.inputs is not None
    (dataset,) = parent.inputs.dataset_inputs
    assert dataset.dataset.name == "demo.jsonl" and "demo.jsonl" in dataset.dataset.source
    assert dataset.dataset.digest == frame_digest(RunPayload.from_dir(out).dataset)
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == run_id]
    assert {c.data.params["system"] for c in children} == SYSTEMS
    systems = pd.read_csv(out / "system_scores.csv").set_index("system")
    for child in children:
        system = child.data.params["system"]
        assert child.data.metrics["ibleu"] == pytest.approx(systems.loc[system, "ibleu"])
    artifacts = {a.path for a in client.list_artifacts(run_id)}
    assert {"segment_scores.parquet", "run_info.json", "plots"} <= artifacts


def _artifacts(client: MlflowClient, run_id: str, path: str | None = None) -> list[str]:
    """Every artifact file of the run, by path."""
    out = []
    for item in client.list_artifacts(run_id, path):
        out += _artifacts(client, run_id, item.path) if item.is_dir else [item.path]
    return sorted(out)


def _as_logged(client: MlflowClient, run_id: str) -> dict[str, Any]:
    """What a logging put in a run and its children, without the ids and times of the logging
    itself (the runs' own start and end times are the run's, and compared)."""
    run = client.get_run(run_id)
    children = client.search_runs(
        [run.info.experiment_id], filter_string=f"tags.`mlflow.parentRunId` = '{run_id}'"
    )
    assert run.inputs is not None
    (dataset,) = run.inputs.dataset_inputs
    histories = {
        name: [(m.step, m.value) for m in client.get_metric_history(run_id, name)]
        for name in run.data.metrics
    }
    return {
        "run": (run.info.run_name, run.info.status, run.info.start_time, run.info.end_time),
        "params": run.data.params,
        "metrics": histories,
        "tags": run.data.tags,
        "dataset": (
            dataset.dataset.name,
            dataset.dataset.digest,
            dataset.dataset.source,
            dataset.dataset.schema,
            dataset.dataset.profile,
        ),
        "artifacts": _artifacts(client, run_id),
        "tables": {
            name: Path(client.download_artifacts(run_id, name)).read_bytes()
            for name in ("tables/correlations.json", "tables/system_comparison.json")
        },
        "children": {
            child.data.params["system"]: (
                child.info.run_name,
                child.info.status,
                child.data.params,
                {
                    name: [
                        (m.step, m.value)
                        for m in client.get_metric_history(child.info.run_id, name)
                    ]
                    for name in child.data.metrics
                },
                {k: v for k, v in child.data.tags.items() if k != "mlflow.parentRunId"},
            )
            for child in children
        },
    }


@pytest.mark.slow
def test_a_run_logged_from_memory_and_from_its_folder_is_the_same_run(tmp_path: Path) -> None:
    """The run logs the tables it holds in memory; ``paraeval-log`` rebuilds the same payload
    from the output folder. Logged into two stores, the two runs hold the same params, metric
    histories, tags, dataset, tables and artifacts, their per-system runs too."""
    import paraeval
    from paraeval.pipeline.cli.relog import relog as relog_dir
    from paraeval.pipeline.data.load import demo_path

    ev = paraeval.evaluate(
        demo_path(),
        ["bleu", "ibleu", "self_bleu", "chrf"],
        cache={"dir": str(tmp_path / "cache")},
        correlation={"ci": False},
        report={"progress": False},
    )
    assert ev.alpha_curve is not None and not ev.comparison.empty  # every part is logged
    out = tmp_path / "out"
    live_store, later_store = tmp_path / "live", tmp_path / "later"
    live_id = ev.log(out, tracking={"store_dir": str(live_store), "uri": None})
    assert live_id is not None
    relogged = relog_dir(out, store_dir=str(later_store))
    assert not relogged.already
    live = _as_logged(MlflowClient(f"sqlite:///{live_store / 'mlflow.db'}"), live_id)
    later = _as_logged(MlflowClient(relogged.uri), relogged.run_id)
    assert live.keys() == later.keys()
    for part in live:
        assert live[part] == later[part], part
    # not vacuous: the parts hold what a run logs
    assert len(live["params"]) > 50 and "ibleu_by_alpha" in live["children"]["copy"][3]
    assert {"system_scores.csv", "alpha_systems.csv", "run_info.json"} <= set(live["artifacts"])


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
            [
                sys.executable,
                "-m",
                "paraeval.pipeline.cli.relog",
                str(d),
                "--store-dir",
                str(store),
            ],
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
