"""A run's processes end with it: ``kill -9`` of ``paraeval`` in the middle of a run and of a
sweep leaves no process of it alive 5 s later.

The command is started in a session of its own, so every process it starts (and anything those
start) carries its session id even after the kernel re-parents an orphan to PID 1; the test then
looks for that session id in /proc.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pipeline.helpers import cli_env, logged_run_args

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/stat").is_file(), reason="needs Linux's /proc to see every process"
)


def session_members(sid: int) -> list[str]:
    """``pid command`` of every live process in session ``sid`` (zombies are dead already)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # ended while we looked
        # the command may hold spaces and parentheses: the fields follow the last ')'
        fields = stat[stat.rindex(")") + 2 :].split()
        state, session = fields[0], int(fields[3])
        if session == sid and state != "Z":
            found.append(f"{entry.name} {stat[stat.index('(') + 1 : stat.rindex(')')]}")
    return found


def test_session_members_sees_a_child_and_its_orphan() -> None:
    proc = subprocess.Popen(
        ["sh", "-c", "sleep 30 & sleep 30"], start_new_session=True, stdout=subprocess.DEVNULL
    )
    try:
        time.sleep(0.5)
        assert len(session_members(proc.pid)) == 3
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        time.sleep(0.2)
        # the killed shell is gone; its two sleeps live on under PID 1, still in its session
        assert len(session_members(proc.pid)) == 2
    finally:
        os.killpg(proc.pid, signal.SIGKILL)


def _start(args: list[str], cwd: Path, stderr: int = subprocess.DEVNULL) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "paraeval", *args],
        cwd=cwd,
        env=cli_env(PARAEVAL_CACHE_DIR=str(cwd / "cache")),
        stdout=subprocess.DEVNULL,
        stderr=stderr,
        start_new_session=True,
    )


