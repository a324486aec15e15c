"""correlation.significance.tasks: several significance tests in one run (mt-metrics-eval's tasks),
checked at config time, each its own rows of significance.csv, and the WMT presets' lists."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd
import pytest

from paraeval.pipeline.errors import ConfigError
from paraeval.pipeline.stages.correlate import significance
from tests.pipeline.helpers import correlation_settings

SYSTEM_PEARSON = {"level": "system", "coefficient": "pearson", "unit": "systems", "weight": 1}


def _settings(tasks: Any, **sig: Any):  # type: ignore[no-untyped-def]
    node = {"method": "permutation", "n_resamples": 40, "tasks": tasks, **sig}
    return correlation_settings({"significance": node})


@pytest.mark.parametrize(
    ("tasks", "message"),
    [
        ("system", r"tasks must be null or a non-empty list of \{level"),
        ([], "tasks must be null or a non-empty list"),
        (["system"], r"tasks\[0\] must be a mapping of level, coefficient, unit, weight"),
        ([{**SYSTEM_PEARSON, "alpha": 1}], r"unknown setting 'correlation.significance.tasks\[0\]"),
        ([{"level": "system", "coefficient": "pearson", "unit": "systems"}], r"\[0\].weight is"),
        ([SYSTEM_PEARSON, {**SYSTEM_PEARSON, "level": "corpus"}], r"tasks\[1\].level must be"),
        ([{**SYSTEM_PEARSON, "coefficient": "pearsn"}], r"tasks\[0\].coefficient must be one"),
        ([{**SYSTEM_PEARSON, "level": "segment", "coefficient": "soft_pairwise_accuracy"}],
         r"tasks\[0\]: coefficient 'soft_pairwise_accuracy' is not defined at the 'segment'"),
        ([{**SYSTEM_PEARSON, "unit": "rows"}], r"tasks\[0\].unit must be one of"),
        ([{**SYSTEM_PEARSON, "unit": "pairs"}], r"tasks\[0\]: unit=pairs swaps pairs"),
        ([{**SYSTEM_PEARSON, "weight": 0}], r"tasks\[0\].weight must be in \(0, inf\)"),
        ([{**SYSTEM_PEARSON, "weight": "x"}], r"tasks\[0\].weight must be a number"),
    ],
)  # fmt: skip
def test_a_bad_task_is_one_config_error_naming_it(tasks: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as err:
        _settings(tasks)
    assert "\n" not in str(err.value)


def test_williams_is_checked_per_task() -> None:
    task = {**SYSTEM_PEARSON, "level": "item", "coefficient": "acc23", "unit": "pairs"}
    with pytest.raises(ConfigError, match=r"tasks\[1\]: Williams' test compares"):
        _settings([SYSTEM_PEARSON, task], method="williams")


def _tasks(settings: Any) -> list[tuple[str, str, str, float]]:
    return [(t.level, t.coefficient.name, t.unit, t.weight) for t in settings.significance.tasks]


def test_null_is_the_one_test_of_level_coefficient_and_unit() -> None:
    settings = _settings(None, level="system", coefficient="kendall_b", unit="both")
    assert _tasks(settings) == [("system", "kendall_b", "both", 1.0)]
    # configured coefficients: the task's is built with coefficient_settings
    node = {"significance": {"method": "permutation", "level": "item", "coefficient": "acc23",
                             "unit": "pairs", "tasks": [{**SYSTEM_PEARSON, "weight": 2.5},
                             {"level": "item", "coefficient": "acc23", "unit": "pairs",
                              "weight": 1}]},
            "coefficient_settings": {"acc23": {"calibrate": False, "epsilon": 0.5}}}  # fmt: skip
    built = correlation_settings(node)
    assert _tasks(built)[0] == ("system", "pearson", "systems", 2.5)
    assert dict(built.significance.tasks[1].coefficient.options)["epsilon"] == 0.5


ACC23 = ("item", "acc23", "pairs", 1.0)


@pytest.mark.parametrize(
    ("preset", "expected"),
    [
        (
            "wmt23",
            [
                ACC23,
                ("system", "pairwise_accuracy", "systems", 1.0),
                ("system", "pearson", "systems", 1.0),
                ("segment", "pearson", "cells", 1.0),
            ],
        ),
        ("wmt24", [ACC23, ("system", "soft_pairwise_accuracy", "cells", 1.0)]),
        ("wmt25", [ACC23, ("system", "soft_pairwise_accuracy", "cells", 1.0)]),
        ("default", [("segment", "pearson", "items", 1.0)]),
    ],
)  # fmt: skip
def test_the_presets_list_mt_metrics_eval_tasks(preset: str, expected: list) -> None:
    settings = correlation_settings(preset=preset)
    assert _tasks(settings) == expected
    # the first task is the test of level/coefficient/unit: the headline's clusters
    sig = settings.significance
    assert (sig.level, sig.coefficient.name, sig.unit) == expected[0][:3]


def _agg(n_sys: int = 5, n_items: int = 10) -> SimpleNamespace:
    rng = np.random.default_rng(2)
    human = rng.normal(size=(n_sys, n_items)) + np.arange(n_sys)[:, None]
    cols = {"good": human + rng.normal(scale=0.5, size=human.shape)}
    cols["weak"] = human + rng.normal(scale=2.0, size=human.shape)
    cols["ter"] = -human + rng.normal(scale=1.0, size=human.shape)
    seg = pd.DataFrame(
        [
            {"item_id": f"i{j}", "system": f"s{s}", "human_x": human[s, j]}
            | {c: m[s, j] for c, m in cols.items()}
            for s in range(n_sys)
            for j in range(n_items)
        ]
    )
    systems = seg.groupby("system")[list(cols)].mean()
    info = {c: SimpleNamespace(higher_is_better=c != "ter") for c in cols}
    return SimpleNamespace(segments=seg, systems=systems, columns=info, given=frozenset())


def test_each_task_adds_its_rows_and_draws() -> None:
    tasks = [
        {"level": "segment", "coefficient": "pearson", "unit": "cells", "weight": 1},
        {"level": "system", "coefficient": "pairwise_accuracy", "unit": "systems", "weight": 1},
    ]
    settings = _settings(tasks, level="segment", coefficient="pearson", unit="cells")
    draws: dict[tuple[str, ...], np.ndarray] = {}
    out = significance(_agg(), settings, np.random.default_rng(0), draws)  # type: ignore[arg-type]
    assert list(out.groupby(["level", "coefficient"], sort=False).size().items()) == [
        (("segment", "pearson"), 3),
        (("system", "pairwise_accuracy"), 3),
    ]
    keys = out[["aspect", "level", "coefficient", "metric_a", "metric_b"]]
    assert set(draws) == set(keys.itertuples(index=False, name=None))
    assert all(d.shape == (40,) for d in draws.values())
    # the first task's rows are those of the single test with the same generator
    single = _settings(None, level="segment", coefficient="pearson", unit="cells")
    alone = significance(_agg(), single, np.random.default_rng(0))  # type: ignore[arg-type]
    pd.testing.assert_frame_equal(out.iloc[:3], alone)
