"""Sweeps past this process: ``hydra/launcher=ray_cluster`` on a real Ray cluster started by the
test session (tests/cluster.py) and joined by its address, ``hydra/launcher=slurm_local``
(hydra-submitit-launcher's SLURM code path through submitit's local executor); each job is logged
to MLflow as with the basic launcher. An address nothing answers at is one line before any work.
The cluster keeps to 127.0.0.1."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.cluster import (
    RAY_ENV,
    RayCluster,
    free_port,
    inet_sockets,
    outside_loopback,
    processes_holding,
    ray_env,
    skip_without_ray,
)
from tests.pipeline.helpers import FAST, invocation_runs, run_cli

ALPHAS = ["0.2", "0.7"]


def sweep_args(tmp_path: Path, launcher: str, *settings: str) -> list[str]:
    """A two-job α sweep of the demo, BLEU and iBLEU only, into ``tmp_path``; the cache folder is
    a setting, not the environment (Ray's workers do not inherit the command's environment)."""
    return [
        "-m",
        f"hydra/launcher={launcher}",
        *[s for s in FAST if not s.startswith("metrics=")],
        "metrics=[bleu,ibleu]",
        f"metrics.ibleu.alpha={','.join(ALPHAS)}",
        f"tracking.store_dir={tmp_path / 'store'}",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        f"cache.dir={tmp_path / 'cache'}",
        *settings,
    ]


def assert_each_job_logged(store: Path, launcher: str) -> None:
    """Two finished parent runs with the swept α as their param, their launcher's tag, the
    correlations as metrics, and their child runs per system with corpus BLEU."""
    parents = invocation_runs(store)
    assert sorted(r.data.params["metrics.ibleu.alpha"] for r in parents) == ALPHAS
    assert {r.data.tags["paraeval.hydra.launcher"] for r in parents} == {launcher}
    assert all(r.info.status == "FINISHED" for r in parents)
    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    for parent in parents:
        assert any(k.startswith("corr.") and k.endswith(".ibleu") for k in parent.data.metrics)
        children = client.search_runs(
            [parent.info.experiment_id],
            filter_string=f"tags.mlflow.parentRunId = '{parent.info.run_id}'",
        )
        assert len(children) == 4  # the demo's systems
        assert all(0 <= c.data.metrics["bleu"] <= 100 for c in children)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("address", "said"),
    [
        ("127.0.0.1:{port}", "cannot reach the Ray cluster at"),  # a port nothing listens on
        ("head-node", "is not a Ray cluster address"),
    ],
    ids=["nothing-listens", "no-port"],
)
def test_an_unreachable_cluster_is_one_line_before_any_work(
    tmp_path: Path, address: str, said: str
) -> None:
    given = address.format(port=free_port())
    proc = run_cli(
        sweep_args(tmp_path, "ray_cluster", f"hydra.launcher.ray.init.address={given}"),
        cwd=tmp_path,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("paraeval: error: "), proc.stderr
    assert said in lines[0] and given in lines[0]
    assert "hydra.launcher.ray.init.address" in lines[0]
    assert not (tmp_path / "sweep").exists() and not (tmp_path / "store").exists()


# a driver that joins the cluster, runs tasks on 4 workers, prints their ids and stays connected
# until told to go (its environment makes Ray keep to loopback before Ray is imported)
DRIVER = """
import os, sys, time, ray
ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
@ray.remote(num_cpus=1)
def pid():
    time.sleep(0.5)
    return os.getpid()
