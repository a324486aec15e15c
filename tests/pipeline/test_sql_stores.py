"""MLflow stores in SQL databases: a real PostgreSQL server (Debian's ``postgresql``, started by
the test on 127.0.0.1) takes a run and a sweep through the URI users write
(``postgresql://user:PASSWORD@host/db``), read back through ``MlflowClient``; a store at another
schema revision, a driver that is missing or a server that refuses the connection is one
``paraeval: error:`` line and exit 2 before any scoring."""

from __future__ import annotations

import secrets
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import mlflow
import pytest
from mlflow.tracking import MlflowClient

from tests.pipeline.helpers import FAST, cli_env, files_containing, run_cli
from tests.pipeline.servers import Postgres, free_port, postgres_server

TOKEN = secrets.token_hex(10)
PASSWORD = f"Pg-{TOKEN}"
# a revision no MLflow has
STALE_REVISION = "0123456789ab"


@pytest.fixture(scope="module")
def postgres() -> Iterator[Postgres]:
    with postgres_server("alice", PASSWORD) as server:
        server.sql("postgres", "CREATE DATABASE mlflow", "CREATE DATABASE stale")
        yield server


def _one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("paraeval: error: "), proc.stderr[-3000:]
    return lines[0]


def _refused_before_scoring(args: list[str], tmp_path: Path, **env: str) -> str:
    """The error line of a run refused when its config is checked: no output table, and no
    stage took long enough to report its time."""
    out = tmp_path / "out"
    proc = run_cli([*FAST, f"hydra.run.dir={out}", *args], cwd=tmp_path, **env)
    line = _one_error_line(proc)
    assert not (out / "segment_scores.parquet").exists()
    return line


