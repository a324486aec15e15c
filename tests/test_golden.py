"""The demo's output tables are a committed golden set (tests/golden/demo): a default run of the
embedded demo must write the same tables with the same numbers, so a number changes only together
with a new golden file and a CHANGELOG.md line.

The golden files are the tables of ``paraeval tracking=none`` on the demo. Floats are compared to a
relative 1e-6 (absolute 1e-9): the encoder metrics run in float32, whose last bits may follow the
CPU's vector instructions; any change a reader could see is far larger.
To renew them after an intended change: run that command, copy its ``*.csv`` and
``segment_scores.parquet`` here, and say what changed and why in CHANGELOG.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.pipeline.helpers import run_cli

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "tests" / "golden" / "demo"
sys.path.insert(0, str(REPO / "scripts"))
from compare_outputs import compare_tables  # noqa: E402

RTOL, ATOL = 1e-6, 1e-9


def _tables(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir() if p.suffix in (".csv", ".parquet")}


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("golden")
    out = work / "out"
    proc = run_cli(
        ["tracking=none", f"hydra.run.dir={out}"],
        cwd=work,
        timeout=900,
        PARAEVAL_CACHE_DIR=str(work / "cache"),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def test_the_golden_set_is_whole() -> None:
    assert {
        "segment_scores.parquet",
        "system_scores.csv",
        "correlations.csv",
        "system_comparison.csv",
        "alpha_curve.csv",
        "alpha_systems.csv",
    } <= _tables(GOLDEN)
    changelog = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    assert "golden" in changelog.lower()


@pytest.mark.slow
def test_the_demo_writes_the_golden_tables(demo_run: Path) -> None:
    # a table added or removed is a change too
    assert _tables(demo_run) == _tables(GOLDEN)
    problems = {
        name: found
        for name in sorted(_tables(GOLDEN))
        if (found := compare_tables(GOLDEN / name, demo_run / name, rtol=RTOL, atol=ATOL))
    }
    assert problems == {}
