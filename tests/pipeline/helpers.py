"""Run the CLI in a subprocess the way a user would."""

from __future__ import annotations

import copy
import functools
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from paraeval.pipeline.config.nodes import AlphaCurveSettings, CompareSettings, EngineSettings
    from paraeval.pipeline.config.settings import CorrelationSettings

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


def finished_run(work: Path, metrics: str, *settings: str) -> Path:
    """A demo run with ``metrics`` (``bleu,chrf``), no tracking and no intervals, in
    ``work/out``: the output folder a tracker logs from."""
    out = work / "out"
    proc = run_cli(
        [
            f"metrics=[{metrics}]",
            "tracking=none",
            f"hydra.run.dir={out}",
            "correlation.ci=false",
            "report.print_tables=false",
            *settings,
        ],
        cwd=work,
        PARAEVAL_CACHE_DIR=str(work / "cache"),
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out


def files_containing(text: str, *roots: Path) -> list[Path]:
    """Every file under ``roots`` (hidden ones included) whose bytes hold ``text``."""
    needle = text.encode()
    found = []
    for root in roots:
        for path in [root] if root.is_file() else sorted(root.rglob("*")):
            if path.is_file() and not path.is_symlink() and needle in path.read_bytes():
                found.append(path)
    return found


def table_rows(text: str) -> dict[str, list[list[tuple[int, int, str]]]]:
    """The tables of a terminal summary, by title: for each data row, its cells as (start, end,
    text). A table is a title, its header, a rule of ``─`` and rows whose cells are separated by
    two or more blanks (the note under a table has none)."""
    lines = text.splitlines()
    tables: dict[str, list[list[tuple[int, int, str]]]] = {}
    for i, line in enumerate(lines):
        if not line.startswith("─"):
            continue
        title = next(lines[j] for j in range(i - 1, -1, -1) if lines[j - 1] == "")
        rows = tables.setdefault(title, [])
        for row in lines[i + 1 :]:
            if "  " not in row.strip():
                break
            rows.append([(m.start(), m.end(), m.group()) for m in re.finditer(r"\S+( \S+)*", row)])
    return tables


NUMBER = re.compile(r"[-+]?\d+(\.\d+)?|–|n/a")


def assert_aligned(text: str) -> int:
    """Every table of ``text`` has its columns aligned: the same number of cells on every row,
    each column's values ending at one character position, and so each number of a value
    (``0.210 [0.19, 0.23] (3)``: four), numbers being right-justified; significance marks in a
    column of their own, starting at one position. Returns how many tables it checked."""
    tables = table_rows(text)
    for title, rows in tables.items():
        rows = [r for r in rows if not r[0][2].startswith("…")]  # "… 18 more"
        assert rows, title
        marks = {r[-1][0] for r in rows if re.fullmatch(r"[*†]+", r[-1][2])}
        assert len(marks) <= 1, (title, rows)  # the marks start in one place
        cells = [[c for c in r[1:] if not re.fullmatch(r"[*†]+", c[2])] for r in rows]
        assert len({len(c) for c in cells}) == 1, (title, rows)
        for k in range(len(cells[0])):
            ends = {c[k][1] for c in cells}
            assert len(ends) == 1, (title, k, [c[k] for c in cells])
            numbers = {tuple(c[k][0] + m.end() for m in NUMBER.finditer(c[k][2])) for c in cells}
            assert len(numbers) == 1, (title, k, [c[k] for c in cells])
    return len(tables)


def invocation_runs(store: Path) -> list[Any]:
    """The parent runs (one per job of a sweep) of the SQLite store in ``store``."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    exp = client.get_experiment_by_name("paraeval")
    assert exp is not None
    runs = client.search_runs([exp.experiment_id])
    return [r for r in runs if r.data.tags.get("paraeval.role") == "invocation"]


@functools.cache
def _composed_node(group: str, option: str) -> dict[str, Any]:
    from omegaconf import OmegaConf

    from paraeval.pipeline.config.compose import compose_config

    cfg = compose_config([f"{group}={option}"] if option else [])
    node = OmegaConf.to_container(cfg[group], resolve=True)
    assert isinstance(node, dict)
    return node


def merged(base: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``changes`` merged in, nested mappings key by key (as Hydra merges)."""
    out = copy.deepcopy(dict(base))
    for key, value in changes.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def conf_node(group: str, option: str = "", **changes: Any) -> dict[str, Any]:
    """A config group's node as ``conf/`` composes it (``option``: the group's file, default the
    run's), with ``changes`` merged in: the settings the tests build come from ``conf/`` too."""
    return merged(_composed_node(group, option), changes)


def correlation_settings(
    changes: Mapping[str, Any] | None = None, preset: str = ""
) -> CorrelationSettings:
    from paraeval.pipeline.config.settings import CorrelationSettings

    return CorrelationSettings.from_node(conf_node("correlation", preset, **(changes or {})))


def compare_settings(**changes: Any) -> CompareSettings:
    from paraeval.pipeline.config.nodes import CompareSettings

    settings = CompareSettings.from_node(conf_node("compare", **changes))
    assert settings is not None
    return settings


def alpha_curve_settings(**changes: Any) -> AlphaCurveSettings:
    from paraeval.pipeline.config.nodes import AlphaCurveSettings

    return AlphaCurveSettings.from_node(merged(_composed_node("alpha_curve", ""), changes))


def engine_settings(kind: str, **changes: Any) -> EngineSettings:
    from paraeval.pipeline.config.nodes import EngineSettings

    return EngineSettings.from_node(conf_node("engine", kind, **changes))
