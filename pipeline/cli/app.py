"""The whole run as a plain function of a composed config: settings -> load -> the stages of
:mod:`paraeval.pipeline.stages.evaluation` -> output files -> tracking -> terminal summary.
``paraeval.pipeline.cli.main`` is a thin Hydra wrapper around :func:`run`; tests call it directly.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from omegaconf import DictConfig

from paraeval.pipeline.api import Evaluation
from paraeval.pipeline.config.settings import Settings, check_table
from paraeval.pipeline.errors import raise_deferred
from paraeval.pipeline.files import check_writable
from paraeval.pipeline.outputs import write_outputs
from paraeval.pipeline.report import summary as report
from paraeval.pipeline.stages.evaluation import compute

log = logging.getLogger("paraeval")


def run(cfg: DictConfig, out_dir: str | Path, overrides: list[str] | None = None) -> Evaluation:
    """Run every stage; outputs go to ``out_dir`` before anything is sent to MLflow."""
    started = time.time()
    out = Path(out_dir)
    check_writable(out)
    settings = Settings.from_config(cfg)
    status = report.Status(enabled=settings.report.progress)
    with status.stage("load"):
        table = settings.data.load()
    check_table(settings, table)
    log.info(
        "loaded %d rows: %d items x %d systems",
        len(table),
        table["item_id"].nunique(),
        table["system"].nunique(),
    )
    ev = Evaluation.of(compute(table, settings, status=status, started_at=started))
    # the tables, then the figures and the page drawn from them, before tracking, so that the
    # output folder is complete when it is logged
    write_outputs(ev, out, status)
    with status.stage("log to MLflow"):
        logged = settings.tracker.log_evaluation(ev, out, overrides or [])
    # an interrupt deferred while the store was writing, if no checkpoint took it
    raise_deferred()
    run_id, uri = (logged.run_id, logged.uri) if logged else (None, None)
    report.print_summary(ev, out, run_id, uri)
    return ev
