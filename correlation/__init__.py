"""Correlation of metric scores with human judgments: coefficients, levels, bootstrap intervals,
significance tests. numpy/scipy (and numba for a few compiled kernels); no Hydra, MLflow or pandas.

Functions and frozen values only: the coefficients are the table :data:`COEFFICIENTS`, what is
shared between calls (resamples, a memo) is passed in by the caller, and the caller decides on
threads (``correlation_table(map=...)``) and on BLAS's thread count. Scores are
``(n_systems, n_items)`` float matrices with NaN for missing values (mt-metrics-eval's layout).
"""

from paraeval.correlation.bootstrap import (
    bootstrap_ci,
    bootstrap_distribution,
    percentile_interval,
    resampled_values,
    stats_system_metric_fn,
)
from paraeval.correlation.catalog import (
    COEFFICIENTS,
    coefficient_settings,
    configure,
    get_coefficient,
)
from paraeval.correlation.levels import (
    AUTO_UNIT,
    ITEM_AVERAGES,
    ITEM_NAN,
    TABLE_UNITS,
    UNITS,
    correlate,
    item_values,
    system_scores,
    valid_combination,
)
from paraeval.correlation.metric_comparison import SIGNIFICANCE_COLUMNS, significance_table
from paraeval.correlation.paired import (
    ArMasks,
    MeanScores,
    StatsScores,
    ar_mask_bits,
    ar_masks,
    bootstrap_indices,
    p_value,
    paired_bs_clusters,
    paired_bs_p,
    resample_counts,
)
from paraeval.correlation.pdp import pdp
from paraeval.correlation.resamples import Resamples, draw_resamples
from paraeval.correlation.significance import (
    ALTERNATIVES,
    METHODS,
    PERMUTATION_UNITS,
    EarlyStop,
    check_test,
    permutation_test,
    significance_clusters,
    williams_test,
)
from paraeval.correlation.spa import soft_pairwise_accuracy_value
from paraeval.correlation.table import (
    CORRELATION_COLUMNS,
    INTERVALS,
    correlation_table,
    draw_table_resamples,
    fisher_interval,
)
from paraeval.correlation.ties import calibrated_epsilon, item_mean_23, kendall_23
from paraeval.correlation.values import LEVELS, Coefficient, Correlation

__all__ = [
    "ALTERNATIVES",
    "AUTO_UNIT",
    "COEFFICIENTS",
    "CORRELATION_COLUMNS",
    "INTERVALS",
    "ITEM_AVERAGES",
    "ITEM_NAN",
    "LEVELS",
    "METHODS",
    "PERMUTATION_UNITS",
    "SIGNIFICANCE_COLUMNS",
    "TABLE_UNITS",
    "UNITS",
    "ArMasks",
    "Coefficient",
    "Correlation",
    "EarlyStop",
    "MeanScores",
    "Resamples",
    "StatsScores",
    "ar_mask_bits",
    "ar_masks",
    "bootstrap_ci",
    "bootstrap_distribution",
    "bootstrap_indices",
    "calibrated_epsilon",
    "check_test",
    "coefficient_settings",
    "configure",
    "correlate",
    "correlation_table",
    "draw_resamples",
    "draw_table_resamples",
    "fisher_interval",
    "get_coefficient",
    "item_mean_23",
    "item_values",
    "kendall_23",
    "p_value",
    "paired_bs_clusters",
    "paired_bs_p",
    "pdp",
    "percentile_interval",
    "permutation_test",
    "resample_counts",
    "resampled_values",
    "significance_clusters",
    "significance_table",
    "soft_pairwise_accuracy_value",
    "stats_system_metric_fn",
    "system_scores",
    "valid_combination",
    "williams_test",
]
