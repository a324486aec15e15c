"""paraeval in a notebook: ``paraeval.list_metrics()`` and an :class:`Evaluation` shown as a
short repr and a compact HTML summary."""

from __future__ import annotations

import importlib
from pathlib import Path

import pandas as pd
import pytest
from omegaconf import OmegaConf

import paraeval

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
    assert list(metrics.columns) == ["id", "group", "direction", "needs", "settings"]
    files = sorted(p.stem for p in CONF.glob("*.yaml"))
    assert len(files) >= 28
    assert sorted(metrics["id"]) == files
    assert metrics["id"].is_unique


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


def test_list_metrics_settings_are_the_config_defaults(metrics: pd.DataFrame) -> None:
    for row in metrics.itertuples():
        raw = OmegaConf.load(CONF / f"{row.id}.yaml")[str(row.id)]
        keys = {str(k) for k in raw} - {"_target_"}
        assert set(row.settings) == keys, row.id
    settings = metrics.set_index("id")["settings"]
    assert settings["ibleu"]["alpha"] == 0.8
    assert settings["bleu"]["tokenize"] == "13a"
    # interpolations resolved as a run resolves them (the cache folder is a path, not ${...})
    assert "${" not in str(settings["bertscore"]["cache_dir"])
