"""paraeval in a notebook: ``paraeval.list_metrics()`` and an :class:`Evaluation` shown as a
short repr and a compact HTML summary."""

from __future__ import annotations

import importlib
from pathlib import Path

import pandas as pd
import pytest
from omegaconf import OmegaConf

import paraeval
from paraeval.pipeline.config.compose import compose_config
from paraeval.pipeline.data.load import demo_path, read_table
from paraeval.pipeline.report.summary import best_metrics, ranked_systems

CONF = Path(__file__).resolve().parents[2] / "conf" / "metrics"


@pytest.fixture(scope="module")
def metrics() -> pd.DataFrame:
    return paraeval.list_metrics()


def _metric_class(metric_id: str) -> type:
    """The class the metric's config file names, imported here independently of paraeval's
    allow-list."""
    target = OmegaConf.load(CONF / f"{metric_id}.yaml")[metric_id]["_target_"]
    module, _, name = str(target).rpartition(".")
    return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]


def test_list_metrics_has_every_config_file(metrics: pd.DataFrame) -> None:
    assert list(metrics.columns) == ["id", "group", "direction", "needs", "default", "settings"]
    files = sorted(p.stem for p in CONF.glob("*.yaml"))
    assert len(files) >= 28
    assert sorted(metrics["id"]) == files
    assert metrics["id"].is_unique
    # the default set is the metrics a run composes without metrics=
    default = set(metrics.loc[metrics["default"], "id"])
    assert default == set(compose_config().metrics)
    assert "bleu" in default and "bleurt" not in default


def test_list_metrics_directions_and_groups_are_the_classes(metrics: pd.DataFrame) -> None:
    for row in metrics.itertuples():
        cls = _metric_class(str(row.id))
        assert row.direction == ("higher" if cls.higher_is_better else "lower"), row.id
        assert row.group == cls.default_group, row.id
        needs = str(row.needs).split(", ")
        assert ("references" in needs) == cls.needs_references, row.id
        assert ("sources" in needs) == cls.needs_sources, row.id
    by_id = metrics.set_index("id")
    assert by_id.loc["ter", "direction"] == "lower" and by_id.loc["wmd", "direction"] == "lower"
    assert by_id.loc["bleu", "direction"] == "higher"
    assert "encoder" in by_id.loc["bertscore", "needs"]
    assert "WordNet" in by_id.loc["meteor", "needs"]
    assert by_id.loc["bleu", "needs"] == "references"


@pytest.mark.slow
def test_list_metrics_settings_are_the_config_defaults(metrics: pd.DataFrame) -> None:
    for row in metrics.itertuples():
        # the metric's file composed alone, with the shared encoder settings (conf/encoder/) its
        # defaults list places in its node
        cfg = compose_config([f"metrics=[{row.id}]"])
        node = OmegaConf.to_container(cfg.metrics[str(row.id)], resolve=True)
        assert isinstance(node, dict)
        node.pop("_target_")
        assert row.settings == node, row.id
    settings = metrics.set_index("id")["settings"]
    assert settings["ibleu"]["alpha"] == 0.8
    assert settings["bleu"]["tokenize"] == "13a"
    # interpolations resolved as a run resolves them (the cache folder is a path, not ${...})
    assert "${" not in str(settings["bertscore"]["cache_dir"])


CHEAP = {
    "correlation": {"n_resamples": 50, "significance": {"n_resamples": 50}},
    "compare": {"n_bootstrap": 50, "n_ar": 100},
    "report": {"progress": False},
    "cache": {"enabled": False},
    "alpha_curve": {"enabled": False},
}


@pytest.fixture(scope="module")
def demo() -> paraeval.Evaluation:
    return paraeval.evaluate(demo_path(), ["bleu", "chrf", "ter", "self_bleu", "ibleu"], **CHEAP)


def test_repr_is_one_short_line(demo: paraeval.Evaluation, tmp_path: Path) -> None:
    text = repr(demo)
    assert len(text) < 300 and "\n" not in text, text
    assert text.startswith("Evaluation(data='table:demo")
    assert "systems=4, items=48" in text
    assert "metrics=[bleu, chrf, ter, self_bleu, ibleu]" in text
    assert "out_dir=None" in text
    # no setting is dumped (the dataclass repr printed the whole Settings tree)
    assert "Settings" not in text and "n_resamples" not in text


def test_html_summary_ranks_the_systems_and_names_the_best_metrics(
    demo: paraeval.Evaluation,
) -> None:
    page = demo._repr_html_()
    assert len(page) < 6000 and "<img" not in page
    for system in ("copy", "strong", "medium", "weak"):
        assert f"<th>{system}</th>" in page
    ranked = ranked_systems(demo)
    assert list(ranked["rank"]) == [1, 2, 3, 4]  # the demo as a table declares no control
    assert ranked["syntactic"].is_monotonic_decreasing
    assert ranked.index[0] == "strong"
    # declared, the copy is last and unranked
    with_control = paraeval.evaluate(
        demo_path(), ["bleu", "chrf"], overrides=["data.controls=[copy]"], **CHEAP
    )
    ranked = ranked_systems(with_control)
    assert list(ranked["rank"]) == [1, 2, 3, "control"] and ranked.index[-1] == "copy"
    assert ranked["syntactic"].iloc[:3].is_monotonic_decreasing
    best = best_metrics(demo)
    assert list(best.index) == ["meaning", "fluency"]
    assert list(best.columns) == ["segment", "item", "system"]
    corr = demo.correlations
    # the averages and the diversity column (self-BLEU: distance from the source) do not compete
    corr = corr[
        (corr["coefficient"] == "pearson") & ~corr["metric"].isin(["syntactic", "self_bleu"])
    ]
    for aspect in best.index:
        for level in best.columns:
            metric, value = best.loc[aspect, level].split()
            cell = corr[(corr["aspect"] == f"human_{aspect}") & (corr["level"] == level)]
            # agreement: a lower-is-better metric (TER) agrees when its correlation is negative
            agreement = cell["value"].where(cell["metric"] != "ter", -cell["value"])
            assert float(value) == pytest.approx(
                cell.set_index("metric").loc[metric, "value"], abs=5e-4
            )
            assert agreement[cell["metric"] == metric].iloc[0] == agreement.max()
            assert f"{metric} {value}" in page
    # TER's -0.6 beats chrF's +0.6 at the system level: ranked by agreement, not by value
    assert best.loc["fluency", "system"].startswith("ter -")


def test_html_summary_escapes_names_from_data() -> None:
    frame = read_table(demo_path())
    frame["system"] = frame["system"].replace({"weak": "<script>alert(1)</script>"})
    ev = paraeval.evaluate(frame, ["bleu"], **CHEAP)
    page = ev._repr_html_()
    assert "<script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
