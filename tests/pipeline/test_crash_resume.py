"""Crash and resume: a run killed (SIGKILL) in the middle of scoring leaves its finished metric
results in the score cache; the same command run again reuses them and writes output files
identical to those of an uninterrupted run. Output files appear under their final name only when
complete, whatever moment the process dies.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.pipeline.helpers import REPO, cli_env, relog, run_cli

N_ITEMS = 3000
SYSTEMS = ("a", "b", "c")
METRICS = "[bleu,chrf,ter]"
JOBS = len(SYSTEMS) * 3  # one cache entry per (metric, system)
KILL_AT = JOBS // 2  # BLEU done, chrF under way; TER (the slowest) still to come
FAST = [
    "tracking=none",
    "report.print_tables=false",
    "correlation.ci=false",
    "compare.enabled=false",
    "alpha_curve.enabled=false",
]
# results, compared file by file; run_info.json (a fresh run id), the log and .hydra/ (the command
# line) differ between any two runs by design
RESULT_CSVS = (
    "system_scores.csv",
    "correlations.csv",
    "significance.csv",
    "normalization.csv",
    "signatures.csv",
    "human_report.csv",
)


def _table(path: Path) -> Path:
    rng = np.random.default_rng(7)
    vocab = [f"w{i}" for i in range(300)]

    def sentence() -> str:
        return " ".join(rng.choice(vocab, size=int(rng.integers(6, 14))))

    with path.open("w", encoding="utf-8") as fh:
        for i in range(N_ITEMS):
            source, refs = sentence(), [sentence()]
            for s in SYSTEMS:
                row = {
                    "item_id": f"{i:05d}",
                    "system": s,
                    "source": source,
                    "references": refs,
                    "candidate": sentence(),
                    "human_meaning": float(rng.integers(1, 6)),
                }
                fh.write(json.dumps(row) + "\n")
    return path


def _args(data: Path, cache: Path, out: Path) -> list[str]:
    return [
        "data=table",
        f"data.path={data}",
        f"metrics={METRICS}",
        f"cache.dir={cache}",
        f"hydra.run.dir={out}",
        *FAST,
    ]


def _entries(cache: Path) -> list[Path]:
    return list((cache / "scores" / "v1").glob("*/*.npz"))


def _cache_line(out: Path) -> tuple[int, int]:
    """Hits and misses of the last run logged in ``out`` (the log file keeps INFO records)."""
    text = (out / "paraeval.log").read_text()
    found = re.findall(r"score cache .*?: (\d+) hits, (\d+) misses", text)
    assert found, text[-3000:]
    return int(found[-1][0]), int(found[-1][1])


@pytest.mark.slow
def test_killed_run_resumes_from_cache_with_identical_outputs(tmp_path: Path) -> None:
    data = _table(tmp_path / "big.jsonl")
    cache, out = tmp_path / "cache", tmp_path / "out"
    args = _args(data, cache, out)

    # 1. start, wait until about half of the metric results are cached, kill without warning
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "paraeval", *args],
        cwd=tmp_path,
        env=cli_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 240
        while (
            len(_entries(cache)) < KILL_AT and proc.poll() is None and time.monotonic() < deadline
        ):
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    killed_after = time.perf_counter() - start
    assert proc.returncode == -signal.SIGKILL
    cached = len(_entries(cache))
    assert KILL_AT <= cached < JOBS, (
        f"killed with {cached} of {JOBS} results cached: not mid-scoring"
    )
    assert not (out / "segment_scores.parquet").exists()

    # 2. the same command again: finished results come from the cache
    start = time.perf_counter()
    resumed = run_cli(args, tmp_path)
    resumed_s = time.perf_counter() - start
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    hits, misses = _cache_line(out)
    assert hits >= cached and hits + misses == JOBS

    # 3. an uninterrupted run with a cache of its own
    ref_out = tmp_path / "ref_out"
    start = time.perf_counter()
    fresh = run_cli(_args(data, tmp_path / "ref_cache", ref_out), tmp_path)
    fresh_s = time.perf_counter() - start
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    assert _cache_line(ref_out) == (0, JOBS)

    print(
        f"\n{len(SYSTEMS)} systems x {N_ITEMS} items, metrics {METRICS}: killed after "
        f"{killed_after:.1f} s with {cached}/{JOBS} results cached; resumed run {resumed_s:.1f} s "
        f"({hits} hits, {misses} misses); uninterrupted run {fresh_s:.1f} s"
    )

    pd.testing.assert_frame_equal(
        pd.read_parquet(out / "segment_scores.parquet"),
        pd.read_parquet(ref_out / "segment_scores.parquet"),
    )
    for name in RESULT_CSVS:
        assert (out / name).is_file() == (ref_out / name).is_file(), name
        if (out / name).is_file():
            assert (out / name).read_bytes() == (ref_out / name).read_bytes(), name
    plots = sorted(p.name for p in (out / "plots").glob("*.png"))
    assert plots and plots == sorted(p.name for p in (ref_out / "plots").glob("*.png"))
    assert not [p for p in out.rglob("*") if p.name.endswith(".tmp")]


WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    import pandas as pd
    from paraeval.pipeline.files import write_parquet

    def slow(df, path, index=False):
        with open(path, "wb") as fh:
            fh.write(b"PAR1" + b"x" * 100_000)
            fh.flush()
            print("half written", flush=True)
            time.sleep(60)

    pd.DataFrame.to_parquet = slow
    write_parquet(pd.DataFrame({"a": [1]}), Path(sys.argv[1]))
    """
)


