"""The terminal summary at the end of a run."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from paraeval.pipeline.names import show

if TYPE_CHECKING:
    from paraeval.pipeline.evaluation import Evaluation


def system_table(systems: pd.DataFrame) -> str:
    return systems.to_string(float_format=lambda v: f"{v:.3f}")


def correlation_table(corr: pd.DataFrame, max_rows: int = 40) -> str:
    """One block per coefficient: metrics as rows, (aspect, level) as columns, ``value [ci]``."""
    if corr.empty:
        return "(no human ratings: nothing to correlate)"
    blocks = []
    for coefficient in list(dict.fromkeys(corr["coefficient"])):
        sub = corr[corr["coefficient"] == coefficient].copy()
        sub["cell"] = [
            f"{v:+.3f}" + (f" [{lo:+.2f},{hi:+.2f}]" if pd.notna(lo) and pd.notna(hi) else "")
            if pd.notna(v)
            else "n/a"
            for v, lo, hi in zip(sub["value"], sub["ci_low"], sub["ci_high"], strict=True)
        ]
        wide = sub.pivot_table(
            index="metric",
            columns=["aspect", "level"],
            values="cell",
            aggfunc="first",
            sort=False,
        )
        wide.columns = [f"{a.removeprefix('human_')}/{lv}" for a, lv in wide.columns]
        wide.index.name = coefficient
        blocks.append(wide.head(max_rows).to_string())
    return "\n\n".join(blocks)


def print_summary(
    result: Evaluation, out_dir: Path, run_id: str | None, tracking_uri: str | None
) -> None:
    max_rows = result.settings.report.max_rows
    width = 100
    with pd.option_context("display.width", 250, "display.max_columns", 60):
        print("\n" + "=" * width)
        print("System scores (corpus-level metrics, group averages, mean human scores)")
        print("=" * width)
        print(show(system_table(result.systems), keep_newlines=True))
        print("\n" + "=" * width)
        print("Correlation with human ratings (value; CIs and p-values in correlations.csv)")
        print("=" * width)
        print(show(correlation_table(result.correlations, max_rows), keep_newlines=True))
        if result.compared is not None:
            from paraeval.pipeline.compare import summary_table

            print("\n" + "=" * width)
            print("System comparison (details in system_comparison.csv)")
            print("=" * width)
            print(show(summary_table(result.compared), keep_newlines=True))
    print(show(f"\nOutputs:      {out_dir.resolve()}", keep_newlines=True))
    if tracking_uri:
        print(f"MLflow store: {tracking_uri}  (run {run_id})")
        if tracking_uri.startswith("sqlite:"):
            print(f"Open it with: mlflow ui --backend-store-uri {tracking_uri}")
        else:
            print(f"Open it in a browser: {tracking_uri}")
