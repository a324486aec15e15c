"""The exit status of a sweep, whose jobs may run in other processes (``hydra/launcher=parallel``):
each job records its status in a file the command names in the environment, and the command exits
with the most serious one once every job has run (a job that fails does not stop the sweep)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

EXIT_OK = 0
EXIT_USER_ERROR = 2  # a mistake in the input or the settings, one line says which
EXIT_NOT_LOGGED = 3  # outputs written but not logged; the warning line says how to log them
EXIT_INCOMPLETE = 4  # tables written and logged, some figures missing; the warning names them
SEVERITY = (EXIT_USER_ERROR, EXIT_NOT_LOGGED, EXIT_INCOMPLETE)  # the most serious first
OUTCOME_ENV = "PARAEVAL_OUTCOME_FILE"

RECORDED: list[int] = []  # where no file is named (a job run without the command line)


def record(status: int) -> None:
    """0 is recorded too: the file lists every job."""
    path = os.environ.get(OUTCOME_ENV)
    if not path:
        RECORDED.append(status)
        return
    # one short append: whole lines even when jobs in several processes write at once
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, f"{status}\n".encode())
    finally:
        os.close(fd)


def worst(statuses: list[int]) -> int:
    """An interrupt's status, then :data:`SEVERITY`'s order; 0 when every job went well."""
    interrupted = [s for s in statuses if s > 128]
    if interrupted:
        return interrupted[0]
    for status in SEVERITY:
        if status in statuses:
            return status
    return max(statuses, default=EXIT_OK)


@contextmanager
def recording() -> Iterator[list[int]]:
    """A fresh file for this command's jobs; on the way out the list holds every status."""
    fd, name = tempfile.mkstemp(prefix="paraeval-outcome-")
    os.close(fd)
    before = os.environ.get(OUTCOME_ENV)
    os.environ[OUTCOME_ENV] = name
    statuses: list[int] = []
    try:
        yield statuses
    finally:
        text = Path(name).read_text() if Path(name).exists() else ""
        statuses.extend(int(line) for line in text.split() if line.isdigit())
        Path(name).unlink(missing_ok=True)
        if before is None:
            os.environ.pop(OUTCOME_ENV, None)
        else:
            os.environ[OUTCOME_ENV] = before
