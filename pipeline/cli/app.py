"""The whole run as a plain function of a composed config: settings -> load -> the stages of
:mod:`paraeval.pipeline.stages.evaluation` -> output files -> tracking -> terminal summary.
``paraeval.pipeline.cli.main`` is a thin Hydra wrapper around :func:`run`; tests call it directly.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from omegaconf import DictConfig

from paraeval.pipeline.report import summary as report

from paraeval.pipeline.tracking import lane as tracking_lane
from paraeval.pipeline.errors import raise_deferred
from paraeval.pipeline.stages.evaluation import Evaluation, compute, run_record, write_tables
from paraeval.pipeline.report.figures import Figures
from paraeval.pipeline.files import check_writable
from paraeval.pipeline.report.html import page_around_figures, write_html
from paraeval.pipeline.data.load import take_load_token
from paraeval.pipeline.config.settings import Settings, check_table
from paraeval.pipeline.tracking.mlflow_store import Logged, write_run_info
from paraeval.pipeline.tracking.trackers import MLflowTracker

log = logging.getLogger("paraeval")


def run(cfg: DictConfig, out_dir: str | Path, overrides: list[str] | None = None) -> Evaluation:
    """Run every stage; outputs go to ``out_dir`` before anything is sent to MLflow."""
    started = time.time()
    out = Path(out_dir)
    check_writable(out)
    settings = Settings.from_config(cfg)
    hand_over = _hands_over(settings)  # and the helper process started, at a multirun's first
    status = report.Status(enabled=settings.report.progress)
    with status.stage("load"):
        table = settings.data.load()
        token = take_load_token(table)
    check_table(settings, table)
    log.info(
        "loaded %d rows: %d items x %d systems",
        len(table),
        table["item_id"].nunique(),
        table["system"].nunique(),
    )
    # figures are drawn in a helper process while the later stages and MLflow logging go on
    figures = Figures(background=settings.report.plot_process)
    ev = compute(
        table,
        settings,
        lambda job: figures.submit(job, out),
        status=status,
        started_at=started,
        table_token=token,
    )
    with status.stage("write tables"):
        write_tables(ev, out)
    run_id = uri = None
    page: list[Path] = []
    # the page around the figures is rendered while they are drawn
    around = page_around_figures(ev)

    def figures_and_page() -> None:
        figures.wait()
        if not page:
            page.append(write_html(ev, out, around))

    if hand_over:
        return _hand_over(ev, out, overrides or [], figures_and_page, figures)
    try:
        # run_info.json is written first, so `paraeval-log` can log this directory later; the
        # figures and report.html are awaited after the per-system runs, before the upload
        with status.stage("log to MLflow"):
            logged = settings.tracker.log(
                out, run_record(ev, out, overrides or []), before_artifacts=figures_and_page
            )
        if logged is not None:
            run_id, uri = logged.run_id, logged.uri
        # an interrupt deferred while the store was writing, if no checkpoint took it
        raise_deferred()
    except BaseException:
        figures.cancel()  # interrupted or failed: nothing waits for drawings any more
        raise
    with status.stage("figures"):
        figures_and_page()
    report.print_summary(ev, out, run_id, uri)
    return ev


def _hands_over(settings: Settings) -> bool:
    """Whether this job's MLflow logging goes to :mod:`paraeval.pipeline.tracking.lane`: in a
    multirun of this process, to an MLflow store, where helper processes are allowed. The
    helper is started at the first such job, so that its imports overlap that job."""
    hands_over = (
        tracking_lane.ENABLED
        and settings.report.plot_process
        and type(settings.tracker) is MLflowTracker
    )
    if hands_over:
        tracking_lane.prepare(settings.tracker.settings)
    return hands_over


def _hand_over(
    ev: Evaluation,
    out: Path,
    overrides: list[str],
    figures_and_page: Callable[[], None],
    figures: Figures,
) -> Evaluation:
    """The job's files completed here (``run_info.json`` first, so that ``paraeval-log`` can
    log the directory whatever happens next), then its logging handed over; the summary is
    printed when it is done."""
    settings = ev.settings
    record = run_record(ev, out, overrides)
    write_run_info(out, record)
    try:
        figures_and_page()
    except BaseException:
        figures.cancel()
        raise

    def reported(logged: Logged | None, handlers: Sequence[logging.Handler]) -> None:
        if logged is not None:
            tracking_lane.emit(
                handlers, logging.INFO, "MLflow run %s in %s", logged.run_id, logged.uri
            )
        report.print_summary(
            ev, out, logged.run_id if logged else None, logged.uri if logged else None
        )

    tracking_lane.hand_over(out, record, settings.tracker.settings, reported)
    return ev
