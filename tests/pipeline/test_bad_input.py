"""Bad input through the CLI: one line naming file/row/column, exit code != 0, no traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.pipeline.helpers import run_cli

FAST = ["tracking=none", "report.print_tables=false", "correlation.ci=false", "metrics=[bleu,chrf]"]


def _table(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def _rows(n: int = 4) -> list[dict[str, object]]:
    return [
        {
            "item_id": f"i{i}",
            "system": s,
            "source": f"the source {i}",
            "references": [f"a ref {i}"],
            "candidate": f"cand {s} {i}",
            "human_meaning": float(i % 3),
        }
        for i in range(n)
        for s in ("a", "b", "c")
    ]


def _assert_user_error(proc, *fragments: str) -> None:  # type: ignore[no-untyped-def]
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("paraeval: error:")]
    assert len(lines) == 1, proc.stderr[-2000:]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_missing_column(tmp_path: Path) -> None:
    rows = _rows()
    for r in rows:
        del r["candidate"]
    path = _table(tmp_path / "t.jsonl", rows)
    proc = run_cli(
        ["data=table", f"data.path={path}", f"hydra.run.dir={tmp_path}/o", *FAST], tmp_path
    )
    _assert_user_error(proc, str(path), "column 'candidate'", "not found")


def test_item_without_reference(tmp_path: Path) -> None:
    rows = _rows()
    rows[4]["references"] = []
    path = _table(tmp_path / "t.jsonl", rows)
    proc = run_cli(
        ["data=table", f"data.path={path}", f"hydra.run.dir={tmp_path}/o", *FAST], tmp_path
    )
    _assert_user_error(proc, str(path), "row 5", "column 'references'", "needs one")


def test_mismatched_line_counts(tmp_path: Path) -> None:
    (tmp_path / "src.txt").write_text("a b c\nd e f\ng h i\n", encoding="utf-8")
    (tmp_path / "ref.txt").write_text("a b x\nd e x\ng h x\n", encoding="utf-8")
    (tmp_path / "a.txt").write_text("a b\nd e\n", encoding="utf-8")
    proc = run_cli(
        [
            "data=text",
            f"data.source={tmp_path}/src.txt",
            f"data.references=[{tmp_path}/ref.txt]",
            f"data.systems={{a: {tmp_path}/a.txt}}",
            f"hydra.run.dir={tmp_path}/o",
            *FAST,
        ],
        tmp_path,
    )
    _assert_user_error(proc, f"{tmp_path}/a.txt", "row 3", "2 lines", "has 3")


@pytest.mark.parametrize("alpha", ["1.5", "-0.1"])
def test_alpha_outside_unit_interval(tmp_path: Path, alpha: str) -> None:
    proc = run_cli(
        [f"metrics.ibleu.alpha={alpha}", "tracking=none", f"hydra.run.dir={tmp_path}/o"], tmp_path
    )
    _assert_user_error(proc, "alpha must be in [0, 1]", alpha)


def test_unknown_metric_id(tmp_path: Path) -> None:
    proc = run_cli(
        ["metrics=[bleu,blue]", "tracking=none", f"hydra.run.dir={tmp_path}/o"], tmp_path
    )
    _assert_user_error(proc, "unknown metrics option 'blue'")


def test_unreadable_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.tsv"
    proc = run_cli(
        ["data=table", f"data.path={missing}", f"hydra.run.dir={tmp_path}/o", *FAST], tmp_path
    )
    _assert_user_error(proc, str(missing), "not found")


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.tsv"
    path.write_bytes(
        "item_id\tsystem\tsource\treferences\tcandidate\n1\ta\tcaf\xe9\tx\ty\n".encode("latin-1")
    )
    proc = run_cli(
        ["data=table", f"data.path={path}", f"hydra.run.dir={tmp_path}/o", *FAST], tmp_path
    )
    _assert_user_error(proc, str(path), "row 2", "UTF-8")


def test_non_numeric_human_score(tmp_path: Path) -> None:
    rows = _rows()
    rows[2]["human_meaning"] = "good"
    path = _table(tmp_path / "t.jsonl", rows)
    proc = run_cli(
        ["data=table", f"data.path={path}", f"hydra.run.dir={tmp_path}/o", *FAST], tmp_path
    )
    _assert_user_error(proc, str(path), "row 3", "column 'human_meaning'", "expected a number")


def test_duplicate_item_system(tmp_path: Path) -> None:
    rows = _rows()
    rows.append(dict(rows[0]))
    path = _table(tmp_path / "t.jsonl", rows)
    proc = run_cli(
        ["data=table", f"data.path={path}", f"hydra.run.dir={tmp_path}/o", *FAST], tmp_path
    )
    _assert_user_error(proc, str(path), "duplicate (item_id, system)")


def test_empty_candidate_is_scored_and_warned(tmp_path: Path) -> None:
    rows = _rows()
    rows[1]["candidate"] = ""
    rows[5]["candidate"] = "   "
    path = _table(tmp_path / "t.jsonl", rows)
    proc = run_cli(
        ["data=table", f"data.path={path}", f"hydra.run.dir={tmp_path}/o", *FAST], tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "2 empty or whitespace-only candidates" in proc.stdout + proc.stderr
    import pandas as pd

    seg = pd.read_parquet(tmp_path / "o" / "segment_scores.parquet")
    assert seg["bleu"].notna().all()
    assert seg.loc[seg.candidate == "", "bleu"].iloc[0] == 0.0
