"""Validation report of the human judgments (``human_report.csv``, warnings to the log):
coverage per system, single ratings, constant vectors."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from paraeval.pipeline.data.load import HUMAN_PREFIX, row_groups

log = logging.getLogger(__name__)

REPORT_COLUMNS = [
    "aspect",
    "system",
    "n_items",
    "n_rated",
    "coverage",
    "n_single_rating",
    "mean",
    "sd",
    "constant",
]


def human_report(segments: pd.DataFrame) -> pd.DataFrame:
    """The report's rows (REPORT_COLUMNS) per aspect, for all rows and per system."""
    aspects = [c for c in segments.columns if c.startswith(HUMAN_PREFIX)]
    rows = []
    # every row, then each system's rows in their order (those of groupby, without its cost)
    groups = [("(all)", slice(None)), *row_groups(segments["system"])]
    for aspect in aspects:
        counts = f"n_{aspect}"
        column = segments[aspect].to_numpy(dtype=float)
        ones: np.ndarray | None = None
        if counts in segments:
            ones = (segments[counts] == 1).fillna(False).to_numpy(dtype=bool)
        for group, at in groups:
            values = column[at]
            rated = values[np.isfinite(values)]
            system, n_items, n_rated = str(group), len(values), len(rated)
            single = int(ones[at].sum()) if ones is not None else 0
            coverage = n_rated / n_items if n_items else float("nan")
            constant = bool(n_rated > 0 and np.ptp(rated) == 0)
            mean = float(rated.mean()) if n_rated else float("nan")
            sd = float(rated.std(ddof=0)) if n_rated else float("nan")
            rows.append((aspect, system, n_items, n_rated, coverage, single, mean, sd, constant))
            if system == "(all)" and coverage < 1:
                log.warning(
                    "%s: %d of %d rows have no rating (left out of its correlations)",
                    aspect,
                    n_items - n_rated,
                    n_items,
                )
            if system != "(all)" and constant and n_rated > 1:
                log.warning(
                    "%s is constant for system %s: item-level correlations there are undefined",
                    aspect,
                    system,
                )
            if system == "(all)" and single:
                log.info("%s: %d rows rest on a single rating", aspect, single)
    return pd.DataFrame(rows, columns=REPORT_COLUMNS)
