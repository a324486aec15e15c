"""The table of coefficients, and a coefficient outside it: every consumer takes the
descriptor itself."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from paraeval.correlation import (
    COEFFICIENTS,
    LEVELS,
    Coefficient,
    correlate,
    correlation_table,
    get_coefficient,
    permutation_test,
    significance_table,
)
from paraeval.correlation.bootstrap import percentile_interval, resampled_values
from paraeval.correlation.coefficients import paired_finite, pearson
from paraeval.correlation.levels import UNITS, valid_combination
from paraeval.correlation.resamples import draw_resamples
from paraeval.pipeline.errors import ConfigError
from tests.pipeline.helpers import correlation_settings


def _ccc(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Lin's concordance correlation coefficient (population moments); no p-value."""
    xs, ys = paired_finite(x, y)
    if xs.size < 2 or np.all(xs == xs[0]) or np.all(ys == ys[0]):
        return float("nan"), float("nan")
    sxy = float(np.mean((xs - xs.mean()) * (ys - ys.mean())))
    return 2 * sxy / (xs.var() + ys.var() + (xs.mean() - ys.mean()) ** 2), float("nan")


@pytest.fixture
def ccc() -> Coefficient:
    # no vectorised form: every consumer must take its generic path
    return Coefficient("ccc", _ccc, levels=("segment", "system"))


def test_toy_coefficient_matches_hand_worked_value(ccc: Coefficient) -> None:
    # pooled cells x = 1, 2, 3, 4 and y = 1, 2, 3, 5: means 2.5 and 2.75, covariance 1.625,
    # variances 1.25 and 2.1875, so CCC = 3.25 / (1.25 + 2.1875 + 0.0625) = 13/14
    metric = np.array([[1.0, 2.0], [3.0, 4.0]])
    human = np.array([[1.0, 2.0], [3.0, 5.0]])
    got = correlate(metric, human, "segment", ccc)
    assert got.value == pytest.approx(13 / 14, abs=1e-12)
    assert math.isnan(got.p_value)
    assert (got.n, got.n_dropped) == (4, 0)


def test_descriptor_runs_through_the_table(ccc: Coefficient) -> None:
    rng = np.random.default_rng(0)
    human = rng.normal(size=(5, 12))
    metric = human + rng.normal(size=(5, 12))
    metric[1, 3] = np.nan
    rows = correlation_table(
        {"m": metric},
        {"h": human},
        levels=LEVELS,
        coefficients=(ccc, "pearson"),
        n_resamples=40,
        rng=np.random.default_rng(7),
    )
    got = {(r["level"], r["coefficient"]): r for r in rows}
    # defined at segment and system only; the item level is skipped, as for any coefficient
    assert {k for k in got if k[1] == "ccc"} == {("segment", "ccc"), ("system", "ccc")}

    # the table's resamples are drawn per (aspect, level) in the order segment, item, system
    draw = np.random.default_rng(7)
    # the default unit: items, and at the system level systems and items together (Boot-Both)
    units = {"segment": "items", "item": "items", "system": "both"}
    res = {level: draw_resamples(draw, 5, 12, 40, units[level]) for level in LEVELS}
    ok = np.isfinite(metric)
    row = got[("segment", "ccc")]
    assert row["value"] == pytest.approx(_ccc(metric[ok], human[ok])[0], abs=1e-12)
    assert res["segment"].item_idx is not None
    explicit = [
        _ccc(metric[:, idx].ravel(), human[:, idx].ravel())[0] for idx in res["segment"].item_idx
    ]
    lo, hi = percentile_interval(np.array(explicit))
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((lo, hi), abs=1e-12)
    sys_idx, item_idx = res["system"].sys_idx, res["system"].item_idx
    assert sys_idx is not None and item_idx is not None
    explicit = [
        _ccc(np.nanmean(metric[s][:, i], 1), human[s][:, i].mean(1))[0]
        for s, i in zip(sys_idx, item_idx, strict=True)
    ]
    lo, hi = percentile_interval(np.array(explicit))
    row = got[("system", "ccc")]
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((lo, hi), abs=1e-12)


def test_descriptor_in_significance(ccc: Coefficient) -> None:
    rng = np.random.default_rng(3)
    human = rng.normal(size=(4, 10))
    a = human + rng.normal(scale=0.5, size=human.shape)
    b = human + rng.normal(scale=2.0, size=human.shape)
    p = permutation_test(a, b, human, "segment", ccc, rng=np.random.default_rng(1), n_resamples=50)
    assert 0.0 < p <= 1.0
    rows = significance_table(
        {"a": a, "b": b},
        {"h": human},
        level="segment",
        coefficient=ccc,
        method="permutation",
        rng=np.random.default_rng(2),
        n_resamples=20,
    )
    assert rows[0]["coefficient"] == "ccc"
    assert rows[0]["metric_a"] == "a"


