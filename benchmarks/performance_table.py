"""docs/performance.md's table, from the JSON files the benchmark scripts wrote (``--json``).

    .venv/bin/python benchmarks/performance_table.py .cache/bench docs/performance.md

Reads every ``*.json`` in the folder (a list of rows: benchmark, what, paraeval, anchor,
anchor_value, unit, ratio; see ``results.py``) and writes one Markdown table, with the line
that says where and when it was measured, between the markers ``<!-- bench:start -->`` and
``<!-- bench:end -->`` of the document; the text around them is kept. A document without the
markers gets them in place of its first Markdown table (or at its end when it has none); a
missing document is created with a title.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

START = "<!-- bench:start -->"
END = "<!-- bench:end -->"
TITLE = "# Performance"
HEADER = (
    "| benchmark | what | paraeval | anchor | anchor figure | ratio |",
    "|---|---|---|---|---|---|",
)
# the order of the table: the whole run first, then memory and the sweep, then the parts
ORDER = (
    "bench_run",
    "bench_memory",
    "bench_mtme",
    "bench_sweep",
    "bench_engine",
    "bench_syntactic",
    "bench_ter",
    "bench_quick",
    "bench_semantic",
    "bench_correlation",
    "bench_compare",
)


def read_rows(folder: Path) -> list[dict[str, Any]]:
    """Every row of every JSON file in ``folder``, in the table's order."""
    files = sorted(folder.glob("*.json"), key=lambda f: (_rank(f.stem), f.stem))
    rows: list[dict[str, Any]] = []
    for path in files:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, list):
            raise SystemExit(f"{path}: expected a list of rows, found {type(data).__name__}")
        rows.extend(data)
    return rows


def _rank(stem: str) -> int:
    """The place of a script's figures (``bench_sweep_demo`` goes with ``bench_sweep``)."""
    for k, name in enumerate(ORDER):
        if stem == name or stem.startswith(name + "_"):
            return k
    return len(ORDER)


def number(value: float | None) -> str:
    """Three significant figures or so, with thousands separated."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    size = abs(value)
    if size >= 100:
        return f"{value:,.0f}"
    if size >= 10:
        return f"{value:.1f}"
    if size >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def with_unit(value: float | None, unit: str) -> str:
    shown = number(value)
    return shown if shown == "–" or not unit else f"{shown} {unit}"


def table(rows: Sequence[dict[str, Any]]) -> list[str]:
    lines = list(HEADER)
    for r in rows:
        ratio = r.get("ratio")
        anchor = r.get("anchor")
        cells = [
            f"`{r['benchmark']}`",
            r["what"],
            with_unit(r["paraeval"], r.get("unit", "")),
            anchor if anchor else "–",
            with_unit(r.get("anchor_value"), r.get("unit", "")),
            "–" if ratio is None else f"{number(ratio)}x",
        ]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return lines


def machine() -> str:
    """The machine in a few words: CPUs, their model, memory, the system."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                model = line.partition(":")[2].strip()
                break
    except OSError:
        model = platform.processor()
    words = f"{os.cpu_count()} CPUs"
    if model:
        words += f" ({model})"
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        words += f", {pages / 2**30:.0f} GiB of memory"
    except (ValueError, OSError, AttributeError):
        pass
    return f"{words}, {platform.system()}, Python {platform.python_version()}"


def generated(rows: Sequence[dict[str, Any]], measured_on: str, where: str) -> list[str]:
    """The part between the markers: the line that says how it was made, and the table."""
    return [
        START,
        f"Made by `make bench` on {measured_on}, on a machine with {where}. Ratio = paraeval / "
        "anchor, both measured in the same run (below 1: paraeval takes less).",
        "",
        *table(rows),
        END,
    ]


def place(document: str | None, block: Sequence[str]) -> str:
    """``document`` with ``block`` between its markers; the rest of it is kept as it was."""
    if document is None:
        return "\n".join([TITLE, "", *block]) + "\n"
    lines = document.splitlines()
    if START in lines and END in lines:
        start, end = lines.index(START), lines.index(END)
        if end < start:
            raise SystemExit(f"{END} comes before {START}")
        return "\n".join([*lines[:start], *block, *lines[end + 1 :]]) + "\n"
    first = next((k for k, line in enumerate(lines) if line.startswith("|")), None)
    if first is None:
        return "\n".join([*lines, "", *block]) + "\n"
    last = first
    while last + 1 < len(lines) and lines[last + 1].startswith("|"):
        last += 1
    return "\n".join([*lines[:first], *block, *lines[last + 1 :]]) + "\n"


def newest(folder: Path) -> str:
    """The date of the newest figures in ``folder``: when the benchmarks ran."""
    stamps = [f.stat().st_mtime for f in folder.glob("*.json")]
    when = dt.datetime.fromtimestamp(max(stamps)) if stamps else dt.datetime.now()
    return when.date().isoformat()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="the folder of the scripts' JSON files")
    parser.add_argument("document", type=Path, help="the Markdown file to write")
    args = parser.parse_args(argv)
    if not args.results.is_dir():
        print(f"no benchmark figures in {args.results}", file=sys.stderr)
        return 2
    rows = read_rows(args.results)
    old = args.document.read_text(encoding="utf-8") if args.document.exists() else None
    text = place(old, generated(rows, newest(args.results), machine()))
    args.document.parent.mkdir(parents=True, exist_ok=True)
    args.document.write_text(text, encoding="utf-8")
    print(f"{args.document}: {len(rows)} rows from {args.results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
