"""Tracking backends that fail: a server answering 500, a half-created SQLite store, artifacts
of a ``sqlite:///`` URI. Real servers (a tiny local ``http.server``) and real SQLite stores."""

from __future__ import annotations

import http.server
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from paraeval.pipeline.tracking.store import TrackingUnavailable, check_reachable
from paraeval.pipeline.tracking.trackers import MLflowTracker
from tests.pipeline.test_tracking import _output_dir, _payload, _record


class _Handler(http.server.BaseHTTPRequestHandler):
    healthy = False  # True: /health answers 200, everything else 500

    def _answer(self) -> None:
        if self.healthy and self.path.startswith("/health"):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"OK")
            return
        body = b"Internal Server Error"
        self.send_response(500)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, format: str, *args: object) -> None:
        pass


def _serve(healthy: bool) -> Iterator[str]:
    handler = type("H", (_Handler,), {"healthy": healthy})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def failing_server() -> Iterator[str]:
    yield from _serve(healthy=False)


@pytest.fixture
def api_failing_server() -> Iterator[str]:
    yield from _serve(healthy=True)


def test_health_check_reads_the_status(failing_server: str) -> None:
    start = time.perf_counter()
    with pytest.raises(TrackingUnavailable, match="answers HTTP 500") as info:
        check_reachable(failing_server)
    assert time.perf_counter() - start < 5
    assert str(info.value) == (
        f"MLflow tracking server {failing_server} answers HTTP 500 Internal Server Error"
    )


