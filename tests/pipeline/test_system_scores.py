"""System scores as given (``system_metric_<name>``, ``system_human_<aspect>``): the system
level's vector coefficients use them, resampling systems only; nothing else moves."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from paraeval.correlation import correlation_table
from paraeval.pipeline.stages.aggregate import Aggregated, aggregate
from paraeval.pipeline.stages.cache import CorrelationRows
from paraeval.pipeline.stages.compare import compare
from paraeval.pipeline.stages.correlate import advance_like_correlate, correlate, significance
from paraeval.pipeline.stages.score import Scores
from tests.pipeline.helpers import compare_settings, correlation_settings

SYSTEMS = ["a", "b", "c", "d", "e"]
N_ITEMS = 6
# given system scores whose order differs from the segment means' (worked out below)
GIVEN_X = {"a": 0.9, "b": 0.1, "c": 0.5, "d": 0.3, "e": 0.7}
GIVEN_Q = {"a": 2.0, "b": 5.0, "c": 1.0, "d": 4.0, "e": 3.0}
COEFFICIENTS = ["pearson", "kendall_b", "soft_pairwise_accuracy"]


def _segments(given: bool) -> pd.DataFrame:
    rng = np.random.default_rng(11)
    rows = []
    for k, s in enumerate(SYSTEMS):
        for i in range(N_ITEMS):
            q = k + rng.normal(0, 1)
            rows.append(
                {
                    "item_id": f"i{i}",
                    "system": s,
                    "source": f"source {i}",
                    "candidate": f"{s} says {i}",
                    "metric_x": q + rng.normal(0, 1),
                    "metric_y": q + rng.normal(0, 2),
                    "human_q": q,
                    "human_r": k + rng.normal(0, 1),
                }
            )
    seg = pd.DataFrame(rows)
    if given:
        seg["system_metric_x"] = seg["system"].map(GIVEN_X)
        seg["system_human_q"] = seg["system"].map(GIVEN_Q)
    return seg


def _aggregated(given: bool) -> tuple[Scores, Aggregated]:
    scores = Scores(_segments(given), pd.DataFrame(index=SYSTEMS), {})
    return scores, aggregate(scores)


def _table(agg: Aggregated, seed: int = 3, **changes: object) -> pd.DataFrame:
    cfg = correlation_settings({"coefficients": COEFFICIENTS, "n_resamples": 200, **changes})
    return correlate(agg, cfg, np.random.default_rng(seed))


def _value(table: pd.DataFrame, metric: str, aspect: str, level: str, coef: str) -> pd.Series:
    rows = table[
        (table["metric"] == metric)
        & (table["aspect"] == aspect)
        & (table["level"] == level)
        & (table["coefficient"] == coef)
    ]
    assert len(rows) == 1
    return rows.iloc[0]


def _means(column: str) -> np.ndarray:
    return _segments(False).groupby("system")[column].mean().reindex(SYSTEMS).to_numpy()


def test_the_systems_table_takes_the_given_scores_and_the_given_columns_are_no_metrics() -> None:
    _, agg = _aggregated(True)
    assert agg.given == {"metric_x", "human_q"}
    assert agg.systems["metric_x"].to_dict() == GIVEN_X
    assert agg.systems["human_q"].to_dict() == GIVEN_Q
    np.testing.assert_allclose(agg.systems.loc[SYSTEMS, "metric_y"], _means("metric_y"))
    assert set(agg.columns) == {"metric_x", "metric_y"}
    assert not [c for c in agg.normalization.get("column", []) if str(c).startswith("system_")]
    table = _table(agg)
    assert set(table["metric"]) == {"metric_x", "metric_y"}
    assert set(table["aspect"]) == {"human_q", "human_r"}


def test_system_level_correlates_the_given_vectors() -> None:
    table = _table(_aggregated(True)[1])
    x, q = np.array(list(GIVEN_X.values())), np.array(list(GIVEN_Q.values()))
    # both given; a given metric with a mean human score; a mean metric with a given human score
    for metric, aspect, mx, hy in [
        ("metric_x", "human_q", x, q),
        ("metric_x", "human_r", x, _means("human_r")),
        ("metric_y", "human_q", _means("metric_y"), q),
    ]:
        pearson = _value(table, metric, aspect, "system", "pearson")
        assert pearson["value"] == pytest.approx(stats.pearsonr(mx, hy)[0], abs=1e-12)
        assert pearson["n"] == len(SYSTEMS)
        tau = _value(table, metric, aspect, "system", "kendall_b")["value"]
        assert tau == pytest.approx(stats.kendalltau(mx, hy)[0], abs=1e-12)
    # x and q by hand: ranks (5,1,3,2,4) against (2,5,1,4,3): 2 concordant, 8 discordant pairs
    assert _value(table, "metric_x", "human_q", "system", "kendall_b")["value"] == -0.6


def test_segment_item_levels_soft_pairwise_accuracy_and_unconcerned_pairs_do_not_move() -> None:
    given, plain = _table(_aggregated(True)[1]), _table(_aggregated(False)[1])
    key = ["metric", "aspect", "level", "coefficient"]
    assert given[key].equals(plain[key])
    same = (given["level"] != "system") | (given["coefficient"] == "soft_pairwise_accuracy")
    same |= (given["metric"] == "metric_y") & (given["aspect"] == "human_r")
    assert same.sum() < len(given)  # the given pairs' system rows differ
    pd.testing.assert_frame_equal(given[same], plain[same])
    assert (given[~same]["value"] != plain[~same]["value"]).any()


def test_a_given_pair_resamples_systems_only() -> None:
    only = {"levels": ["system"], "coefficients": ["pearson"]}
    cfg = correlation_settings({**only, "n_resamples": 200})
    table = correlate(_aggregated(True)[1], cfg, np.random.default_rng(5))
    # the system view draws after the table of segment scores, systems only
    rng = np.random.default_rng(5)
    advance_like_correlate(_aggregated(False)[1], cfg, rng)
    x = np.array(list(GIVEN_X.values()))[:, None]
    q = np.array(list(GIVEN_Q.values()))[:, None]
    rows = correlation_table(
        {"metric_x": x}, {"human_q": q}, **only, n_resamples=200, unit="systems", rng=rng
    )
    row = _value(table, "metric_x", "human_q", "system", "pearson")
    assert (row["ci_low"], row["ci_high"]) == (rows[0]["ci_low"], rows[0]["ci_high"])
    assert row["ci_low"] < row["value"] < row["ci_high"]


def test_a_missing_given_score_leaves_the_system_out() -> None:
    seg = _segments(True)
    seg.loc[seg["system"] == "b", "system_metric_x"] = np.nan
    agg = aggregate(Scores(seg, pd.DataFrame(index=SYSTEMS), {}))
    assert np.isnan(agg.systems.loc["b", "metric_x"])
    row = _value(_table(agg), "metric_x", "human_q", "system", "pearson")
    keep = [s for s in SYSTEMS if s != "b"]
    expected = stats.pearsonr([GIVEN_X[s] for s in keep], [GIVEN_Q[s] for s in keep])[0]
    assert (row["n"], row["n_dropped"]) == (4, 1)
    assert row["value"] == pytest.approx(expected, abs=1e-12)


def test_significance_at_the_system_level_compares_on_the_given_scores() -> None:
    sig = {"level": "system", "method": "permutation", "unit": "items", "n_resamples": 100}
    cfg = correlation_settings({"significance": sig})
    out = significance(_aggregated(True)[1], cfg, np.random.default_rng(1))
    row = out[out["aspect"] == "human_q"].iloc[0]
    pearson = {
        "metric_x": stats.pearsonr(list(GIVEN_X.values()), list(GIVEN_Q.values()))[0],
        "metric_y": stats.pearsonr(_means("metric_y"), list(GIVEN_Q.values()))[0],
    }
    assert row["r_a"] == pytest.approx(pearson[row["metric_a"]], abs=1e-12)
    assert row["r_b"] == pytest.approx(pearson[row["metric_b"]], abs=1e-12)
    # systems permuted (five systems: 32 swaps), not the lone item of the system view
    assert 0 < row["p_value"] < 1


def test_the_row_cache_keeps_the_given_rows_and_the_generator_in_step(tmp_path: Path) -> None:
    _, agg = _aggregated(True)
    cfg = correlation_settings({"coefficients": ["pearson"], "n_resamples": 50})
    plain_rng = np.random.default_rng(4)
    plain = correlate(agg, cfg, plain_rng)
    cache = CorrelationRows(tmp_path)
    for _ in range(2):  # computed, then every row from the cache
        rng = np.random.default_rng(4)
        pd.testing.assert_frame_equal(correlate(agg, cfg, rng, rows=cache), plain)
        assert rng.bit_generator.state == plain_rng.bit_generator.state


def test_the_comparison_ranks_systems_by_the_given_scores_untested() -> None:
    scores, agg = _aggregated(True)
    table = compare(scores, agg, compare_settings(seed=3, n_bootstrap=100, n_ar=100)).table
    x = table[table["metric"] == "metric_x"].set_index("system")
    assert x["score"].to_dict() == GIVEN_X
    assert x["rank"].to_dict() == {"a": 1, "e": 2, "c": 3, "d": 4, "b": 5}
    assert x[["ci_low", "ci_high", "p_bootstrap", "p_ar", "cluster"]].isna().all().all()
    y = table[table["metric"] == "metric_y"].set_index("system")
    assert y["cluster"].notna().all()
    np.testing.assert_allclose(y.loc[SYSTEMS, "score"], _means("metric_y"))
