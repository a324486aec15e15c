"""System comparison: sacrebleu-equal paired tests, intervals, clusters, the diversity view."""

from __future__ import annotations

import dataclasses
import json
import random
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sacrebleu.metrics.bleu import BLEU as SacreBLEU
from sacrebleu.metrics.chrf import CHRF as SacreCHRF
from sacrebleu.metrics.ter import TER as SacreTER

from paraeval.metrics._sacre_batched import bleu_scores, chrf_scores, ter_scores
from paraeval.metrics.base import Metric, MetricResult
from paraeval.pipeline.api import Evaluation, compose_config
from paraeval.pipeline.config.settings import Settings
from paraeval.pipeline.data.load import load_demo, load_text
from paraeval.pipeline.errors import ConfigError
from paraeval.pipeline.stages.aggregate import aggregate
from paraeval.pipeline.stages.compare import (
    COMPARISON_COLUMNS,
    compare,
    copy_rates,
)
from paraeval.pipeline.stages.evaluation import compare_stage
from paraeval.pipeline.stages.score import build_metrics, score
from tests.pipeline.helpers import compare_settings

SACREBLEU = Path(sys.executable).with_name("sacrebleu")
SEED = 1234

WORDS = [
    "the",
    "a",
    "old",
    "young",
    "man",
    "woman",
    "cat",
    "dog",
    "found",
    "sold",
    "painted",
    "saw",
    "bicycle",
    "map",
    "fence",
    "kitchen",
    "table",
    "yesterday",
    "quickly",
    "slowly",
    "after",
    "before",
    "with",
    "without",
    "help",
    "long",
    "discussion",
    "garden",
    "red",
]


def _sentence(r: random.Random) -> str:
    return " ".join(r.choice(WORDS) for _ in range(r.randint(3, 12))).capitalize() + "."


def _edit(r: random.Random, sentence: str, rate: float) -> str:
    words = sentence.rstrip(".").split()
    out = [r.choice(WORDS) if r.random() < rate else w for w in words]
    if r.random() < rate:
        out = out[: max(1, len(out) - 2)]
    return " ".join(out) + "."


