"""mt-metrics-eval's metric scores and system scores as given (data=mtme, data=table): the test set
that test_mtme.py writes, read back cell by cell; the selection of metrics, mt-metrics-eval's
conventions (None, a metric lacking a system), each bad file one error naming the file and line,
and runs with precomputed metrics only or beside paraeval's own."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import pearsonr

from paraeval.pipeline.data.load import load_frame, load_mtme, load_table
from paraeval.pipeline.errors import ConfigError, DataError
from tests.pipeline.helpers import run_cli
from tests.pipeline.test_mtme import BAD, COMET, FAST, GOLD, LP, METRICS, OUT, write_mtme

THREE = ["sysA", "sysB", "sysC"]


@pytest.fixture
def mtme(tmp_path: Path) -> Path:
    return write_mtme(tmp_path)


def _given(key: str, system: str, i: int) -> float:
    """The file's value (None: NaN); 0 for a system a metric file lacks, as mt-metrics-eval."""
    per_system = METRICS[key]
    if system not in per_system:
        return 0.0
    values = per_system[system]
    value = values[i if len(values) > 1 else 0]
    return math.nan if value is None else value


def _cells(df: pd.DataFrame, column: str) -> list[tuple[str, str, float]]:
    return list(zip(df["system"], df["item_id"], df[column], strict=True))


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def test_metric_and_system_scores_are_what_the_files_say(
    mtme: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        df = load_mtme(str(mtme), LP, outliers=OUT, baseline_metrics=["BLEU", "CometKiwi-src"])
    given = sorted(c for c in df.columns if c.startswith(("metric_", "system_")))
    # refB's COMET and the domain-level file are not read; MetricX has system scores only
    assert given == [
        "metric_BLEU-refA",
        "metric_COMET-refA",
        "metric_CometKiwi-src",
        "metric_MetricX-refA",
        "system_human_mqm",
        "system_metric_COMET-refA",
        "system_metric_MetricX-refA",
    ]
    for column, key in [
        ("metric_COMET-refA", "COMET-refA.seg"),
        ("metric_CometKiwi-src", "CometKiwi-src.seg"),
        ("metric_BLEU-refA", "BLEU-refA.seg"),
        ("system_metric_COMET-refA", "COMET-refA.sys"),
        ("system_metric_MetricX-refA", "MetricX-refA.sys"),
    ]:
        for system, item, value in _cells(df, column):
            assert _same(value, _given(key, system, int(item) - 1)), (column, system, item)
    assert df["metric_COMET-refA"].isna().sum() == 1  # sysB's None
    assert df["metric_MetricX-refA"].isna().all()
    assert (df.loc[df.system == "sysC", "metric_BLEU-refA"] == 0).all()
    mqm = {"sysA": -0.4, "sysB": -9.5, "sysC": math.nan}  # sysC not rated at the system level
    assert all(_same(v, mqm[s]) for s, _, v in _cells(df, "system_human_mqm"))
    # one warning per file that lacks a system the run evaluates, naming file and systems
    lacking = [r.getMessage() for r in caplog.records if "no scores for" in r.getMessage()]
    assert lacking == ["BLEU-refA.seg.score: no scores for sysC: 0, as mt-metrics-eval"]
    assert df.attrs["baseline_metrics"] == ["metric_BLEU-refA", "metric_CometKiwi-src"]
    assert str(mtme / "metric-scores" / LP / "COMET-refA.sys.score") in df.attrs["data_files"]


def test_the_chosen_reference_and_the_human_systems(mtme: Path) -> None:
    df = load_mtme(str(mtme), LP, ref="refB", outliers=OUT)
    assert sorted(c for c in df.columns if c.startswith("metric_")) == [
        "metric_COMET-refB",
        "metric_CometKiwi-src",
    ]
    assert (df["metric_COMET-refB"] == 9.0).all()
    human = load_mtme(str(mtme), LP, include_human=True, outliers=OUT)
    ref_b = human[human.system == "refB"]
    assert ref_b["metric_COMET-refA"].tolist() == METRICS["COMET-refA.seg"]["refB"]
    assert (ref_b["system_metric_COMET-refA"] == 0.9).all()
    assert (ref_b["metric_BLEU-refA"] == 0).all()


def test_the_selection(mtme: Path) -> None:
    def given(**options: object) -> list[str]:
        df = load_mtme(str(mtme), LP, outliers=OUT, **options)  # type: ignore[arg-type]
        return sorted(c for c in df.columns if c.startswith(("metric_", "system_metric_")))

    assert given(metric_scores=["COMET"]) == ["metric_COMET-refA", "system_metric_COMET-refA"]
    assert given(metric_scores="CometKiwi-src") == ["metric_CometKiwi-src"]
    assert given(metric_scores="none") == given(metric_scores=None) == []
    with pytest.raises(ConfigError, match=r"data\.metric_scores: no COMET-refB or chrF in .*"):
        given(metric_scores=["COMET-refB", "chrF", "BLEU"])


def test_a_filtered_set_has_no_system_scores(mtme: Path) -> None:
    for options in ({"domain": "speech"}, {"max_items": 2}):
        df = load_mtme(str(mtme), LP, outliers=OUT, **options)  # type: ignore[arg-type]
        assert not [c for c in df.columns if c.startswith("system_")], options
        assert "metric_MetricX-refA" not in df
        for system, item, value in _cells(df, "metric_COMET-refA"):
            assert _same(value, _given("COMET-refA.seg", system, int(item) - 1))


def _table_rows() -> list[dict[str, object]]:
    return [
        {
            "item_id": f"i{i}",
            "system": s,
            "candidate": f"{s} {i}",
            "human_q": float(i),
            "metric_m": float(i * k),
            "system_metric_m": float(k),
            "system_human_q": 10.0 * k if s != "c" else None,
        }
        for i in range(3)
        for k, s in enumerate("abc")
    ]


def test_table_system_columns_pass_and_are_checked(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    rows = _table_rows()
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    df = load_table(str(path))
    by_system = df.groupby("system")[["system_metric_m", "system_human_q"]].first()
    assert by_system["system_metric_m"].tolist() == [0.0, 1.0, 2.0]
    assert np.isnan(by_system.loc["c", "system_human_q"])
    assert load_frame(pd.DataFrame(rows))["system_human_q"].isna().sum() == 3
    rows[7]["system_human_q"] = 11.0  # item i2, system b: 10.0 in its other rows
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with pytest.raises(DataError) as err:
        load_table(str(path))
    assert str(err.value).startswith(f"{path}, row 8, column 'system_human_q': system 'b' ")
    assert "'11.0' here and '10.0' at" in str(err.value)
    rows[7]["system_human_q"] = None  # none given on one row of a system that has one
    with pytest.raises(DataError, match=r"^<DataFrame>, row 7, column 'system_human_q'"):
        load_frame(pd.DataFrame(rows))


def _run(mtme: Path, out: Path, *args: str) -> pd.DataFrame:
    common = ["data=mtme", f"data.path={mtme}", f"data.lp={LP}", "data.outliers=[synthetic_ref]"]
    proc = run_cli(
        [*common, *args, "tracking=none", f"hydra.run.dir={out}", "cache.enabled=false", *FAST],
        out.parent,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return pd.read_csv(out / "correlations.csv")


@pytest.mark.slow
def test_precomputed_metrics_alone_and_beside_paraevals(mtme: Path, tmp_path: Path) -> None:
    x, y = [], []
    for system in THREE:
        for i in range(5):
            metric, human = METRICS["COMET-refA.seg"][system][i], GOLD["mqm"][system][i]
            if metric is not None and human is not None:
                x.append(metric)
                y.append(human)
    by_hand = pearsonr(x, y).statistic
    alone = _run(mtme, tmp_path / "alone", "metrics=[]")
    beside = _run(mtme, tmp_path / "beside", "metrics=[bleu]")
    assert set(alone["metric"]) == {f"metric_{m}" for m in ("BLEU-refA", "COMET-refA")} | {
        "metric_CometKiwi-src",
        "metric_MetricX-refA",
    }
    assert set(beside["metric"]) == {*alone["metric"], "bleu", "syntactic"}
    for corr in (alone, beside):
        row = corr[
            (corr.metric == "metric_COMET-refA")
            & (corr.aspect == "human_mqm")
            & (corr.level == "segment")
            & (corr.coefficient == "pearson")
        ]
        assert len(row) == 1 and row["value"].iloc[0] == pytest.approx(by_hand, abs=1e-12)
    assert len(x) == 12  # the cells with None on either side are left out


@pytest.mark.slow
def test_errors_on_the_command_line(mtme: Path, tmp_path: Path) -> None:
    """A bad metric file, and nothing to correlate: one ``paraeval: error:`` line, exit 2."""
    BAD["metric file: not a number"][0](mtme)
    for args, what in [
        ([f"data.path={mtme}"], f"paraeval: error: {mtme / COMET}, row 2: expected a number"),
        (["data=demo", "metrics=[]"], "paraeval: error: no metrics selected and the data has"),
    ]:
        data = ["data=mtme", f"data.lp={LP}"] if "data=demo" not in args else []
        proc = run_cli([*data, *args, "tracking=none", f"hydra.run.dir={tmp_path}/o"], tmp_path)
        assert proc.returncode == 2, proc.stderr[-2000:]
        errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("paraeval: error:")]
        assert len(errors) == 1 and errors[0].startswith(what), proc.stderr[-2000:]
        assert "Traceback" not in proc.stderr
