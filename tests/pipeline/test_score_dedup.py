"""The score stage does the work that several systems and metrics share once (the same candidate
from several systems, the BLEU parts of BLEU, iBLEU and self-BLEU), with the numbers of scoring
each system on its own."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import paraeval.metrics._sacre_base as sacre_base
from paraeval.metrics import rouge, sacre
from paraeval.metrics.base import Metric, MetricResult, SegmentLocal, make_signature
from paraeval.pipeline.engine.base import LocalEngine, Origin
from paraeval.pipeline.stages import score as score_module
from paraeval.pipeline.stages.cache import ScoreCache
from paraeval.pipeline.stages.score import score

SOURCES = [
    "the cat sat on the mat",
    "a dog barked loudly at night",
    "it is raining today in the city",
    "we went to the market on monday",
]
REFERENCES = [
    ["a cat sat on the mat", "the cat was on the mat"],
    ["the dog barked at night"],
    ["today it rains in the city", "rain in the city today"],
    ["on monday we went to the market"],
]
OUTPUTS = {
    "copy": SOURCES,
    "a": ["a cat sat on a mat", "a dog barked at night", "it rains today", "we went to market"],
    # shares two candidates with "a" and one with "copy"
    "b": ["a cat sat on a mat", "the dog barked", "it is raining today in the city", "monday"],
    "twin": ["a cat sat on a mat", "a dog barked at night", "it rains today", "we went to market"],
}


def _table(references: str = "own") -> pd.DataFrame:
    rows = []
    for system, outputs in OUTPUTS.items():
        for i, cand in enumerate(outputs):
            refs = REFERENCES[i] if references == "own" else [SOURCES[i]]
            rows.append(
                {
                    "item_id": str(i),
                    "system": system,
                    "source": SOURCES[i],
                    "references": list(refs),
                    "candidate": cand,
                }
            )
    return pd.DataFrame(rows).sort_values(["item_id", "system"]).reset_index(drop=True)


def _metrics() -> dict[str, Metric]:
    return {
        "bleu": sacre.BLEU(),
        "ibleu": sacre.IBLEU(alpha=0.7),
        "self_bleu": sacre.SelfBLEU(),
        "chrf": sacre.CHRF(against_source=True),
        "ter": sacre.TER(),
        "rouge1": rouge.Rouge1(),
        "rougeL": rouge.RougeL(against_source=True),
        "rougeLsum": rouge.RougeLsum(),
        "rougeW": rouge.RougeW(),
        "rougeSU": rouge.RougeSU(skip_distance=2),
    }


def _one_by_one(df: pd.DataFrame, metrics: dict[str, Metric]) -> dict[tuple[str, str], Any]:
    """Each metric on each system's texts on its own (fresh objects, no stage)."""
    out: dict[tuple[str, str], Any] = {}
    for metric_id, metric in metrics.items():
        for vs_source in (False, True) if metric.against_source else (False,):
            for system, sub in df.groupby("system", sort=False):
                srcs = sub["source"].tolist()
                refs = [[s] for s in srcs] if vs_source else sub["references"].tolist()
                fresh = type(metric)(**_settings(metric))
                suffix = "_src" if vs_source else ""
                out[(metric_id + suffix, str(system))] = fresh.score(
                    sub["candidate"].tolist(), refs, srcs
                )
    return out


def _settings(metric: Metric) -> dict[str, Any]:
    if isinstance(metric, sacre.IBLEU):
        return {"alpha": metric.alpha}
    if isinstance(metric, rouge.RougeSU):
        return {"skip_distance": metric.skip_distance}
    return {}


@pytest.mark.parametrize("references", ["own", "the sources"])
def test_the_stage_gives_the_numbers_of_each_system_scored_on_its_own(references: str) -> None:
    df = _table(references)
    metrics = _metrics()
    got = score(df, metrics, progress=False)
    want = _one_by_one(df, metrics)
    for (name, system), result in want.items():
        rows = (got.segments["system"] == system).to_numpy()
        for col, values in result.segment.items():
            column = f"{col}{'_src' if name.endswith('_src') else ''}"
            np.testing.assert_array_equal(got.segments.loc[rows, column].to_numpy(), values)
            assert got.corpus.loc[system, column] == result.corpus[col], (column, system)
        if result.stats is not None:
            np.testing.assert_array_equal(got.stats[(name, system)], result.stats)


def test_a_segment_local_metric_scores_all_systems_in_one_call() -> None:
    df = _table()
    counting = _CountingLocal()
    got = score(df, {"counting": counting}, progress=False)
    # one call, on the distinct segments of the four systems (twin repeats a; b shares three)
    assert counting.calls == [len(set(zip(df["item_id"], df["candidate"], strict=True)))]
    for system, outputs in OUTPUTS.items():
        rows = (got.segments["system"] == system).to_numpy()
        want = [float(len(c)) for c in outputs]
        np.testing.assert_array_equal(got.segments.loc[rows, "counting"].to_numpy(), want)
        assert got.corpus.loc[system, "counting"] == float(np.mean(want))


