"""The metric ranking: per test, and overall over several tests as mt-metrics-eval's
TaskSetResults.AverageCorrMatrix computes it, on hand-worked arrays."""

from __future__ import annotations

import math

import numpy as np
import pytest

from paraeval.correlation.ranking import (
    RANKING_COLUMNS,
    RankedTask,
    metric_ranking,
    overall_ranking,
)

ZEROS4, ZEROS8 = np.zeros(4), np.zeros(8)
# task A: a correlation in [-1, 1], weight 1, stopped early after 4 permutations; its rows are
# in its own order x > z > y. Task B: a rate in [0, 1], weight 3, 8 permutations, y > z > x;
# w has no value in A and stays out of the overall ranking
TASK_A = RankedTask(
    1.0,
    (-1.0, 1.0),
    {"x": 0.6, "y": 0.2, "z": 0.4},
    {("x", "z"): ZEROS4, ("x", "y"): ZEROS4, ("z", "y"): np.array([0.1, -0.2, 0.3, 0.0])},
)
TASK_B = RankedTask(
    3.0,
    (0.0, 1.0),
    {"x": 0.5, "y": 0.9, "z": 0.7, "w": 0.8},
    {
        ("y", "z"): np.array([0.1, 0.2, -0.1, 0.05, 0.18, -0.2, 0.0, 0.15]),
        ("y", "x"): ZEROS8,
        ("z", "x"): ZEROS8,
        ("w", "y"): ZEROS8,
    },
)


def test_overall_values_are_weighted_means_of_the_mapped_values() -> None:
    rows = overall_ranking([TASK_A, TASK_B], alpha=0.05)
    # weights 1/4 and 3/4; A's values mapped by (v + 1) / 2
    assert [r["metric"] for r in rows] == ["y", "z", "x"]
    assert [r["value"] for r in rows] == pytest.approx(
        [0.25 * 0.6 + 0.75 * 0.9, 0.25 * 0.7 + 0.75 * 0.7, 0.25 * 0.8 + 0.75 * 0.5], abs=1e-15
    )


@pytest.mark.parametrize(
    ("alpha", "clusters"),
    [
        # y vs z: observed 0.125; the null sums 0.75 * B's draws and 1/8 * A's (negated: its row
        # is z - y) repeated twice: 0.0625 0.175 -0.1125 0.0375 0.1225 -0.125 -0.0375 0.1125,
        # one at least 0.125: p = (1 + 1) / (1 + 8) (not tiled: 0.135 would count too, p 3/9)
        (2 / 9, [1, 2, 3]),
        (2 / 9 - 1e-9, [1, 1, 2]),
        # y and z vs x: no null sum reaches the observed difference: p = 1/9
        (1 / 9 - 1e-9, [1, 1, 1]),
    ],
)
def test_overall_clusters_from_the_summed_tiled_draws(alpha: float, clusters: list[int]) -> None:
    rows = overall_ranking([TASK_A, TASK_B], alpha=alpha)
    assert [r["cluster"] for r in rows] == clusters


def test_a_pair_without_draws_in_a_task_is_not_significant() -> None:
    task = RankedTask(1.0, (-1.0, 1.0), {"x": 0.9, "y": -0.9}, {})
    rows = overall_ranking([task, TASK_B], alpha=1.0)
    assert [(r["metric"], r["cluster"]) for r in rows] == [("y", 1), ("x", 1)]
    nan_value = RankedTask(1.0, (-1.0, 1.0), {"x": 0.1, "y": math.nan, "z": 0.0}, {})
    assert [r["metric"] for r in overall_ranking([nan_value, TASK_B], 0.05)] == ["z", "x"]


def _corr(aspect: str, level: str, coefficient: str, values: dict[str, float]) -> list[dict]:
    return [
        {"aspect": aspect, "level": level, "coefficient": coefficient, "metric": m, "value": v}
        for m, v in values.items()
    ]


