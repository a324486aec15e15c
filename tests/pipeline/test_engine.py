"""``engine=ray``: the score stage's calls on a real Ray cluster (tests/cluster.py, joined by its
address) give the numbers of ``engine=local``: every n-gram column identical, every encoder
column within 1e-6, whatever the shard size; a Ray instance the run starts ends with it; the
engine's settings are checked before any work."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from omegaconf import OmegaConf

from paraeval.pipeline.config.compose import compose_config
from paraeval.pipeline.config.nodes import EngineSettings
from paraeval.pipeline.data.load import load_demo
from paraeval.pipeline.engine.ray_engine import open_engine
from paraeval.pipeline.stages.score import Scores, build_metrics, score
from tests.cluster import RAY_ENV, RayCluster, free_port, processes_holding, skip_without_ray
from tests.pipeline.helpers import cli_env, engine_settings, run_cli

ROUGE = ["rouge1", "rougeL", "rougeLsum", "rougeW", "rougeSU"]
NGRAM = ["bleu", "ibleu", "self_bleu", "chrf", "ter", "nist", "meteor", "cider", *ROUGE]
ENCODER = ["cosine", "bertscore", "wmd"]


def metric_nodes(ids: list[str], *overrides: str) -> dict[str, Any]:
    cfg = compose_config([f"metrics=[{','.join(ids)}]", *overrides])
    nodes = OmegaConf.to_container(cfg.metrics, resolve=True)
    assert isinstance(nodes, dict)
    return nodes


def scored(ids: list[str], engine: EngineSettings, *overrides: str) -> Scores:
    nodes = metric_nodes(ids, *overrides)
    with open_engine(engine, nodes) as on:
        return score(load_demo(), build_metrics(nodes), progress=False, engine=on)


def float_columns(scores: Scores) -> list[str]:
    return [c for c in scores.segments.columns if c in scores.columns]


def assert_same(ray: Scores, local: Scores, tolerance: float) -> None:
    """Same columns; segment and corpus values equal (0: bit for bit) or within ``tolerance``."""
    assert list(ray.segments.columns) == list(local.segments.columns)
    assert list(ray.corpus.columns) == list(local.corpus.columns)
    for column in float_columns(local):
        for table in ("segments", "corpus"):
            a = getattr(ray, table)[column].to_numpy(float)
            b = getattr(local, table)[column].to_numpy(float)
            if tolerance == 0:
                assert np.array_equal(a, b, equal_nan=True), (table, column)
            else:
                assert np.allclose(a, b, rtol=0, atol=tolerance, equal_nan=True), (table, column)
    for key, stats in local.stats.items():
        # an encoder metric's statistics are its segment scores (BERTScore's P, R, F1)
        assert np.allclose(ray.stats[key], stats, rtol=0, atol=tolerance, equal_nan=True), key


@pytest.fixture(scope="module")
def ray_env_here(ray_cluster: RayCluster) -> Iterator[RayCluster]:
    """This process joins the test cluster as a driver: Ray keeps to loopback only with the
    cluster's environment (tests/cluster.py)."""
    saved = {k: os.environ.get(k) for k in RAY_ENV}
    os.environ.update(RAY_ENV)
    try:
        yield ray_cluster
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(scope="module")
def local_ngram() -> Scores:
    return scored(NGRAM, engine_settings("local"))


@pytest.mark.slow
@pytest.mark.parametrize("rows_per_shard", [7, 50, 10_000])
def test_ngram_columns_on_the_cluster_are_identical_for_any_shard_size(
    ray_env_here: RayCluster, local_ngram: Scores, rows_per_shard: int
) -> None:
    engine = engine_settings("ray", address=ray_env_here.address, rows_per_shard=rows_per_shard)
    assert_same(scored(NGRAM, engine), local_ngram, tolerance=0)


@pytest.mark.slow
def test_encoder_columns_on_the_cluster_are_within_1e_6(ray_env_here: RayCluster) -> None:
    """Two actors per encoder metric, each building its metric (its model) once, on shards of 7
    segments: batches differ from one process's, the numbers by float32's last bits only.
    BERTScore with idf, in batches of 4 pairs: its shards end where batches end, and its idf
    comes from the counts of every shard of the system."""
    engine = engine_settings(
        "ray", address=ray_env_here.address, actors_per_encoder=2, rows_per_shard=7
    )
    bertscore = ("metrics.bertscore.idf=true", "metrics.bertscore.bert_score_batch_size=4")
    local = scored(ENCODER, engine_settings("local"), *bertscore)
    assert_same(scored(ENCODER, engine, *bertscore), local, tolerance=1e-6)
    # idf changed the numbers: it was in force
    plain = scored(["bertscore"], engine_settings("local"), bertscore[1])
    assert not np.allclose(plain.segments["bertscore_f1"], local.segments["bertscore_f1"])


