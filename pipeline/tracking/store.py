"""Where runs go: the tracking URI, whether a server answers, and the embedded SQLite store.

A SQLite store is created whole or not at all (built under a temporary name by MLflow's own
client, then renamed), one left half-created by a killed run is recreated when it holds no run and
named otherwise, and writers of one store take turns on a lock file beside it: SQLite allows one
writer, and MLflow's first-use schema creation is not safe to run concurrently. Only public APIs
of MLflow are used; the database file itself is read with Python's ``sqlite3``.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

log = logging.getLogger("paraeval.pipeline.tracking")

LOCK_TIMEOUT_S = 600.0


class TrackingUnavailable(RuntimeError):
    """The tracking server cannot be reached; the message is one line."""


class StoreBroken(TrackingUnavailable):
    """A SQLite store that a killed run left half-created; the message says what to do."""


def sqlite_path(uri: str) -> Path:
    """The database file of a ``sqlite:///`` URI, absolute."""
    db = Path(uri.removeprefix("sqlite:///").split("?", 1)[0])
    return db if db.is_absolute() else db.resolve()


def resolve_tracking_uri(tracking: Mapping[str, Any]) -> tuple[str, str | None]:
    """(tracking URI, artifact location for a new experiment or None)."""
    uri = tracking.get("uri")
    if uri and str(uri).startswith("sqlite:///"):
        # beside the store, as for store_dir; MLflow's default is ./mlruns in whatever folder
        # the run was started from
        db = sqlite_path(str(uri))
        return str(uri), (db.parent / "artifacts").as_uri()
    if uri:
        return str(uri), None
    store = Path(str(tracking.get("store_dir") or "mlflow")).expanduser().resolve()
    store.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{store / 'mlflow.db'}", (store / "artifacts").as_uri()


def resolved_tracking(tracking: Mapping[str, Any]) -> dict[str, Any]:
    """Tracking settings with a relative ``store_dir`` made absolute (as stored for relogging);
    the tracker's ``_target_`` is not a setting."""
    out = {k: v for k, v in tracking.items() if k != "_target_"}
    if not out.get("uri"):
        out["store_dir"] = str(Path(str(out.get("store_dir") or "mlflow")).expanduser().resolve())
    return out


# MLflow's client retries a failing request 7 times with exponential back-off (minutes against a
# server that answers 500); paraeval bounds that to seconds. Variables a user sets win.
HTTP_RETRY_DEFAULTS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "30",
}
HEALTH_ATTEMPTS = 2
HEALTH_PAUSE_S = 0.5


def bound_http_retries() -> None:
    for name, value in HTTP_RETRY_DEFAULTS.items():
        os.environ.setdefault(name, value)


def check_reachable(uri: str, timeout: float = 5.0) -> None:
    """A fast answer for a remote server that is down or failing (MLflow's client would retry
    for minutes): ``/health`` must answer, and not with a server error (5xx). A 4xx (a proxy
    without that route) counts as an answer. Raises :class:`TrackingUnavailable`."""
    if not uri.startswith(("http://", "https://")):
        return
    bound_http_retries()
    url = uri.rstrip("/") + "/health"
    problem = ""
    for attempt in range(HEALTH_ATTEMPTS):
        if attempt:
            time.sleep(HEALTH_PAUSE_S)
        try:
            with urllib.request.urlopen(url, timeout=timeout) as resp:
                resp.read(64)
            return
        except urllib.error.HTTPError as exc:
            if exc.code < 500:
                return  # something answers; MLflow reports any real problem itself
            problem = f"answers HTTP {exc.code} {exc.reason}".rstrip()
        except (urllib.error.URLError, OSError, TimeoutError) as exc:
            problem = f"is unreachable ({getattr(exc, 'reason', exc)})"
    raise TrackingUnavailable(f"MLflow tracking server {uri} {problem}")


