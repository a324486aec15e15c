"""Real servers for the tracking tests, started on 127.0.0.1 at a free port and stopped when the
``with`` block ends, however it ends: an ``mlflow server`` (optionally with MLflow's basic-auth
app) and a PostgreSQL server (Debian's ``postgresql``; as root, run as the ``postgres`` user)."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.pipeline.helpers import cli_env

STARTUP_TIMEOUT_S = 120.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError):
        return False


@contextmanager
def mlflow_server(root: Path, *args: str, **env: str) -> Iterator[str]:
    """``mlflow server`` with a SQLite backend and an artifact folder in ``root``; its URL.
    ``args``: more options (``--app-name basic-auth``), ``env``: its extra variables."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server_env = cli_env(**env)
    server_env.pop("MLFLOW_TRACKING_URI", None)
    command = [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1"]
    command += ["--port", str(port), "--workers", "1"]
    command += ["--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}"]
    command += ["--artifacts-destination", str(root / "artifacts"), *args]
    with (root / "server.log").open("w") as log_file:
        proc = subprocess.Popen(
            command,
            cwd=root,
            env=server_env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its worker processes end with it
        )
        try:
            deadline = time.monotonic() + STARTUP_TIMEOUT_S
            while not _healthy(url):
                if proc.poll() is not None:
                    log = (root / "server.log").read_text()[-2000:]
                    pytest.fail(f"mlflow server exited: {log}")
                if time.monotonic() > deadline:
                    pytest.fail(f"mlflow server not up after {STARTUP_TIMEOUT_S:.0f} s")
                time.sleep(0.5)
            yield url
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, 15)
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, 9)
                    proc.wait(timeout=20)


@dataclass(frozen=True)
class Postgres:
    port: int
    user: str
    password: str
    data_dir: Path  # the cluster's files (the store's tables among them)
    bin_dir: Path

    def uri(self, database: str, password: str | None = None) -> str:
        """``postgresql://user:PASSWORD@127.0.0.1:PORT/database``, as users write it."""
        secret = self.password if password is None else password
        return f"postgresql://{self.user}:{secret}@127.0.0.1:{self.port}/{database}"

    def sql(self, database: str, *statements: str) -> None:
        """Statements run by ``psql`` as the server's superuser (over its Unix socket)."""
        where = ("-h", str(self.data_dir), "-p", str(self.port), "-U", self.user, "-d", database)
        for statement in statements:
            psql = (self.bin_dir / "psql", "-q", *where, "-v", "ON_ERROR_STOP=1", "-c", statement)
            _as_postgres(*psql)


def postgres_bin() -> Path | None:
    """The folder of Debian's PostgreSQL programs (``make setup-dev`` installs them)."""
    found = shutil.which("initdb")
    if found:
        return Path(os.path.realpath(found)).parent
    dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda d: int(d.split("/")[-2]))
    return Path(dirs[-1]) if dirs else None


def _as_postgres(*command: str | Path, timeout: float = 180, check: bool = True) -> None:
    subprocess.run(
        ["runuser", "-u", "postgres", "--", *map(str, command)],
        check=check,
        capture_output=True,
        timeout=timeout,
    )


@contextmanager
def postgres_server(user: str, password: str) -> Iterator[Postgres]:
    """A PostgreSQL cluster in a fresh folder, its server listening on 127.0.0.1 only (no other
    address, the Unix socket inside the folder), password authentication over TCP; ``user`` is
    its superuser. ``initdb`` and the server run as the ``postgres`` user (tests run as root)."""
    bin_dir = postgres_bin()
    if bin_dir is None:
        pytest.fail("PostgreSQL is not installed: run make setup-dev (Debian's postgresql)")
    owner = pwd.getpwnam("postgres")
    # not under pytest's folder, which only root may enter
    root = Path(tempfile.mkdtemp(prefix="paraeval-pg-"))
    data, pwfile = root / "data", root / "pwfile"
    port = free_port()
    pwfile.write_text(password + "\n")
    os.chown(root, owner.pw_uid, owner.pw_gid)
    os.chown(pwfile, owner.pw_uid, owner.pw_gid)
    auth = ("--auth-host=scram-sha-256", "--auth-local=trust", f"--pwfile={pwfile}")
    try:
        _as_postgres(bin_dir / "initdb", "-D", data, "-U", user, *auth, "-E", "UTF8", "--locale=C")
        pwfile.unlink()
        options = f"-h 127.0.0.1 -p {port} -k {data}"
        log = root / "server.log"
        _as_postgres(bin_dir / "pg_ctl", "-D", data, "-o", options, "-l", log, "-w", "start")
        yield Postgres(port, user, password, data, bin_dir)
    finally:
        if (data / "postmaster.pid").exists():
            stop = (bin_dir / "pg_ctl", "-D", data, "-m", "immediate", "-w", "stop")
            _as_postgres(*stop, check=False)
        shutil.rmtree(root, ignore_errors=True)