def run_args(out: Path, *settings: str) -> list[str]:
    return [
        "metrics=[bleu,ibleu,chrf,cider,cosine]",
        "cache.enabled=false",
        "tracking=none",
        "report.print_tables=false",
        "report.parallel_figures=false",
        f"hydra.run.dir={out}",
        *settings,
    ]


@pytest.mark.slow
def test_the_demo_on_the_cluster_writes_the_tables_of_a_local_run(
    tmp_path: Path, ray_cluster: RayCluster
) -> None:
    head = ray_cluster.head()
    ray = run_cli(
        run_args(tmp_path / "ray", "engine=ray", f"engine.address={ray_cluster.address}"),
        cwd=tmp_path,
        **RAY_ENV,
    )
    assert ray.returncode == 0, ray.stderr[-3000:]
    local = run_cli(run_args(tmp_path / "local"), cwd=tmp_path)
    assert local.returncode == 0, local.stderr[-3000:]
    log = (tmp_path / "ray" / "paraeval.log").read_text()
    assert f"engine=ray: scoring on {ray_cluster.address}" in log
    # Ray's Python loggers write to the run's log, not the terminal; the one line Ray's C++ core
    # worker logs for an actor pool (cosine's) is the exception (docs/scaling.md)
    foreign = [line for line in ray.stderr.splitlines() if not line.startswith("paraeval:")]
    assert [line for line in foreign if "core_worker.cc" not in line] == [], ray.stderr
    assert "[ray.data" in log
    for name in ("segment_scores.parquet", "system_scores.csv", "correlations.csv"):
        read = pd.read_parquet if name.endswith(".parquet") else pd.read_csv
        a, b = read(tmp_path / "ray" / name), read(tmp_path / "local" / name)
        assert list(a.columns) == list(b.columns) and len(a) == len(b)
        pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=0, atol=1e-6)
        if name != "correlations.csv":
            for column in ("bleu", "ibleu", "chrf", "cider"):
                assert np.array_equal(a[column], b[column], equal_nan=True), (name, column)
    # the cluster is the user's: it outlives the run (its GCS and raylet; idle workers come and go)
    assert head and head <= ray_cluster.head()


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    tmp = Path(tempfile.mkdtemp(prefix="pe-tmp-"))  # short: Ray's socket paths live under it
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def describe(pids: list[int]) -> list[str]:
    """Each process's parent, state and command line, for a failure message."""
    out = []
    for pid in pids:
        with contextlib.suppress(OSError):
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            out.append(f"{pid} ppid={stat[1]} state={stat[0]} {cmd[:200]}")
    return out


