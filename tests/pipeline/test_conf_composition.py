"""How conf/ is composed, not only what it gives: each correlation preset is default.yaml plus its
own differences, and the encoder metrics share one encoder settings node (conf/encoder/) that each
metric's file places in its own node, so that a setting is still the metric's own."""

from __future__ import annotations

import inspect
import re
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

from paraeval.pipeline.config.compose import compose_config, config_dir
from paraeval.pipeline.config.targets import metric_class, metric_ids

CONF = config_dir()
PRESETS = sorted(p.stem for p in (CONF / "correlation").glob("*.yaml") if p.stem != "default")
# how a metric's file takes a shared encoder node: `- /encoder/<name>@<metric id>`
ENCODER_ENTRY = re.compile(r"/encoder/(?P<name>\w+)@(?P<package>\w+)")


def _raw(group: str, option: str) -> dict[str, Any]:
    node = yaml.safe_load((CONF / group / f"{option}.yaml").read_text(encoding="utf-8"))
    assert isinstance(node, dict)
    return node


def _leaves(node: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """``dotted.key, value`` of every leaf (a list is a leaf: Hydra replaces lists whole)."""
    for key, value in node.items():
        if isinstance(value, Mapping):
            yield from _leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def _resolved(overrides: list[str], node: str) -> dict[str, Any]:
    tree = OmegaConf.to_container(compose_config(overrides), resolve=True)
    assert isinstance(tree, dict)
    return tree[node]  # type: ignore[no-any-return]


def _all_metrics() -> list[str]:
    return [f"metrics=[{','.join(metric_ids())}]"]


def _encoder_files() -> dict[str, str]:
    """metric id -> the conf/encoder/ file its defaults list places in its node."""
    out: dict[str, str] = {}
    for metric_id in metric_ids():
        for entry in _raw("metrics", metric_id).get("defaults", []):
            if isinstance(entry, str) and (found := ENCODER_ENTRY.fullmatch(entry)):
                assert found["package"] == metric_id, f"{metric_id}: {entry} is not its own node"
                out[metric_id] = found["name"]
    return out


def _shared_node(name: str) -> dict[str, Any]:
    """conf/encoder/<name>.yaml as Hydra composes it (its own defaults list followed), resolved in
    a run's config (the cache interpolations)."""
    return _resolved(["metrics=[bleu]", f"+encoder={name}"], "encoder")


# --- the correlation presets -------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("preset", PRESETS)
def test_correlation_preset_is_default_plus_its_own_differences(preset: str) -> None:
    raw = _raw("correlation", preset)
    assert raw.pop("defaults", None) == ["default", "_self_"], (
        "extend default.yaml, then its own keys"
    )
    own = dict(_leaves(raw))
    base = dict(_leaves(_resolved([], "correlation")))
    composed = dict(_leaves(_resolved([f"correlation={preset}"], "correlation")))
    # the preset adds no key (a misspelt one would be a new key) and keeps default.yaml's order
    assert set(own) <= set(base), sorted(set(own) - set(base))
    assert list(composed) == list(base)
    # what it declares is what differs, and nothing else does
    assert {k: v for k, v in composed.items() if v != base[k]} == own
    redundant = sorted(k for k, v in own.items() if v == base[k])
    assert not redundant, f"{preset}.yaml repeats default.yaml's values: {redundant}"


def test_default_correlation_has_no_defaults_list() -> None:
    # the presets extend it; it extends nothing (every key is written there once)
    assert "defaults" not in _raw("correlation", "default")


# --- the shared encoder node -------------------------------------------------------------------


def test_every_encoder_metric_takes_the_shared_node() -> None:
    files = _encoder_files()
    assert {"bertscore", "cosine", "wmd", "semantic_diversity"} <= set(files)
    assert {"parascore", "parascore_free", "bert_ibleu"} <= set(files)
    shared_keys = set(_shared_node("default"))
    for metric_id in metric_ids():
        target = str(_raw("metrics", metric_id)[metric_id]["_target_"])
        params = inspect.signature(metric_class(target, metric_id, allow_external=False)).parameters
        if shared_keys <= set(params):
            # a metric with the encoder settings takes them from conf/encoder/, never a copy
            assert metric_id in files, f"{metric_id}: add - /encoder/default@{metric_id}"
        # and only settings the metric's class takes (each shared file fits its metrics)
        if metric_id in files:
            assert set(_shared_node(files[metric_id])) <= set(params), metric_id


def test_encoder_metrics_carry_the_shared_values_and_no_copy() -> None:
    files = _encoder_files()
    composed = _resolved(_all_metrics(), "metrics")
    for metric_id in metric_ids():
        own = _raw("metrics", metric_id)[metric_id]
        shared = _shared_node(files[metric_id]) if metric_id in files else {}
        # the file repeats no shared value (a key it sets is a value of its own, which wins)
        copies = sorted(k for k in set(own) & set(shared) if own[k] == shared[k])
        assert not copies, f"{metric_id}.yaml repeats conf/encoder/ values: {copies}"
        node = composed[metric_id]
        assert set(node) == set(own) | set(shared), metric_id
        assert {k: node[k] for k in shared if k not in own} == {
            k: v for k, v in shared.items() if k not in own
        }, metric_id


def test_a_metric_without_an_encoder_gains_no_encoder_key() -> None:
    node = _resolved(["metrics=[bleu]"], "metrics")
    assert list(node) == ["bleu"]
    assert node["bleu"] == _raw("metrics", "bleu")["bleu"]  # no interpolation in bleu's file
    assert not set(node["bleu"]) & set(_shared_node("bert_score"))


def test_one_metrics_override_reaches_that_metric_alone() -> None:
    before = _resolved(_all_metrics(), "metrics")
    after = _resolved([*_all_metrics(), "metrics.bertscore.batch_size=8"], "metrics")
    assert after["bertscore"]["batch_size"] == 8
    changed = {(m, k) for m in before for k, v in before[m].items() if after[m][k] != v}
    assert changed == {("bertscore", "batch_size")}


def test_a_change_to_the_shared_node_reaches_every_encoder_metric(tmp_path: Path) -> None:
    conf = tmp_path / "conf"
    shutil.copytree(CONF, conf)
    for name, key, value in (("default", "batch_size", 7), ("bert_score", "layer", 5)):
        path = conf / "encoder" / f"{name}.yaml"
        node = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert key in node
        node[key] = value
        path.write_text(yaml.safe_dump(node, sort_keys=False), encoding="utf-8")
    before = _resolved(_all_metrics(), "metrics")
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(str(conf), version_base="1.3", job_name="paraeval"):
            tree = OmegaConf.to_container(compose("config", overrides=_all_metrics()), resolve=True)
    finally:
        GlobalHydra.instance().clear()
    assert isinstance(tree, dict)
    after = tree["metrics"]
    files = _encoder_files()
    # every metric that takes the changed key from the shared file, and no other metric or key
    # (a metric's file that sets the key itself keeps its own value)
    expected = {
        (m, key)
        for m, name in files.items()
        for key in {"default": ["batch_size"], "bert_score": ["batch_size", "layer"]}[name]
        if key not in _raw("metrics", m)[m]
    }
    assert {m for m, _ in expected} >= {"bertscore", "cosine", "wmd", "bert_ibleu"}
    changed = {(m, k) for m in before for k, v in before[m].items() if after[m][k] != v}
    assert changed == expected
    assert {after[m][k] for m, k in expected} == {7, 5}
    # wmd's layer is its own (contextual WMD), not bert-score's
    assert after["wmd"]["layer"] == before["wmd"]["layer"]
