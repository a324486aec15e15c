"""The figures a benchmark script writes with ``--json PATH``, for ``performance_table.py``.

One row per figure: what paraeval measured, the anchor measured in the same run (a reference
implementation, the plain script a user writes, a single run), and their ratio, paraeval /
anchor (below 1: paraeval takes less time or memory than the anchor).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

KEYS = ("benchmark", "what", "paraeval", "anchor", "anchor_value", "unit", "ratio")


def row(
    benchmark: str,
    what: str,
    paraeval: float,
    unit: str,
    anchor: str | None = None,
    anchor_value: float | None = None,
) -> dict[str, Any]:
    """A row of the table; without an anchor figure its ratio is None."""
    ratio = None
    if anchor_value is not None and anchor_value > 0 and math.isfinite(anchor_value):
        ratio = paraeval / anchor_value
    return {
        "benchmark": benchmark,
        "what": what,
        "paraeval": paraeval,
        "anchor": anchor,
        "anchor_value": anchor_value,
        "unit": unit,
        "ratio": ratio,
    }


def write_rows(path: Path | None, rows: list[dict[str, Any]]) -> None:
    """Writes ``rows`` to ``path`` (nothing when no path was asked for)."""
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    print(f"figures written to {path}")
