"""Where runs go, checked before any scoring: an unusable store is one line, not a late failure."""

from __future__ import annotations

import hashlib
import logging
import os
import re
import sqlite3
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator, Mapping
from contextlib import closing, contextmanager, suppress
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from paraeval.pipeline.secrets import client_credentials, credentials_in_env, redact

log = logging.getLogger("paraeval.pipeline.tracking")

LOCK_TIMEOUT_S = 600.0
CONNECT_TIMEOUT_S = 10
SQL_DIALECTS = ("sqlite", "postgresql", "mysql", "mssql")
DRIVER_MODULES = {  # each SQLAlchemy driver's module; a dialect's "" entry is its default
    "postgresql": {"": "psycopg2", "psycopg": "psycopg", "psycopg2": "psycopg2"},
    "mysql": {"": "MySQLdb", "mysqldb": "MySQLdb", "pymysql": "pymysql"},
    "mssql": {"": "pyodbc", "pyodbc": "pyodbc", "pymssql": "pymssql"},
}
INSTALL_HINTS = {"postgresql": "pip install 'paraeval[postgres]'"}


class TrackingUnavailable(RuntimeError):
    """A server or store that cannot be used; the message is one line that says what to do."""


def sqlite_path(uri: str) -> Path:
    db = Path(uri.removeprefix("sqlite:///").split("?", 1)[0])
    return db if db.is_absolute() else db.resolve()


def resolve_tracking_uri(tracking: Mapping[str, Any]) -> tuple[str, str | None]:
    """(tracking URI, artifact location for a new experiment or None)."""
    uri = tracking.get("uri")
    if uri and str(uri).startswith("sqlite:///"):
        # beside the store (MLflow's default is ./mlruns wherever the run was started)
        return str(uri), (sqlite_path(str(uri)).parent / "artifacts").as_uri()
    if uri:
        return str(uri), None
    store = Path(str(tracking.get("store_dir") or "mlflow")).expanduser().resolve()
    store.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{store / 'mlflow.db'}", (store / "artifacts").as_uri()


UI_ADDRESS = "http://127.0.0.1:5000"  # where `mlflow ui` serves a store by default


def run_page(uri: str, exp_id: str, run_id: str) -> str:
    """The run in the UI: the server's own address, or where ``mlflow ui`` serves a store."""
    web = uri.startswith(("http://", "https://"))
    base = client_credentials(uri)[0].rstrip("/") if web else UI_ADDRESS
    return f"{base}/#/experiments/{exp_id}/runs/{run_id}"


def resolved_tracking(tracking: Mapping[str, Any]) -> dict[str, Any]:
    """As stored for relogging: ``store_dir`` absolute, no ``_target_``."""
    out = {k: v for k, v in tracking.items() if k != "_target_"}
    if not out.get("uri"):
        out["store_dir"] = str(Path(str(out.get("store_dir") or "mlflow")).expanduser().resolve())
    return out


HTTP_RETRY_DEFAULTS = {  # MLflow's client retries for minutes: seconds unless a user says
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "30",
}
HEALTH_ATTEMPTS = 2
HEALTH_PAUSE_S = 0.5


def check_reachable(uri: str, timeout: float = 5.0) -> None:
    """Fails at once on a silent or 5xx ``/health`` (MLflow retries for minutes); 4xx answers."""
    if not uri.startswith(("http://", "https://")):
        return
    for name, value in HTTP_RETRY_DEFAULTS.items():
        os.environ.setdefault(name, value)
    # urllib takes no user in a URL; /health answers without credentials
    url = client_credentials(uri)[0].rstrip("/") + "/health"
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
    raise TrackingUnavailable(f"MLflow tracking server {redact(uri)} {problem}")


def store_state(db: Path) -> str:
    """``missing``, ``ready``, ``empty-broken`` (safe to recreate) or ``broken`` (has runs)."""
    if not db.exists() or db.stat().st_size == 0:
        return "missing"
    try:
        with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as con:
            names = con.execute("SELECT name FROM sqlite_master WHERE type='table'")
            tables = {r[0] for r in names}
            versioned = "alembic_version" in tables and bool(
                con.execute("SELECT count(*) FROM alembic_version").fetchone()[0]
            )
            runs = con.execute("SELECT count(*) FROM runs").fetchone()[0] if "runs" in tables else 0
    except sqlite3.DatabaseError as exc:
        raise TrackingUnavailable(f"MLflow store {db} cannot be read ({exc})") from None
    # an interrupted batch migration leaves its copy table behind ("table ... already exists")
    if versioned and not any(t.startswith("_alembic_tmp_") for t in tables):
        return "ready"
    return "broken" if runs else "empty-broken"


