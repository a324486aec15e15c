"""Run the CLI in a subprocess the way a user would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# a run that is quick to score and tracks the same way as any other
FAST = [
    "metrics=[bleu]",
    "correlation.ci=false",
    "compare.enabled=false",
    "alpha_curve.enabled=false",
    "report.print_tables=false",
]


def cli_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        MLFLOW_DISABLE_TELEMETRY="true",
        TOKENIZERS_PARALLELISM="false",
        PYTHONWARNINGS="ignore",
    )
    env.update(extra)
    return env


def run_cli(
    args: list[str], cwd: Path, timeout: int = 300, **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "paraeval", *args],
        cwd=cwd,
        env=cli_env(**env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def relog(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``paraeval-log ARGS`` (directories, options), as a user would run it."""
    return subprocess.run(
        [sys.executable, "-m", "paraeval.pipeline.cli.relog", *args],
        cwd=cwd,
        env=cli_env(**env),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def logged_run_args(tmp_path: Path) -> list[str]:
    """A short run of the demo into ``tmp_path/out``, logged to a SQLite store in ``tmp_path``."""
    return [
        f"hydra.run.dir={tmp_path / 'out'}",
        f"tracking.store_dir={tmp_path / 'store'}",
        "metrics=[bleu,ibleu,chrf,ter]",
        "report.print_tables=false",
    ]


def files_containing(text: str, *roots: Path) -> list[Path]:
    """Every file under ``roots`` (hidden ones included) whose bytes hold ``text``."""
    needle = text.encode()
    found = []
    for root in roots:
        for path in [root] if root.is_file() else sorted(root.rglob("*")):
            if path.is_file() and not path.is_symlink() and needle in path.read_bytes():
                found.append(path)
    return found
