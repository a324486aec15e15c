"""Every metric of the metric table against the contract, as scikit-learn's ``check_estimator``
checks an estimator: its descriptor is cheap, what it declares (group, direction, needed inputs)
holds when it scores, a :class:`Sharded` metric's shards reduce to the unsharded result, and its
signature is stable."""

from __future__ import annotations

import functools
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

import paraeval.metrics
from paraeval.metrics import METRICS
from paraeval.metrics.base import GROUPS, CorpusCounts, Metric, MetricConfigError, Sharded
from tests.metrics.varied import unzip, varied_sets

# the settings a class cannot do without
REQUIRED: dict[str, dict[str, Any]] = {"RougeN": {"n": 3}}
# needs a checkpoint that does not ship: the descriptor is still checked
NO_RESOURCE = {"BLEURT"}
CANDS, REFS, SRCS = unzip(varied_sets(24, seed=11))


def build(name: str) -> Metric:
    metric: Metric = getattr(paraeval.metrics, name)(**REQUIRED.get(name, {}))
    return metric


@pytest.mark.slow
def test_descriptors_and_constructors_load_no_model() -> None:
    code = (
        "import sys, paraeval.metrics as m\n"
        f"required = {REQUIRED!r}\n"
        "for name in m.METRICS:\n"
        "    cls = getattr(m, name)\n"
        "    assert cls.describe().name == cls.name, name\n"
        f"    if name not in {NO_RESOURCE!r}:\n"
        "        cls(**required.get(name, {}))\n"
        "print(sorted(k for k in ('torch', 'transformers') if k in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stderr


@pytest.mark.parametrize("name", METRICS)
def test_descriptor_matches_the_class(name: str) -> None:
    cls = getattr(paraeval.metrics, name)
    info = cls.describe()
    assert info.group in GROUPS
    assert info.sharded == issubclass(cls, Sharded)
    assert not (info.sharded and info.segment_local), "a sharded metric's rows are not local"
    assert info.version and info.resources == cls.resources
    assert cls.describe({"group": "diversity"}).group == "diversity"
    for setting in cls.memory:
        assert setting in cls.__init__.__code__.co_varnames, (name, setting)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(set(METRICS) - NO_RESOURCE))
def test_declarations_hold_when_scoring(name: str) -> None:
    metric = build(name)
    info = type(metric).describe()
    assert metric.group == info.group
    result = metric.score(CANDS, REFS, SRCS)
    assert set(result.segment) == set(metric.output_columns) <= set(result.corpus)
    if info.needs_references:
        with pytest.raises(MetricConfigError):
            metric.score(CANDS[:2], [REFS[0], []], SRCS[:2])
    if info.needs_sources:
        with pytest.raises(MetricConfigError):
            metric.score(CANDS[:2], REFS[:2], None)
    if info.group in ("syntactic", "semantic") and not metric.describe().corpus_only:
        # a candidate equal to its reference is at least as good as an unrelated one
        same = metric.score([REFS[0][0]], [REFS[0]], SRCS[:1]).segment[metric.output_columns[0]]
        other = metric.score(["zebra quartz"], [REFS[0]], SRCS[:1]).segment
        worse = other[metric.output_columns[0]]
        assert (same >= worse) if info.higher_is_better else (same <= worse), name
    assert metric.signature() == build(name).signature(), "the signature is stable"
    assert result.signature == metric.signature()


@pytest.mark.slow
@pytest.mark.parametrize("rows", [1, 5, 100])
@pytest.mark.parametrize(
    "name", [n for n in METRICS if issubclass(getattr(paraeval.metrics, n), Sharded)]
)
def test_sharded_scoring_equals_unsharded(name: str, rows: int) -> None:
    metric = build(name)
    assert isinstance(metric, Sharded)
    cut = metric.split(REFS, rows)
    assert [b.start for b in cut[1:]] == [b.stop for b in cut[:-1]]
    counts = [metric.counts(CANDS[b], REFS[b]) for b in cut]
    total = functools.reduce(lambda a, b: a + b, counts, CorpusCounts())
    shards = [metric.score_shard(total, CANDS[b], REFS[b], SRCS[b]) for b in cut]
    got, want = metric.reduce(shards), build(name).score(CANDS, REFS, SRCS)
    for col, values in want.segment.items():
        np.testing.assert_allclose(got.segment[col], values, rtol=0, atol=1e-6, err_msg=col)
    for col, value in want.corpus.items():
        assert abs(got.corpus[col] - value) <= 1e-6, col
    assert got.signature == want.signature
