"""The content-addressed score cache: exact round trips, keys that see every setting and text,
iBLEU for a new α from cached BLEU statistics, atomic writes, no pickle; the correlation rows
cached next to the scores."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd
import pytest

import paraeval.metrics._sacre_base as sacre_base
import paraeval.metrics.sacre as sacre
import paraeval.pipeline.stages.cache as cache_module
from paraeval.metrics.base import Metric, MetricResult, make_signature
from paraeval.pipeline.stages.cache import ScoreCache, cache_key
from paraeval.pipeline.stages.score import score
from tests.pipeline.helpers import correlation_settings


def lookup(
    cache: ScoreCache, name: str, metric: Metric, cands: Sequence[str] | None = None
) -> MetricResult | None:
    cands = CANDS if cands is None else cands
    return cache.get(name, metric, cache_key(metric, cands, REFS, SRCS), len(cands))


CANDS = ["the cat sat on the mat", "a dog barked loudly at night", "it is raining today"]
REFS = [
    ["the cat was sitting on the mat", "a cat sat on a mat"],
    ["a dog was barking loud at night"],
    ["today it rains", "it rains today", "rain today"],
]
SRCS = ["a cat sat on the mat", "the dog barked loudly in the night", "it's raining today"]


def _fresh(metric: Metric) -> MetricResult:
    return metric.score(CANDS, REFS, SRCS)


def _no_statistics(monkeypatch: pytest.MonkeyPatch) -> None:
    """Extracting sacrebleu statistics from text fails the test from here on."""

    def no_stats(*args: object, **kwargs: object) -> np.ndarray:
        raise AssertionError("statistics recomputed from text")

    monkeypatch.setattr(sacre_base, "segment_statistics", no_stats)
    monkeypatch.setattr(sacre, "segment_statistics", no_stats)


def _same(a: MetricResult, b: MetricResult) -> None:
    assert a.signature == b.signature
    assert list(a.segment) == list(b.segment)
    for col in a.segment:
        np.testing.assert_array_equal(a.segment[col], b.segment[col])
    assert a.corpus == b.corpus
    assert a.extra == b.extra
    assert (a.stats is None) == (b.stats is None)
    if a.stats is not None:
        np.testing.assert_array_equal(a.stats, b.stats)


@pytest.mark.parametrize(
    "metric",
    [
        sacre.BLEU(),
        sacre.BLEU(tokenize="intl", lowercase=True),
        sacre.SelfBLEU(),
        sacre.IBLEU(alpha=0.7),
        sacre.CHRF(word_order=2),
        sacre.TER(),
    ],
    ids=repr,
)
def test_hit_equals_fresh_result_and_corpus_from_stats_works(
    metric: Metric, tmp_path: Path
) -> None:
    cache = ScoreCache(tmp_path)
    fresh = _fresh(metric)
    assert lookup(cache, "m", metric) is None
    cache.put(metric, CANDS, REFS, SRCS, fresh)
    hit = lookup(ScoreCache(tmp_path), "m", metric)
    assert hit is not None
    _same(hit, fresh)
    assert hit.stats is not None
    assert metric.corpus_from_stats(hit.stats[[0, 2]]) == metric.corpus_from_stats(
        fresh.stats[[0, 2]]  # type: ignore[index]
    )
    assert cache.summary() == {"m": {"hits": 0, "misses": 1}}


def test_key_sees_every_setting_and_every_text() -> None:
    base = cache_key(sacre.BLEU(), CANDS, REFS, SRCS)
    assert base == cache_key(sacre.BLEU(), list(CANDS), [list(r) for r in REFS], list(SRCS))
    changed = [
        cache_key(sacre.BLEU(lowercase=True), CANDS, REFS, SRCS),
        cache_key(sacre.BLEU(tokenize="char"), CANDS, REFS, SRCS),
        cache_key(sacre.BLEU(smooth_method="floor"), CANDS, REFS, SRCS),
        cache_key(sacre.SelfBLEU(), CANDS, REFS, SRCS),
        cache_key(sacre.BLEU(), [*CANDS[:2], CANDS[2] + " "], REFS, SRCS),
        cache_key(sacre.BLEU(), CANDS, [REFS[0], REFS[1], REFS[2][:2]], SRCS),
        cache_key(sacre.BLEU(), CANDS, REFS, [*SRCS[:2], "other"]),
        cache_key(sacre.BLEU(), CANDS, REFS, None),
        # the same characters split differently between segments is other content
        cache_key(sacre.BLEU(), ["ab", "c", "d"], [["x"]] * 3, ["s"] * 3),
        cache_key(sacre.BLEU(), ["a", "bc", "d"], [["x"]] * 3, ["s"] * 3),
        # a corpus-level call is keyed by all its texts: a subset is another entry
        cache_key(sacre.BLEU(), CANDS[:2], REFS[:2], SRCS[:2]),
    ]
    assert len({base, *changed}) == len(changed) + 1


def test_ibleu_entry_serves_any_alpha_without_recomputing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = {a: _fresh(sacre.IBLEU(alpha=a)) for a in (0.0, 0.35, 1.0)}
    cache = ScoreCache(tmp_path)
    cache.put(sacre.IBLEU(alpha=0.8), CANDS, REFS, SRCS, _fresh(sacre.IBLEU(alpha=0.8)))
    _no_statistics(monkeypatch)
    for alpha, want in expected.items():
        got = lookup(cache, "ibleu", sacre.IBLEU(alpha=alpha))
        assert got is not None
        _same(got, want)
        assert f"alpha:{alpha:g}" in got.signature
    assert cache.summary()["ibleu"] == {"hits": 3, "misses": 0}
    # other BLEU settings are not served from this entry
    assert lookup(cache, "ibleu", sacre.IBLEU(alpha=0.5, lowercase=True)) is None


class _Counting(Metric):
    """A metric that records what the pipeline asks of it."""

    name = "counting"
    calls: ClassVar[dict[str, int]] = {"prepare": 0, "score": 0}

    def prepare(self, texts: object) -> None:
        self.calls["prepare"] += 1

    def signature(self, nrefs: int | None = None, segment: bool | None = None) -> str:
        return make_signature(self.name, v=1)

    def _score(
        self, candidates: list[str], references: list[list[str]], sources: Sequence[str] | None
    ) -> MetricResult:
        self.calls["score"] += 1
        seg = np.array([float(len(c)) for c in candidates])
        return MetricResult({self.name: seg}, {self.name: float(seg.mean())}, self.signature())


def _table() -> pd.DataFrame:
    rows = []
    for system, shift in (("a", 0), ("b", 1)):
        for i, (c, r, s) in enumerate(zip(CANDS, REFS, SRCS, strict=True)):
            rows.append(
                {
                    "item_id": str(i),
                    "system": system,
                    "source": s,
                    "references": r,
                    "candidate": c if not shift else c.upper(),
                }
            )
    return pd.DataFrame(rows)


def test_pipeline_second_run_with_new_alpha_has_no_misses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    df = _table()
    _Counting.calls.update(prepare=0, score=0)

    def metric_set(alpha: float) -> dict[str, Metric]:
        return {
            "bleu": sacre.BLEU(),
            "ibleu": sacre.IBLEU(alpha=alpha),
            "self_bleu": sacre.SelfBLEU(),
            "chrf": sacre.CHRF(against_source=True),
            "counting": _Counting(),
        }

    first_cache = ScoreCache(tmp_path)
    first = score(df, metric_set(0.8), progress=False, cache=first_cache)
    assert all(c["hits"] == 0 and c["misses"] == 2 for c in first_cache.summary().values())
    assert set(first_cache.summary()) == {
        "bleu",
        "ibleu",
        "self_bleu",
        "chrf",
        "chrf_src",
        "counting",
    }
    assert _Counting.calls == {"prepare": 1, "score": 2}

    uncached = score(df, metric_set(0.25), progress=False)
    _no_statistics(monkeypatch)
    second_cache = ScoreCache(tmp_path)
    before = dict(_Counting.calls)
    second = score(df, metric_set(0.25), progress=False, cache=second_cache)
    assert all(c == {"hits": 2, "misses": 0} for c in second_cache.summary().values())
    # all hits: encoders are not even prepared
    assert _Counting.calls == before
    pd.testing.assert_frame_equal(second.segments, uncached.segments)
    pd.testing.assert_frame_equal(second.corpus, uncached.corpus)
    assert not first.segments["ibleu"].equals(second.segments["ibleu"])
    for key, stats in uncached.stats.items():
        np.testing.assert_array_equal(second.stats[key], stats)
    assert second_cache.metrics()["cache.misses"] == 0.0
    assert second_cache.metrics()["cache.hits.ibleu"] == 2.0


def test_entries_are_plain_arrays_and_writes_are_atomic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    metric = sacre.BLEU()
    result = _fresh(metric)
    cache = ScoreCache(tmp_path)
    path = cache.path(cache_key(metric, CANDS, REFS, SRCS))

    def crash(fh: object, **arrays: object) -> None:
        fh.write(b"PK\x03\x04 half an entry")  # type: ignore[attr-defined]
        raise KeyboardInterrupt

    monkeypatch.setattr(np, "savez", crash)
    with pytest.raises(KeyboardInterrupt):
        cache.put(metric, CANDS, REFS, SRCS, result)
    assert not path.exists()
    assert list(path.parent.glob("*")) == []  # no temporary file left behind
    monkeypatch.undo()

    cache.put(metric, CANDS, REFS, SRCS, result)
    with np.load(path, allow_pickle=False) as npz:  # loads without pickle: no object arrays
        assert all(npz[k].dtype != object for k in npz.files)

    path.write_bytes(b"not a zip file")
    assert lookup(cache, "bleu", metric) is None
    cache.put(metric, CANDS, REFS, SRCS, result)
    hit = lookup(cache, "bleu", metric)
    assert hit is not None
    _same(hit, result)


def test_cache_settings() -> None:
    from paraeval.pipeline.config.nodes import CacheSettings
    from paraeval.pipeline.errors import ConfigError

    assert CacheSettings.from_node({"enabled": False, "dir": "/tmp/x"}) is None
    settings = CacheSettings.from_node({"enabled": True, "dir": "/tmp/x"})
    assert settings is not None and ScoreCache(settings.dir).root == Path("/tmp/x/scores/v1")
    with pytest.raises(ConfigError, match=r"cache\.dir must be a folder"):
        CacheSettings.from_node({"enabled": True, "dir": ""})


def _demo_agg(alpha: float, cache: ScoreCache | None = None) -> tuple[object, object]:
    from paraeval.pipeline.data.load import load_demo
    from paraeval.pipeline.stages.aggregate import aggregate

    df = load_demo()
    metrics = {"bleu": sacre.BLEU(), "ibleu": sacre.IBLEU(alpha=alpha), "chrf": sacre.CHRF()}
    scores = score(df, metrics, progress=False, cache=cache)
    return aggregate(scores), scores


def test_correlation_rows_cached_per_column_equal_a_full_computation(tmp_path: Path) -> None:
    from paraeval.pipeline.stages.correlate import correlate

    cfg = correlation_settings(
        {
            "levels": ["segment", "system"],
            "coefficients": ["pearson", "kendall_b"],
            "ci": True,
            "n_resamples": 40,
            "unit": "items",
        }
    )
    for alpha, hits, misses in ((0.8, 0, 4), (0.3, 2, 2), (0.3, 4, 0)):
        cache = ScoreCache(tmp_path)  # a run of its own
        agg, scores = _demo_agg(alpha, cache)
        plain_rng, cached_rng = np.random.default_rng(5), np.random.default_rng(5)
        want = correlate(agg, cfg, plain_rng, scores)
        got = correlate(agg, cfg, cached_rng, scores, cache.rows)
        pd.testing.assert_frame_equal(got, want)
        # the generator ends where it would without the cache: later stages draw the same numbers
        assert cached_rng.bit_generator.state == plain_rng.bit_generator.state
        # bleu and chrf do not depend on alpha; ibleu and the syntactic average do. With every
        # column cached nothing is computed; the generator is advanced by the same draws.
        assert (cache.rows.counts.hits, cache.rows.counts.misses) == (hits, misses)
        assert cache.metrics()["cache.hits.correlation"] == hits


def test_the_few_systems_warning_is_said_of_a_table_the_cache_serves(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The demo has 4 systems: the same command run twice warns twice, the second time with
    every row read from the cache."""
    from paraeval.pipeline.stages.correlate import correlate

    cfg = correlation_settings(
        {"levels": ["system"], "coefficients": ["pearson"], "ci": False, "warn_below_n": 10}
    )
    for hits in (0, 4):
        cache = ScoreCache(tmp_path)
        agg, scores = _demo_agg(0.8, cache)
        caplog.clear()
        with caplog.at_level("WARNING"):
            correlate(agg, cfg, np.random.default_rng(5), scores, cache.rows)
        assert cache.rows.counts.hits == hits
        assert caplog.text.count("rest on n=4 systems (fewer than 10)") == 1