print(*sorted(set(ray.get([pid.remote() for _ in range(4)]))), flush=True)
sys.stdin.readline()
ray.shutdown()
"""


@pytest.mark.slow
def test_the_cluster_keeps_to_loopback(ray_cluster: RayCluster) -> None:
    """Every process of the cluster, the workers that ran tasks included, and a driver joined
    to it: no socket that listens on or connects to an address outside 127.0.0.0/8."""
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER, ray_cluster.address],
        env=ray_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert driver.stdout is not None and driver.stdin is not None
        workers = {int(p) for p in driver.stdout.readline().split()}
        pids = ray_cluster.pids()
        assert workers and workers <= set(pids)  # the check sees the workers
        assert len(pids) >= 6  # GCS, raylet, agents, workers
        sockets = inet_sockets([*pids, driver.pid])
        assert any(state == "0A" for state, _, _ in sockets)  # and their listening sockets
        assert outside_loopback(sockets) == []
        driver.stdin.write("\n")
        driver.stdin.flush()
        assert driver.wait(timeout=60) == 0
    finally:
        driver.kill()
        driver.wait()


@pytest.mark.slow
def test_ray_sweep_joins_the_cluster_and_logs_each_job(
    tmp_path: Path, ray_cluster: RayCluster
) -> None:
    head = ray_cluster.head()
    proc = run_cli(
        sweep_args(
            tmp_path,
            "ray_cluster",
            f"hydra.launcher.ray.init.address={ray_cluster.address}",
            "hydra.launcher.ray.remote.num_cpus=1",  # both jobs at once on the 2-CPU cluster
        ),
        cwd=tmp_path,
        **RAY_ENV,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    # joined, not started: Ray says so, and the jobs ran in the cluster's worker processes
    assert f"Connecting to existing Ray cluster at address: {ray_cluster.address}" in proc.stderr
    assert "(_run_job pid=" in proc.stdout + proc.stderr
    assert_each_job_logged(tmp_path / "store", "RayLauncher")
    for job in (0, 1):
        assert (tmp_path / "sweep" / str(job) / "system_scores.csv").is_file()
    # the cluster is the user's: it outlives the sweep
    assert head and head <= ray_cluster.head()


@pytest.mark.slow
def test_a_ray_instance_the_sweep_starts_ends_with_it(tmp_path: Path) -> None:
    """With no address the launcher starts Ray on this machine for the sweep: its processes
    (found by the files they hold in the instance's temp folder, under TMPDIR) end with the
    command."""
    skip_without_ray()
    tmp = Path(tempfile.mkdtemp(prefix="pe-tmp-"))  # short: Ray's socket paths live under it
    try:
        args = sweep_args(tmp_path, "ray_cluster", "hydra.launcher.ray.remote.num_cpus=1")
        proc = run_cli(args, cwd=tmp_path, TMPDIR=str(tmp), **RAY_ENV)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "Started a local Ray instance" in proc.stderr
        assert (tmp / "ray").is_dir()
        assert_each_job_logged(tmp_path / "store", "RayLauncher")
        deadline = time.monotonic() + 10  # the processes Ray ends are reaped by then
        while processes_holding(tmp) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert processes_holding(tmp) == []
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.mark.slow
def test_a_failed_ray_job_sets_the_exit_status(tmp_path: Path, ray_cluster: RayCluster) -> None:
    """Ray's workers do not inherit the command's environment: the file each job records its
    status in reaches them through the launcher's runtime_env, so a job's mistake is exit 2."""
    args = sweep_args(
        tmp_path, "ray_cluster", f"hydra.launcher.ray.init.address={ray_cluster.address}"
    )
    args[args.index(f"metrics.ibleu.alpha={','.join(ALPHAS)}")] = "metrics.ibleu.alpha=1.5"
    proc = run_cli([*args, "tracking=none"], cwd=tmp_path, **RAY_ENV)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert (
        "paraeval: error: sweep job 0" in proc.stderr and "alpha must be in [0, 1]" in proc.stderr
    )


@pytest.mark.slow
def test_slurm_sweep_through_submitits_local_executor_logs_each_job(tmp_path: Path) -> None:
    proc = run_cli(sweep_args(tmp_path, "slurm_local"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert_each_job_logged(tmp_path / "store", "LocalLauncher")
    # each job ran in a process of its own, through submitit's job folders (pickled job, result)
    results = sorted((tmp_path / "sweep" / ".submitit").glob("*/*_result.pkl"))
    assert len(results) == 2
    # submitit's local job ids are the ids of the processes that ran the jobs
    assert len({p.parent.name for p in results}) == 2
    assert str(os.getpid()) not in {p.parent.name for p in results}
