"""A real Ray cluster on this machine for the tests (``ray start --head``, one node with several
worker processes), kept on 127.0.0.1, and what tests need to check that it stays there.

Ray advertises the machine's network address on Linux unless ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER``
is 0: then the node's address is the loopback one (which allows one node per cluster). The
cluster's processes are found by a variable of their environment, which every process of the
cluster inherits from ``ray start`` (workers from the raylet), and ended by their ids: ``ray stop``
would end every Ray process of the machine, other people's clusters included."""

from __future__ import annotations

import contextlib
import importlib.util
import ipaddress
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

# names the processes of one test cluster (its value: the cluster's temp folder)
MARKER = "PARAEVAL_TEST_RAY_CLUSTER"
RAY_ENV = {
    # `ray start` turns token authentication on where ~/.ray/auth_token exists (`ray
    # get-auth-token --generate`), and a driver that joins by address does not send the token: the
    # test cluster keeps to loopback and runs without it, whatever the machine's home holds
    "RAY_AUTH_MODE": "disabled",
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_USAGE_STATS_ENABLED": "0",
}


def skip_without_ray() -> None:
    """Skips the test where the ray extra (Ray, hydra-ray-launcher) is not installed."""
    if importlib.util.find_spec("hydra_plugins.hydra_ray_launcher") is None:
        pytest.skip("the ray extra is not installed (pip install -e '.[ray]'; make test does)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def processes_with(name: str, value: str) -> list[int]:
    """The ids of the processes whose environment holds ``name=value``."""
    needle = f"{name}={value}".encode()
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            environ = (proc / "environ").read_bytes()
        except OSError:  # ended meanwhile, or another user's
            continue
        if needle in environ.split(b"\0"):
            pids.append(int(proc.name))
    return pids


def processes_holding(folder: Path) -> list[int]:
    """The ids of the processes with a file open under ``folder`` (removed files included)."""
    prefix = str(folder) + os.sep
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            fds = list((proc / "fd").iterdir())
        except OSError:  # ended meanwhile, or another user's
            continue
        for fd in fds:
            with contextlib.suppress(OSError):  # closed meanwhile
                if os.readlink(fd).startswith(prefix):
                    pids.append(int(proc.name))
                    break
    return pids


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    try:
        for fd in (Path("/proc") / str(pid) / "fd").iterdir():
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    except OSError:
        pass
    return inodes


def _address(hex_address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """An address of /proc/net/tcp{,6}: the IP in the kernel's byte order, then the port."""
    host = bytes.fromhex(hex_address.split(":")[0])
    if len(host) == 4:
        return ipaddress.IPv4Address(host[::-1])
    # IPv6: four 32-bit words, each in the kernel's (little-endian) order
    words = b"".join(host[i : i + 4][::-1] for i in range(0, 16, 4))
    return ipaddress.IPv6Address(words)


def inet_sockets(pids: list[int]) -> list[tuple[str, str, str]]:
    """(state, local address, remote address) of every TCP socket of ``pids`` (state ``0A`` is
    listening, ``01`` established), IPv6-mapped IPv4 addresses given as IPv4."""
    wanted = set().union(*(_socket_inodes(p) for p in pids)) if pids else set()
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, remote, state, inode = fields[1], fields[2], fields[3], fields[9]
            if inode not in wanted:
                continue
            ends = []
            for hex_address in (local, remote):
                ip = _address(hex_address)
                if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
                    ip = ip.ipv4_mapped
                ends.append(str(ip))
            found.append((state, ends[0], ends[1]))
    return found


def outside_loopback(sockets: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """The sockets that listen on or connect to an address outside 127.0.0.0/8 and ::1 (a
    listening socket's remote end is the unspecified address)."""

    def outside(state: str, local: str, remote: str) -> bool:
        if not ipaddress.ip_address(local).is_loopback:
            return True
        return state != "0A" and not ipaddress.ip_address(remote).is_loopback

    return [s for s in sockets if outside(*s)]


@dataclass
class RayCluster:
    address: str  # the GCS address: what `ray.init(address=...)` and the launcher join
    temp_dir: Path

    def pids(self) -> list[int]:
        """Every process of the cluster: by the variable of its environment, or by a file open
        under the cluster's temp folder (its log files): Ray's agents retitle themselves
        (``ray::DashboardAgent``), which overwrites the environment that /proc shows."""
        marked = set(processes_with(MARKER, str(self.temp_dir)))
        return sorted(marked | set(processes_holding(self.temp_dir)))

    def head(self) -> set[int]:
        """The cluster's GCS and raylet processes: what outlives a run that joins it (idle
        workers come and go)."""
        found = set()
        for pid in self.pids():
            with contextlib.suppress(OSError):
                program = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
                if program.endswith((b"/gcs_server", b"/raylet")):
                    found.add(pid)
        return found

    def stop(self, grace_s: float = 2.0) -> None:
        """SIGTERM to every process of the cluster, SIGKILL to those left after ``grace_s``."""
        for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 2.0)):
            pids = self.pids()
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):  # ended meanwhile
                    os.kill(pid, sig)
            deadline = time.monotonic() + wait
            while self.pids() and time.monotonic() < deadline:
                time.sleep(0.1)
            if not self.pids():
                break
        shutil.rmtree(self.temp_dir, ignore_errors=True)


def ray_env() -> dict[str, str]:
    """The environment of a process that starts or joins the test cluster."""
    return {**os.environ, **RAY_ENV}


def start_cluster(num_cpus: int = 2) -> RayCluster:
    """``ray start --head`` on 127.0.0.1 with ``num_cpus`` worker slots, no dashboard, no usage
    statistics, every port chosen free and its own temp folder (short: Ray's socket paths live
    under it)."""
    temp_dir = Path(tempfile.mkdtemp(prefix="pe-ray-"))
    port = free_port()
    ray = Path(sys.executable).parent / "ray"
    cmd = [
        str(ray),
        "start",
        "--head",
        "--node-ip-address=127.0.0.1",
        f"--port={port}",
        f"--num-cpus={num_cpus}",
        "--num-gpus=0",
        "--include-dashboard=false",
        "--disable-usage-stats",
        f"--temp-dir={temp_dir}",
        # fixed by default (10001, 52365): another cluster on this machine may hold them
        f"--ray-client-server-port={free_port()}",
        f"--dashboard-agent-listen-port={free_port()}",
    ]
    env = {**ray_env(), MARKER: str(temp_dir)}
    cluster = RayCluster(address=f"127.0.0.1:{port}", temp_dir=temp_dir)
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, check=False)
    if proc.returncode != 0:
        cluster.stop()
        raise RuntimeError(f"ray start failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return cluster
