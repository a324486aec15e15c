"""The two tables the pipeline writes."""

from __future__ import annotations

import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest

from paraeval.correlation import table
from paraeval.correlation.catalog import COEFFICIENTS, get_coefficient
from paraeval.correlation.levels import correlate
from paraeval.correlation.metric_comparison import SIGNIFICANCE_COLUMNS, significance_table
from paraeval.correlation.significance import williams_test
from paraeval.correlation.table import CORRELATION_COLUMNS, correlation_table


def _inputs() -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    meaning = rng.normal(size=(6, 30)) + np.linspace(0, 2, 6)[:, None]
    fluency = rng.normal(size=(6, 30))
    good = meaning + 0.4 * rng.normal(size=(6, 30))
    good[1, 4] = np.nan
    metrics = {"good": good, "noise": rng.normal(size=(6, 30)), "close": good + 0.01}
    return metrics, {"human_meaning": meaning, "human_fluency": fluency}


def test_correlation_rows_cover_valid_combinations_only() -> None:
    metrics, humans = _inputs()
    rows = correlation_table(
        metrics,
        humans,
        levels=("segment", "item", "system"),
        coefficients=("pearson", "kendall_like", "pairwise_accuracy"),
        n_resamples=50,
        rng=np.random.default_rng(1),
    )
    assert all(tuple(r) == CORRELATION_COLUMNS for r in rows)
    combos = {(r["level"], r["coefficient"]) for r in rows}
    assert combos == {
        ("segment", "pearson"),
        ("segment", "kendall_like"),
        ("item", "pearson"),
        ("item", "kendall_like"),
        ("system", "pearson"),
        ("system", "pairwise_accuracy"),
    }
    assert len(rows) == 3 * 2 * 6
    for r in rows:
        corr = correlate(metrics[r["metric"]], humans[r["aspect"]], r["level"], r["coefficient"])
        assert r["value"] == corr.value or (math.isnan(r["value"]) and math.isnan(corr.value))
        assert (r["n"], r["n_dropped"]) == (corr.n, corr.n_dropped)
        assert r["ci_low"] <= r["ci_high"]
    seg = next(r for r in rows if r["metric"] == "good" and r["level"] == "segment")
    assert (seg["n"], seg["n_dropped"]) == (179, 1)


def test_correlation_table_is_seeded_uses_corpus_scores_and_can_skip_ci() -> None:
    metrics, humans = _inputs()
    kw: dict[str, Any] = {"levels": ("system",), "coefficients": ("kendall_b",), "n_resamples": 40}
    first = correlation_table(metrics, humans, rng=np.random.default_rng(5), **kw)
    again = correlation_table(metrics, humans, rng=np.random.default_rng(5), **kw)
    assert first == again
    corpus = {"good": np.arange(6.0)}
    with pytest.raises(ValueError, match="system_metric_fn"):
        correlation_table(
            metrics, humans, rng=np.random.default_rng(5), system_metrics=corpus, **kw
        )
    rows = correlation_table(
        metrics,
        humans,
        rng=np.random.default_rng(5),
        system_metrics=corpus,
        system_metric_fns={"good": lambda ix: np.arange(6.0)},
        **kw,
    )
    good = [r for r in rows if r["metric"] == "good"]
    # corpus scores 0..5 rank the systems exactly like the meaning means do (increasing design)
    meaning = next(r for r in good if r["aspect"] == "human_meaning")
    assert (
        meaning["value"]
        == correlate(
            metrics["good"],
            humans["human_meaning"],
            "system",
            "kendall_b",
            system_metric=corpus["good"],
        ).value
    )
    no_ci = correlation_table(metrics, humans, rng=np.random.default_rng(5), ci=False, **kw)
    assert all(math.isnan(r["ci_low"]) and math.isnan(r["ci_high"]) for r in no_ci)


def test_correlation_table_input_errors() -> None:
    metrics, humans = _inputs()
    with pytest.raises(ValueError, match="shape"):
        correlation_table({"x": np.ones((2, 2))}, humans, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="valid levels"):
        correlation_table(metrics, humans, levels=("corpus",), rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="valid coefficients"):
        correlation_table(metrics, humans, coefficients=("tau",), rng=np.random.default_rng(0))


