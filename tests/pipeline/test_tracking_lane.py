"""A multirun's jobs hand their MLflow logging to a helper process (``tracking_lane``): every job
is logged whole, its run id reaches its own log file and the console, a failure is the job's own
warning and the exit status says so; a single run logs as before."""

from __future__ import annotations

import logging
import re
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from mlflow.tracking import MlflowClient

from paraeval.pipeline.cli import app

from paraeval.pipeline.tracking import lane as tracking_lane
from paraeval.pipeline.cli.main import EXIT_NOT_LOGGED, config_dir
from tests.pipeline.helpers import relog, run_cli
from tests.pipeline.test_tracking_faults import _serve

SMALL = [
    "metrics=[bleu,ibleu,self_bleu,chrf]",
    "correlation.ci=false",
    "alpha_curve.grid=[0,0.5,1]",
    "report.print_tables=false",
]
RUN_LINE = re.compile(r"\]\[paraeval\.pipeline\.track\]\[INFO\] - MLflow run (\w+) in ")


def _three_jobs(store: Path, sweep: Path, cache: Path) -> list[str]:
    return [
        "-m",
        *SMALL,
        "metrics.ibleu.alpha=0.2,0.5,0.9",
        f"tracking.store_dir={store}",
        f"hydra.sweep.dir={sweep}",
        f"cache.dir={cache}",
    ]


def _second_job_started(sweep: Path) -> bool:
    log_file = sweep / "1" / "paraeval.log"
    return log_file.is_file() and "loaded " in log_file.read_text()


def _client(store: Path) -> MlflowClient:
    return MlflowClient(f"sqlite:///{store / 'mlflow.db'}")


def _check_logged(client: MlflowClient, run_id: str, out: Path) -> None:
    """The run of ``out`` is finished and whole: its files, its per-system runs, its tags."""
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"
    assert run.data.tags["paraeval.output_dir"] == str(out.resolve())
    assert run.data.tags["paraeval.content_hash"]
    artifacts = {a.path for a in client.list_artifacts(run_id)}
    assert {"report.html", "system_scores.csv", "plots", "tables"} <= artifacts, artifacts
    plots = {Path(a.path).name for a in client.list_artifacts(run_id, "plots")}
    assert {p.name for p in (out / "plots").iterdir()} == plots
    children = client.search_runs(
        [run.info.experiment_id], filter_string=f"tags.`mlflow.parentRunId` = '{run_id}'"
    )
    assert len(children) == 4 and {c.info.status for c in children} == {"FINISHED"}