def _wait_for(path: Path, proc: subprocess.Popen[bytes], timeout: float = 240.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, f"paraeval ended (exit {proc.returncode}) before {path}"
        assert time.monotonic() < deadline, f"{path} did not appear"
        time.sleep(0.05)


def _kill_and_check(proc: subprocess.Popen[bytes]) -> None:
    sid = proc.pid
    try:
        assert proc.poll() is None, "the run ended before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        time.sleep(5)
        assert session_members(sid) == []
    finally:
        # whatever outlived the run must not outlive the test too
        with contextlib.suppress(ProcessLookupError):
            os.killpg(sid, signal.SIGKILL)


@pytest.mark.slow
def test_kill_9_in_the_middle_of_a_run(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = _start(
        [
            f"hydra.run.dir={out}",
            f"tracking.store_dir={tmp_path / 'store'}",
            "metrics=[bleu,ibleu,chrf,ter,bertscore,cosine]",
        ],
        tmp_path,
    )
    # the first figure is written: the others, report.html and the MLflow logging are to come
    _wait_for(out / "plots", proc)
    deadline = time.monotonic() + 60
    while not any((out / "plots").iterdir()) and time.monotonic() < deadline:
        time.sleep(0.02)
    # the run and the processes drawing the other figures
    assert len(session_members(proc.pid)) >= 2, session_members(proc.pid)
    _kill_and_check(proc)


@pytest.mark.slow
def test_kill_9_in_the_middle_of_a_sweep(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    proc = _start(
        [
            "-m",
            "metrics=[bleu,ibleu,chrf]",
            "metrics.ibleu.alpha=0.2,0.5,0.8",
            f"hydra.sweep.dir={sweep}",
            f"tracking.store_dir={tmp_path / 'store'}",
        ],
        tmp_path,
    )
    # the first job is done and logged, the second under way
    _wait_for(sweep / "1" / ".hydra" / "config.yaml", proc)
    time.sleep(0.5)
    _kill_and_check(proc)


def children(pid: int) -> list[tuple[int, str]]:
    """(pid, command line) of every live descendant of ``pid``, found through /proc."""
    parents: dict[int, list[tuple[int, str]]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] != "Z":
            parents.setdefault(int(fields[1]), []).append((int(entry.name), command))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child[0])
    return found


def _wait_for_log(path: Path, text: str, proc: subprocess.Popen[bytes]) -> None:
    """Until the log file ``path`` holds ``text`` (a job is inside its run)."""
    deadline = time.monotonic() + 240
    while not (path.is_file() and text in path.read_text(errors="replace")):
        assert proc.poll() is None, f"paraeval ended (exit {proc.returncode}) before {path}"
        assert time.monotonic() < deadline, f"{text!r} did not appear in {path}"
        time.sleep(0.1)


def _gone_within(sid: int, seconds: float) -> list[str]:
    deadline = time.monotonic() + seconds
    while session_members(sid) and time.monotonic() < deadline:
        time.sleep(0.1)
    return session_members(sid)


@contextlib.contextmanager
def _session(args: list[str], cwd: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``paraeval ARGS`` in a session of its own, stderr piped; whatever of it is left when the
    block ends is killed."""
    proc = _start(args, cwd, subprocess.PIPE)
    try:
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_a_run_ends_it_and_its_figure_processes(tmp_path: Path, signum: int) -> None:
    with _session(logged_run_args(tmp_path), tmp_path) as proc:
        _wait_for(tmp_path / "out" / "plots", proc)
        os.kill(proc.pid, signum)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 128 + signum, err.decode()[-2000:]
        assert f"paraeval: interrupted ({signal.Signals(signum).name})" in err.decode()
        assert _gone_within(proc.pid, 5) == []


@pytest.mark.slow
def test_a_killed_figure_process_names_the_run_and_its_figures_and_exits_4(
    tmp_path: Path,
) -> None:
    killed = None
    with _session(logged_run_args(tmp_path), tmp_path) as proc:
        deadline = time.monotonic() + 240
        while killed is None and proc.poll() is None and time.monotonic() < deadline:
            # a figure process is a fork of the run: the same command line
            own = Path(f"/proc/{proc.pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            for pid, command in children(proc.pid):
                if command == own:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                        killed = pid
                    break
            time.sleep(0.01)
        assert killed is not None, "no figure process was seen"
        _, err = proc.communicate(timeout=240)
    text = err.decode()
    assert proc.returncode == 4, text[-2000:]
    warned = [ln for ln in text.splitlines() if "figures missing:" in ln]
    assert len(warned) == 1 and warned[0].startswith("paraeval: warning: "), text[-2000:]
    assert str(tmp_path / "out") in warned[0] and "signal 9" in warned[0]
    missing = warned[0].split("figures missing: ")[1].split(";")[0].split(", ")
    assert missing and all(not (tmp_path / "out" / "plots" / name).exists() for name in missing)
    assert (tmp_path / "out" / "system_scores.csv").is_file()  # the tables are written


def _parallel_sweep(tmp_path: Path) -> list[str]:
    return [
        "-m",
        "hydra/launcher=parallel",
        "hydra.launcher.n_jobs=2",
        "metrics=[bleu,ibleu,chrf]",
        "metrics.ibleu.alpha=0.2,0.5,0.8",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        f"tracking.store_dir={tmp_path / 'store'}",
        "report.print_tables=false",
    ]


def _parent(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def _workers(pid: int) -> list[int]:
    """The loky workers: children of the command. A figure process a worker forks carries the
    same command line but is the worker's child."""
    found = []
    for p, command in children(pid):
        with contextlib.suppress(OSError):  # ended while we looked
            if "LokyProcess" in command and _parent(p) == pid:
                found.append(p)
    return found


def _logged_jobs(store: Path) -> list[str]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    exp = client.get_experiment_by_name("paraeval")
    runs = client.search_runs([exp.experiment_id]) if exp is not None else []
    return sorted(
        r.data.tags["paraeval.output_dir"]
        for r in runs
        if r.data.tags.get("paraeval.role") == "invocation" and r.info.status == "FINISHED"
    )


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_a_parallel_sweep_ends_its_workers(tmp_path: Path, signum: int) -> None:
    with _session(_parallel_sweep(tmp_path), tmp_path) as proc:
        _wait_for_log(tmp_path / "sweep" / "0" / "paraeval.log", "loaded", proc)
        assert len(_workers(proc.pid)) == 2, children(proc.pid)
        os.kill(proc.pid, signum)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode in (-signum, 128 + signum), err.decode()[-2000:]
        # kill -9 leaves the workers' kernel death signal to end them
        assert _gone_within(proc.pid, 5) == []


@pytest.mark.slow
def test_sigterm_to_a_worker_stops_its_job_and_the_sweep_logs_the_others(
    tmp_path: Path,
) -> None:
    with _session(_parallel_sweep(tmp_path), tmp_path) as proc:
        for job in ("0", "1"):
            _wait_for_log(tmp_path / "sweep" / job / "paraeval.log", "loaded", proc)
        os.kill(_workers(proc.pid)[0], signal.SIGTERM)
        _, err = proc.communicate(timeout=400)
        assert _gone_within(proc.pid, 5) == []
    text = err.decode()
    assert proc.returncode == 128 + signal.SIGTERM, text[-2000:]
    stopped = [ln for ln in text.splitlines() if "the sweep goes on" in ln]
    assert len(stopped) == 1 and stopped[0].startswith("paraeval: interrupted (SIGTERM)")
    # the two other jobs, the later one (job 2) included, are logged
    logged = _logged_jobs(tmp_path / "store")
    assert len(logged) == 2 and str((tmp_path / "sweep" / "2").resolve()) in logged, logged


@pytest.mark.slow
def test_kill_9_of_a_worker_stops_the_sweep_with_one_line(tmp_path: Path) -> None:
    with _session(_parallel_sweep(tmp_path), tmp_path) as proc:
        _wait_for_log(tmp_path / "sweep" / "0" / "paraeval.log", "loaded", proc)
        os.kill(_workers(proc.pid)[0], signal.SIGKILL)
        _, err = proc.communicate(timeout=120)
        assert _gone_within(proc.pid, 5) == []
    text = err.decode()
    assert proc.returncode == 1, text[-2000:]
    assert "Traceback" not in text
    errors = [ln for ln in text.splitlines() if ln.startswith("paraeval: error:")]
    assert len(errors) == 1 and "worker processes was killed" in errors[0], text[-2000:]
