"""The run as a plain function of a composed config, so it runs without Hydra's wrapper."""

from __future__ import annotations

import logging
import time
from pathlib import Path

from omegaconf import DictConfig

from paraeval.pipeline.api import Evaluation
from paraeval.pipeline.config.settings import Settings, check_table
from paraeval.pipeline.data.load import load_data
from paraeval.pipeline.errors import RunContext
from paraeval.pipeline.files import check_writable
from paraeval.pipeline.report import summary as report
from paraeval.pipeline.report.figures import writing_outputs
from paraeval.pipeline.stages.evaluation import compute
from paraeval.pipeline.stages.memory_bounds import check_memory
from paraeval.pipeline.tracking.trackers import tracker_from_settings

log = logging.getLogger("paraeval")


def run(
    cfg: DictConfig,
    out_dir: str | Path,
    overrides: list[str] | None = None,
    context: RunContext | None = None,
) -> Evaluation:
    """Outputs go to ``out_dir`` before anything is sent to MLflow."""
    started = time.time()
    context = context or RunContext()
    out = Path(out_dir)
    check_writable(out)
    settings = Settings.from_config(cfg)
    tracker = tracker_from_settings(settings.tracking)
    tracker.check()
    status = report.Status(enabled=settings.report.progress)
    with status.stage("load"):
        table = load_data(settings.data)
    check_table(settings, table)
    check_memory(settings, table)
    shape = len(table), table["item_id"].nunique(), table["system"].nunique()
    log.info("loaded %d rows: %d items x %d systems", *shape)
    # each figure is drawn aside once its tables exist; the tracker waits for them (``finish``)
    with writing_outputs(out, settings.report.parallel_figures, context) as outputs:
        computed = compute(
            table, settings, status=status, started_at=started, after_stage=outputs.draw_ready
        )
        ev = Evaluation.of(computed)
        ev.out_dir = out
        with status.stage("write tables"):
            outputs.write_tables(ev)
        with status.stage("figures, page, MLflow"):
            logged = tracker.log_evaluation(ev, out, overrides or [], outputs.finish, context)
    # an interrupt deferred while the store was writing, if no checkpoint took it
    context.raise_deferred()
    run_id, uri = (logged.run_id, logged.uri) if logged else (None, None)
    report.print_summary(ev, out, run_id, uri)
    if logged:
        print(f"Run page:     {logged.page}", flush=True)
    return ev
