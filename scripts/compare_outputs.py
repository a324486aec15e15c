"""Compare two paraeval output directories: same files, same tables, same values.

Usage: ``python scripts/compare_outputs.py OLD_DIR NEW_DIR [--rtol 0] [--allow-new]``

Every table (``*.csv``, ``*.parquet``) must have the same columns in the same order, the same rows
and the same values (exactly, or within ``--rtol`` for floats); every figure must exist in both.
What legitimately differs between two runs is left out: Hydra's ``.hydra/`` folder (paths and
timestamps), ``run_info.json`` (output paths, run ids), logs. Exit code 0 when the directories
agree, 1 with one line per difference otherwise.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

SKIPPED_SUFFIXES = (".log", ".json", ".lock")
SKIPPED_PARTS = (".hydra",)


def _files(root: Path) -> set[str]:
    return {
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file()
        and not p.name.endswith(SKIPPED_SUFFIXES)
        and not any(part in SKIPPED_PARTS for part in p.relative_to(root).parts)
    }


def _read(path: Path) -> pd.DataFrame:
    if path.suffix == ".parquet":
        return pd.read_parquet(path)
    return pd.read_csv(path, keep_default_na=False, na_values=[""])


def _column_differences(
    name: str, old: pd.Series, new: pd.Series, rtol: float, atol: float = 0.0
) -> list[str]:
    if pd.api.types.is_float_dtype(old) and pd.api.types.is_float_dtype(new):
        a, b = old.to_numpy(dtype=float), new.to_numpy(dtype=float)
        same = (
            np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
            if rtol or atol
            else ((a == b) | (np.isnan(a) & np.isnan(b)))
        )
    else:
        same = np.array([_same_cell(x, y) for x, y in zip(old, new, strict=True)], dtype=bool)
    if same.all():
        return []
    row = int(np.flatnonzero(~same)[0])
    return [
        f"column {name!r}: {int((~same).sum())} cells differ, first at row {row}: "
        f"{old.iloc[row]!r} != {new.iloc[row]!r}"
    ]


def _same_cell(x: object, y: object) -> bool:
    if isinstance(x, np.ndarray | list) or isinstance(y, np.ndarray | list):
        return bool(np.array_equal(np.asarray(x, dtype=object), np.asarray(y, dtype=object)))
    if pd.isna(x) and pd.isna(y):  # type: ignore[arg-type]
        return True
    return bool(x == y)


def compare_tables(old: Path, new: Path, rtol: float = 0.0, atol: float = 0.0) -> list[str]:
    a, b = _read(old), _read(new)
    problems: list[str] = []
    if list(a.columns) != list(b.columns):
        problems.append(f"columns differ: {list(a.columns)} != {list(b.columns)}")
        return problems
    if len(a) != len(b):
        problems.append(f"{len(a)} rows != {len(b)} rows")
        return problems
    for column in a.columns:
        problems += _column_differences(str(column), a[column], b[column], rtol, atol)
    return problems


def compare_dirs(old: Path, new: Path, rtol: float = 0.0, allow_new: bool = False) -> list[str]:
    """One line per difference between two output directories (empty when they agree);
    ``allow_new``: files that only the new directory has are not differences."""
    old_files, new_files = _files(old), _files(new)
    problems = [f"only in {old}: {f}" for f in sorted(old_files - new_files)]
    if not allow_new:
        problems += [f"only in {new}: {f}" for f in sorted(new_files - old_files)]
    for name in sorted(old_files & new_files):
        if name.endswith((".csv", ".parquet")):
            problems += [f"{name}: {p}" for p in compare_tables(old / name, new / name, rtol)]
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--rtol", type=float, default=0.0, help="relative tolerance for floats")
    parser.add_argument(
        "--allow-new", action="store_true", help="files only NEW_DIR has are not differences"
    )
    args = parser.parse_args(argv)
    problems = compare_dirs(args.old, args.new, args.rtol, args.allow_new)
    for line in problems:
        print(line)
    if not problems:
        n = len(_files(args.old))
        print(f"{args.old} and {args.new} agree ({n} files compared)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
