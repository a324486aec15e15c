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
from pathlib import Path

import pytest

from tests.pipeline.helpers import cli_env

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


def _start(args: list[str], cwd: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "paraeval", *args],
        cwd=cwd,
        env=cli_env(PARAEVAL_CACHE_DIR=str(cwd / "cache")),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
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