def test_kill_during_write_never_leaves_a_partial_file_under_the_final_name(
    tmp_path: Path,
) -> None:
    target = tmp_path / "segment_scores.parquet"
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(target)],
        cwd=REPO,
        env=cli_env(),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "half written"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    assert not target.exists()
    partial = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert len(partial) == 1 and partial[0].name.startswith(".segment_scores.parquet.")
    assert partial[0].stat().st_size > 100_000  # the half-written bytes went there, not to target


# --------------------------------------------------------------------------- a full disk
def _big_table(path: Path, n_items: int = 200) -> Path:
    rng = np.random.default_rng(1)
    words = [f"w{i}" for i in range(3000)]

    def sentence() -> str:
        return " ".join(rng.choice(words, size=40))

    rows = []
    for i in range(n_items):
        source, ref = sentence(), sentence()
        for system in "abc":
            rows.append(
                {
                    "item_id": f"i{i}",
                    "system": system,
                    "source": source,
                    "references": [ref],
                    "candidate": sentence(),
                    "human_meaning": float(rng.random()),
                }
            )
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


FULL_DISK_SCRIPT = r"""
set -u
mkdir -p "$MNT/out"
echo OLD-RESULT > "$MNT/out/segment_scores.parquet"
"$PY" -m paraeval data=table "data.path=$DATA" "metrics=[bleu]" tracking=none \
    "hydra.run.dir=$MNT/out" "cache.dir=$CACHE" correlation.ci=false compare.enabled=false \
    report.print_tables=false > "$REPORT/stdout" 2> "$REPORT/stderr"
echo $? > "$REPORT/rc"
cp "$MNT/out/segment_scores.parquet" "$REPORT/kept"
ls -a "$MNT/out" > "$REPORT/listing"
"""


@pytest.mark.slow
def test_full_disk_while_writing_tables_is_one_line_and_loses_nothing(tmp_path: Path) -> None:
    """A real ENOSPC: the output folder is a 128 KiB tmpfs (mounted in a user namespace, so no
    privileges are needed), too small for the segment table. Where user namespaces are not
    available, the file size limit (RLIMIT_FSIZE) makes the same write fail with EFBIG."""
    data = _big_table(tmp_path / "big.jsonl")
    report = tmp_path / "report"
    report.mkdir()
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "MLFLOW_DISABLE_TELEMETRY": "true",
        "PY": sys.executable,
        "DATA": str(data),
        "MNT": str(mnt),
        "CACHE": str(tmp_path / "cache"),
        "REPORT": str(report),
    }
    namespace = subprocess.run(
        ["unshare", "-rm", "sh", "-c", f'mount -t tmpfs -o size=128k tmpfs "{mnt}" || exit 99'],
        capture_output=True,
        check=False,
    )
    if namespace.returncode == 0:
        cmd = [
            "unshare",
            "-rm",
            "sh",
            "-c",
            f'mount -t tmpfs -o size=128k tmpfs "{mnt}" && {FULL_DISK_SCRIPT}',
        ]
        expected = "No space left on device"
    else:
        cmd = ["sh", "-c", f"trap '' XFSZ; ulimit -f 64; {FULL_DISK_SCRIPT}"]
        expected = "File too large"
    subprocess.run(cmd, env=env, timeout=300, check=True)
    stderr = (report / "stderr").read_text()
    assert (report / "rc").read_text().strip() == "2", stderr[-3000:]
    assert "Traceback" not in stderr and "Logging error" not in stderr, stderr[-3000:]
    lines = [ln for ln in stderr.splitlines() if ln.startswith("paraeval: error:")]
    assert len(lines) == 1, stderr[-3000:]
    assert f"cannot write {mnt}/out/segment_scores.parquet" in lines[0]
    assert expected in lines[0] and f"kept in {mnt}/out" in lines[0]
    # the earlier file of that name is intact, and no partial file is left anywhere
    assert (report / "kept").read_text() == "OLD-RESULT\n"
    listing = (report / "listing").read_text().split()
    assert not [n for n in listing if n.endswith(".tmp")], listing
    assert ".hydra" in listing  # what was written before stays


