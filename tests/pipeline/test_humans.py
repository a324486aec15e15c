"""The human-rating report against a plain groupby over the same rows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from paraeval.pipeline.data.validate import REPORT_COLUMNS, human_report


def _by_groupby(segments: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for aspect in [c for c in segments.columns if c.startswith("human_")]:
        counts = f"n_{aspect}"
        for system, sub in [("(all)", segments), *segments.groupby("system", sort=False)]:
            values = sub[aspect].to_numpy(dtype=float)
            rated = values[np.isfinite(values)]
            rows.append(
                {
                    "aspect": aspect,
                    "system": str(system),
                    "n_items": len(sub),
                    "n_rated": len(rated),
                    "coverage": len(rated) / len(sub),
                    "n_single_rating": int((sub[counts] == 1).sum()) if counts in sub else 0,
                    "mean": float(rated.mean()) if len(rated) else float("nan"),
                    "sd": float(rated.std(ddof=0)) if len(rated) else float("nan"),
                    "constant": bool(len(rated) > 0 and np.ptp(rated) == 0),
                }
            )
    return pd.DataFrame(rows, columns=REPORT_COLUMNS)


@pytest.mark.parametrize("seed", range(5))
def test_report_is_the_groupby_one(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 300
    systems = rng.choice(["s2", "s0", "s1", "s3"], size=n)  # met in no sorted order
    meaning = rng.normal(3, 1, size=n)
    meaning[rng.random(n) < 0.1] = np.nan
    fluency = rng.integers(1, 6, size=n).astype(float)
    fluency[systems == "s3"] = 4.0  # constant for one system
    segments = pd.DataFrame(
        {
            "system": pd.Series(systems, dtype="string[pyarrow]" if seed % 2 else object),
            "human_meaning": meaning,
            "n_human_meaning": rng.integers(1, 4, size=n),
            "human_fluency": fluency,
        }
    )
    got = human_report(segments)
    pd.testing.assert_frame_equal(got, _by_groupby(segments), check_exact=True)
    assert got["system"].tolist()[:5] == ["(all)", *pd.unique(pd.Series(systems)).tolist()]