def test_each_read_is_the_callers_own_copy(tmp_path: Path) -> None:
    """A result read from the cache is the caller's to change: the next read is the entry."""
    cache = ScoreCache(tmp_path)
    metric = sacre.BLEU()
    cache.put(metric, CANDS, REFS, SRCS, _fresh(metric))
    first = lookup(cache, "bleu", metric)
    assert first is not None
    first.segment["bleu"][:] = -1.0
    second = lookup(cache, "bleu", metric)
    assert second is not None
    _same(second, _fresh(metric))
    assert cache.counts["bleu"].hits == 2


def test_an_entry_is_served_only_for_its_own_key(tmp_path: Path) -> None:
    """A valid entry under another key's name (a copied or renamed file, a collision of the
    file layout) is a miss, never another text's scores."""
    cache = ScoreCache(tmp_path)
    metric = sacre.BLEU()
    strong = ["the cat was sitting on the mat", "a dog was barking loud at night", "today it rains"]
    weak = ["zebra", "quantum", "umbrella"]
    cache.put(metric, strong, REFS, SRCS, metric.score(strong, REFS, SRCS))
    right = cache.path(cache_key(metric, strong, REFS, SRCS))
    wrong = cache.path(cache_key(metric, weak, REFS, SRCS))
    wrong.parent.mkdir(parents=True, exist_ok=True)
    wrong.write_bytes(right.read_bytes())
    assert lookup(ScoreCache(tmp_path), "bleu", metric, weak) is None
    served = lookup(ScoreCache(tmp_path), "bleu", metric, strong)
    assert served is not None and served.corpus["bleu"] > 50
    # the miss is replaced by the right entry
    cache.put(metric, weak, REFS, SRCS, metric.score(weak, REFS, SRCS))
    hit = lookup(ScoreCache(tmp_path), "bleu", metric, weak)
    assert hit is not None and hit.corpus["bleu"] == 0.0


