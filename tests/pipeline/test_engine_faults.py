"""``engine=ray`` with a worker killed in the middle of scoring: the run on the test cluster
(tests/cluster.py, joined by its address) goes on and writes the tables of an ``engine=local``
run. Ray runs the killed worker's shard again (Ray Data retries its tasks and restarts its pool's
actors); a shard's call is a pure function of its texts, so the rerun gives the same numbers. The
score cache is off: every shard is scored by the cluster, none comes from a file.

The worker is found by the title Ray gives its process while it runs a shard
(``ray::MapBatches(score_shards)`` for a task, ``ray::MapWorker(MapBatches(ShardScorer)).submit``
for an actor's call), among the processes of the test cluster only, and is stopped (SIGSTOP)
before its title is read again: a stopped process cannot finish its shard, so the title read then
is what it was doing when SIGKILL arrives."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.cluster import RAY_ENV, RayCluster
from tests.pipeline.helpers import cli_env, run_cli

# chrF loads nothing: Ray tasks; METEOR loads WordNet: a pool of actors (one, the default)
METRICS = ("chrf", "meteor")
TASK_TITLE = "ray::MapBatches(score_shards)"
ACTOR = "ray::MapWorker(MapBatches(ShardScorer))"
ACTOR_CALL = f"{ACTOR}.submit"
# 600 distinct segments in shards of 10: 60 shards per metric, several seconds of scoring each
ITEMS, SYSTEMS, ROWS_PER_SHARD = 200, 3, 10
FIND_TIMEOUT_S = 150.0
_WORDS = (
    "the a of to in and is was for on that with by as at from it be this are were which an or "
    "government people year city report price market house children country world time day man "
    "woman said told asked began bought quickly large small new old good great high long little"
)
WORDS = _WORDS.split()


def write_table(path: Path) -> Path:
    """A long table of ``ITEMS`` sources x ``SYSTEMS`` systems, every candidate its own
    (distinct segments are what the engine shards), one reference and a rating each."""
    rng = random.Random(3)
    rows = []
    for i in range(ITEMS):
        source = [rng.choice(WORDS) for _ in range(rng.randint(10, 30))]
        reference = [w if rng.random() < 0.7 else rng.choice(WORDS) for w in source]
        for s in range(SYSTEMS):
            candidate = [w if rng.random() < 0.6 else rng.choice(WORDS) for w in source]
            rows.append(
                {
                    "item_id": f"i{i}",
                    "system": f"sys{s}",
                    "source": " ".join(source),
                    "references": [" ".join(reference)],
                    "candidate": " ".join(candidate),
                    "human_meaning": rng.random() * 5,
                }
            )
    pd.DataFrame(rows).to_parquet(path, index=False)
    return path


def run_args(table: Path, out: Path, *settings: str) -> list[str]:
    return [
        "data=table",
        f"data.path={table}",
        f"metrics=[{','.join(METRICS)}]",
        "cache.enabled=false",
        "tracking=none",
        "report.parallel_figures=false",
        f"hydra.run.dir={out}",
        "report.print_tables=false",
        "correlation.ci=false",
        "compare.enabled=false",
        "alpha_curve.enabled=false",
        *settings,
    ]


def title(pid: int) -> str:
    """The process's title (Ray's workers write theirs over their command line); '' once gone."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
    except OSError:
        return ""


def started(pid: int) -> int | None:
    """When the process started (clock ticks after boot): tells it from a later one given the
    same id; None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2 :].split()[19])


def titled(prefix: str) -> list[int]:
    return [
        int(p.name)
        for p in Path("/proc").iterdir()
        if p.name.isdigit() and title(int(p.name)) == prefix
    ]


@dataclass
class Kill:
    """A worker of the cluster killed while it scored a shard, and what was true then."""

    pid: int
    started: int | None
    title: str  # read while the process was stopped, just before SIGKILL
    run_alive: bool  # the run had not exited
    outputs_absent: bool  # nor written its segment scores


@dataclass
class Killer:
    cluster: RayCluster
    out: Path  # the run's output folder
    stderr: Path  # where the run writes its stderr
    members: set[int] = field(default_factory=set)  # processes of the cluster, refreshed

    def of_cluster(self, pid: int) -> bool:
        """Whether ``pid`` is a process of the test cluster (not another session's Ray)."""
        if pid not in self.members:
            self.members = set(self.cluster.pids())
        return pid in self.members

    def kill_one(self, busy: str, run: subprocess.Popen[bytes]) -> Kill:
        """SIGKILL to a worker of the cluster whose title is ``busy`` (scoring a shard), within
        ``FIND_TIMEOUT_S``; fails (does not skip) if none shows before the run ends."""
        deadline = time.monotonic() + FIND_TIMEOUT_S
        while time.monotonic() < deadline and run.poll() is None:
            for pid in titled(busy):
                if not self.of_cluster(pid):
                    continue
                try:
                    os.kill(pid, signal.SIGSTOP)
                except ProcessLookupError:  # ended meanwhile
                    continue
                now = title(pid)
                if now != busy:  # finished its shard before it stopped: let it go on
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGCONT)
                    continue
                alive = run.poll() is None
                absent = not (self.out / "segment_scores.parquet").exists()
                when = started(pid)
                os.kill(pid, signal.SIGKILL)
                return Kill(pid, when, now, alive, absent)
            time.sleep(0.02)
        pytest.fail(
            f"no {busy!r} process of the test cluster within {FIND_TIMEOUT_S:g} s "
            f"(run exit status {run.poll()}):\n{self.stderr.read_text()[-3000:]}"
        )


