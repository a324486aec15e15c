"""Rebuilt from ``run_info.json``, a run is logged as it would have been (docs/cli.md). Exit codes:
0 logged or already; 1 unreachable or failed; 2 not an output directory."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "1")

from paraeval.pipeline.errors import UserError
from paraeval.pipeline.names import escape_log_output, show
from paraeval.pipeline.terminal import HelpFormatter
from paraeval.pipeline.tracking.mlflow_log import Logged
from paraeval.pipeline.tracking.payload import RunPayload, read_run_info
from paraeval.pipeline.tracking.store import TrackingUnavailable
from paraeval.pipeline.tracking.trackers import MLflowTracker, failure_reason

PROG = "paraeval-log"


def relog(
    out_dir: Path,
    tracking_uri: str | None = None,
    store_dir: str | None = None,
    experiment: str | None = None,
) -> Logged:
    """One directory, as it was logged (``already``) or now is."""
    record = read_run_info(out_dir)
    tracking = dict(record.tracking)
    if tracking_uri:
        tracking.update(uri=tracking_uri, store_dir=None)
    elif store_dir:
        tracking.update(uri=None, store_dir=str(Path(store_dir).expanduser().resolve()))
    if experiment:
        tracking["experiment"] = experiment
    # whatever tracker the run had (none included), a later logging goes to MLflow
    return MLflowTracker.from_settings(tracking).log_or_raise(RunPayload.from_dir(out_dir, record))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Log finished paraeval output directories to MLflow (idempotent).",
        formatter_class=HelpFormatter,
    )
    p.add_argument("output_dirs", nargs="+", metavar="OUTPUT_DIR", type=Path)
    p.add_argument(
        "--tracking-uri", help="MLflow tracking URI (default: the one the run was configured with)"
    )
    p.add_argument(
        "--store-dir",
        help="folder of an embedded SQLite store (sqlite:///<dir>/mlflow.db), instead of a URI",
    )
    p.add_argument("--experiment", help="experiment name (default: the run's)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    escape_log_output()  # a library's record quoting a URI shows it without its password
    status = 0
    for out_dir in args.output_dirs:
        try:
            logged = relog(out_dir, args.tracking_uri, args.store_dir, args.experiment)
        except UserError as exc:
            print(f"{PROG}: error: {show(exc)}", file=sys.stderr)
            status = max(status, 2)
        except TrackingUnavailable as exc:
            print(f"{PROG}: error: {show(exc)}; {show(out_dir)} not logged", file=sys.stderr)
            status = max(status, 1)
        except Exception as exc:
            reason = show(failure_reason(exc))
            print(f"{PROG}: error: logging {show(out_dir)} failed: {reason}", file=sys.stderr)
            status = max(status, 1)
        else:
            what = "already logged as run" if logged.already else "logged as run"
            print(f"{out_dir}: {what} {logged.run_id} in {logged.uri}\n  {logged.page}")
    return status


if __name__ == "__main__":
    sys.exit(main())