def test_entries_without_a_key_are_misses(tmp_path: Path) -> None:
    cache = ScoreCache(tmp_path)
    metric = sacre.BLEU()
    path = cache.path(cache_key(metric, CANDS, REFS, SRCS))
    path.parent.mkdir(parents=True)
    np.savez(path, **cache_module._to_arrays(_fresh(metric), len(CANDS)))  # older format
    assert lookup(cache, "bleu", metric) is None


def test_correlation_rows_are_served_only_for_their_own_key(tmp_path: Path) -> None:
    from paraeval.pipeline.stages.correlate import correlate

    cfg = correlation_settings(
        {"levels": ["segment"], "coefficients": ["pearson"], "ci": False, "unit": "items"}
    )
    cache = ScoreCache(tmp_path)
    agg, scores = _demo_agg(0.8, cache)
    correlate(agg, cfg, np.random.default_rng(5), scores, cache.rows)
    files = sorted((tmp_path / "scores" / "correlations").rglob("*.parquet"))
    assert len(files) == 4
    # every file now holds the rows of the first column
    for f in files[1:]:
        f.write_bytes(files[0].read_bytes())
    want = correlate(agg, cfg, np.random.default_rng(5), scores)
    # the next run reads the files, and serves only the one whose key is its own
    rows = ScoreCache(tmp_path).rows
    got = correlate(agg, cfg, np.random.default_rng(5), scores, rows)
    pd.testing.assert_frame_equal(got, want)
    assert (rows.counts.hits, rows.counts.misses) == (1, 3)
