"""MLflow stores in a SQL database (``sqlite:///``, ``postgresql://``, ``mysql://``, ...), checked
when the config is: a missing driver, a server that refuses the connection or a store at another
schema revision is one line that says what to do, before any scoring, instead of a failure
after all the work.

``postgresql://`` (no driver named, the form users write) goes to SQLAlchemy as
``postgresql+psycopg://`` when psycopg (``paraeval[postgres]``) is installed: SQLAlchemy's own
default for that form is psycopg2."""

from __future__ import annotations

import hashlib
import re
import tempfile
from importlib.util import find_spec
from pathlib import Path

from paraeval.pipeline.secrets import credentials_in_env, redact
from paraeval.pipeline.tracking.store import StoreBroken, sqlite_path, store_state

SQL_DIALECTS = ("sqlite", "postgresql", "mysql", "mssql")
# the module each SQLAlchemy driver name imports; a dialect's entry under "" is its default
DRIVER_MODULES = {
    "postgresql": {"": "psycopg2", "psycopg": "psycopg", "psycopg2": "psycopg2"},
    "mysql": {"": "MySQLdb", "mysqldb": "MySQLdb", "pymysql": "pymysql"},
    "mssql": {"": "pyodbc", "pyodbc": "pyodbc", "pymssql": "pymssql"},
}
INSTALL_HINTS = {"postgresql": "pip install 'paraeval[postgres]'"}
CONNECT_TIMEOUT_S = 10
LOCK_TIMEOUT_S = 600.0


class StoreUnusable(StoreBroken):
    """A SQL store that cannot be used as it is; the message says what to do."""


def dialect(uri: str) -> str:
    """``postgresql`` for ``postgresql+psycopg://...``; "" for a URI that is not SQL."""
    name = uri.partition("://")[0].partition("+")[0].lower()
    return name if "://" in uri and name in SQL_DIALECTS else ""


def driver_uri(uri: str) -> str:
    """The URI as SQLAlchemy (and so MLflow) is given it: ``postgresql://`` names psycopg where
    psycopg is installed and psycopg2, SQLAlchemy's default, is not."""
    if uri.startswith("postgresql://") and find_spec("psycopg2") is None and find_spec("psycopg"):
        return "postgresql+psycopg://" + uri.removeprefix("postgresql://")
    return uri


def missing_driver(uri: str) -> str | None:
    """The module the driver of ``uri`` imports, where it is not installed."""
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
    """Raise :class:`StoreUnusable` (one line) for a SQL store paraeval cannot log to; a SQLite
    store not created yet is left to :func:`paraeval.pipeline.tracking.store.store_lock`.
    Creates the tables of an empty database (as MLflow's client would on first use)."""
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
        raise StoreUnusable(
            f"tracking.uri {redact(uri)} needs a {name} driver ({module} is not installed); "
            f"install it with: {hint}"
        )
    with credentials_in_env(driver_uri(uri)) as target:
        _check_connection(target, shown, name)
        from filelock import FileLock

        # MLflow creates a new store's tables on first use, which two processes must not do at
        # once: jobs of a parallel sweep on this machine take turns
        key = hashlib.blake2b(shown.encode(), digest_size=8).hexdigest()
        lock = Path(tempfile.gettempdir()) / f"paraeval-store-{key}.lock"
        with FileLock(str(lock), timeout=LOCK_TIMEOUT_S):
            _check_schema(target, shown)


def _check_connection(target: str, shown: str, name: str) -> None:
    """One connection attempt (MLflow's client retries for about 100 s, logging each failure)."""
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
        raise StoreUnusable(
            f"MLflow store {shown} does not accept the connection ({redact(reason)}); start the "
            f"database server, or fix tracking.uri (a password goes in {password})"
        ) from None
    finally:
        engine.dispose()


_REVISIONS = re.compile(r"found version (?P<found>\S+), but expected (?P<expected>[^)\s]+)")


def _check_schema(target: str, shown: str) -> None:
    """The store's schema revision is the one this MLflow writes (the store is opened by
    MLflow's client, which keeps it for the logging that follows)."""
    import mlflow
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    try:
        MlflowClient(target).search_experiments(max_results=1)
    except MlflowException as exc:
        revisions = _REVISIONS.search(str(exc))
        if revisions is None:
            reason = redact(" ".join(str(exc).split())[:300])
            raise StoreUnusable(f"MLflow store {shown} cannot be opened: {reason}") from None
        raise StoreUnusable(
            f"MLflow store {shown} is at schema revision {revisions['found']} but MLflow "
            f"{mlflow.__version__} expects {revisions['expected']}: back it up, then upgrade it "
            f"with: mlflow db upgrade {shown} (a store written by a newer MLflow needs that "
            "MLflow instead)"
        ) from None