def test_significance_table_williams() -> None:
    metrics, humans = _inputs()
    rows = significance_table(
        metrics,
        {"human_meaning": humans["human_meaning"]},
        level="segment",
        coefficient="pearson",
        method="williams",
        rng=np.random.default_rng(0),
    )
    assert all(tuple(r) == SIGNIFICANCE_COLUMNS for r in rows)
    assert len(rows) == 3
    for r in rows:
        assert r["r_a"] >= r["r_b"]
    # recompute one p by hand on the common cells
    row = next(r for r in rows if {r["metric_a"], r["metric_b"]} == {"good", "noise"})
    a, b = metrics[row["metric_a"]], metrics[row["metric_b"]]
    h = humans["human_meaning"]
    ok = np.isfinite(a) & np.isfinite(b) & np.isfinite(h)
    r_ab = np.corrcoef(a[ok], b[ok])[0, 1]
    r_a = np.corrcoef(a[ok], h[ok])[0, 1]
    r_b = np.corrcoef(b[ok], h[ok])[0, 1]
    assert row["p_value"] == pytest.approx(williams_test(r_a, r_b, r_ab, int(ok.sum())))
    clusters = {r["metric_a"]: r["cluster_a"] for r in rows} | {
        r["metric_b"]: r["cluster_b"] for r in rows
    }
    assert clusters["noise"] == 2 and clusters["good"] == clusters["close"] == 1
    with pytest.raises(ValueError, match="item level"):
        significance_table(
            metrics,
            humans,
            level="item",
            coefficient="pearson",
            method="williams",
            rng=np.random.default_rng(0),
        )


@pytest.mark.parametrize("method", ["williams", "permutation"])
def test_significance_compares_direction_adjusted_agreement(method: str) -> None:
    """A lower-is-better metric that tracks the humans (an error rate, a distance) ranks by how
    strongly it agrees, not below every positive correlation: its scores are negated for the
    comparison, and its printed r keeps its sign."""
    rng = np.random.default_rng(3)
    h = rng.normal(size=(6, 40))
    distance = -h + 0.3 * rng.normal(size=h.shape)  # agrees strongly, lower is better
    weak = 0.1 * h + rng.normal(size=h.shape)  # agrees weakly, higher is better
    metrics = {"weak": weak, "distance": distance}
    kw: dict[str, Any] = {"level": "segment", "coefficient": "pearson", "method": method}
    kw["n_resamples"] = 200
    adjusted = significance_table(
        metrics, {"h": h}, rng=np.random.default_rng(0), lower_is_better={"distance"}, **kw
    )
    [row] = adjusted
    assert row["metric_a"] == "distance" and row["adjusted_a"] and not row["adjusted_b"]
    assert row["r_a"] == pytest.approx(np.corrcoef(distance.ravel(), h.ravel())[0, 1])
    assert row["r_a"] < -0.9 and row["p_value"] < 0.01
    assert (row["cluster_a"], row["cluster_b"]) == (1, 2)
    # the same numbers as negating the scores by hand, and unlike the signed comparison
    by_hand = significance_table(
        {"weak": weak, "distance": -distance}, {"h": h}, rng=np.random.default_rng(0), **kw
    )[0]
    assert by_hand["p_value"] == pytest.approx(row["p_value"])
    assert by_hand["r_a"] == pytest.approx(-row["r_a"])
    signed = significance_table(metrics, {"h": h}, rng=np.random.default_rng(0), **kw)[0]
    assert signed["metric_a"] == "weak" and (signed["cluster_a"], signed["cluster_b"]) == (1, 2)


def test_significance_table_permutation_system_level() -> None:
    metrics, humans = _inputs()
    rows = significance_table(
        metrics,
        {"human_meaning": humans["human_meaning"]},
        level="system",
        coefficient="pearson",
        method="permutation",
        rng=np.random.default_rng(0),
        n_resamples=100,
        unit="items",
    )
    assert {r["method"] for r in rows} == {"permutation"}
    assert all(0 < r["p_value"] <= 1 for r in rows)
    with pytest.raises(ValueError, match="unit='systems'"):
        significance_table(
            metrics,
            humans,
            level="system",
            coefficient="pearson",
            method="permutation",
            rng=np.random.default_rng(0),
            n_resamples=10,
            system_metrics={"good": np.arange(6.0)},
        )