def wait_gone(tmp: Path, seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while processes_holding(tmp) and time.monotonic() < deadline:
        time.sleep(0.2)
    return processes_holding(tmp)


@pytest.mark.slow
def test_a_ray_instance_the_run_starts_ends_with_it(tmp_path: Path, short_tmp: Path) -> None:
    skip_without_ray()
    args = run_args(tmp_path / "out", "engine=ray", "metrics=[bleu,chrf]")
    proc = run_cli(args, cwd=tmp_path, TMPDIR=str(short_tmp), **RAY_ENV)
    assert proc.returncode == 0, proc.stderr[-3000:]
    log = (tmp_path / "out" / "paraeval.log").read_text()
    assert "engine=ray: scoring on a Ray instance started for this run" in log
    assert (short_tmp / "ray").is_dir()  # Ray ran under this TMPDIR
    assert wait_gone(short_tmp, 10) == []


@pytest.mark.slow
def test_a_ray_instance_the_run_starts_ends_when_the_run_is_killed(
    tmp_path: Path, short_tmp: Path
) -> None:
    """SIGKILL leaves the run no chance to stop Ray: the kernel's signal to the `ray start`
    child does (its agents included, which ray.init's own start left behind). Whatever stays is
    ended here, by its id, after the assertion."""
    skip_without_ray()
    args = run_args(tmp_path / "out", "engine=ray", "metrics=[bleu,cosine]")
    run = subprocess.Popen(
        [sys.executable, "-m", "paraeval", *args],
        cwd=tmp_path,
        env=cli_env(TMPDIR=str(short_tmp), **RAY_ENV),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        # scoring: Ray's workers are up (more than its GCS and raylet hold files there)
        while len(processes_holding(short_tmp)) < 4 and time.monotonic() < deadline:
            assert run.poll() is None, "the run ended before Ray started"
            time.sleep(0.2)
        assert len(processes_holding(short_tmp)) >= 4
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=30)
        left = wait_gone(short_tmp, 20)
        assert left == [], describe(left)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        for pid in processes_holding(short_tmp):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("setting", "said"),
    [
        ("engine.address=127.0.0.1:{port}", "cannot reach the Ray cluster at engine.address="),
        ("engine.rows_per_shard=0", "engine.rows_per_shard must be a positive integer"),
        ("+engine.rows_per_shrd=5", "did you mean 'engine.rows_per_shard'?"),
    ],
    ids=["nothing-listens", "no-rows", "misspelt"],
)
def test_a_wrong_engine_setting_is_one_line_before_any_work(
    tmp_path: Path, setting: str, said: str
) -> None:
    proc = run_cli(
        ["engine=ray", setting.format(port=free_port()), "metrics=[bleu]", "tracking=none"],
        cwd=tmp_path,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("paraeval: error: "), proc.stderr
    assert said in lines[0]
    assert not list(tmp_path.rglob("segment_scores.parquet"))


@pytest.mark.slow
def test_gpus_the_machine_lacks_are_one_line_and_ray_ends(tmp_path: Path, short_tmp: Path) -> None:
    """Actors asking for a GPU on the run's own instance, which has none (CUDA_VISIBLE_DEVICES
    empty), would wait for ever: one line, exit 2, before the scoring, and Ray is stopped."""
    skip_without_ray()
    args = ["engine=ray", "engine.gpus_per_actor=1", "metrics=[bleu,cosine]", "tracking=none"]
    args.append("cache.enabled=false")  # scores from a cache would not reach the actors
    env = {"TMPDIR": str(short_tmp), "CUDA_VISIBLE_DEVICES": "", **RAY_ENV}
    proc = run_cli([*args, f"hydra.run.dir={tmp_path / 'out'}"], cwd=tmp_path, **env)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if "core_worker.cc" not in line]
    errors = [line for line in lines if line.startswith("paraeval: error: ")]
    assert len(errors) == 1, proc.stderr
    assert "engine.gpus_per_actor=1: Ray finds 0 GPUs" in errors[0]
    # the rest is the demo's own warnings (its empty candidates), no traceback
    assert all(line.startswith("paraeval: warning: ") for line in lines if line not in errors)
    assert not list(tmp_path.rglob("segment_scores.parquet"))
    assert wait_gone(short_tmp, 10) == []


def _units(sizes: list[int]) -> list[Any]:
    from paraeval.pipeline.engine.ray_engine import Shard

    return [Shard(k, 0, 0, ["c"] * n, [["r"]] * n, ["s"] * n) for k, n in enumerate(sizes)]


@pytest.mark.parametrize(
    ("sizes", "rows", "workers", "expected"),
    [
        ([400] * 36, 2048, 2, 6),  # ParaBank-Eval's one-system shards: 6 of them a bundle
        ([2048, 2048, 100, 7, 2048], 2048, 2, 3),  # target 1,563 rows: 2048 | 2048 | 100+7+2048
        ([7] * 50, 7, 2, 50),  # shards of the shard size stay alone
        ([10] * 12, 2048, 3, 6),  # a small pool: two bundles per worker, not one
        ([0, 0, 5], 2048, 1, 1),  # empty shards (an empty call) are kept, with the next
    ],
)
def test_bundles_keep_every_shard_in_order_and_about_the_shard_size(
    sizes: list[int], rows: int, workers: int, expected: int
) -> None:
    from paraeval.pipeline.engine.ray_engine import bundled

    bundles = bundled(_units(sizes), rows, workers)
    assert len(bundles) == expected
    flat = [unit.position for bundle in bundles for unit in bundle]
    assert flat == list(range(len(sizes)))  # each shard once, in order
    target = max(1, min(rows, -(-sum(sizes) // (2 * workers))))
    for bundle in bundles[:-1]:
        filled = sum(len(unit.candidates) for unit in bundle)
        # full once it reaches the target, and never by more than its last shard
        assert filled >= target
        assert filled - len(bundle[-1].candidates) < target