def check_correlation_config(changes: dict) -> tuple[list[str], list[str]]:
    """The levels and coefficient names of conf/'s correlation settings with ``changes``."""
    settings = correlation_settings(changes)
    return list(settings.levels), list(settings.coefficient_names)


def _config(level: str, coefficient: str) -> dict:
    return {
        "levels": [level],
        "coefficients": [coefficient],
        "significance": {
            "enabled": True,
            "method": "permutation",
            "level": level,
            "coefficient": coefficient,
        },
    }


@pytest.mark.parametrize(("coefficient", "level"), list(itertools.product(COEFFICIENTS, LEVELS)))
def test_config_check_accepts_each_coefficient_at_exactly_its_levels(
    coefficient: str, level: str
) -> None:
    defined = level in COEFFICIENTS[coefficient].levels
    assert valid_combination(level, coefficient) is defined
    if defined:
        assert check_correlation_config(_config(level, coefficient)) == ([level], [coefficient])
    else:
        with pytest.raises(ConfigError, match=coefficient):
            check_correlation_config(_config(level, coefficient))


def test_config_check_keeps_lists_with_some_defined_combination() -> None:
    # the WMT coefficient set at the system level alone: pairwise accuracy and Pearson still apply
    levels, coefficients = check_correlation_config(
        {"levels": "system", "coefficients": ["kendall_like", "pairwise_accuracy", "pearson"]}
    )
    assert (levels, coefficients) == (["system"], ["kendall_like", "pairwise_accuracy", "pearson"])
    with pytest.raises(ConfigError, match="none of the coefficients"):
        check_correlation_config({"levels": "system", "coefficients": ["kendall_like"]})


def test_the_table_of_coefficients() -> None:
    assert list(COEFFICIENTS) == [
        "pearson",
        "spearman",
        "kendall_b",
        "kendall_c",
        "kendall_like",
        "pairwise_accuracy",
        "pdp",
        "soft_pairwise_accuracy",
        "acc23",
        "tau_23",
    ]
    assert COEFFICIENTS["pdp"].levels == ("segment",)
    assert COEFFICIENTS["kendall_like"].levels == ("segment", "item")
    assert COEFFICIENTS["pairwise_accuracy"].levels == ("system",)
    assert COEFFICIENTS["acc23"].levels == ("item", "system")
    assert COEFFICIENTS["soft_pairwise_accuracy"].levels == ("system",)


def test_plain_callable_is_a_coefficient() -> None:
    rng = np.random.default_rng(4)
    human = rng.normal(size=(6, 8))
    metric = human + rng.normal(size=(6, 8))

    def scipy_pearson(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
        res = stats.pearsonr(x, y)
        return float(res.statistic), float(res.pvalue)

    for level in LEVELS:
        got = correlate(metric, human, level, scipy_pearson)
        want = correlate(metric, human, level, "pearson")
        assert got.value == pytest.approx(want.value, abs=1e-12)
        assert got.n == want.n
    rows = correlation_table(
        {"m": metric},
        {"h": human},
        coefficients=(scipy_pearson,),
        ci=False,
        rng=np.random.default_rng(0),
    )
    assert {r["coefficient"] for r in rows} == {"scipy_pearson"}


@pytest.mark.parametrize(("level", "unit"), list(itertools.product(LEVELS, UNITS)))
def test_generic_paths_equal_vectorised_forms(level: str, unit: str) -> None:
    """Pearson without its vectorised forms goes through every generic path (expanded samples,
    explicit resamples) and must give the registered Pearson's numbers."""
    plain = Coefficient("plain_pearson", pearson)
    rng = np.random.default_rng(9)
    human = np.round(rng.normal(size=(5, 9)) * 2)
    metric = np.round(human + rng.normal(size=(5, 9)))
    metric[0, 2] = np.nan
    res = draw_resamples(np.random.default_rng(5), 5, 9, 30, unit)
    np.testing.assert_allclose(
        resampled_values(metric, human, level, plain, res),
        resampled_values(metric, human, level, "pearson", res),
        rtol=0,
        atol=1e-9,
    )
    other = metric + rng.normal(size=metric.shape)
    p_plain = permutation_test(
        metric, other, human, level, plain, rng=np.random.default_rng(1), n_resamples=30, unit=unit
    )
    p_fast = permutation_test(
        metric,
        other,
        human,
        level,
        "pearson",
        rng=np.random.default_rng(1),
        n_resamples=30,
        unit=unit,
    )
    assert p_plain == pytest.approx(p_fast, abs=1e-12)


def test_coefficient_entries_are_checked() -> None:
    with pytest.raises(ValueError, match="levels must be"):
        Coefficient("x", pearson, levels=("corpus",))
    with pytest.raises(ValueError, match="system level"):
        Coefficient("x", pearson, levels=("segment", "system"), vector=False)
    with pytest.raises(TypeError, match="mappingproxy"):
        COEFFICIENTS["pearson"] = Coefficient("pearson", pearson)  # type: ignore[index]
    with pytest.raises(ValueError, match="unknown coefficient 'tau'"):
        get_coefficient("tau")
