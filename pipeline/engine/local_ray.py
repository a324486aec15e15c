"""A Ray instance on this machine for one run (``engine=ray`` without an address), which ends with
the run however the run ends.

``ray.init()`` would start Ray's processes itself, and after a ``kill -9`` of the run its GCS and
raylet end but the raylet's agents stay. Here the instance is ``ray start --head --block``, a
child that the kernel sends SIGTERM when the run ends (``PR_SET_PDEATHSIG``), on which Ray's
command stops every process of its node; the run then joins it by its address. It listens on
127.0.0.1 only, without a dashboard or usage statistics; token authentication is left off unless
the environment asks for it (``RAY_AUTH_MODE``), since ``ray start`` would turn it on where a
``~/.ray/auth_token`` exists and the run, joining by address, would not send the token. Its node
is stopped without Ray's drain (which waited 30 s at every run's end), and its workers' torch
gets the machine's cores (Ray would give an actor one thread).
"""

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
    """The environment of a run that starts its own instance, set in this process before Ray is
    imported (Ray reads it then) and inherited by the instance: the driver and the instance must
    agree on token authentication (``ray start`` turns it on where ``~/.ray/auth_token`` exists,
    a driver joining by address does not, and then cannot connect); usage statistics off; on
    Linux, 127.0.0.1 rather than the machine's network address. A value the environment already
    has is kept."""
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")


class LocalRay:
    """``ray start --head --block`` on 127.0.0.1 as a child of this process; :attr:`address` is
    what ``ray.init`` joins. :meth:`stop` ends it (SIGTERM: Ray stops its node's processes)."""

    def __init__(self, actors_per_encoder: int = 1) -> None:
        port = _free_port()
        use_own_instance_settings()
        env = dict(os.environ)
        # on SIGTERM Ray first drains the node for up to this many seconds (30 by default), for
        # a serving cluster's traffic; Ray Data's idle actors never let the run's node drain, so
        # every run waited the whole 30 s at its end. Nothing else uses this instance
        env.setdefault("RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S", "0")
        # Ray sets a worker's OMP_NUM_THREADS to its CPUs, 1 for Ray Data's actors, unless the
        # environment sets it: an encoder actor then ran torch on one thread where engine=local
        # uses every core (BERTScore took twice as long). The machine's cores go to the
        # actors that encode at once
        threads = max(1, (os.cpu_count() or 1) // max(1, actors_per_encoder))
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