# --------------------------------------------------------------------------- SQLite stores
def store_state(db: Path) -> str:
    """``missing``, ``ready``, ``empty-broken`` (half-created, no run in it: safe to recreate)
    or ``broken`` (half-created with runs: the user decides)."""
    if not db.exists() or db.stat().st_size == 0:
        return "missing"
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            tables = {
                r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")
            }
            versioned = "alembic_version" in tables and bool(
                con.execute("SELECT count(*) FROM alembic_version").fetchone()[0]
            )
            runs = con.execute("SELECT count(*) FROM runs").fetchone()[0] if "runs" in tables else 0
        finally:
            con.close()
    except sqlite3.DatabaseError as exc:
        raise StoreBroken(f"MLflow store {db} cannot be read ({exc})") from None
    # an interrupted batch migration leaves its copy table behind ("table ... already exists")
    interrupted = any(t.startswith("_alembic_tmp_") for t in tables)
    if versioned and not interrupted:
        return "ready"
    return "broken" if runs else "empty-broken"


def prepare_sqlite_store(db: Path) -> None:
    """Create a new store atomically (built under a temporary name, then renamed), so that a run
    killed while MLflow creates the schema leaves no half-created store; repair one left by an
    older version the same way when it holds no run. Called under the store's lock."""
    state = store_state(db)
    if state == "ready":
        return
    if state == "broken":
        raise StoreBroken(
            f"MLflow store {db} was left half-created (a schema migration was interrupted) and "
            f"holds runs; move it aside (mv {db} {db}.broken) so that a new one is created"
        )
    if state == "empty-broken":
        log.warning("MLflow store %s was left half-created and holds no run; recreating it", db)
    for stale in db.parent.glob(f".{db.name}.creating-*"):
        with suppress(OSError):
            stale.unlink()
    # a name never used before: MLflow keeps each store it opened for the rest of the process
    tmp = db.parent / f".{db.name}.creating-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    _create_schema(tmp)
    for suffix in ("-wal", "-shm", "-journal"):
        with suppress(OSError):
            os.unlink(str(db) + suffix)
    os.replace(tmp, db)


def _create_schema(db: Path) -> None:
    """A new store's tables, as MLflow creates them when its client first opens a new store
    (in SQLite's rollback-journal mode, so the file is whole once the call returns)."""
    from mlflow.tracking import MlflowClient

    MlflowClient(f"sqlite:///{db}").search_experiments(max_results=1)


def use_wal(db: Path) -> None:
    """SQLite's write-ahead log for the store: readers (the MLflow UI, a search) no longer
    block the writer, and a commit appends to the log instead of rewriting pages. The journal
    mode is kept in the file, so this is set once, before MLflow opens the store. A store that
    another program holds open keeps its mode."""
    try:
        con = sqlite3.connect(db, timeout=1.0)
        try:
            if str(con.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
                con.execute("PRAGMA journal_mode=WAL")
        finally:
            con.close()
    except sqlite3.Error as exc:
        log.debug("MLflow store %s keeps its journal mode (%s)", db, exc)


@contextmanager
def store_lock(uri: str) -> Iterator[None]:
    """Serialize writers of one SQLite store (no-op for servers and other databases), and make
    sure the store is whole before MLflow opens it."""
    if not uri.startswith("sqlite:///"):
        yield
        return
    from filelock import FileLock

    db = sqlite_path(uri)
    db.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(db) + ".lock", timeout=LOCK_TIMEOUT_S):
        prepare_sqlite_store(db)
        use_wal(db)
        yield


def experiment_id(client: Any, name: str, artifact_location: str | None) -> str:
    """The id of the experiment ``name``, created (with ``artifact_location``) if new."""
    from mlflow.exceptions import MlflowException

    exp = client.get_experiment_by_name(name)
    if exp is not None:
        return str(exp.experiment_id)
    try:
        return str(client.create_experiment(name, artifact_location=artifact_location))
    except MlflowException:
        # another job created it between our lookup and our create
        exp = client.get_experiment_by_name(name)
        if exp is None:
            raise
        return str(exp.experiment_id)