def _sig(level: str, coefficient: str, a: str, b: str, ca: int, cb: int, **more: object) -> dict:
    cells = {"metric_a": a, "metric_b": b, "cluster_a": ca, "cluster_b": cb}
    plain = {"r_a": 0.0, "r_b": 0.0, "adjusted_a": False, "adjusted_b": False}
    test = {"aspect": "h", "level": level, "coefficient": coefficient, "method": "permutation"}
    return test | cells | plain | more


def test_metric_ranking_blocks_per_test_and_overall() -> None:
    correlations = (
        _corr("h", "system", "pearson", {"ter": -0.6, "bleu": 0.2, "m": 0.4, "nan": math.nan})
        + _corr("h", "item", "acc23", {"ter": 0.5, "bleu": 0.9, "m": 0.7})
        + _corr("h", "segment", "kendall_b", {"ter": -0.1, "bleu": 0.3})
    )
    significance = [
        _sig("system", "pearson", "ter", "m", 1, 2),
        _sig("system", "pearson", "ter", "bleu", 1, 2),
        _sig("system", "pearson", "m", "bleu", 2, 2),
        # acc23 on ter's negated scores, 0.3: r_b as printed is -0.3
        _sig("item", "acc23", "bleu", "ter", None, None, r_b=-0.3, adjusted_b=True),
        # a Williams test's r may be on the cells of a pair: not a value
        _sig(
            "segment",
            "kendall_b",
            "bleu",
            "ter",
            None,
            None,
            r_b=9,
            adjusted_b=True,
            method="williams",
        ),
    ]
    key = ("h", "system", "pearson")
    draws = {(*key, "ter", "m"): ZEROS4, (*key, "ter", "bleu"): ZEROS4}
    draws |= {(*key, "m", "bleu"): np.array([0.1, -0.2, 0.3, 0.0])}
    key = ("h", "item", "acc23")
    draws |= {(*key, "bleu", "m"): TASK_B.draws["y", "z"], (*key, "bleu", "ter"): ZEROS8}
    draws |= {(*key, "m", "ter"): ZEROS8}
    tasks = [("system", "pearson", 1.0), ("item", "acc23", 3.0)]
    args = {"lower_is_better": {"ter"}, "precomputed": {"m"}, "baselines": {"bleu"}}
    rows = metric_ranking(correlations, significance, draws, tasks, 2 / 9, **args)
    assert all(list(r) == list(RANKING_COLUMNS) for r in rows)
    table = [(r["level"], r["metric"], r["order"], r["cluster"]) for r in rows]
    assert table == [
        # ter's agreement is 0.6: first; a NaN value last, with no order nor cluster
        ("system", "ter", 1, 1),
        ("system", "m", 2, 2),
        ("system", "bleu", 3, 2),
        ("system", "nan", None, None),
        ("item", "bleu", 1, None),
        ("item", "m", 2, None),
        ("item", "ter", 3, None),
        ("segment", "bleu", 1, None),
        ("segment", "ter", 2, None),
        # TASK_A and TASK_B under other names: ter x, bleu y, m z; no test ran on segments
        ("overall", "bleu", 1, 1),
        ("overall", "m", 2, 2),
        ("overall", "ter", 3, 3),
    ]
    assert {r["coefficient"] for r in rows if r["level"] == "overall"} == {""}
    assert [r["value"] for r in rows[-3:]] == pytest.approx([0.825, 0.7, 0.2 + 0.75 * 0.3])
    assert [r["value"] for r in rows if r["metric"] == "ter"][1:3] == [0.3, 0.1]
    assert {r["metric"]: r["source"] for r in rows} == {
        "ter": "paraeval", "bleu": "paraeval", "m": "precomputed", "nan": "paraeval"
    }  # fmt: skip
    assert {r["metric"] for r in rows if r["baseline"]} == {"bleu"}
    # one task: no overall block
    one = metric_ranking(correlations, significance, draws, tasks[:1], 0.05, **args)
    assert "overall" not in {r["level"] for r in one} and len(one) == len(rows) - 3
