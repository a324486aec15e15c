"""benchmarks/performance_table.py: the figures of the benchmark scripts' JSON files become one
table between the markers of docs/performance.md, and the text around it stays."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


performance_table = _load("performance_table")
results = _load("results")

RUN = [
    results.row("bench_run", "ParaBank-Eval, cold cache", 65.7, "s", "plain script", 487.25),
    results.row("bench_run", "ParaBank-Eval, warm cache", 21.04, "s"),
]
MEMORY = [results.row("bench_memory", "peak RSS | 400,000 rows", 2.16, "GB", "pandas", 0.54)]
EXPECTED_TABLE = [
    "| benchmark | what | paraeval | anchor | anchor figure | ratio |",
    "|---|---|---|---|---|---|",
    "| `bench_run` | ParaBank-Eval, cold cache | 65.7 s | plain script | 487 s | 0.135x |",
    "| `bench_run` | ParaBank-Eval, warm cache | 21.0 s | – | – | – |",
    "| `bench_memory` | peak RSS \\| 400,000 rows | 2.16 GB | pandas | 0.54 GB | 4.00x |",
]


@pytest.fixture
def figures(tmp_path: Path) -> Path:
    folder = tmp_path / "bench"
    # written out of the table's order: the table puts the whole run first
    results.write_rows(folder / "bench_memory.json", MEMORY)
    results.write_rows(folder / "bench_run.json", RUN)
    return folder


def _table_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("|")]


def test_rows_carry_the_ratio_against_the_anchor(figures: Path) -> None:
    rows = json.loads((figures / "bench_run.json").read_text(encoding="utf-8"))
    assert [set(r) for r in rows] == [set(results.KEYS)] * 2
    assert rows[0]["ratio"] == pytest.approx(65.7 / 487.25)
    assert rows[1]["anchor"] is None and rows[1]["ratio"] is None


def test_the_table_between_the_markers_and_the_text_around_it_kept(
    figures: Path, tmp_path: Path
) -> None:
    doc = tmp_path / "performance.md"
    before = "# Performance\n\nWhat the scripts measure, written by hand.\n\n"
    after = "\nA paragraph below the table.\n"
    old = "<!-- bench:start -->\nan old table\n<!-- bench:end -->\n"
    doc.write_text(before + old + after, encoding="utf-8")
    assert performance_table.main([str(figures), str(doc)]) == 0
    text = doc.read_text(encoding="utf-8")
    assert text.startswith(before + "<!-- bench:start -->\nMade by `make bench` on ")
    assert text.endswith("| 4.00x |\n<!-- bench:end -->\n" + after)
    assert "an old table" not in text
    assert _table_lines(text) == EXPECTED_TABLE
    assert f"{__import__('os').cpu_count()} CPUs" in text
    # run again on its own output: the same document
    assert performance_table.main([str(figures), str(doc)]) == 0
    assert doc.read_text(encoding="utf-8") == text


def test_a_document_without_markers_has_its_first_table_replaced(
    figures: Path, tmp_path: Path
) -> None:
    doc = tmp_path / "performance.md"
    doc.write_text(
        "# Performance\n\nIntro.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\nBelow.\n", encoding="utf-8"
    )
    assert performance_table.main([str(figures), str(doc)]) == 0
    text = doc.read_text(encoding="utf-8")
    assert text.startswith("# Performance\n\nIntro.\n\n<!-- bench:start -->\n")
    assert text.endswith("<!-- bench:end -->\n\nBelow.\n")
    assert _table_lines(text) == EXPECTED_TABLE


def test_a_missing_document_is_made_with_a_title(figures: Path, tmp_path: Path) -> None:
    doc = tmp_path / "docs" / "performance.md"
    assert performance_table.main([str(figures), str(doc)]) == 0
    text = doc.read_text(encoding="utf-8")
    assert text.startswith("# Performance\n\n<!-- bench:start -->\n")
    assert _table_lines(text) == EXPECTED_TABLE