def test_calls_are_bounded_in_rows_and_give_the_same_numbers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    df = _table()
    one = score(df, {"counting": _CountingLocal()}, progress=False)
    per_system = df.groupby("system", sort=False).size()
    # two systems' rows per call at most
    monkeypatch.setattr(score_module, "ROWS_PER_CALL", int(per_system.iloc[:2].sum()))
    counting = _CountingLocal()
    bounded = score(df, {"counting": counting}, progress=False)
    assert len(counting.calls) == 2
    assert all(n <= score_module.ROWS_PER_CALL for n in counting.calls)
    pd.testing.assert_frame_equal(bounded.segments, one.segments)
    pd.testing.assert_frame_equal(bounded.corpus, one.corpus)


class _CountingLocal(SegmentLocal):
    """A segment-local metric that records the size of each call."""

    name = "counting"
    needs_references = False

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[int] = []

    def signature(self, nrefs: int | None = None, segment: bool | None = None) -> str:
        return make_signature(self.name, v=1)

    def _score(
        self, candidates: list[str], references: list[list[str]], sources: Sequence[str] | None
    ) -> MetricResult:
        self.calls.append(len(candidates))
        seg = np.array([float(len(c)) for c in candidates])
        return MetricResult({self.name: seg}, {self.name: float(np.mean(seg))}, self.signature())


@pytest.mark.parametrize(("references", "bleus"), [("own", 2), ("the sources", 1)])
def test_the_bleus_of_bleu_ibleu_and_self_bleu_are_computed_once(
    references: str, bleus: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """BLEU against the references and against the sources, each once for the three metrics
    (and once where the references are the sources), over the distinct segments."""
    calls: list[int] = []
    real = sacre_base.segment_statistics

    def counting(metric: object, hyps: Sequence[str], *args: Any, **kwargs: Any) -> np.ndarray:
        calls.append(len(hyps))
        return real(metric, hyps, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(sacre_base, "segment_statistics", counting)
    df = _table(references)
    metrics = {"bleu": sacre.BLEU(), "ibleu": sacre.IBLEU(), "self_bleu": sacre.SelfBLEU()}
    score(df, metrics, progress=False)
    assert len(calls) == bleus
    assert all(n == len(set(zip(df["item_id"], df["candidate"], strict=True))) for n in calls)


def test_cached_systems_are_not_scored_again(tmp_path: Path) -> None:
    """With the cache, a run scores only the systems it has no entry for, still in one call."""
    df = _table()
    first = _CountingLocal()
    score(df[df["system"] != "b"], {"counting": first}, progress=False, cache=ScoreCache(tmp_path))
    again = _CountingLocal()
    cache = ScoreCache(tmp_path)
    score(df, {"counting": again}, progress=False, cache=cache)
    assert again.calls == [len(OUTPUTS["b"])]  # b alone: the others were cached
    assert cache.summary() == {"counting": {"hits": 3, "misses": 1}}


@pytest.mark.parametrize("metric", list(_metrics().values()), ids=repr)
def test_select_is_the_metric_on_those_segments(metric: Metric) -> None:
    cands = [c for outputs in OUTPUTS.values() for c in outputs]
    refs = REFERENCES * len(OUTPUTS)
    srcs = SOURCES * len(OUTPUTS)
    assert isinstance(metric, SegmentLocal)
    whole = metric.score(cands, refs, srcs)
    for rows in (np.array([3, 1, 1, 7]), np.arange(4, 12), np.array([0])):
        got = metric.select(whole, rows)
        want = type(metric)(**_settings(metric)).score(
            [cands[i] for i in rows], [refs[i] for i in rows], [srcs[i] for i in rows]
        )
        assert got.signature == want.signature
        assert got.corpus == want.corpus
        assert got.extra == want.extra
        for col, values in want.segment.items():
            np.testing.assert_array_equal(got.segment[col], values)
        if want.stats is not None:
            np.testing.assert_array_equal(got.stats, want.stats)


class _CountingBLEU(sacre.BLEU):
    prepared: list[int]

    def prepare(self, texts: Any) -> None:
        self.prepared.append(id(self))


def test_the_local_engine_prepares_a_metric_once_per_origin() -> None:
    """iBLEU's parts are new objects at each ask; the engine prepares and scores one per origin."""
    prepared: list[int] = []
    _CountingBLEU.prepared = prepared
    engine = LocalEngine()
    first, again, other = _CountingBLEU(), _CountingBLEU(), _CountingBLEU()
    calls = [(["a cat sat"], [["the cat sat"]], ["a cat sat"])]
    origin = Origin("ibleu", (0,))
    results = [engine.score_systems(m, origin, calls)[0].get() for m in (first, again)]
    engine.score_systems(other, origin.part(1), calls)[0].get()
    assert prepared == [id(first), id(other)]
    assert results[0].corpus == results[1].corpus
