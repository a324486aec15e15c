"""One line per message: Hydra's own errors are one ``paraeval: error:`` line with exit 2; off a
terminal each warning is one line; libraries' warnings go to ``paraeval.log``, not stderr."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.pipeline.helpers import logged_run_args, run_cli


@pytest.mark.slow
@pytest.mark.parametrize(
    ("argument", "said"),
    [
        ("metrics=[bleu,chrf", "cannot read the override 'metrics=[bleu,chrf'"),
        ("seed=${oops", "cannot read the override 'seed=${oops'"),
        (
            "hydra.run.dri=out",
            "'hydra.run.dri' in 'hydra.run.dri=out'; did you mean 'hydra.run.dir'",
        ),
        ("hydra.job.env_set.X=1", "add it with '+hydra.job.env_set.X=1'"),
        ("--config-name=nosuch", "Cannot find primary config 'nosuch'"),
    ],
)
def test_hydras_errors_are_one_line_exit_2(tmp_path: Path, argument: str, said: str) -> None:
    proc = run_cli([argument, "tracking=none", f"hydra.run.dir={tmp_path}/o"], tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("paraeval: error: "), proc.stderr[-2000:]
    assert said in lines[0]
    assert not (tmp_path / "o" / "paraeval.log").exists()  # no run began


@pytest.mark.slow
def test_a_logged_run_writes_paraeval_lines_only(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = run_cli(
        logged_run_args(tmp_path),
        tmp_path,
        PARAEVAL_CACHE_DIR=str(tmp_path / "cache"),
        PYTHONWARNINGS="default",  # every library warning shows, as on a user's machine
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stderr.splitlines()
    assert all(ln.startswith("paraeval: ") for ln in lines if ln.strip()), proc.stderr
    # the demo's four systems: a long warning, on one line off a terminal
    assert any(ln.startswith("paraeval: warning: system-level correlations") for ln in lines)
    # libraries' warnings (there are some with PYTHONWARNINGS=default, e.g. SQLAlchemy's from
    # MLflow's store) are in the log file, not on the terminal
    log = (out / "paraeval.log").read_text()
    library = [ln for ln in log.splitlines() if "[py.warnings][WARNING]" in ln]
    assert library, log[-2000:]
    categories = {m for ln in library for m in re.findall(r"\b(\w+Warning): ", ln)}
    assert categories and not [c for c in categories if c in proc.stderr], categories
