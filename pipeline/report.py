"""The terminal summary at the end of a run."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

if TYPE_CHECKING:
    from paraeval.pipeline.app import RunResult


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


def print_summary(result: RunResult, max_rows: int = 40) -> None:
    width = 100
    with pd.option_context("display.width", 250, "display.max_columns", 60):
        print("\n" + "=" * width)
        print("System scores (corpus-level metrics, group averages, mean human scores)")
        print("=" * width)
        print(system_table(result.systems))
        print("\n" + "=" * width)
        print("Correlation with human ratings (value; CIs and p-values in correlations.csv)")
        print("=" * width)
        print(correlation_table(result.correlations, max_rows))
        if result.comparison is not None:
            from paraeval.pipeline.compare import summary_table

            print("\n" + "=" * width)
            print("System comparison (details in system_comparison.csv)")
            print("=" * width)
            print(summary_table(result.comparison))
    print(f"\nOutputs:      {result.out_dir.resolve()}")
    if result.tracking_uri:
        print(f"MLflow store: {result.tracking_uri}  (run {result.run_id})")
        if result.tracking_uri.startswith("sqlite:"):
            print(f"Open it with: mlflow ui --backend-store-uri {result.tracking_uri}")
        else:
            print(f"Open it in a browser: {result.tracking_uri}")
