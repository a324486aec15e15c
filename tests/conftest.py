"""Test-wide guards: nothing reaches the network, nothing reaches a model hub, no telemetry."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster import RayCluster, skip_without_ray, start_cluster

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["MLFLOW_DISABLE_TELEMETRY"] = "true"
os.environ["DO_NOT_TRACK"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("PARAEVAL_SHARED_DATA", REPO.parent / "shared" / "data"))

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _allowed(address: object) -> bool:
    if isinstance(address, str | bytes):  # AF_UNIX
        return True
    if isinstance(address, tuple) and address:
        host = str(address[0])
        return host in ("localhost", "::1") or host.startswith("127.")
    return False


def _guarded_connect(self: socket.socket, address: object) -> None:
    if not _allowed(address):
        raise RuntimeError(f"test tried to reach the network: {address!r}")
    return _real_connect(self, address)  # type: ignore[arg-type]


def _guarded_connect_ex(self: socket.socket, address: object) -> int:
    if not _allowed(address):
        raise RuntimeError(f"test tried to reach the network: {address!r}")
    return _real_connect_ex(self, address)  # type: ignore[arg-type]


socket.socket.connect = _guarded_connect  # type: ignore[method-assign]
socket.socket.connect_ex = _guarded_connect_ex  # type: ignore[method-assign]


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real-data folder {SHARED_DATA} is absent (set PARAEVAL_SHARED_DATA)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def shared_data_or_none() -> Path | None:
    return SHARED_DATA if SHARED_DATA.is_dir() else None


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[RayCluster]:
    """One real Ray cluster on 127.0.0.1 for the test session (tests/cluster.py), stopped at its
    end with every process of it."""
    skip_without_ray()
    cluster = start_cluster()
    try:
        yield cluster
    finally:
        cluster.stop()
    left = cluster.pids()
    assert not left, f"processes of the test Ray cluster left running: {left}"
