"""``lifetime.guard``: what a run starts under the guard ends when the run is SIGKILLed, even a
command that ignores SIGTERM (as ``ray start`` does while it starts) and what it left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path


def stand_in_run(tmp: Path) -> str:
    """The run: it starts the guard as LocalRay does (death signal SIGTERM) and waits. The guarded
    command ignores SIGTERM and leaves a grandchild that ignores it too."""
    stubborn = f"trap '' TERM; sleep 300 & echo $! > {tmp}/grandchild; echo $$ > {tmp}/child; wait"
    guarded = (
        "from paraeval.pipeline.lifetime import guard; "
        f"guard(['sh', '-c', {stubborn!r}], grace_s=1.0)"
    )
    return textwrap.dedent(
        f"""
        import os, signal, subprocess, sys
        from paraeval.pipeline.lifetime import die_with_parent
        parent = os.getpid()
        guard = subprocess.Popen(
            [sys.executable, "-c", {guarded!r}],
            preexec_fn=lambda: die_with_parent(parent, signal.SIGTERM),
        )
        open({str(tmp / "guard")!r}, "w").write(str(guard.pid))
        signal.pause()
        """
    )


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has ended; only its parent's wait is missing


def wait_for(paths: list[Path], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not all(p.exists() and p.read_text().strip() for p in paths):
        assert time.monotonic() < deadline, [p.name for p in paths if not p.exists()]
        time.sleep(0.05)


def test_a_guarded_command_and_its_leftovers_end_when_the_run_is_killed(tmp_path: Path) -> None:
    run = subprocess.Popen([sys.executable, "-c", stand_in_run(tmp_path)])
    try:
        files = [tmp_path / name for name in ("guard", "child", "grandchild")]
        wait_for(files, 60)
        pids = [int(p.read_text()) for p in files]
        assert all(alive(pid) for pid in pids)
        assert os.getpgid(pids[1]) == os.getpgid(pids[2]) == pids[0]  # one group, the guard's
        run.send_signal(signal.SIGKILL)
        run.wait()
        deadline = time.monotonic() + 20
        while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [pid for pid in pids if alive(pid)] == []
    finally:
        run.kill()
        for name in ("child", "grandchild"):
            path = tmp_path / name
            if path.exists() and path.read_text().strip() and alive(int(path.read_text())):
                os.kill(int(path.read_text()), signal.SIGKILL)
