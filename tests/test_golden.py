"""The demo's output tables are a committed golden set (tests/golden/demo): a default run of the
embedded demo must write the same tables with the same numbers, so a number changes only together
with a new golden file and a CHANGELOG.md line.

The golden files are the tables of ``paraeval tracking=none`` on the demo, run with the vector
instructions held to AVX2 (:data:`AVX2`): on a CPU with AVX-512, numpy's ``power`` (ROUGE-W),
OpenBLAS (the resampling tests' sums) and the float32 kernels of PyTorch and MKL (the encoder)
round differently in the last bits, and the rank correlations of those columns then move by up
to 5e-4, and a randomization p-value by one permutation, where ties break the other way. Each
library's documented switch keeps it to its AVX2 code, which gives the same bits on either CPU.
Floats are compared to a relative 1e-6 (absolute 1e-9); any change a reader could see is far
larger. Held to AVX2, the encoder's float32 scores still differ in the last bits between an AMD
EPYC and an Intel Xeon with AMX (up to 1.8e-7): where the run's segment scores are within that
rounding but not bit-equal to the golden ones, the tables derived from their ranks
(:data:`RANK_TABLES`) are compared to an absolute :data:`RANK_ATOL`. To renew them after an
intended change: run that command with :data:`AVX2`'s variables set, copy its ``*.csv`` and
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
# the tables a tie broken the other way moves, and how far
RANK_TABLES, RANK_ATOL = ("correlations.csv", "significance.csv"), 5e-4


# each library's switch to its AVX2 code (a CPU without AVX-512 runs that code anyway)
AVX2 = {
    "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL",  # numpy's dispatched loops
    "ATEN_CPU_CAPABILITY": "avx2",  # PyTorch's own kernels
    "MKL_ENABLE_INSTRUCTIONS": "AVX2",  # PyTorch's matrix products
    "ONEDNN_MAX_CPU_ISA": "AVX2",
    "OPENBLAS_CORETYPE": "Haswell",  # numpy's and scipy's BLAS (the resampling tests' sums)
}


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
        **AVX2,
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
    scores = "segment_scores.parquet"
    bit_equal = not compare_tables(GOLDEN / scores, demo_run / scores)
    problems = {
        name: found
        for name in sorted(_tables(GOLDEN))
        if (
            found := compare_tables(
                GOLDEN / name,
                demo_run / name,
                rtol=RTOL,
                atol=ATOL if bit_equal or name not in RANK_TABLES else RANK_ATOL,
            )
        )
    }
    assert problems == {}


@pytest.mark.slow
def test_the_demo_ranks_lower_is_better_metrics_by_their_agreement(demo_run: Path) -> None:
    """WMD and TER correlate negatively with meaning and are lower-is-better: in the comparison
    between metrics they stand where the strength of their agreement puts them."""
    import pandas as pd

    sig = pd.read_csv(demo_run / "significance.csv")
    corr = pd.read_csv(demo_run / "correlations.csv")
    sig = sig[(sig["aspect"] == "human_meaning") & (sig["level"] == "segment")]
    cell = corr[
        (corr["aspect"] == "human_meaning")
        & (corr["level"] == "segment")
        & (corr["coefficient"] == sig["coefficient"].iloc[0])
    ].set_index("metric")["value"]
    clusters = dict(zip(sig["metric_a"], sig["cluster_a"], strict=True))
    clusters |= dict(zip(sig["metric_b"], sig["cluster_b"], strict=True))
    adjusted = set(sig.loc[sig["adjusted_a"], "metric_a"]) | set(
        sig.loc[sig["adjusted_b"], "metric_b"]
    )
    assert {"wmd", "ter"} <= adjusted and "ibleu" not in adjusted
    assert cell["wmd"] < 0 and cell["ter"] < 0
    for lower in ("wmd", "ter"):
        # every pair's winner agrees more after the adjustment
        for row in sig[(sig["metric_a"] == lower) | (sig["metric_b"] == lower)].itertuples():
            a = -row.r_a if row.adjusted_a else row.r_a
            b = -row.r_b if row.adjusted_b else row.r_b
            assert a >= b
        if -cell[lower] > cell["ibleu"]:
            assert clusters[lower] <= clusters["ibleu"]
