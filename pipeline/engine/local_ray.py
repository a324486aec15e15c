"""A Ray instance on this machine for one run (``engine=ray`` without an address): ``ray start
--head --block`` as a child that the kernel sends SIGTERM when the run ends, ``kill -9`` included
(``ray.init()``'s own processes would leave the raylet's agents behind); the run joins it."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from paraeval.pipeline.errors import ConfigError
from paraeval.pipeline.lifetime import die_with_parent

START_TIMEOUT_S = 120.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ray_command() -> str:
    """The ``ray`` command of this Python installation (the one whose Ray the run imports)."""
    here = Path(sys.executable).parent / "ray"
    found = str(here) if here.is_file() else shutil.which("ray")
    if found is None:
        raise ConfigError("engine=ray needs Ray's `ray` command: pip install 'paraeval[ray]'")
    return found


def use_own_instance_settings() -> None:
    """Set before Ray is imported (it reads them then) and inherited by the instance; a value the
    environment has is kept. Driver and instance must agree on token authentication: ``ray start``
    turns it on where ``~/.ray/auth_token`` exists, a driver joining by address does not. Also:
    usage statistics off and, on Linux, 127.0.0.1 rather than the machine's network address."""
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")


class LocalRay:
    """The instance, on 127.0.0.1 without a dashboard; :meth:`stop` ends it (on SIGTERM Ray stops
    its node's processes)."""

    def __init__(self, actors_per_encoder: int = 1) -> None:
        port = _free_port()
        use_own_instance_settings()
        env = dict(os.environ)
        # on SIGTERM Ray drains the node for up to 30 s, which Ray Data's idle actors never let
        # end: nothing but this run uses the instance
        env.setdefault("RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S", "0")
        # Ray gives a worker OMP_NUM_THREADS = its CPUs unless set, 1 for Ray Data's actors: torch
        # would encode on one thread; the machine's cores go to the actors that encode at once
        threads = max(1, (os.cpu_count() or 1) // actors_per_encoder)
        env.setdefault("OMP_NUM_THREADS", str(threads))
        cmd = [
            _ray_command(),
            "start",
            "--head",
            "--block",
            "--node-ip-address=127.0.0.1",
            f"--port={port}",
            "--include-dashboard=false",
            "--disable-usage-stats",
        ]
        parent = os.getpid()
        self.address = f"127.0.0.1:{port}"
        # a file, not a pipe: Ray's command writes for as long as it runs, and nobody reads
        self._err = tempfile.TemporaryFile()  # noqa: SIM115 - closed by stop()
        self.process = subprocess.Popen(
            cmd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._err,
            preexec_fn=lambda: die_with_parent(parent, signal.SIGTERM),
        )
        self._wait_listening(port)

    def _wait_listening(self, port: int) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self._err.seek(0)
                lines = self._err.read().decode(errors="replace").strip().splitlines()
                last = lines[-1] if lines else f"exit status {self.process.returncode}"
                self._err.close()
                raise ConfigError(f"engine=ray: cannot start Ray on this machine ({last})")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1.0):
                    return
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise ConfigError(f"engine=ray: Ray did not start within {START_TIMEOUT_S:g} s")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._err.close()