# --------------------------------------------------------------------------- SIGINT and SIGTERM
def _descendants(pid: int) -> list[int]:
    """Every living process below ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for stat_file in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat_file.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat_file.parent.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _store_runs(db: Path) -> list[tuple[str, str, str]]:
    """(run id, status, lifecycle stage) of every run, read while the run writes (WAL)."""
    import sqlite3

    if not db.exists():
        return []
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
        try:
            return con.execute("SELECT run_uuid, status, lifecycle_stage FROM runs").fetchall()
        finally:
            con.close()
    except sqlite3.Error:
        return []


def _many_systems(path: Path, n_systems: int = 80, n_items: int = 8) -> Path:
    rng = np.random.default_rng(3)
    vocab = [f"w{i}" for i in range(200)]

    def sentence() -> str:
        return " ".join(rng.choice(vocab, size=8))

    with path.open("w", encoding="utf-8") as fh:
        for i in range(n_items):
            source, ref = sentence(), sentence()
            for s in range(n_systems):
                row = {
                    "item_id": f"i{i}",
                    "system": f"s{s:03d}",
                    "source": source,
                    "references": [ref],
                    "candidate": sentence(),
                    "human_meaning": float(rng.integers(1, 6)),
                }
                fh.write(json.dumps(row) + "\n")
    return path


# the CLI run after ``before`` (Python code) in the same process: a test that must interrupt a
# short stretch of the run makes that stretch long
LAUNCH = textwrap.dedent(
    """
    import runpy, sys
    {before}
    sys.argv = ["paraeval", *sys.argv[1:]]
    runpy.run_module("paraeval", run_name="__main__", alter_sys=True)
    """
)

# MLflow's upload of the output folder (the last step of logging, after the per-system runs)
# held for a minute: the interrupt lands while the run is being logged, however fast the steps
# before it are
SLOW_UPLOAD = textwrap.dedent(
    """
    import time
    from mlflow.tracking import MlflowClient
    _upload = MlflowClient.log_artifacts
    def _slow_upload(self, *args, **kwargs):
        time.sleep(60)
        return _upload(self, *args, **kwargs)
    MlflowClient.log_artifacts = _slow_upload
    """
)


def _interrupt(
    args: list[str],
    cwd: Path,
    when: object,
    signum: int,
    whole_group: bool,
    before: str | None = None,
) -> tuple[subprocess.Popen[str], str, list[int]]:
    """Start the CLI (after the code ``before``, if given), wait until ``when()`` is true, send
    ``signum`` (to the process group, as a terminal's Ctrl-C does, or to the process, as
    ``kill`` does); returns the finished process, its stderr and the processes it had
    started."""
    start = ["-m", "paraeval"] if before is None else ["-c", LAUNCH.format(before=before)]
    proc = subprocess.Popen(
        [sys.executable, *start, *args],
        cwd=cwd,
        env=cli_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    helpers: list[int] = []
    try:
        deadline = time.monotonic() + 240
        while proc.poll() is None and time.monotonic() < deadline:
            helpers = sorted(set(helpers) | set(_descendants(proc.pid)))
            if when():  # type: ignore[operator]
                break
            time.sleep(0.02)
        assert proc.poll() is None, "the run ended before the moment to interrupt it"
        if whole_group:
            os.killpg(proc.pid, signum)
        else:
            os.kill(proc.pid, signum)
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc, stderr, helpers


def _one_interrupt_line(proc: subprocess.Popen[str], stderr: str, signum: int, out: Path) -> str:
    assert proc.returncode == 128 + signum, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    name = signal.Signals(signum).name
    lines = [ln for ln in stderr.splitlines() if "interrupt" in ln.lower() or "error" in ln]
    assert lines == [ln for ln in lines if ln.startswith(f"paraeval: interrupted ({name})")]
    assert len(lines) == 1, stderr[-3000:]
    assert f"outputs written so far are kept in {out}" in lines[0]
    return lines[0]


def _no_helper_left(helpers: list[int]) -> None:
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in helpers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in helpers if _alive(p)], "a helper process outlived the run"


@pytest.mark.slow
def test_ctrl_c_during_scoring(tmp_path: Path) -> None:
    data = _table(tmp_path / "big.jsonl")
    cache, out = tmp_path / "cache", tmp_path / "out"
    args = [a for a in _args(data, cache, out) if a != "report.print_tables=false"]
    proc, stderr, helpers = _interrupt(
        args, tmp_path, lambda: len(_entries(cache)) >= 2, signal.SIGINT, whole_group=True
    )
    _one_interrupt_line(proc, stderr, signal.SIGINT, out)
    _no_helper_left(helpers)
    assert len(_entries(cache)) >= 2  # finished results stay for the next run
    assert not [p for p in out.rglob("*") if p.name.endswith(".tmp")]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("signum", "whole_group"), [(signal.SIGTERM, False), (signal.SIGINT, True)]
)
def test_interrupt_while_logging_closes_the_runs_and_relog_replaces_them(
    tmp_path: Path, signum: int, whole_group: bool
) -> None:
    data = _many_systems(tmp_path / "many.jsonl")
    store, out = tmp_path / "store", tmp_path / "out"
    db = store / "mlflow.db"
    args = [
        "data=table",
        f"data.path={data}",
        "metrics=[bleu]",
        f"cache.dir={tmp_path / 'cache'}",
        f"hydra.run.dir={out}",
        "tracking=sqlite",
        f"tracking.store_dir={store}",
        "report.print_tables=false",
        "correlation.ci=false",
        "compare.enabled=false",
        "alpha_curve.enabled=false",
    ]
    # a parent run and at least three of its per-system runs exist: logging is under way (and
    # stays so until the interrupt: the upload that follows is held)
    proc, stderr, helpers = _interrupt(
        args, tmp_path, lambda: len(_store_runs(db)) >= 4, signum, whole_group, SLOW_UPLOAD
    )
    line = _one_interrupt_line(proc, stderr, signum, out)
    assert f"log them later with: paraeval-log {out}" in line
    _no_helper_left(helpers)
    runs = _store_runs(db)
    assert len(runs) >= 4
    assert not [r for r in runs if r[1] == "RUNNING"], runs  # never left RUNNING
    assert "KILLED" in {r[1] for r in runs}
    for name in ("segment_scores.parquet", "system_scores.csv", "run_info.json"):
        assert (out / name).is_file(), name

    logged = relog(str(out), cwd=tmp_path)
    assert logged.returncode == 0, logged.stderr[-3000:]
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{db}")
    exp = client.get_experiment_by_name("paraeval")
    assert exp is not None
    uid = json.loads((out / "run_info.json").read_text())["run_uid"]
    active = client.search_runs(
        [exp.experiment_id], filter_string=f"tags.`paraeval.run_uid` = '{uid}'"
    )
    assert [r.info.status for r in active] == ["FINISHED"]  # one run for the directory
    killed = {r[0] for r in runs if r[1] == "KILLED"}
    replaced = set(active[0].data.tags["paraeval.replaces"].split(","))
    assert replaced <= killed and replaced
    every = _store_runs(db)
    assert all(stage == "deleted" for run_id, _, stage in every if run_id in killed)
    children = client.search_runs(
        [exp.experiment_id], filter_string=f"tags.`mlflow.parentRunId` = '{active[0].info.run_id}'"
    )
    assert len(children) == 80


@pytest.mark.slow
def test_ctrl_c_during_a_sweep_leaves_the_finished_jobs_logged_whole(tmp_path: Path) -> None:
    """Ctrl-C while the second job of a sweep computes: the first job, finished, was logged
    before the second began; the line names the second job's folder."""
    from mlflow.tracking import MlflowClient

    from tests.pipeline.test_tracking import RUN_LINE, SMALL, check_logged_whole

    store, sweep = tmp_path / "store", tmp_path / "sweep"
    args = [
        "-m",
        *SMALL,
        "metrics.ibleu.alpha=0.2,0.5,0.9",
        f"tracking.store_dir={store}",
        f"hydra.sweep.dir={sweep}",
        f"cache.dir={tmp_path / 'cache'}",
    ]

    def second_job_started() -> bool:
        log_file = sweep / "1" / "paraeval.log"
        return log_file.is_file() and "loaded " in log_file.read_text()

    proc, stderr, helpers = _interrupt(
        args, tmp_path, second_job_started, signal.SIGINT, whole_group=True
    )
    _one_interrupt_line(proc, stderr, signal.SIGINT, sweep / "1")
    _no_helper_left(helpers)
    first = sweep / "0"
    ids = RUN_LINE.findall((first / "paraeval.log").read_text())
    assert len(ids) == 1, ids
    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    check_logged_whole(client, ids[0], first)
    assert not (sweep / "2").exists()  # the sweep stopped there