def pids_titled(prefix: str, cluster: RayCluster) -> set[int]:
    return {p for p in cluster.pids() if title(p).startswith(prefix)}


@pytest.mark.slow
def test_a_worker_killed_mid_shard_leaves_the_tables_of_a_local_run(
    tmp_path: Path, ray_cluster: RayCluster
) -> None:
    """One task worker (chrF's shards) and one actor (METEOR's, the pool's only one) are killed
    mid-shard; the run exits 0, its segment and system scores equal a local run's bit for bit
    (both metrics are n-gram ones), and the cluster stays whole and usable."""
    table = write_table(tmp_path / "table.parquet")
    head = ray_cluster.head()
    out = tmp_path / "ray"
    args = run_args(
        table,
        out,
        "engine=ray",
        f"engine.address={ray_cluster.address}",
        f"engine.rows_per_shard={ROWS_PER_SHARD}",
    )
    err = (tmp_path / "stderr").open("wb")
    run = subprocess.Popen(
        [sys.executable, "-m", "paraeval", *args],
        cwd=tmp_path,
        env=cli_env(**RAY_ENV),
        stdout=subprocess.DEVNULL,
        stderr=err,
    )
    killer = Killer(ray_cluster, out, tmp_path / "stderr")
    try:
        # METRICS are scored in order: chrF's tasks, then METEOR's actor
        task = killer.kill_one(TASK_TITLE, run)
        actor = killer.kill_one(ACTOR_CALL, run)
        # the pool replaces its actor, which builds METEOR again and scores what is left
        deadline = time.monotonic() + FIND_TIMEOUT_S
        while not pids_titled(ACTOR, ray_cluster) - {actor.pid} and run.poll() is None:
            assert time.monotonic() < deadline, "the killed actor was not replaced"
            time.sleep(0.05)
        replaced = pids_titled(ACTOR, ray_cluster) - {actor.pid}
        run.wait(timeout=300)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        err.close()
    for kill, busy in ((task, TASK_TITLE), (actor, ACTOR_CALL)):
        assert kill.title == busy and kill.run_alive and kill.outputs_absent, kill
    assert run.returncode == 0, (tmp_path / "stderr").read_text()[-3000:]
    assert replaced

    local = run_cli(run_args(table, tmp_path / "local"), cwd=tmp_path)
    assert local.returncode == 0, local.stderr[-3000:]
    for name in ("segment_scores.parquet", "system_scores.csv"):
        read = pd.read_parquet if name.endswith(".parquet") else pd.read_csv
        a, b = read(out / name), read(tmp_path / "local" / name)
        pd.testing.assert_frame_equal(a, b, check_exact=True)
        for metric in METRICS:
            assert np.array_equal(a[metric], b[metric], equal_nan=True), (name, metric)
    assert len(pd.read_parquet(out / "segment_scores.parquet")) == ITEMS * SYSTEMS

    # nothing of the run stays: its workers end with it, the killed ones are gone (the raylet
    # reaps them), and the cluster's GCS and raylet are those of before
    deadline = time.monotonic() + 30
    while pids_titled(ACTOR, ray_cluster) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not pids_titled(ACTOR, ray_cluster)
    for kill in (task, actor):
        assert kill.started is not None and started(kill.pid) != kill.started, kill
    assert head and head == ray_cluster.head()
    assert_usable(ray_cluster)


def assert_usable(cluster: RayCluster) -> None:
    """A driver joins the cluster, a task runs there, and all its CPUs are free again (no actor
    of the run holds one)."""
    code = (
        "import ray, time\n"
        f"ray.init(address={cluster.address!r}, log_to_driver=False)\n"
        "assert ray.get(ray.remote(lambda: 41 + 1).remote()) == 42\n"
        "deadline = time.monotonic() + 30\n"
        "while ray.available_resources().get('CPU') != ray.cluster_resources().get('CPU'):\n"
        "    assert time.monotonic() < deadline, ray.available_resources()\n"
        "    time.sleep(0.2)\n"
        "print(ray.cluster_resources().get('CPU'))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env=cli_env(**RAY_ENV),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert float(proc.stdout.split()[-1]) == 2.0  # tests/cluster.start_cluster's num_cpus