def test_rows_do_not_depend_on_the_threads_that_run_the_jobs() -> None:
    metrics, humans = _inputs()
    kw: dict[str, Any] = {"levels": ("segment", "system"), "n_resamples": 30}
    one = correlation_table(metrics, humans, rng=np.random.default_rng(2), **kw)
    with ThreadPoolExecutor(max_workers=3) as pool:
        three = correlation_table(metrics, humans, rng=np.random.default_rng(2), map=pool.map, **kw)
    assert [tuple(r.values()) for r in one] == [tuple(r.values()) for r in three]


def _segment_pearson_significance(
    metrics: dict[str, np.ndarray], h: np.ndarray
) -> list[dict[str, Any]]:
    return significance_table(
        metrics, {"human": h}, level="segment", coefficient="pearson", rng=np.random.default_rng(0)
    )


def test_williams_with_missing_ratings_serves_each_metrics_own_correlation_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With ratings missing (cells left out of every pair), a metric's correlation with the
    human on the pair's cells is computed once for all its pairs, and the rows equal those of
    a computation that does not share them."""
    import paraeval.correlation.metric_comparison as sig

    rng = np.random.default_rng(6)
    h = rng.normal(size=(5, 40))
    h[0, 3] = h[2, 7] = np.nan
    metrics = {f"m{k}": h + rng.normal(scale=0.5 + k, size=h.shape) for k in range(4)}
    metrics = {k: np.where(np.isfinite(v), v, 0.3) for k, v in metrics.items()}

    def run() -> list[dict[str, Any]]:
        return _segment_pearson_significance(metrics, h)

    calls: list[int] = []
    plain = sig._segment_value

    def counted(*args: Any) -> float:
        calls.append(1)
        return plain(*args)

    monkeypatch.setattr(sig, "_segment_value", counted)
    served = run()
    # 6 pairs: one r_ab each, and one r with the human per metric (4), not two per pair (12)
    assert len(calls) == 6 + 4
    shared = sig._segment_williams_inputs
    monkeypatch.setattr(
        sig, "_segment_williams_inputs", lambda a, b, h, c, v, masked: shared(a, b, h, c, v, {})
    )
    calls.clear()
    assert run() == served
    assert len(calls) == 6 * 3


# ------------------------------------------------------------------ rows of ordinal coefficients
ORDINAL = [c for c in COEFFICIENTS.values() if c.ordinal]

# strictly increasing in floating point on the scores below (checked by order_key in the test)
TRANSFORMS: dict[str, Callable[[np.ndarray], np.ndarray] | None] = {
    "affine": lambda x: 3.0 * x - 0.7,
    "exp": np.exp,
    "cube": lambda x: x**3 + x,
    "negated twice": lambda x: -(-2.5 * x),
    "dense ranks": None,
}


def _ordinal_inputs(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Scores with ties (a coarse scale), missing cells and a human with tied ratings."""
    rng = np.random.default_rng(seed)
    n_sys, n_items = int(rng.integers(3, 9)), int(rng.integers(8, 40))
    human = rng.integers(1, 6, size=(n_sys, n_items)).astype(float)
    metric = np.round(human + rng.normal(scale=1.5, size=human.shape), int(rng.integers(0, 3)))
    metric[rng.random(metric.shape) < 0.08] = np.nan
    human[rng.random(human.shape) < 0.05] = np.nan
    return metric, human


def _dense_ranks(x: np.ndarray) -> np.ndarray:
    out = np.full(x.shape, np.nan)
    ok = np.isfinite(x)
    out[ok] = np.unique(x[ok], return_inverse=True)[1].reshape(-1)
    return out


def _rows(metric: np.ndarray, human: np.ndarray, **kwargs: Any) -> list[dict[str, Any]]:
    return correlation_table(
        {"m": metric},
        {"human_overall": human},
        levels=("segment", "item"),
        coefficients=tuple(ORDINAL),
        rng=np.random.default_rng(7),
        **kwargs,
    )