@pytest.mark.slow
def test_multirun_jobs_are_each_logged_whole_and_say_so_in_their_own_log(tmp_path: Path) -> None:
    store, sweep = tmp_path / "store", tmp_path / "sweep"
    proc = run_cli(
        [
            "-m",
            *SMALL,
            "metrics.ibleu.alpha=0.2,0.5,0.9",
            f"tracking.store_dir={store}",
            f"hydra.sweep.dir={sweep}",
        ],
        cwd=tmp_path,
        PARAEVAL_CACHE_DIR=str(tmp_path / "cache"),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    client = _client(store)
    seen = []
    for job in range(3):
        out = sweep / str(job)
        ids = RUN_LINE.findall((out / "paraeval.log").read_text())
        assert len(ids) == 1, ids  # its own run, in its own log file
        _check_logged(client, ids[0], out)
        assert f"(run {ids[0]})" in proc.stdout  # the job's summary names it
        seen.append(ids[0])
    assert len(set(seen)) == 3
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_jobs_in_one_process_hand_over_to_the_lane(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As Hydra's basic launcher runs a multirun: the jobs' calls of ``app.run`` return before
    their logging is done, which the lane does; each job's record of it goes to the log file the
    job had (Hydra gives each job its own)."""
    monkeypatch.setattr(tracking_lane, "ENABLED", True)
    store = tmp_path / "store"
    GlobalHydra.instance().clear()
    root = logging.getLogger()
    outs = [tmp_path / f"job{k}" for k in range(2)]
    try:
        for out, alpha in zip(outs, ("0.3", "0.7"), strict=True):
            with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
                cfg = compose(
                    "config",
                    overrides=[
                        *SMALL,
                        f"metrics.ibleu.alpha={alpha}",
                        "tracking=sqlite",
                        f"tracking.store_dir={store}",
                        f"cache.dir={tmp_path / 'cache'}",
                    ],
                )
            out.mkdir()
            job_log = logging.FileHandler(out / "paraeval.log")
            job_log.setFormatter(logging.Formatter("[%(name)s][%(levelname)s] - %(message)s"))
            root.addHandler(job_log)
            try:
                app.run(cfg, out)
            finally:
                root.removeHandler(job_log)  # the next job's logging replaces it
                job_log.close()
        assert tracking_lane._POOL is not None  # the lane was started and used
        assert tracking_lane.wait(timeout=120)
    finally:
        tracking_lane.wait(timeout=120)
        tracking_lane.stop()
        GlobalHydra.instance().clear()
    client = _client(store)
    for out in outs:
        lines = re.findall(r"MLflow run (\w+) in ", (out / "paraeval.log").read_text())
        assert len(lines) == 1, lines
        _check_logged(client, lines[0], out)


@pytest.fixture
def failing_server() -> Iterator[str]:
    yield from _serve(healthy=False)


@pytest.mark.slow
def test_a_job_whose_handed_over_logging_fails_says_so_and_the_exit_status_too(
    tmp_path: Path, failing_server: str
) -> None:
    sweep = tmp_path / "sweep"
    proc = run_cli(
        [
            "-m",
            *SMALL,
            "metrics.ibleu.alpha=0.2,0.8",
            "tracking=server",
            f"tracking.uri={failing_server}",
            f"hydra.sweep.dir={sweep}",
        ],
        cwd=tmp_path,
        PARAEVAL_CACHE_DIR=str(tmp_path / "cache"),
    )
    assert proc.returncode == EXIT_NOT_LOGGED, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    for job in range(2):
        out = (sweep / str(job)).resolve()
        hint = f"log them later with: paraeval-log {out}"
        log_text = (sweep / str(job) / "paraeval.log").read_text()
        assert log_text.count(hint) == 1 and "HTTP 500" in log_text
        assert hint in " ".join(proc.stderr.split())  # the terminal wraps its lines
        assert (out / "run_info.json").is_file() and (out / "report.html").is_file()


@pytest.mark.slow
def test_an_interrupt_waits_for_the_finished_jobs_logging_in_flight(tmp_path: Path) -> None:
    """Ctrl-C during the second job, while the first job's logging is held up in the lane (the
    store's lock is taken here): the command waits for it, so the finished job is logged
    whole, then stops with the interrupt's exit status."""
    from filelock import FileLock

    from tests.pipeline.test_crash_resume import _interrupt, _no_helper_left, _one_interrupt_line

    store, sweep = tmp_path / "store", tmp_path / "sweep"
    store.mkdir()
    args = _three_jobs(store, sweep, tmp_path / "cache")
    lock = FileLock(str(store / "mlflow.db") + ".lock", thread_local=False)
    released = threading.Event()

    def second_job_started() -> bool:
        if _second_job_started(sweep):
            # the lane holds the first job's logging while the interrupt lands, then goes on
            threading.Timer(2.0, lambda: (lock.release(), released.set())).start()
            return True
        return False

    with lock:
        lock.acquire()  # held past this block, until the timer releases it
    proc, stderr, helpers = _interrupt(
        args, tmp_path, second_job_started, signal.SIGINT, whole_group=True
    )
    assert released.is_set()
    _one_interrupt_line(proc, stderr, signal.SIGINT, sweep / "1")
    _no_helper_left(helpers)
    first = sweep / "0"
    ids = RUN_LINE.findall((first / "paraeval.log").read_text())
    assert len(ids) == 1, ids
    _check_logged(_client(store), ids[0], first)


@pytest.mark.slow
def test_an_interrupt_gives_up_a_logging_that_does_not_finish(tmp_path: Path) -> None:
    """Held up longer than the command waits after Ctrl-C, the first job's logging is given up:
    one warning says how to log that job later, which then works."""
    from filelock import FileLock

    from tests.pipeline.test_crash_resume import _interrupt, _no_helper_left

    store, sweep = tmp_path / "store", tmp_path / "sweep"
    store.mkdir()
    args = _three_jobs(store, sweep, tmp_path / "cache")
    lock = FileLock(str(store / "mlflow.db") + ".lock", thread_local=False)

    shorter = "import paraeval.pipeline.cli.main as m; m.INTERRUPTED_LOGGING_WAIT_S = 1.0"
    with lock:
        proc, stderr, helpers = _interrupt(
            args, tmp_path, lambda: _second_job_started(sweep), signal.SIGINT, True, shorter
        )
    assert proc.returncode == 128 + signal.SIGINT, stderr[-3000:]
    assert "Traceback" not in stderr
    _no_helper_left(helpers)
    first = (sweep / "0").resolve()
    flat = " ".join(stderr.split())
    assert f"outputs kept in {first}; log them later with: paraeval-log {first}" in flat
    assert RUN_LINE.findall((first / "paraeval.log").read_text()) == []
    logged = relog(str(first), cwd=tmp_path)
    assert logged.returncode == 0, logged.stderr[-3000:]
    client = _client(store)
    exp = client.get_experiment_by_name("paraeval")
    assert exp is not None
    runs = client.search_runs(
        [exp.experiment_id],
        filter_string=f"tags.`paraeval.output_dir` = '{first}' and attributes.status = 'FINISHED'",
    )
    assert len(runs) == 1
    _check_logged(client, runs[0].info.run_id, first)
