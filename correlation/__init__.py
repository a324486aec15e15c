"""Correlation of metric scores with human judgments: coefficients, levels, bootstrap intervals,
significance tests. numpy/scipy (and numba for one pair-count kernel); no Hydra, MLflow or pandas.

Scores are ``(n_systems, n_items)`` float matrices with NaN for missing values (the layout of
mt-metrics-eval). The pipeline calls :func:`correlation_table` and :func:`significance_table`.
"""

from paraeval.correlation.bootstrap import (
    Resamples,
    bootstrap_ci,
    bootstrap_distribution,
    draw_resamples,
    percentile_interval,
    resampled_values,
    stats_system_metric_fn,
)
from paraeval.correlation.coefficients import (
    COEFFICIENTS,
    Coefficient,
    get_coefficient,
    kendall_b,
    kendall_c,
    kendall_like,
    kendall_like_counts,
    pairwise_accuracy,
    pearson,
    register_coefficient,
    spearman,
)
from paraeval.correlation.levels import (
    ITEM_NAN,
    LEVELS,
    UNITS,
    Correlation,
    correlate,
    item_values,
    system_scores,
    valid_combination,
)
from paraeval.correlation.significance import permutation_test, significance_clusters, williams_test
from paraeval.correlation.table import (
    CORRELATION_COLUMNS,
    SIGNIFICANCE_COLUMNS,
    correlation_table,
    draw_table_resamples,
    significance_table,
)

__all__ = [
    "COEFFICIENTS",
    "CORRELATION_COLUMNS",
    "ITEM_NAN",
    "LEVELS",
    "SIGNIFICANCE_COLUMNS",
    "UNITS",
    "Coefficient",
    "Correlation",
    "Resamples",
    "bootstrap_ci",
    "bootstrap_distribution",
    "correlate",
    "correlation_table",
    "draw_resamples",
    "draw_table_resamples",
    "get_coefficient",
    "item_values",
    "kendall_b",
    "kendall_c",
    "kendall_like",
    "kendall_like_counts",
    "pairwise_accuracy",
    "pearson",
    "percentile_interval",
    "permutation_test",
    "register_coefficient",
    "resampled_values",
    "significance_clusters",
    "significance_table",
    "spearman",
    "stats_system_metric_fn",
    "system_scores",
    "valid_combination",
    "williams_test",
]