def prepare_sqlite_store(db: Path) -> None:
    """Built under a temporary name, then renamed: no half-created store. Under the lock."""
    state = store_state(db)
    if state == "ready":
        return
    if state == "broken":
        raise TrackingUnavailable(
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
    # created by MLflow's client, in rollback-journal mode: the file is whole once it returns
    _open(f"sqlite:///{tmp}")
    for suffix in ("-wal", "-shm", "-journal"):
        with suppress(OSError):
            os.unlink(str(db) + suffix)
    os.replace(tmp, db)


def use_wal(db: Path) -> None:
    """Readers (the MLflow UI) then do not block the writer; a store held open keeps its mode."""
    try:
        with closing(sqlite3.connect(db, timeout=1.0)) as con:
            if str(con.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
                con.execute("PRAGMA journal_mode=WAL")
    except sqlite3.Error as exc:
        log.debug("MLflow store %s keeps its journal mode (%s)", db, exc)


@contextmanager
def store_lock(uri: str) -> Iterator[None]:
    """SQLite allows one writer, and MLflow's first-use schema creation is not concurrency-safe."""
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


def dialect(uri: str) -> str:
    """``postgresql`` for ``postgresql+psycopg://...``; "" for a URI that is not SQL."""
    name = uri.partition("://")[0].partition("+")[0].lower()
    return name if "://" in uri and name in SQL_DIALECTS else ""


def driver_uri(uri: str) -> str:
    """``postgresql://`` names psycopg where psycopg2, SQLAlchemy's default, is not installed."""
    if uri.startswith("postgresql://") and find_spec("psycopg2") is None and find_spec("psycopg"):
        return "postgresql+psycopg://" + uri.removeprefix("postgresql://")
    return uri


def missing_driver(uri: str) -> str | None:
    name = dialect(uri)
    drivers = DRIVER_MODULES.get(name)
    if not drivers:
        return None
    driver = driver_uri(uri).partition("://")[0].partition("+")[2].lower()
    module = drivers.get(driver, driver)
    if find_spec(module):
        return None
    # plain postgresql:// takes either driver: named, the one the postgres extra brings
    return "psycopg" if name == "postgresql" and not driver else module


def check_store(uri: str) -> None:
    """An empty database gets its tables; a SQLite store not yet created is :func:`store_lock`'s."""
    name = dialect(uri)
    if not name:
        return
    shown = redact(driver_uri(uri))
    if name == "sqlite":
        if store_state(sqlite_path(uri)) == "ready":
            _check_schema(uri, shown)
        return
    module = missing_driver(uri)
    if module is not None:
        hint = INSTALL_HINTS.get(name, f"pip install {module}")
        raise TrackingUnavailable(
            f"tracking.uri {redact(uri)} needs a {name} driver ({module} is not installed); "
            f"install it with: {hint}"
        )
    with credentials_in_env(driver_uri(uri)) as target:
        _check_connection(target, shown, name)
        from filelock import FileLock

        # two jobs of a parallel sweep must not create a new store's tables at once
        key = hashlib.blake2b(shown.encode(), digest_size=8).hexdigest()
        lock = Path(tempfile.gettempdir()) / f"paraeval-store-{key}.lock"
        with FileLock(str(lock), timeout=LOCK_TIMEOUT_S):
            _check_schema(target, shown)


def _check_connection(target: str, shown: str, name: str) -> None:
    """One attempt (MLflow's client retries for about 100 s, logging each failure)."""
    import sqlalchemy
    from sqlalchemy.pool import NullPool

    args = {"connect_timeout": CONNECT_TIMEOUT_S} if name in ("postgresql", "mysql") else {}
    engine = sqlalchemy.create_engine(target, poolclass=NullPool, connect_args=args)
    try:
        with engine.connect():
            pass
    except sqlalchemy.exc.SQLAlchemyError as exc:
        cause = getattr(exc, "orig", None) or exc
        reason = " ".join(str(cause).split()) or type(cause).__name__
        password = "PGPASSWORD" if name == "postgresql" else "the driver's configuration"
        raise TrackingUnavailable(
            f"MLflow store {shown} does not accept the connection ({redact(reason)}); start the "
            f"database server, or fix tracking.uri (a password goes in {password})"
        ) from None
    finally:
        engine.dispose()


def _open(target: str) -> None:
    """MLflow's client creates a new store's tables and keeps the store for the logging."""
    from mlflow.tracking import MlflowClient

    MlflowClient(target).search_experiments(max_results=1)


_REVISIONS = re.compile(r"found version (?P<found>\S+), but expected (?P<expected>[^)\s]+)")


def _check_schema(target: str, shown: str) -> None:
    import mlflow
    from mlflow.exceptions import MlflowException

    try:
        _open(target)
    except MlflowException as exc:
        revisions = _REVISIONS.search(str(exc))
        if revisions is None:
            reason = redact(" ".join(str(exc).split())[:300])
            raise TrackingUnavailable(f"MLflow store {shown} cannot be opened: {reason}") from None
        raise TrackingUnavailable(
            f"MLflow store {shown} is at schema revision {revisions['found']} but MLflow "
            f"{mlflow.__version__} expects {revisions['expected']}: back it up, then upgrade it "
            f"with: mlflow db upgrade {shown} (a store written by a newer MLflow needs that "
            "MLflow instead)"
        ) from None