@pytest.mark.slow
def test_a_run_and_a_sweep_are_logged_to_postgresql(postgres: Postgres, tmp_path: Path) -> None:
    uri = postgres.uri("mlflow")
    cache = str(tmp_path / "cache")
    out, sweep = tmp_path / "out", tmp_path / "sweep"
    run = run_cli(
        [*FAST, f"tracking.uri={uri}", "tracking.experiment=pg", f"hydra.run.dir={out}"],
        cwd=tmp_path,
        PARAEVAL_CACHE_DIR=cache,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    shown = f"postgresql+psycopg://alice@127.0.0.1:{postgres.port}/mlflow"
    assert f"mlflow ui --backend-store-uri {shown}" in run.stdout
    jobs = ["tracking.experiment=pg-sweep", f"hydra.sweep.dir={sweep}", "seed=1,2"]
    multirun = run_cli(
        ["-m", *FAST, f"tracking.uri={uri}", *jobs], cwd=tmp_path, PARAEVAL_CACHE_DIR=cache
    )
    assert multirun.returncode == 0, multirun.stderr[-3000:]

    client = MlflowClient(postgres.uri("mlflow").replace("postgresql:", "postgresql+psycopg:"))
    for experiment, parents, seeds in (("pg", 1, {"1234"}), ("pg-sweep", 2, {"1", "2"})):
        exp = client.get_experiment_by_name(experiment)
        assert exp is not None
        runs = client.search_runs([exp.experiment_id])
        invocations = [r for r in runs if r.data.tags.get("paraeval.role") == "invocation"]
        assert len(invocations) == parents
        assert {r.data.params["seed"] for r in invocations} == seeds
        for parent in invocations:
            assert parent.data.params["tracking.uri"] == uri.replace(f":{PASSWORD}", "")
            children = [
                r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id
            ]
            assert {c.data.params["system"] for c in children} == {
                "copy",
                "strong",
                "medium",
                "weak",
            }
            assert "run_info.json" in {a.path for a in client.list_artifacts(parent.info.run_id)}
    # nothing written holds the password: output folders, the artifacts MLflow stored under
    # ./mlruns, the database's files
    assert files_containing(TOKEN, tmp_path, postgres.data_dir) == []
    assert TOKEN not in run.stdout + run.stderr + multirun.stdout + multirun.stderr


@pytest.mark.slow
def test_a_store_at_another_schema_revision_is_refused_before_scoring(
    postgres: Postgres, tmp_path: Path
) -> None:
    client_uri = postgres.uri("stale").replace("postgresql:", "postgresql+psycopg:")
    MlflowClient(client_uri).search_experiments()  # the tables of this MLflow
    postgres.sql("stale", f"UPDATE alembic_version SET version_num = '{STALE_REVISION}'")
    line = _refused_before_scoring([f"tracking.uri={postgres.uri('stale')}"], tmp_path)
    shown = f"postgresql+psycopg://alice@127.0.0.1:{postgres.port}/stale"
    assert f"is at schema revision {STALE_REVISION} but MLflow" in line
    assert line.endswith(
        f"mlflow db upgrade {shown} (a store written by a newer MLflow needs that MLflow instead)"
    ), line
    assert TOKEN not in line


@pytest.mark.slow
def test_a_wrong_password_is_refused_before_scoring(postgres: Postgres, tmp_path: Path) -> None:
    uri = postgres.uri("mlflow", password="not-the-password")
    line = _refused_before_scoring([f"tracking.uri={uri}"], tmp_path)
    assert "does not accept the connection" in line and "password authentication failed" in line
    assert "PGPASSWORD" in line and "not-the-password" not in line


@pytest.mark.slow
def test_a_server_that_refuses_the_connection_is_refused_before_scoring(tmp_path: Path) -> None:
    uri = f"postgresql://alice:{PASSWORD}@127.0.0.1:{free_port()}/mlflow"
    started = time.monotonic()
    line = _refused_before_scoring([f"tracking.uri={uri}"], tmp_path)
    assert "does not accept the connection" in line and "Connection refused" in line, line
    assert "start the database server" in line and TOKEN not in line
    # one attempt, not MLflow's client retrying for about 100 s
    assert time.monotonic() - started < 60


def test_a_missing_driver_says_which_extra_to_install(tmp_path: Path) -> None:
    """The run in a Python where psycopg cannot be imported (Python's documented way to block
    an import: ``None`` in ``sys.modules``), which is a Python without the driver to paraeval."""
    uri = f"postgresql://alice:{PASSWORD}@127.0.0.1:{free_port()}/mlflow"
    out = tmp_path / "out"
    blocked = (
        "import sys\n"
        "sys.modules.update(psycopg=None, psycopg2=None)\n"
        "from paraeval.pipeline.cli.main import main\n"
        "main()\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", blocked, *FAST, f"tracking.uri={uri}", f"hydra.run.dir={out}"],
        cwd=tmp_path,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    line = _one_error_line(proc)
    assert "needs a postgresql driver (psycopg is not installed)" in line
    assert line.endswith("install it with: pip install 'paraeval[postgres]'"), line
    assert not (out / "segment_scores.parquet").exists() and TOKEN not in proc.stderr


@pytest.mark.slow
def test_a_sqlite_store_at_another_schema_revision_is_refused_before_scoring(
    tmp_path: Path,
) -> None:
    db = tmp_path / "store" / "mlflow.db"
    db.parent.mkdir()
    MlflowClient(f"sqlite:///{db}").search_experiments()
    with sqlite3.connect(db) as con:
        (head,) = con.execute("SELECT version_num FROM alembic_version").fetchone()
        con.execute("UPDATE alembic_version SET version_num = ?", (STALE_REVISION,))
    line = _refused_before_scoring([f"tracking.store_dir={db.parent}"], tmp_path)
    # the whole message, not cut mid-word
    assert line == (
        f"paraeval: error: MLflow store sqlite:///{db} is at schema revision {STALE_REVISION} but "
        f"MLflow {mlflow.__version__} expects {head}: back it up, then upgrade it "
        f"with: mlflow db upgrade sqlite:///{db} (a store written by a newer MLflow needs that "
        "MLflow instead)"
    )
