"""An evaluation's output folder: its tables, then the figures and ``report.html`` drawn from them.

The stages compute tables; the report draws from the finished evaluation. This module sits above
both, for the command line and the Python API, which write the same folder.
"""

from __future__ import annotations

from pathlib import Path

from paraeval.pipeline.report.figures import write_figures
from paraeval.pipeline.report.html import write_html
from paraeval.pipeline.stages.evaluation import Evaluation, write_tables
from paraeval.pipeline.terminal import Status


def write_outputs(
    ev: Evaluation,
    out_dir: str | Path,
    status: Status | None = None,
) -> Path:
    """Every output file, figure and ``report.html`` of ``ev`` into ``out_dir``; ``status``
    tells the terminal which part is being written."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    status = status if status is not None else Status(enabled=False)
    with status.stage("write tables"):
        write_tables(ev, out)
    with status.stage("figures"):
        write_figures(ev, out)
    with status.stage("report page"):
        write_html(ev, out)
    return out
