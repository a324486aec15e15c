"""Correlation of metric scores with human judgments: coefficients, levels, bootstrap intervals,
significance tests. numpy/scipy (and numba for a few compiled kernels); no Hydra, MLflow or pandas.

Functions and frozen values only: the coefficients are the table :data:`COEFFICIENTS`, what is
shared between calls (resamples, a memo) is passed in by the caller, and the caller decides on
threads (``correlation_table(map=...)``) and on BLAS's thread count. Scores are
``(n_systems, n_items)`` float matrices with NaN for missing values (mt-metrics-eval's layout).
The rest of the API is in the modules, bottom to top: values, coefficients, catalog, levels,
resamples, bootstrap, significance, table, metric_comparison.
"""

from paraeval.correlation.bootstrap import bootstrap_ci, resampled_values
from paraeval.correlation.catalog import COEFFICIENTS, configure, get_coefficient
from paraeval.correlation.levels import correlate
from paraeval.correlation.metric_comparison import SIGNIFICANCE_COLUMNS, significance_table
from paraeval.correlation.resamples import draw_resamples
from paraeval.correlation.significance import permutation_test, williams_test
from paraeval.correlation.table import CORRELATION_COLUMNS, correlation_table
from paraeval.correlation.ties import calibrated_epsilon
from paraeval.correlation.values import LEVELS, Coefficient, Correlation

__all__ = [
    "COEFFICIENTS",
    "CORRELATION_COLUMNS",
    "LEVELS",
    "SIGNIFICANCE_COLUMNS",
    "Coefficient",
    "Correlation",
    "bootstrap_ci",
    "calibrated_epsilon",
    "configure",
    "correlate",
    "correlation_table",
    "draw_resamples",
    "get_coefficient",
    "permutation_test",
    "resampled_values",
    "significance_table",
    "williams_test",
]
