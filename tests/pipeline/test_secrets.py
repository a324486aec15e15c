"""Credentials for the tracking store: they work as they do with ``MlflowClient`` (in the URI, or in
``MLFLOW_TRACKING_USERNAME`` / ``MLFLOW_TRACKING_PASSWORD``), against a real ``mlflow server``
running MLflow's basic-auth app, and the password is never written: not to the terminal, not to
any file of the output folders of a run, a sweep and ``paraeval-log``, not to the store."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from paraeval.pipeline.secrets import client_credentials, credentials_in_env, redact
from tests.pipeline.helpers import FAST, files_containing, relog, run_cli
from tests.pipeline.servers import mlflow_server

USER = "alice"
# an "@" in it: the URI carries it percent-encoded, the environment as it is
TOKEN = secrets.token_hex(10)  # found in the password in any encoding
PASSWORD = f"Pw@{TOKEN}"


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """(URL, folder of its stores) of an ``mlflow server`` that takes only ``USER:PASSWORD``."""
    root = tmp_path_factory.mktemp("mlflow-auth")
    config = root / "basic_auth.ini"
    config.write_text(
        "[mlflow]\n"
        "default_permission = NO_PERMISSIONS\n"
        f"database_uri = sqlite:///{root / 'auth.db'}\n"
        f"admin_username = {USER}\n"
        "authorization_function = mlflow.server.auth:authenticate_request_basic_auth\n"
        # each request's password is checked by PBKDF2; cached, a run's requests stay fast
        "auth_cache_ttl_seconds = 600\n"
    )
    with mlflow_server(
        root,
        "--app-name",
        "basic-auth",
        MLFLOW_AUTH_CONFIG_PATH=str(config),
        MLFLOW_AUTH_ADMIN_PASSWORD=PASSWORD,
        MLFLOW_FLASK_SERVER_SECRET_KEY=secrets.token_hex(8),
    ) as url:
        yield url, root


def _with_password(url: str) -> str:
    return url.replace("http://", f"http://{USER}:{quote(PASSWORD, safe='')}@")


def _parents(client: MlflowClient, experiment: str) -> list[Any]:
    exp = client.get_experiment_by_name(experiment)
    assert exp is not None, experiment
    runs = client.search_runs([exp.experiment_id])
    return [r for r in runs if "mlflow.parentRunId" not in r.data.tags]


@pytest.mark.slow
def test_password_in_the_uri_logs_a_run_a_sweep_and_a_relog_and_is_never_written(
    auth_server: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, store = auth_server
    uri = _with_password(url)
    shown = url.replace("http://", f"http://{USER}@")
    cache = str(tmp_path / "cache")
    out, sweep = tmp_path / "out", tmp_path / "sweep"
    tracking = ["tracking=server", f"tracking.uri={uri}"]
    run = run_cli(
        [*FAST, *tracking, "tracking.experiment=run", f"hydra.run.dir={out}"],
        cwd=tmp_path,
        PARAEVAL_CACHE_DIR=cache,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert f"MLflow store: {shown}" in run.stdout
    jobs = ["seed=1,2", f"hydra.sweep.dir={sweep}"]
    multirun = run_cli(
        ["-m", *FAST, *tracking, "tracking.experiment=sweep", *jobs],
        cwd=tmp_path,
        PARAEVAL_CACHE_DIR=cache,
    )
    assert multirun.returncode == 0, multirun.stderr[-3000:]
    # paraeval-log: the URI recorded without the password, the password from the environment
    later = relog(
        str(out), "--experiment", "relog", cwd=tmp_path, MLFLOW_TRACKING_PASSWORD=PASSWORD
    )
    assert later.returncode == 0, later.stderr[-3000:]
    # ... or given in --tracking-uri
    given = relog(
        str(sweep / "0"), "--experiment", "relog-uri", "--tracking-uri", uri, cwd=tmp_path
    )
    assert given.returncode == 0, given.stderr[-3000:]
    assert f"in {shown}" in later.stdout and f"in {shown}" in given.stdout

    # the server takes no request without the password: the runs below went in with it
    with pytest.raises(MlflowException, match="401"):
        MlflowClient(url).search_experiments()
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", USER)
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", PASSWORD)
    client = MlflowClient(url)
    counts = {e: len(_parents(client, e)) for e in ("run", "sweep", "relog", "relog-uri")}
    assert counts == {"run": 1, "sweep": 2, "relog": 1, "relog-uri": 1}
    (parent,) = _parents(client, "run")
    assert parent.data.params["tracking.uri"] == shown
    assert f"tracking.uri={shown}" in parent.data.tags["paraeval.overrides"]
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {".hydra", "run_info.json", "report.html", "paraeval.log"} <= artifacts

    assert (out / ".hydra" / "overrides.yaml").is_file() and (sweep / "multirun.yaml").is_file()
    leaks = files_containing(TOKEN, tmp_path, store)
    assert leaks == [], leaks
    for proc in (run, multirun, later, given):
        assert TOKEN not in proc.stdout + proc.stderr


@pytest.mark.slow
def test_the_environment_variables_log_a_run(
    auth_server: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, _ = auth_server
    out = tmp_path / "out"
    proc = run_cli(
        [*FAST, "tracking=server", "tracking.experiment=env", f"hydra.run.dir={out}"],
        cwd=tmp_path,
        PARAEVAL_CACHE_DIR=str(tmp_path / "cache"),
        MLFLOW_TRACKING_URI=url,
        MLFLOW_TRACKING_USERNAME=USER,
        MLFLOW_TRACKING_PASSWORD=PASSWORD,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    # without the variables the server refuses, and the line says what to set
    refused = relog(str(out), "--experiment", "env-again", cwd=tmp_path)
    assert refused.returncode == 1, refused.stderr[-3000:]
    (line,) = refused.stderr.strip().splitlines()
    assert (
        "error code 401" in line
        and "set MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD" in line
    )
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", USER)
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", PASSWORD)
    assert len(_parents(MlflowClient(url), "env")) == 1
    assert files_containing(TOKEN, tmp_path) == []


@pytest.mark.parametrize(
    ("selection", "names"),
    [
        (["tracking=team"], "tracking.uri"),
        # a sweep over groups is not composed before Hydra runs: the files are read
        (["-m", "tracking=team,none"], "team.yaml"),
    ],
    ids=["run", "sweep-over-groups"],
)
def test_a_password_in_a_config_file_is_refused_before_hydra_saves_it(
    selection: list[str], names: str, tmp_path: Path
) -> None:
    conf = tmp_path / "conf"
    (conf / "tracking").mkdir(parents=True)
    (conf / "tracking" / "team.yaml").write_text(
        "defaults:\n  - server\n  - _self_\n"
        f"uri: http://{USER}:{quote(PASSWORD, safe='')}@127.0.0.1:9/\n"
    )
    out = tmp_path / "out"
    folders = [f"hydra.run.dir={out}", f"hydra.sweep.dir={out}"]
    proc = run_cli(["--config-dir", str(conf), *selection, *folders], cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("paraeval: error: "), proc.stderr[-3000:]
    assert f"{names} holds a password" in lines[0] and "MLFLOW_TRACKING_PASSWORD" in lines[0]
    assert not out.exists()
    assert TOKEN not in proc.stdout + proc.stderr


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        (f"data.path=https://u:{TOKEN}@example.invalid/x.tsv", "only tracking.uri takes"),
        (f"tracking.uri=mysql://u:{TOKEN}@127.0.0.1/db", "only for http(s):// and postgresql://"),
        (
            f"tracking.uri=http://u:{TOKEN}@127.0.0.1:9,http://u:x{TOKEN}@127.0.0.1:9",
            "two passwords",
        ),
    ],
    ids=["other-setting", "other-scheme", "two-passwords"],
)
def test_a_password_without_a_safe_route_is_refused(
    override: str, expected: str, tmp_path: Path
) -> None:
    proc = run_cli(["-m", override, f"hydra.sweep.dir={tmp_path / 'sweep'}"], cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("paraeval: error:") and expected in lines[0]
    assert TOKEN not in proc.stdout + proc.stderr
    assert not (tmp_path / "sweep").exists()


def test_redact_removes_every_password_and_keeps_the_rest() -> None:
    assert redact("http://u:p@h:5000/x") == "http://u@h:5000/x"
    assert redact("postgresql+psycopg://u:p%40q@h/db") == "postgresql+psycopg://u@h/db"
    # an unescaped "@" in the password, a password alone, two URIs in one message
    assert redact("see http://u:p@q@h/ and https://:s@h2") == "see http://u@h/ and https://h2"
    assert redact("sqlite:////tmp/a@b/mlflow.db") == "sqlite:////tmp/a@b/mlflow.db"
    assert redact("http://u@h and a:b@c") == "http://u@h and a:b@c"


def test_a_client_gets_the_uri_without_the_password_and_the_variables_it_reads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    uri = f"http://{USER}:{quote(PASSWORD, safe='')}@127.0.0.1:5000"
    assert client_credentials(uri) == (
        "http://127.0.0.1:5000",
        {"MLFLOW_TRACKING_USERNAME": USER, "MLFLOW_TRACKING_PASSWORD": PASSWORD},
    )
    # a user without a password: the password comes from the environment
    assert client_credentials("https://bob@h") == ("https://h", {"MLFLOW_TRACKING_USERNAME": "bob"})
    assert client_credentials("postgresql://bob:p%2Fq@h/db") == (
        "postgresql://bob@h/db",
        {"PGPASSWORD": "p/q"},
    )
    monkeypatch.setenv("PGPASSWORD", "before")
    with credentials_in_env("postgresql://bob:now@h/db") as target:
        assert target == "postgresql://bob@h/db"
        assert os.environ["PGPASSWORD"] == "now"
    assert os.environ["PGPASSWORD"] == "before"