@pytest.fixture(scope="module")
def text_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Source, two references and three systems, 50 lines; sys1 equals the baseline on about
    half of the lines (ties in the randomization test), sys2 is a noisier system."""
    r = random.Random(7)
    d = tmp_path_factory.mktemp("paired")
    src = [_sentence(r) for _ in range(50)]
    ref1 = [_edit(r, s, 0.3) for s in src]
    ref2 = [_edit(r, s, 0.4).rstrip(".") + (" too." if r.random() < 0.5 else ".") for s in src]
    base = [_edit(r, s, 0.35) for s in src]
    sys1 = [b if r.random() < 0.5 else _edit(r, s, 0.25) for b, s in zip(base, src, strict=True)]
    sys2 = [_edit(r, s, 0.6) for s in src]
    files = {}
    for name, lines in dict(src=src, ref1=ref1, ref2=ref2, base=base, sys1=sys1, sys2=sys2).items():
        files[name] = d / f"{name}.txt"
        files[name].write_text("\n".join(lines) + "\n", encoding="utf-8")
    return files


def _sacrebleu_paired(files: dict[str, Path], test: str, n: int) -> dict[str, dict[str, Any]]:
    """{system: {metric: (score, p_value)}} from the sacrebleu command line. The paired bootstrap
    cannot print JSON (its float32 means are not serializable), so that table is parsed from text:
    its p-values have 4 decimals, which pins (c + 1) / (n + 1) down exactly for n = 1000."""
    flag = (
        ["--paired-bs", "--paired-bs-n", str(n), "-f", "text", "-w", "4"]
        if test == "bs"
        else ["--paired-ar", "--paired-ar-n", str(n), "-f", "json"]
    )
    cmd = [str(SACREBLEU), str(files["ref1"]), str(files["ref2"]), "-i"]
    cmd += [str(files[k]) for k in ("base", "sys1", "sys2")]
    cmd += ["-m", "bleu", "chrf", "ter", "--paired-jobs", "1", *flag]
    env = {"SACREBLEU_SEED": str(SEED), "PATH": "/usr/bin:/bin", "NO_COLOR": "1"}
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True, timeout=120)
    names = ("bleu", "chrf", "ter")
    result: dict[str, dict[str, Any]] = {}
    if test == "ar":
        for row in json.loads(out.stdout):
            system = Path(row["system"].removeprefix("Baseline: ")).stem
            result[system] = {
                m: (row[k]["score"], row[k]["p_value"])
                for m, k in zip(names, ("BLEU", "chrF2", "TER"), strict=True)
            }
        return result
    system = ""
    for line in out.stdout.splitlines():
        if not line.startswith("│"):
            continue
        cells = [c.strip() for c in line.strip("│").split("│")]
        if cells[0] == "System":
            continue
        if cells[0]:
            system = Path(cells[0].removeprefix("Baseline: ")).stem
            result[system] = {
                m: (float(c.split()[0]), None) for m, c in zip(names, cells[1:], strict=True)
            }
        else:
            for m, c in zip(names, cells[1:], strict=True):
                p_text = re.fullmatch(r"\(p = ([0-9.]+)\)\*?", c)
                assert p_text, c
                count = round(float(p_text.group(1)) * (n + 1)) - 1
                result[system][m] = (result[system][m][0], (count + 1) / (n + 1))
    return result


@pytest.fixture(scope="module")
def ours(text_files: dict[str, Path]) -> pd.DataFrame:
    df = load_text(
        source=str(text_files["src"]),
        systems={k: str(text_files[k]) for k in ("base", "sys1", "sys2")},
        references=[str(text_files["ref1"]), str(text_files["ref2"])],
    )
    metrics = build_metrics(
        {
            "bleu": {"_target_": "paraeval.metrics.sacre.BLEU"},
            "chrf": {"_target_": "paraeval.metrics.sacre.CHRF"},
            "ter": {"_target_": "paraeval.metrics.sacre.TER"},
        }
    )
    scores = score(df, metrics, progress=False)
    # two references of different lengths: TER's averaged reference length is fractional, so
    # TER takes the float path (sacrebleu's gather and matrix products verbatim) and BLEU/chrF
    # the integer path
    ter = scores.stats[("ter", "sys2")]
    assert not np.array_equal(ter, np.round(ter))
    agg = aggregate(scores)
    cfg = compare_settings(n_bootstrap=1000, n_ar=1000, seed=SEED, baseline="base")
    return compare(scores, agg, cfg).table


@pytest.mark.parametrize("test", ["bs", "ar"])
def test_paired_p_values_equal_sacrebleu_cli(
    text_files: dict[str, Path], ours: pd.DataFrame, test: str
) -> None:
    theirs = _sacrebleu_paired(text_files, test, 1000)
    assert set(theirs) == {"base", "sys1", "sys2"}
    column = "p_bootstrap" if test == "bs" else "p_ar"
    p_values = []
    for system, per_metric in theirs.items():
        for metric, (their_score, their_p) in per_metric.items():
            mine = ours[(ours["system"] == system) & (ours["metric"] == metric)].iloc[0]
            assert mine["score"] == pytest.approx(their_score, abs=1e-4)
            if system == "base":
                assert their_p is None and np.isnan(mine[column])
                continue
            assert mine[column] == their_p, (system, metric, test)
            p_values.append(mine[column])
    # the files are built so that not every difference is maximally significant
    assert max(p_values) > 0.01


@pytest.mark.parametrize(
    ("metric", "fn"),
    [
        (SacreBLEU(), bleu_scores),
        (SacreBLEU(smooth_method="floor"), bleu_scores),
        (SacreBLEU(smooth_method="none"), bleu_scores),
        (SacreBLEU(effective_order=True), bleu_scores),
        (SacreCHRF(), chrf_scores),
        (SacreCHRF(word_order=2), chrf_scores),
        (SacreTER(), ter_scores),
    ],
    ids=["bleu-exp", "bleu-floor", "bleu-none", "bleu-eff", "chrf", "chrf++", "ter"],
)
def test_vectorised_scores_bit_equal_sacrebleu(metric: Any, fn: Any) -> None:
    r = random.Random(3)
    hyps = [_sentence(r) if r.random() > 0.05 else "" for _ in range(120)]
    refs = [[_edit(r, h or "a b", 0.5) for h in hyps], [_sentence(r) for _ in hyps]]
    stats = np.asarray(metric._extract_corpus_statistics(hyps, refs), dtype=float)
    idx = np.random.default_rng(0).choice(len(hyps), size=(200, len(hyps)))
    cases = {
        "single segments f64": stats,
        "single segments f32": stats.astype(np.float32),
        "resampled f32": stats.astype(np.float32)[idx].sum(axis=1),
        "resampled f64": stats[idx].sum(axis=1),
        "pairs f32": stats.astype(np.float32)[idx[:, :2]].sum(axis=1),
    }
    for name, rows in cases.items():
        expected = np.array([metric._compute_score_from_stats(row).score for row in rows])
        got = fn(rows, metric)
        assert got.dtype == expected.dtype, name
        assert np.array_equal(got, expected), name


def _demo_scores(metric_names: tuple[str, ...] = ("bleu", "chrf", "self_bleu", "ter")) -> Any:
    catalogue = {
        "bleu": {"_target_": "paraeval.metrics.sacre.BLEU"},
        "chrf": {"_target_": "paraeval.metrics.sacre.CHRF", "against_source": True},
        "self_bleu": {"_target_": "paraeval.metrics.sacre.SelfBLEU"},
        "ter": {"_target_": "paraeval.metrics.sacre.TER", "against_source": True},
        "ibleu": {"_target_": "paraeval.metrics.sacre.IBLEU"},
    }
    df = load_demo()
    scores = score(df, build_metrics({k: catalogue[k] for k in metric_names}), progress=False)
    return scores, aggregate(scores)


@pytest.fixture(scope="module")
def demo() -> Any:
    return _demo_scores()


FAST = dict(n_bootstrap=200, n_ar=500)


def test_bootstrap_is_deterministic_for_a_seed(demo: Any) -> None:
    scores, agg = demo
    a = compare(scores, agg, compare_settings(seed=11, **FAST)).table
    b = compare(scores, agg, compare_settings(seed=11, **FAST)).table
    c = compare(scores, agg, compare_settings(seed=12, **FAST)).table
    pd.testing.assert_frame_equal(a, b)
    assert not np.array_equal(a["ci_low"].to_numpy(), c["ci_low"].to_numpy())
    assert (a["signature"].str.endswith("|bs:200|ar:500|seed:11|conf:0.95|alpha:0.05")).all()


def test_interval_contains_point_estimate_and_matches_a_plain_loop(demo: Any) -> None:
    scores, agg = demo
    t = compare(scores, agg, compare_settings(seed=5, **FAST)).table
    assert list(t.columns) == COMPARISON_COLUMNS
    assert set(t["metric"]) >= {
        "bleu",
        "chrf",
        "chrf_src",
        "self_bleu",
        "ter",
        "ter_src",
        "syntactic",
    }
    assert ((t["ci_low"] <= t["score"]) & (t["score"] <= t["ci_high"])).all()
    assert (t["ci_low"] < t["ci_high"])[t["metric"] == "bleu"].all()
    # the syntactic average is a mean column: its interval is the percentile interval of the
    # resampled means, recomputed here with a plain loop over the same sacrebleu-style resamples
    seg = agg.segments[agg.segments["system"] == "strong"]["syntactic"].to_numpy()
    idx = np.random.default_rng(5).choice(len(seg), size=(200, len(seg)), replace=True)
    means = np.array([seg[i].mean() for i in idx])
    row = t[(t["metric"] == "syntactic") & (t["system"] == "strong")].iloc[0]
    assert row["ci_low"] == pytest.approx(np.quantile(means, 0.025), abs=1e-12)
    assert row["ci_high"] == pytest.approx(np.quantile(means, 0.975), abs=1e-12)
    # the BLEU interval is recomputed from resampled statistics with sacrebleu itself
    sb = scores.metrics["bleu"]._corpus_metric()
    st = scores.stats[("bleu", "strong")].astype(np.float32)
    bleus = np.array([sb._compute_score_from_stats(st[i].sum(0)).score for i in idx])
    row = t[(t["metric"] == "bleu") & (t["system"] == "strong")].iloc[0]
    assert row["ci_low"] == pytest.approx(np.quantile(bleus, 0.025), abs=1e-9)
    assert row["score"] == pytest.approx(agg.systems.loc["strong", "bleu"], abs=1e-9)


def test_copy_system_has_lowest_possible_diversity_and_copy_rate_one(demo: Any) -> None:
    scores, agg = demo
    result = compare(scores, agg, compare_settings(seed=1, **FAST))
    view = result.systems
    assert set(result.diversity_columns) == {"self_bleu", "chrf_src", "ter_src"}
    # similarity to the source is maximal on every item for the copy system: diversity 0
    assert view.loc["copy", "diversity"] == 0.0
    assert view.loc["copy", "diversity_q75"] == 0.0
    assert (view.drop(index="copy")["diversity"] > 0.0).all()
    assert (view["diversity"].between(0.0, 1.0)).all()
    assert view.loc["copy", "copy_rate"] == 1.0
    assert (view.drop(index="copy")["copy_rate"] < 0.5).all()


def test_adequacy_is_the_semantic_average_or_source_side_fallback() -> None:
    scores, agg = _demo_scores(("bleu", "self_bleu"))
    view = compare(scores, agg, compare_settings(seed=1, **FAST)).systems
    assert view["adequacy"].isna().all()  # no semantic metric: nothing to report, no guess
    agg.segments["semantic"] = agg.normalized["bleu"]
    view = compare(scores, agg, compare_settings(seed=1, **FAST)).systems
    expected = agg.normalized["bleu"].groupby(agg.segments["system"]).mean()
    assert view["adequacy"].to_dict() == pytest.approx(expected.to_dict())


def test_copy_rate_normalizes_whitespace_and_case() -> None:
    seg = pd.DataFrame(
        {
            "system": ["a", "a", "a", "b"],
            "source": ["The cat sat.", "A dog", "x y", "Hello  world"],
            "candidate": ["  the CAT   sat. ", "A dog ran", "x\ty", "hello world"],
        }
    )
    rates = copy_rates(seg)
    assert rates["a"] == pytest.approx(2 / 3)
    assert rates["b"] == 1.0


@pytest.mark.parametrize("dtype", ["str", "object"])
def test_copy_rates_follow_every_text(dtype: str) -> None:
    """Copy rates on Arrow-backed and object columns alike; any changed text changes the answer
    and the unchanged table keeps its own."""
    seg = pd.DataFrame(
        {
            "system": ["a", "a", "b", "b"],
            "source": ["The cat sat.", "A dog", "x y", "z"],
            "candidate": ["the cat sat.", "A dog ran", "x y", "w"],
        }
    ).astype({"source": dtype, "candidate": dtype})
    first = copy_rates(seg)
    assert first.to_dict() == {"a": 0.5, "b": 0.5}
    assert copy_rates(seg.copy()).to_dict() == first.to_dict()
    for row, column, text, want in [
        (1, "candidate", "a  DOG", {"a": 1.0, "b": 0.5}),
        (3, "source", "w", {"a": 0.5, "b": 1.0}),
        (0, "source", "The cat sat", {"a": 0.0, "b": 0.5}),
    ]:
        changed = seg.copy()
        changed.loc[row, column] = text
        assert copy_rates(changed).to_dict() == want
        assert copy_rates(seg).to_dict() == first.to_dict()


def test_clusters_on_a_hand_built_example() -> None:
    """a and b differ by noise, c is far behind, d ties a exactly: {a, b, d} then {c}."""
    from paraeval.pipeline.stages.score import ColumnInfo, Scores

    rng = np.random.default_rng(0)
    n = 60
    a = rng.normal(0.6, 0.1, n)
    values = {"a": a, "b": a + rng.normal(0, 0.01, n), "c": a - 0.3, "d": a.copy()}
    rows = [
        {"item_id": f"i{k}", "system": s, "source": "s", "candidate": "c", "m": v[k]}
        for s, v in values.items()
        for k in range(n)
    ]
    seg = pd.DataFrame(rows)
    seg["references"] = [["r"]] * len(seg)
    info = {"m": ColumnInfo(metric="m", group="syntactic", higher_is_better=True, signature="m")}
    scores = Scores(seg, pd.DataFrame(index=list(values)), info)
    agg = aggregate(scores)
    t = compare(scores, agg, compare_settings(seed=3, baseline="c", **FAST)).table
    m = t[t["metric"] == "m"].set_index("system")
    assert m.loc["a", "cluster"] == m.loc["b", "cluster"] == m.loc["d", "cluster"] == 1
    assert m.loc["c", "cluster"] == 2
    assert m.loc["a", "p_bootstrap"] < 0.05 and m.loc["a", "p_ar"] < 0.05
    assert (m["baseline"] == "c").all()


@pytest.mark.slow
def test_compare_stage_adds_system_columns_to_the_written_table(demo: Any, tmp_path: Path) -> None:
    scores, agg = demo
    # a stand-in semantic average so that the diversity–adequacy plot has both axes
    agg = dataclasses.replace(agg, segments=agg.segments.copy(), systems=agg.systems.copy())
    agg.segments["semantic"] = agg.normalized["chrf"]
    settings = dataclasses.replace(
        Settings.from_config(compose_config(["metrics=[bleu]"])),
        compare=compare_settings(baseline="medium", seed=2, **FAST),
    )
    ev = Evaluation(settings, scores.segments, scores=scores, aggregated=agg)
    compare_stage(ev)
    ev.write(tmp_path)
    result = ev.compared
    assert result is not None
    table = pd.read_csv(tmp_path / "system_comparison.csv")
    assert list(table.columns) == COMPARISON_COLUMNS
    assert set(table["baseline"]) == {"medium"}
    assert table[table["system"] == "medium"]["p_ar"].isna().all()
    assert (tmp_path / "plots" / "system_ranking.png").stat().st_size > 1000
    # the comparison's per-system columns join the system table the run writes, while the
    # aggregate stage's own table stays as that stage left it
    written = pd.read_csv(tmp_path / "system_scores.csv").set_index("system")
    for col in ("diversity", "adequacy", "copy_rate"):
        assert col not in agg.systems
        assert col in ev.systems
        expected = result.systems[col].reindex(written.index).to_numpy(dtype=float)
        assert np.allclose(written[col].to_numpy(dtype=float), expected, equal_nan=True)


def test_config_errors_are_one_line() -> None:
    with pytest.raises(ConfigError, match="n_bootstrap"):
        compare_settings(n_bootstrap=0)
    with pytest.raises(ConfigError, match="confidence"):
        compare_settings(confidence=95)
    with pytest.raises(ConfigError, match="unknown setting"):
        compare_settings(**{"n_samples": 3})


class _LengthRatio(Metric):
    """A toy corpus-level metric: total candidate characters / total source characters."""

    name = "ratio"
    needs_references = False
    needs_sources = True

    def _score(
        self, candidates: list[str], references: list[list[str]], sources: Any
    ) -> MetricResult:
        stats = np.array(
            [[len(c), max(1, len(s))] for c, s in zip(candidates, sources, strict=True)], float
        )
        return MetricResult(
            {"ratio": stats[:, 0] / stats[:, 1]}, self.corpus_from_stats(stats), "ratio", stats
        )

    def signature(self, nrefs: int | None = None, segment: bool | None = None) -> str:
        return "ratio"

    def corpus_from_stats(self, stats: np.ndarray) -> dict[str, float]:
        return {"ratio": float(stats[:, 0].sum() / stats[:, 1].sum())}


def test_other_corpus_metrics_resample_their_statistics() -> None:
    df = load_demo()
    df = df[df["system"].isin(["copy", "medium", "weak"])].reset_index(drop=True)
    scores = score(df, {"ratio": _LengthRatio()}, progress=False)
    agg = aggregate(scores)
    t = compare(scores, agg, compare_settings(seed=9, baseline="copy", **FAST)).table
    t = t[t["metric"] == "ratio"].set_index("system")
    st = {s: scores.stats[("ratio", s)] for s in ("copy", "weak")}
    n = len(st["copy"])
    idx = np.random.default_rng(9).choice(n, size=(200, n), replace=True)
    boot = {s: np.array([v[i, 0].sum() / v[i, 1].sum() for i in idx]) for s, v in st.items()}
    assert t.loc["weak", "ci_low"] == pytest.approx(np.quantile(boot["weak"], 0.025), abs=1e-12)
    real = {s: v[:, 0].sum() / v[:, 1].sum() for s, v in st.items()}
    assert t.loc["weak", "score"] == pytest.approx(real["weak"])
    diffs = np.abs(boot["weak"] - boot["copy"])
    c = np.sum(diffs - diffs.mean() > abs(real["copy"] - real["weak"]))
    assert t.loc["weak", "p_bootstrap"] == (c + 1) / 201
    # approximate randomization written out: swap each item's two outputs with probability 1/2
    keep = np.random.default_rng(9).integers(2, size=(500, n), dtype=bool)
    a, b = st["copy"], st["weak"]
    stat = []
    for m in keep:
        x, y = np.where(m[:, None], a, b), np.where(m[:, None], b, a)
        stat.append(abs(x[:, 0].sum() / x[:, 1].sum() - y[:, 0].sum() / y[:, 1].sum()))
    c = np.sum(np.array(stat) > abs(real["copy"] - real["weak"]))
    assert t.loc["weak", "p_ar"] == (c + 1) / 501


def test_a_single_system_has_intervals_but_no_tests() -> None:
    df = load_demo()
    df = df[df["system"] == "strong"].reset_index(drop=True)
    bleu = build_metrics({"bleu": {"_target_": "paraeval.metrics.sacre.BLEU"}})
    scores = score(df, bleu, progress=False)
    t = compare(scores, aggregate(scores), compare_settings(seed=1, **FAST)).table
    assert set(t["system"]) == {"strong"}
    assert t["p_bootstrap"].isna().all() and t["p_ar"].isna().all()
    assert (t["cluster"] == 1).all() and (t["ci_low"] < t["score"]).all()


def test_systems_on_a_single_item_are_ranked_untested_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """One shared item: every resample is that item, so an interval would have zero width and a
    paired test would read p = 1/(N+1) as significance. Ranks only, and a warning."""
    df = load_demo()
    first = df["item_id"].iloc[0]
    df = df[df["item_id"] == first].reset_index(drop=True)
    bleu = build_metrics({"bleu": {"_target_": "paraeval.metrics.sacre.BLEU"}})
    scores = score(df, bleu, progress=False)
    with caplog.at_level("WARNING"):
        t = compare(scores, aggregate(scores), compare_settings(seed=1, **FAST)).table
    assert "single item" in caplog.text
    assert set(t["metric"]) == {"bleu", "syntactic"} and (t["n_items"] == 1).all()
    for column in ("ci_low", "ci_high", "p_bootstrap", "p_ar", "cluster"):
        assert t[column].isna().all(), column
    for _, rows in t.groupby("metric"):
        assert len(rows) == df["system"].nunique() and rows["score"].notna().all()
        best_first = rows.sort_values("rank")["score"].to_numpy()
        assert (np.diff(best_first) <= 0).all()


def test_a_changed_column_changes_its_rows_only(demo: Any) -> None:
    import copy

    scores, agg = demo
    cfg = compare_settings(seed=11, **FAST)
    first = compare(scores, agg, cfg).table
    again = compare(scores, agg, cfg).table  # seeded: the same table
    pd.testing.assert_frame_equal(first, again)
    # change one system's syntactic average: its rows are recomputed, nothing else changes
    changed = copy.copy(agg)
    changed.segments = agg.segments.copy()
    weak = changed.segments["system"] == "weak"
    changed.segments.loc[weak, "syntactic"] = changed.segments.loc[weak, "syntactic"] * 0.5
    third = compare(scores, changed, cfg).table
    syn_a = first[first.metric == "syntactic"].reset_index(drop=True)
    syn_b = third[third.metric == "syntactic"].reset_index(drop=True)
    weak_a = syn_a.loc[syn_a.system == "weak", "score"].iloc[0]
    weak_b = syn_b.loc[syn_b.system == "weak", "score"].iloc[0]
    assert weak_b == pytest.approx(weak_a * 0.5)
    others = first[first.metric != "syntactic"].reset_index(drop=True)
    pd.testing.assert_frame_equal(others, third[third.metric != "syntactic"].reset_index(drop=True))


def test_compiled_log_exp_are_bit_identical_to_python_math() -> None:
    """The paired tests need sacrebleu's scores to the last bit: the compiled log/exp must give
    what math.log/math.exp give (numpy's own log/exp do not, in general)."""
    import math

    from paraeval.metrics._sacre_batched import _MATH_EXP, _MATH_LOG, _map_math

    rng = np.random.default_rng(0)
    x = np.concatenate(
        [
            rng.random(200_000) * 100,
            rng.random(200_000) * 1e-3,
            np.exp(rng.normal(size=200_000) * 50),
        ]
    )
    y = rng.normal(size=600_000) * 5
    want_log = np.array([math.log(v) for v in x])
    want_exp = np.array([math.exp(v) for v in y])
    assert np.array_equal(_map_math(_MATH_LOG, x), want_log)
    assert np.array_equal(_map_math(_MATH_EXP, y), want_exp)
    assert _map_math(_MATH_LOG, x.reshape(3, -1)).shape == (3, 200_000)


def test_approximate_randomization_of_all_systems_at_once_equals_one_at_a_time() -> None:
    """The AR test shares one mask product across systems; per system it is the same test. With
    integer statistics (BLEU, chrF) the sums are exact, so the p-values are identical; mean
    columns may differ only by rounding of the sums, so by at most one count."""
    from paraeval.correlation.paired import ArMasks, MeanScores, ar_masks
    from paraeval.pipeline.stages.compare import _align, _build_columns

    scores, agg = _demo_scores(("bleu", "chrf", "ibleu", "ter"))
    seg = agg.segments
    systems = list(dict.fromkeys(seg["system"]))
    base, others = systems[0], systems[1:]
    items, positions = _align(seg, systems, base)
    masks = ArMasks(ar_masks(len(items), 400, 5))
    columns = _build_columns(scores, agg, systems, positions)
    assert {"bleu", "chrf", "ibleu", "ter"} <= {c.name for c in columns}
    assert any(isinstance(c.scores, MeanScores) for c in columns)
    for col in columns:
        together = col.scores.ar_all(base, others, masks)
        for s in others:
            alone = col.scores.ar(base, s, masks)
            if isinstance(col.scores, MeanScores):
                assert together[s] == pytest.approx(alone, abs=1.5 / 401), (col.name, s)
            else:
                assert together[s] == alone, (col.name, s)
    # a system without a finite score is not tested, on both paths
    mean = next(c.scores for c in columns if isinstance(c.scores, MeanScores))
    mean.values[others[0]] = np.full_like(mean.values[others[0]], np.nan)
    mean.zeroed[others[0]] = np.zeros_like(mean.zeroed[others[0]])
    mean.finite[others[0]] = np.zeros_like(mean.finite[others[0]])
    assert np.isnan(mean.ar_all(base, others, masks)[others[0]])
    assert np.isnan(mean.ar(base, others[0], masks))


@pytest.mark.parametrize("n_clusters", [None, 13])  # as compared; a legend of three rows
def test_ranking_title_legend_and_panels_do_not_overlap(demo: Any, n_clusters: int | None) -> None:
    from matplotlib.text import Text

    from paraeval.pipeline.report.ranking import ranking_figure

    scores, agg = demo
    result = compare(scores, agg, compare_settings(baseline="medium", seed=2, **FAST))
    if n_clusters is not None:
        table = result.table.copy()
        table["cluster"] = np.arange(len(table)) % n_clusters + 1.0
        result = dataclasses.replace(result, table=table)
    fig = ranking_figure(result)
    assert fig is not None
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    caption = fig.get_suptitle()
    assert caption.startswith("System ranking:")
    (suptitle,) = [t for t in fig.findobj(Text) if t.get_text() == caption]
    boxes: dict[str, Any] = {
        "title": suptitle.get_window_extent(renderer),
        "legend": fig.legends[0].get_window_extent(renderer),
        "panels": [ax.title.get_window_extent(renderer) for ax in fig.axes if ax.get_visible()],
    }
    assert len(boxes["panels"]) == result.table["metric"].nunique()
    title, legend = boxes["title"], boxes["legend"]
    assert legend.y1 <= title.y0  # the legend's row below the figure's title
    assert all(legend.y0 >= panel.y1 for panel in boxes["panels"])  # and above every panel


def test_a_system_missing_an_item_is_compared_on_the_shared_items(
    demo: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The item alignment drops an item one system lacks, says so once, and a second comparison
    of the same inputs gives the same table."""
    scores, agg = demo
    seg = agg.segments
    last = seg.index[(seg["system"] == "strong") & (seg["item_id"] == seg["item_id"].iloc[-1])]
    gappy = dataclasses.replace(agg, segments=seg.drop(index=last))
    cfg = compare_settings(seed=3, **FAST)
    with caplog.at_level("WARNING", logger="paraeval.pipeline.stages.compare"):
        first = compare(scores, gappy, cfg).table
    warnings = [r for r in caplog.records if "items they all have" in r.getMessage()]
    assert len(warnings) == 1
    assert (first["n_items"] == seg["item_id"].nunique() - 1).all()
    pd.testing.assert_frame_equal(first, compare(scores, gappy, cfg).table)
