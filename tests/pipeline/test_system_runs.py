"""The per-system child runs that a SQL store gets in one transaction are the rows MLflow's own
``create_run`` + ``log_batch`` + ``set_terminated`` write: the same output directory is logged
both ways into two SQLite stores and every row of the children is compared."""

from __future__ import annotations

import math
import sqlite3
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from paraeval.pipeline.tracking import mlflow_store as track
from tests.pipeline.helpers import run_cli

SYSTEMS = {"copy", "strong", "medium", "weak"}


@pytest.fixture(scope="module")
def finished_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("system-runs")
    out = work / "out"
    proc: subprocess.CompletedProcess[str] = run_cli(
        [
            "metrics=[bleu,ibleu,self_bleu,chrf]",
            "tracking=none",
            f"hydra.run.dir={out}",
            "correlation.ci=false",
            "report.print_tables=false",
        ],
        cwd=work,
        PARAEVAL_CACHE_DIR=str(work / "cache"),
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out


def _log(out: Path, store: Path, *, api: bool, monkeypatch: pytest.MonkeyPatch) -> str:
    record = track.read_run_info(out)
    record.run_uid = uuid.uuid4().hex  # a new logging of the same directory
    with monkeypatch.context() as m:
        if api:
            m.setattr(track, "_sql_store", lambda client: None)
        else:
            # the transaction path must be the one taken by default
            real = track._sql_store
            m.setattr(
                track,
                "_sql_store",
                lambda client: _asserted(real(client)),
            )
        logged = track.log_output_dir(out, record, {"store_dir": str(store)})
    assert not logged.already
    return logged.run_id


def _asserted(store: Any) -> Any:
    assert store is not None, "a SQLite store must take the one-transaction path"
    return store


TABLES = {
    "runs": "run_uuid",
    "tags": "run_uuid",
    "params": "run_uuid",
    "metrics": "run_uuid",
    "latest_metrics": "run_uuid",
}


def _child_rows(db: Path, parent_id: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the parent's children, run ids replaced by the system's name, the parent id
    and the store's folder by placeholders, and metric times by their role."""
    con = sqlite3.connect(db)
    try:
        ids = dict(
            con.execute(
                "SELECT c.run_uuid, s.value FROM tags c JOIN tags s ON s.run_uuid = c.run_uuid "
                "WHERE c.key = 'mlflow.parentRunId' AND c.value = ? AND s.key = 'paraeval.system'",
                (parent_id,),
            ).fetchall()
        )
        assert set(ids.values()) == SYSTEMS
        out: dict[str, list[tuple[Any, ...]]] = {}
        for table in TABLES:
            cur = con.execute(
                f"SELECT * FROM {table} WHERE run_uuid IN ({','.join('?' * len(ids))})",
                list(ids),
            )
            names = [d[0] for d in cur.description]
            rows = []
            for row in cur.fetchall():
                clean = []
                for name, value in zip(names, row, strict=True):
                    if isinstance(value, str):
                        for run_id, system in ids.items():
                            value = value.replace(run_id, f"<{system}>")
                        value = value.replace(parent_id, "<parent>")
                        value = value.replace(db.parent.as_uri(), "<store>")
                    if name == "timestamp":
                        value = "<logged>" if isinstance(value, int) and value > 0 else value
                    clean.append((name, value, type(value).__name__))
                rows.append(tuple(clean))
            out[table] = sorted(rows, key=repr)
        return out
    finally:
        con.close()


def test_children_in_one_transaction_equal_mlflows_own_rows(
    finished_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast_store, api_store = tmp_path / "fast", tmp_path / "api"
    fast = _log(finished_dir, fast_store, api=False, monkeypatch=monkeypatch)
    slow = _log(finished_dir, api_store, api=True, monkeypatch=monkeypatch)
    got = _child_rows(fast_store / "mlflow.db", fast)
    want = _child_rows(api_store / "mlflow.db", slow)
    assert set(got) == set(want)
    for table in TABLES:
        assert got[table] == want[table], table
    # not vacuous: each child holds its metrics, both ways
    assert len(got["metrics"]) == len(got["latest_metrics"]) > 4 * 8
    assert len(got["runs"]) == 4

    # and MLflow reads them back as it reads its own: entities, history, search
    clients = (
        MlflowClient(f"sqlite:///{fast_store / 'mlflow.db'}"),
        MlflowClient(f"sqlite:///{api_store / 'mlflow.db'}"),
    )
    systems = pd.read_csv(finished_dir / "system_scores.csv").set_index("system")
    seen = []
    for client, parent in zip(clients, (fast, slow), strict=True):
        exp = client.get_experiment_by_name("paraeval")
        assert exp is not None
        children = client.search_runs(
            [exp.experiment_id],
            filter_string=f"tags.`mlflow.parentRunId` = '{parent}' and attributes.status = "
            "'FINISHED' and metrics.bleu > -1",
            order_by=["tags.`paraeval.system` ASC"],
        )
        view = {}
        for child in children:
            run = client.get_run(child.info.run_id)
            system = run.data.params["system"]
            assert run.info.run_name == system and run.data.tags["mlflow.runName"] == system
            assert run.info.artifact_uri.endswith(f"{run.info.run_id}/artifacts")
            assert run.data.metrics["chrf"] == pytest.approx(systems.loc[system, "chrf"])
            history = client.get_metric_history(run.info.run_id, "bleu")
            assert [(h.value, h.step) for h in history] == [(run.data.metrics["bleu"], 0)]
            view[system] = (
                run.info.status,
                run.info.lifecycle_stage,
                run.info.start_time,
                run.info.end_time,
                run.info.user_id,
                {k: v for k, v in run.data.metrics.items() if math.isfinite(v)},
                run.data.params,
                {k: v for k, v in run.data.tags.items() if k != "mlflow.parentRunId"},
            )
        seen.append(view)
    assert set(seen[0]) == SYSTEMS
    assert seen[0] == seen[1]


def test_a_deleted_experiment_is_refused_as_mlflow_refuses_it(
    finished_dir: Path, tmp_path: Path
) -> None:
    from mlflow.exceptions import MlflowException

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    exp_id = client.create_experiment("gone")
    client.delete_experiment(exp_id)
    runs = [track.SystemRun("a", {"paraeval.system": "a"}, {"bleu": 1.0}, {"system": "a"})]
    with pytest.raises(MlflowException, match="active"):
        track.log_system_runs(client, exp_id, runs, None, None)
    with pytest.raises(MlflowException, match="active"):
        client.create_run(exp_id)


def test_dataset_digest_is_kept_by_content(finished_dir: Path, tmp_path: Path) -> None:
    """The dataset logged with each run (its table and digest) is kept for the next logging of
    the same input; another input, even one text apart, gets its own."""
    seg = finished_dir / "segment_scores.parquet"

    def fresh(path: Path) -> str:
        import pyarrow.parquet as pq

        columns = track._dataset_columns(pq.read_schema(path).names)
        return track.frame_digest(track.dataset_frame(pd.read_parquet(path, columns=columns)))

    frame, digest = track._dataset(seg)
    assert digest == fresh(seg) and len(frame) == 192
    changed = pd.read_parquet(seg)
    changed.loc[5, "candidate"] = str(changed.loc[5, "candidate"]) + "!"
    other = tmp_path / "segment_scores.parquet"
    changed.to_parquet(other, index=False)
    _, other_digest = track._dataset(other)
    assert other_digest == fresh(other) != digest
    assert track._dataset(seg)[1] == digest


def test_metric_names_mlflow_checked_once_are_not_checked_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import mlflow.utils.validation as validation

    checked: list[str] = []
    real = validation._validate_metric

    def counting(key, *args, **kwargs):  # type: ignore[no-untyped-def]
        checked.append(key)
        return real(key, *args, **kwargs)

    monkeypatch.setattr(validation, "_validate_metric", counting)
    monkeypatch.setattr(track, "_CHECKED_METRIC_NAMES", set())
    run = track.SystemRun("sys1", {"mlflow.runName": "sys1"}, {"bleu": 1.5, "chrf": 2.0}, {})
    first = track._entities(run, 7)
    assert sorted(checked) == ["bleu", "chrf"]
    other = track.SystemRun("sys2", {}, {"bleu": 3.0, "ter": 0.5}, {"p": "1"})
    second = track._entities(other, 7)
    assert sorted(checked) == ["bleu", "chrf", "ter"]  # only the new name
    assert [(m.key, m.value) for m in first[0]] == [("bleu", 1.5), ("chrf", 2.0)]
    assert [(m.key, m.value) for m in second[0]] == [("bleu", 3.0), ("ter", 0.5)]
    assert [(p.key, p.value) for p in second[1]] == [("p", "1")]