def _same(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> bool:
    """Every field equal, bit for bit (NaN equal to NaN)."""
    return len(a) == len(b) and all(
        x.keys() == y.keys()
        and all(
            x[k] == y[k] or (isinstance(x[k], float) and math.isnan(x[k]) and math.isnan(y[k]))
            for k in x
        )
        for x, y in zip(a, b, strict=True)
    )


@pytest.mark.parametrize("transform", sorted(TRANSFORMS))
@pytest.mark.parametrize(
    "settings",
    [
        {"n_resamples": 120},
        {"n_resamples": 60, "unit": "systems", "item_nan": "zero"},
        {"n_resamples": 60, "unit": "both"},
        {"interval": "fisher"},
        {"ci": False},
    ],
    ids=["items", "systems-zero", "both", "fisher", "no-ci"],
)
@pytest.mark.parametrize("seed", range(4))
def test_an_ordinal_coefficients_rows_depend_on_the_metrics_order_only(
    seed: int, settings: dict[str, Any], transform: str
) -> None:
    """``Coefficient.ordinal`` lets a column that orders like one already correlated share its
    rows: true only if every number of the row (value, p-value, n, interval) is the same, bit for
    bit, when the metric is replaced by a strictly increasing function of it."""
    assert {c.name for c in ORDINAL} >= {"spearman", "kendall_b", "kendall_c", "kendall_like"}
    metric, human = _ordinal_inputs(seed)
    moved = (TRANSFORMS[transform] or _dense_ranks)(metric)
    assert table.order_key(moved) == table.order_key(metric)
    assert not np.array_equal(moved, metric, equal_nan=True)
    assert _same(_rows(moved, human, **settings), _rows(metric, human, **settings))


def test_pearson_is_not_ordinal_and_its_rows_show_why() -> None:
    """The same comparison for Pearson's r, which reads the values: its rows change."""
    metric, human = _ordinal_inputs(0)
    assert not get_coefficient("pearson").ordinal
    rows = [
        correlation_table(
            {"m": m},
            {"human_overall": human},
            levels=("segment", "item"),
            coefficients=("pearson",),
            n_resamples=50,
            rng=np.random.default_rng(7),
        )
        for m in (metric, np.exp(metric))
    ]
    assert not _same(rows[0], rows[1])


def test_order_key_tells_orders_apart() -> None:
    x = np.array([[0.1, 0.5, np.nan], [0.5, 0.3, np.inf]])
    assert table.order_key(x) == table.order_key(np.exp(x))
    assert table.order_key(x) != table.order_key(-x)  # reversed order
    y = x.copy()
    y[0, 1] = 0.50000001  # a tie broken
    assert table.order_key(x) != table.order_key(y)
    z = x.copy()
    z[0, 0] = np.nan  # a cell dropped
    assert table.order_key(x) != table.order_key(z)
    assert table.order_key(x) != table.order_key(np.where(np.isinf(x), -np.inf, x))


def test_a_column_ordered_like_another_is_served_its_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """In one table, the ordinal rows of a rescaled column are those of the original column, not
    computed again; its Pearson rows and its system level are computed. A later table computes
    its own rows."""
    metrics, humans = _inputs()
    good = metrics["good"]
    calls: list[tuple[str, str]] = []
    real = table.correlate

    def counting(metric: np.ndarray, human: np.ndarray, level: str, coefficient: Any, **kw: Any):
        calls.append((level, get_coefficient(coefficient).name))
        return real(metric, human, level, coefficient, **kw)

    monkeypatch.setattr(table, "correlate", counting)
    kwargs: dict[str, Any] = {
        "levels": ("segment", "item", "system"),
        "coefficients": ("pearson", "spearman", "kendall_b"),
        "n_resamples": 80,
    }
    alone = correlation_table({"good": good}, humans, rng=np.random.default_rng(3), **kwargs)
    first = len(calls)
    both = correlation_table(
        {"good": good, "scaled": 0.25 * good + 1.0},
        humans,
        rng=np.random.default_rng(3),
        **kwargs,
    )
    # the second table computes the ordinal rows of segments and items for one of the two
    # columns; what reads values (Pearson everywhere, the system level) for both
    second = calls[first:]
    assert sorted(second) == sorted(
        [(lv, "pearson") for lv in ("segment", "item", "system")] * 2 * len(humans)
        + [("system", c) for c in ("spearman", "kendall_b")] * 2 * len(humans)
        + [(lv, c) for lv in ("segment", "item") for c in ("spearman", "kendall_b")] * len(humans)
    )
    assert _same([r for r in both if r["metric"] == "good"], alone)
    scaled = [r for r in both if r["metric"] == "scaled"]
    for r, g in zip(scaled, [r for r in both if r["metric"] == "good"], strict=True):
        if r["coefficient"] != "pearson" and r["level"] != "system":
            assert _same([{**r, "metric": "good"}], [g])