def test_server_answering_500_is_handled_like_an_unreachable_one(
    failing_server: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    out = _output_dir(tmp_path / "out")
    tracker = MLflowTracker(uri=failing_server)
    start = time.perf_counter()
    with caplog.at_level(logging.WARNING):
        assert tracker.log(_payload(out, _record(tracker))) is None
    assert time.perf_counter() - start < 5
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert warnings[0] == (
        f"MLflow tracking server {failing_server} answers HTTP 500 Internal Server Error; "
        f"outputs kept in {out}; log them later with: paraeval-log {out}"
    )
    assert (out / "run_info.json").is_file()


@pytest.mark.slow
def test_server_whose_api_fails_gives_up_within_seconds(
    api_failing_server: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """/health is fine but every API call answers 500: MLflow's client retries are bounded."""
    out = _output_dir(tmp_path / "out")
    tracker = MLflowTracker(uri=api_failing_server)
    start = time.perf_counter()
    with caplog.at_level(logging.WARNING):
        assert tracker.log(_payload(out, _record(tracker))) is None
    elapsed = time.perf_counter() - start
    assert elapsed < 30, elapsed  # unbounded: 7 retries with exponential back-off, minutes
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith("MLflow logging failed (")
    assert f"outputs kept in {out}; log them later with: paraeval-log {out}" in warnings[0]


# --------------------------------------------------------------------------- SQLite stores
@pytest.fixture(scope="module")
def template_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One store created the way every run creates it; tests copy it (creating one is slow)."""
    from paraeval.pipeline.tracking.store import store_lock

    db = tmp_path_factory.mktemp("template") / "mlflow.db"
    with store_lock(f"sqlite:///{db}"):
        pass
    return db


def _copy_store(template: Path, db: Path) -> Path:
    import sqlite3

    db.parent.mkdir(parents=True, exist_ok=True)
    src, dst = sqlite3.connect(template), sqlite3.connect(db)
    with dst:
        src.backup(dst)
    src.close()
    dst.close()
    return db


def _sql(db: Path, *statements: str) -> None:
    import sqlite3

    con = sqlite3.connect(db)
    with con:
        for statement in statements:
            con.execute(statement)
    con.close()


def test_new_store_is_whole_and_leaves_no_temporary(template_store: Path) -> None:
    from paraeval.pipeline.tracking.store import store_state

    assert store_state(template_store) == "ready"
    assert not list(template_store.parent.glob(".mlflow.db.creating-*"))
    import sqlite3

    # write-ahead logging, kept in the file: every later connection (MLflow's too) uses it
    con = sqlite3.connect(template_store)
    try:
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        con.close()


@pytest.mark.slow
def test_store_killed_while_being_created_is_not_left_half_created(
    tmp_path: Path, template_store: Path
) -> None:
    """SIGKILL in the middle of the schema creation: the store is absent (or, on a machine fast
    enough to finish first, whole); the next run creates it and logs."""
    import signal
    import subprocess
    import sys

    from paraeval.pipeline.tracking.store import store_state

    db = tmp_path / "store" / "mlflow.db"
    code = (
        "import sys, pathlib\n"
        "from paraeval.pipeline.tracking.store import prepare_sqlite_store\n"
        "print('creating', flush=True)\n"
        "prepare_sqlite_store(pathlib.Path(sys.argv[1]))\n"
    )
    db.parent.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(db)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline() == "creating\n"
    time.sleep(1.0)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert store_state(db) in ("missing", "ready")
    out = _output_dir(tmp_path / "out")
    tracker = MLflowTracker(store_dir=str(db.parent))
    logged = tracker.log(_payload(out, _record(tracker)))
    assert logged is not None and store_state(db) == "ready"
    assert not list(db.parent.glob(".mlflow.db.creating-*"))


def test_half_created_store_without_runs_is_recreated(
    tmp_path: Path, template_store: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = _copy_store(template_store, tmp_path / "store" / "mlflow.db")
    # what an interrupted migration leaves: no schema version, a batch-migration copy table
    _sql(db, "DROP TABLE alembic_version", "CREATE TABLE _alembic_tmp_runs (x INTEGER)")
    out = _output_dir(tmp_path / "out")
    tracker = MLflowTracker(store_dir=str(db.parent))
    with caplog.at_level(logging.WARNING):
        logged = tracker.log(_payload(out, _record(tracker)))
    assert logged is not None
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [f"MLflow store {db} was left half-created and holds no run; recreating it"]
    from mlflow.tracking import MlflowClient

    assert MlflowClient(f"sqlite:///{db}").get_run(logged.run_id).info.status == "FINISHED"


def test_half_created_store_with_runs_says_what_to_do(
    tmp_path: Path, template_store: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = _copy_store(template_store, tmp_path / "store" / "mlflow.db")
    first = _output_dir(tmp_path / "first")
    tracker = MLflowTracker(store_dir=str(db.parent))
    assert tracker.log(_payload(first, _record(tracker))) is not None
    _sql(db, "DELETE FROM alembic_version")
    out = _output_dir(tmp_path / "out")
    payload = _payload(out, _record(tracker))
    with caplog.at_level(logging.WARNING):
        assert tracker.log(payload) is None
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        f"MLflow store {db} was left half-created (a schema migration was interrupted) and "
        f"holds runs; move it aside (mv {db} {db}.broken) so that a new one is created; "
        f"outputs kept in {out}; log them later with: paraeval-log {out}"
    ]
    assert payload.context.not_logged == [out]  # the CLI exits 3 for it


def test_sqlite_uri_keeps_artifacts_beside_the_store(
    tmp_path: Path, template_store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = _copy_store(template_store, tmp_path / "elsewhere" / "runs.db")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    out = _output_dir(tmp_path / "out")
    tracker = MLflowTracker(uri=f"sqlite:///{db}")
    logged = tracker.log(_payload(out, _record(tracker)))
    assert logged is not None
    assert list(cwd.iterdir()) == []  # no ./mlruns in the folder the user stands in
    uploaded = list((db.parent / "artifacts").rglob("system_scores.csv"))
    assert len(uploaded) == 1


@pytest.mark.slow
def test_a_multirun_job_whose_logging_fails_says_so_and_the_exit_status_too(
    tmp_path: Path, failing_server: str
) -> None:
    from paraeval.pipeline.cli.main import EXIT_NOT_LOGGED
    from tests.pipeline.helpers import run_cli
    from tests.pipeline.test_tracking import SMALL

    sweep = tmp_path / "sweep"
    proc = run_cli(
        [
            "-m",
            *SMALL,
            "metrics.ibleu.alpha=0.2,0.8",
            "tracking=server",
            f"tracking.uri={failing_server}",
            f"hydra.sweep.dir={sweep}",
        ],
        cwd=tmp_path,
        PARAEVAL_CACHE_DIR=str(tmp_path / "cache"),
    )
    assert proc.returncode == EXIT_NOT_LOGGED, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    for job in range(2):  # the second job ran all the same
        out = (sweep / str(job)).resolve()
        hint = f"log them later with: paraeval-log {out}"
        log_text = (sweep / str(job) / "paraeval.log").read_text()
        assert log_text.count(hint) == 1 and "HTTP 500" in log_text
        assert hint in " ".join(proc.stderr.split())  # the terminal wraps its lines
        assert (out / "run_info.json").is_file() and (out / "report.html").is_file()
