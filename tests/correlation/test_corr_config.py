"""Coefficient settings from conf/correlation/, the wmt23 preset, the Williams check, and the n
beside system-level values in the report."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from paraeval.correlation import COEFFICIENTS
from paraeval.correlation.catalog import coefficient_settings
from paraeval.pipeline.config.settings import configured_coefficients
from paraeval.pipeline.errors import ConfigError
from paraeval.pipeline.report.summary import correlations_block
from tests.pipeline.helpers import conf_node, correlation_settings

CONF = Path(__file__).resolve().parents[2] / "conf" / "correlation"
PRESETS = sorted(p.stem for p in CONF.glob("*.yaml"))


# WMT's DARR protocol as mt-metrics-eval's KendallLike counts it: |DA difference| >= 25
PROTOCOL_SETTINGS = {"wmt": {"kendall_like": {"human_margin": 25.0, "margin_rule": "at_least"}}}


@pytest.mark.parametrize("preset", PRESETS)
def test_every_coefficient_setting_is_in_every_preset(preset: str) -> None:
    # each setting can be overridden from the command line (correlation.coefficient_settings.
    # kendall_like.human_margin=25) because every preset lists it; with the code's default,
    # except where a preset is a protocol that sets its own (WMT's DARR threshold)
    node = conf_node("correlation", preset)
    listed = node["coefficient_settings"]
    own = PROTOCOL_SETTINGS.get(preset, {})
    for name in COEFFICIENTS:
        defaults = coefficient_settings(name)
        if defaults:
            assert listed.get(name) == defaults | own.get(name, {}), (preset, name)
    correlation_settings(preset=preset)
    built = configured_coefficients(listed)
    assert set(built) == {n for n in COEFFICIENTS if coefficient_settings(n)}


def test_settings_change_the_numbers() -> None:
    # threshold 1: mt-metrics-eval ("at_least") counts 6 pairs (tau 1/3); the default rule
    # ("above") 5 (tau 0.6). Four systems on one item.
    gold = np.array([[10.0], [11.0], [100.0], [150.0]])
    metric = np.array([[2.0], [1.0], [4.0], [3.0]])
    from paraeval.correlation import correlate

    above = configured_coefficients({"kendall_like": {"human_margin": 1}})
    field = configured_coefficients(
        {"kendall_like": {"human_margin": 1, "margin_rule": "at_least"}}
    )
    assert correlate(metric, gold, "segment", field["kendall_like"]).value == pytest.approx(1 / 3)
    assert correlate(metric, gold, "segment", above["kendall_like"]).value == pytest.approx(0.6)


@pytest.mark.parametrize(
    ("node", "message"),
    [
        ({"kendall_like": {"human_margn": 1}}, "no setting 'human_margn'"),
        ({"kendall_like": {"margin_rule": "over"}}, "margin_rule must be one of"),
        ({"pairwise_accuracy": {"human_ties": "drop"}}, "human_ties must be one of"),
        ({"acc23": {"epsilon": -1}}, "epsilon must be"),
        ({"acc23": {"sample_rate": 1.5}}, "sample_rate must be"),
        ({"tau_23": {"seed": -1}}, "seed must be"),
        ({"kendal_like": {}}, "unknown coefficient 'kendal_like'"),
        ({"pearson": {"x": 1}}, "has no setting 'x'"),
    ],
)
def test_bad_settings_are_one_line_config_errors(node: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as err:
        correlation_settings({"coefficient_settings": node})
    assert "\n" not in str(err.value)


def test_williams_with_pairwise_accuracy_is_rejected_at_config_check() -> None:
    cfg = {
        "levels": ["system"],
        "coefficients": ["pairwise_accuracy"],
        "significance": {
            "enabled": True,
            "method": "williams",
            "level": "system",
            "coefficient": "pairwise_accuracy",
        },
    }
    with pytest.raises(ConfigError, match="method=permutation"):
        correlation_settings(cfg)
    cfg["significance"]["method"] = "permutation"  # type: ignore[index]
    settings = correlation_settings(cfg)
    assert (settings.levels, settings.coefficient_names) == (("system",), ("pairwise_accuracy",))


def test_interval_and_permutation_unit_are_checked() -> None:
    with pytest.raises(ConfigError, match=r"correlation\.interval"):
        correlation_settings({"interval": "jackknife"})
    with pytest.raises(ConfigError, match=r"significance\.unit"):
        correlation_settings(
            {"significance": {"enabled": True, "method": "permutation", "unit": "rows"}}
        )


@pytest.mark.parametrize(
    ("sig", "message"),
    [
        ({"unit": "pairs", "level": "item", "coefficient": "pearson"}, "unit=pairs"),
        ({"unit": "pairs", "level": "system", "coefficient": "acc23"}, "unit=pairs"),
        ({"alternative": "less"}, "alternative must be one of"),
        ({"block_size": 0}, "block_size must be"),
        ({"block_size": 100, "early_min": 0.6}, "early_min <= early_max"),
    ],
)
def test_significance_settings_are_checked(sig: dict, message: str) -> None:
    node = {"enabled": True, "method": "permutation", "level": "item", "coefficient": "acc23"}
    with pytest.raises(ConfigError, match=message) as err:
        correlation_settings({"significance": node | sig})
    assert "\n" not in str(err.value)


def test_report_says_n_beside_system_level_values() -> None:
    corr = pd.DataFrame(
        [
            ["bleu", "human_x", "segment", "pearson", 0.5, 0.4, 0.6, 0.01, 120, 0],
            ["bleu", "human_x", "system", "pearson", 1.0, np.nan, np.nan, 1 / 3, 3, 0],
        ],
        columns=[
            "metric",
            "aspect",
            "level",
            "coefficient",
            "value",
            "ci_low",
            "ci_high",
            "p_value",
            "n",
            "n_dropped",
        ],
    )
    import io
    from types import SimpleNamespace

    from rich.console import Console

    ev = SimpleNamespace(
        correlations=corr,
        aggregated=None,
        settings=SimpleNamespace(
            correlation=correlation_settings({"significance": {"enabled": False}})
        ),
    )
    block = correlations_block(ev, 40)  # type: ignore[arg-type]
    assert block is not None
    buffer = io.StringIO()
    Console(file=buffer, width=100, color_system=None).print(block[0])
    text = buffer.getvalue()
    assert "+1.000 n=3" in text
    assert "+0.500" in text and "n=120" not in text


def _agg_for(human: np.ndarray, metric: np.ndarray):  # type: ignore[no-untyped-def]
    """A minimal Aggregated-like object for the correlate stage: segments with one metric."""
    from types import SimpleNamespace

    n_sys, n_items = human.shape
    rows = [
        {
            "item_id": f"i{j}",
            "system": f"s{s}",
            "human_x": human[s, j],
            "m": metric[s, j],
        }
        for s in range(n_sys)
        for j in range(n_items)
    ]
    seg = pd.DataFrame(rows)
    systems = pd.DataFrame(
        {"m": seg.groupby("system")["m"].mean()}, index=[f"s{s}" for s in range(n_sys)]
    )
    return SimpleNamespace(segments=seg, systems=systems, columns={"m": None}, given=frozenset())


def test_wmt23_preset_through_the_correlate_stage(caplog: pytest.LogCaptureFixture) -> None:
    from paraeval.pipeline.stages import correlate as stage

    rng = np.random.default_rng(0)
    human = rng.normal(size=(4, 12)) + np.arange(4)[:, None]
    metric = human + rng.normal(scale=0.5, size=human.shape)
    settings = correlation_settings({"n_resamples": 50}, preset="wmt23")
    agg = _agg_for(human, metric)
    with caplog.at_level(logging.WARNING):
        out = stage.correlate(agg, settings, np.random.default_rng(1))  # type: ignore[arg-type]
    got = {(r.level, r.coefficient) for r in out.itertuples()}
    assert got == {
        ("system", "pairwise_accuracy"),
        ("system", "pearson"),
        ("segment", "pearson"),
        ("item", "pearson"),
        ("item", "acc23"),
        ("system", "acc23"),
    }
    # every row has an interval from the same 1,000-resample (here 50) bootstrap, except a
    # system-level row whose resamples all agree (a perfect pairwise accuracy on 4 systems):
    # not available rather than of zero width
    has = out["ci_low"].notna() & out["ci_high"].notna()
    assert has[out.level != "system"].all()
    assert (out.loc[has, "ci_low"] < out.loc[has, "ci_high"]).all()
    assert set(out.loc[~has, "coefficient"]) == {"pairwise_accuracy", "acc23"}
    assert out.loc[~has, "value"].tolist() == pytest.approx([1.0, 1.0])
    acc = out[(out.level == "item") & (out.coefficient == "acc23")].iloc[0]
    assert 0.0 <= acc.ci_low <= acc.value <= acc.ci_high <= 1.0
    # 4 systems: the warning about system-level values on few systems
    assert "n=4 systems" in caplog.text


def test_wmt23_preset_end_to_end_on_the_demo() -> None:
    import paraeval
    from paraeval.pipeline.data.load import demo_path, read_table

    ev = paraeval.evaluate(
        read_table(demo_path()),
        ["bleu", "chrf"],
        correlation="wmt23",
        overrides=[
            "correlation.n_resamples=50",
            "correlation.significance.n_resamples=50",
            "compare.enabled=false",
            "report.progress=false",
        ],
    )
    corr = ev.correlations
    assert set(corr["coefficient"]) == {"pairwise_accuracy", "pearson", "acc23"}
    sys_rows = corr[corr["level"] == "system"]
    assert (sys_rows["n"] == len(ev.systems)).all()
    # a table per task of tasks.WMT23(), in the preset's order
    tasks = ev.significance[["level", "coefficient"]].drop_duplicates()
    assert list(tasks.itertuples(index=False, name=None)) == [
        ("item", "acc23"),
        ("system", "pairwise_accuracy"),
        ("system", "pearson"),
        ("segment", "pearson"),
    ]
    assert set(ev.significance["method"]) == {"permutation"}
    assert set(ev.draws) == {
        (*key, a, b)
        for *key, a, b in ev.significance[
            ["aspect", "level", "coefficient", "metric_a", "metric_b"]
        ].itertuples(index=False, name=None)
    }


@pytest.mark.parametrize("preset", ["wmt24", "wmt25"])
def test_wmt24_and_wmt25_presets_are_mt_metrics_eval_tasks(preset: str) -> None:
    # tasks.WMT24()/WMT25(): system-level pce (soft pairwise accuracy) and item-averaged acc23
    # with tie calibration on every pair, compared by the pairwise permutation test with the
    # Task's early stopping (block 100, 0.02, 0.5) and k = 1000
    node = conf_node("correlation", preset)
    settings = correlation_settings(preset=preset)
    assert (settings.levels, settings.coefficient_names) == (
        ("item", "system"),
        ("soft_pairwise_accuracy", "acc23"),
    )
    built = configured_coefficients(node["coefficient_settings"])
    assert dict(built["acc23"].options) == {
        "calibrate": True,
        "epsilon": 0.0,
        "sample_rate": 1.0,
        "seed": 0,
    }
    assert dict(built["soft_pairwise_accuracy"].options)["n_permutations"] == 1000
    sig = node["significance"]
    assert (sig["level"], sig["coefficient"], sig["unit"], sig["alternative"]) == (
        "item",
        "acc23",
        "pairs",
        "greater",
    )
    assert (sig["n_resamples"], sig["block_size"], sig["early_min"], sig["early_max"]) == (
        1000,
        100,
        0.02,
        0.5,
    )
