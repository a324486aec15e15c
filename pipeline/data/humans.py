"""Validation report of the human judgments: coverage per system, single ratings, constant vectors.

A correlation is only as good as the ratings under it; this report is written next to the
correlations (``human_report.csv``) and its warnings go to the log.
"""

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
    aspects = [c for c in segments.columns if c.startswith(HUMAN_PREFIX)]
    rows = []
    # every row, then each system's rows in their order (those of groupby, without its cost)
    groups = [("(all)", slice(None)), *row_groups(segments["system"])]
    for aspect in aspects:
        counts = f"n_{aspect}"
        column = segments[aspect].to_numpy(dtype=float)
        ones = (
            (segments[counts] == 1).fillna(False).to_numpy(dtype=bool)
            if counts in segments
            else None
        )
        for system, at in groups:
            values = column[at]
            rated = values[np.isfinite(values)]
            single = int(ones[at].sum()) if ones is not None else 0
            rows.append(
                {
                    "aspect": aspect,
                    "system": str(system),
                    "n_items": len(values),
                    "n_rated": len(rated),
                    "coverage": len(rated) / len(values) if len(values) else float("nan"),
                    "n_single_rating": single,
                    "mean": float(rated.mean()) if len(rated) else float("nan"),
                    "sd": float(rated.std(ddof=0)) if len(rated) else float("nan"),
                    "constant": bool(len(rated) > 0 and np.ptp(rated) == 0),
                }
            )
    report = pd.DataFrame(rows, columns=REPORT_COLUMNS)
    for row in report.to_dict("records"):
        aspect, system = str(row["aspect"]), str(row["system"])
        n_items, n_rated = int(row["n_items"]), int(row["n_rated"])
        if system == "(all)" and float(row["coverage"]) < 1:
            log.warning(
                "%s: %d of %d rows have no rating (left out of its correlations)",
                aspect,
                n_items - n_rated,
                n_items,
            )
        if system != "(all)" and bool(row["constant"]) and n_rated > 1:
            log.warning(
                "%s is constant for system %s: item-level correlations there are undefined",
                aspect,
                system,
            )
        single = int(row["n_single_rating"])
        if system == "(all)" and single:
            log.info("%s: %d rows rest on a single rating", aspect, single)
    return report
