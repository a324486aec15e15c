"""scripts/compare_outputs.py finds what differs between two output directories."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from compare_outputs import compare_dirs


def _write(root: Path, score: float, extra: bool = False) -> Path:
    (root / "plots").mkdir(parents=True)
    (root / ".hydra").mkdir()
    (root / ".hydra" / "config.yaml").write_text(f"run: {score}\n")  # never compared
    pd.DataFrame({"system": ["a", "b"], "bleu": [1.5, score]}).to_csv(
        root / "system_scores.csv", index=False
    )
    pd.DataFrame({"x": [[1, 2], [3]]}).to_parquet(root / "segment_scores.parquet")
    (root / "plots" / "p.png").write_bytes(b"png")
    if extra:
        (root / "plots" / "q.png").write_bytes(b"png")
    return root


def test_same_directories_agree(tmp_path: Path) -> None:
    assert compare_dirs(_write(tmp_path / "a", 2.0), _write(tmp_path / "b", 2.0)) == []


def test_a_changed_value_and_a_missing_file_are_reported(tmp_path: Path) -> None:
    problems = compare_dirs(_write(tmp_path / "a", 2.0), _write(tmp_path / "b", 2.5, extra=True))
    assert any("system_scores.csv" in p and "'bleu'" in p and "2.5" in p for p in problems)
    assert any("only in" in p and "q.png" in p for p in problems)
    assert len(problems) == 2
    # within a relative tolerance the values agree
    assert len(compare_dirs(tmp_path / "a", tmp_path / "b", rtol=0.3)) == 1


def test_files_only_the_new_directory_has_may_be_allowed(tmp_path: Path) -> None:
    old, new = _write(tmp_path / "a", 2.0), _write(tmp_path / "b", 2.0, extra=True)
    assert len(compare_dirs(old, new)) == 1
    assert compare_dirs(old, new, allow_new=True) == []
    # a file the old directory has and the new lacks is still a difference
    assert len(compare_dirs(new, old, allow_new=True)) == 1
