"""The public metrics API: every metric class importable from ``paraeval.metrics``, lazily."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

import paraeval.metrics
from paraeval.metrics import Metric, MetricResult

REPO = Path(__file__).resolve().parents[2]


def _targets(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["_target_"]] if isinstance(node.get("_target_"), str) else []
        return found + [t for value in node.values() for t in _targets(value)]
    if isinstance(node, list):
        return [t for value in node for t in _targets(value)]
    return []


def test_import_is_cheap_and_bleu_needs_no_torch() -> None:
    code = (
        "import sys\n"
        "import paraeval.metrics\n"
        "assert 'paraeval.metrics.sacre' not in sys.modules\n"
        "from paraeval.metrics import BLEU\n"
        "assert 'paraeval.metrics.sacre' in sys.modules\n"
        "heavy = sorted(m for m in ('torch', 'transformers', 'numba') if m in sys.modules)\n"
        "assert not heavy, heavy\n"
        "print(BLEU.__module__)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "paraeval.metrics.sacre"


def test_every_public_metric_resolves_to_a_metric_subclass() -> None:
    names = set(paraeval.metrics.__all__)
    assert set(paraeval.metrics.METRICS) <= names
    assert len(paraeval.metrics.METRICS) == 28
    for name in paraeval.metrics.METRICS:
        cls = getattr(paraeval.metrics, name)
        assert isinstance(cls, type) and issubclass(cls, Metric), name
        assert cls is not Metric and cls.name, name
        assert cls.__name__ == name
        assert cls.__module__.startswith("paraeval.metrics."), cls.__module__
    # the other public names resolve too
    assert MetricResult.__module__ == "paraeval.metrics.base"
    for name in names - set(paraeval.metrics.METRICS):
        assert getattr(paraeval.metrics, name) is not None, name
    # metric ids are distinct
    ids = [getattr(paraeval.metrics, n).name for n in paraeval.metrics.METRICS]
    assert len(set(ids)) == len(ids), ids


def test_unknown_name_is_an_attribute_error() -> None:
    try:
        paraeval.metrics.NoSuchMetric  # noqa: B018
    except AttributeError as err:
        assert "NoSuchMetric" in str(err)
    else:
        raise AssertionError("paraeval.metrics.NoSuchMetric resolved")


def test_every_config_target_is_a_public_metric() -> None:
    files = sorted((REPO / "conf" / "metrics").glob("*.yaml"))
    assert len(files) >= 28
    seen: set[str] = set()
    for path in files:
        targets = _targets(yaml.safe_load(path.read_text()))
        assert targets, f"{path.name}: no _target_"
        for target in targets:
            module, _, cls_name = target.rpartition(".")
            assert module.startswith("paraeval.metrics."), f"{path.name}: {target}"
            assert cls_name in paraeval.metrics.__all__, f"{path.name}: {cls_name} not exported"
            assert cls_name in paraeval.metrics.METRICS, f"{path.name}: {cls_name}"
            # the public name and the config's target are the same class
            defining = __import__(module, fromlist=[cls_name])
            assert getattr(paraeval.metrics, cls_name) is getattr(defining, cls_name), target
            seen.add(cls_name)
    # and every public metric has a config file
    assert seen == set(paraeval.metrics.METRICS)


def test_scoring_through_the_public_name() -> None:
    from paraeval.metrics import BLEU

    result = BLEU().score(["the cat sat on the mat"], [["the cat sat on the mat"]])
    assert isinstance(result, MetricResult)
    assert abs(result.corpus["bleu"] - 100.0) < 1e-9
    assert result.segment["bleu"].shape == (1,)
