"""mt-metrics-eval's layout (data=mtme): a small test set written here in that layout is read back
cell by cell; the choices of reference, systems, gold scores and segments; each bad input is one
error that names the file and the line."""

from __future__ import annotations

import json
import logging
import math
import shutil
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from paraeval.pipeline.data.load import load_mtme
from paraeval.pipeline.errors import ConfigError, DataError
from tests.pipeline.helpers import run_cli

LP = "en-de"
SOURCES = [
    "The cat sat on the mat.",
    "It is raining in the city today.",
    "She reads a book every evening.",
    "The train leaves at seven.",
    "We will meet again next week.",
]
REFERENCES = {
    "refA": [
        "Die Katze sass auf der Matte.",
        "Heute regnet es in der Stadt.",
        "Sie liest jeden Abend ein Buch.",
        "Der Zug faehrt um sieben ab.",
        "Wir sehen uns naechste Woche wieder.",
    ],
    "refB": [
        "Die Katze sass auf dem Teppich.",
        "In der Stadt regnet es heute.",
        "Jeden Abend liest sie ein Buch.",
        "Der Zug geht um sieben.",
        "Naechste Woche treffen wir uns wieder.",
    ],
}
SYSTEMS = {
    "sysA": [
        "Die Katze sass auf der Matte.",
        "Es regnet heute in der Stadt.",
        "Sie liest jeden Abend ein Buch.",
        "Der Zug faehrt um sieben.",
        "Wir treffen uns naechste Woche wieder.",
    ],
    "sysB": [
        "Die Katze sitzt auf Matte.",
        "Regen in Stadt heute.",
        "Sie lesen Buch Abend.",
        "Zug sieben.",
        "Wir treffen wieder Woche.",
    ],
    "sysC": [
        "Eine Katze sass auf einer Matte.",
        "Es regnet heute in der Stadt.",
        "Sie liest am Abend ein Buch.",
        "Der Zug faehrt um sieben Uhr.",
        "Wir sehen uns naechste Woche.",
    ],
    # WMT23 en-de's outlier, left out when named
    "synthetic_ref": [
        "Die Katze sass auf der Matte.",
        "Heute regnet es in der Stadt.",
        "Sie liest jeden Abend ein Buch.",
        "Der Zug faehrt um sieben ab.",
        "Wir sehen uns naechste Woche wieder.",
    ],
}
# None: a segment without a score; a system absent from a file: not rated at all
GOLD: dict[str, dict[str, list[float | None]]] = {
    "mqm": {
        "sysA": [0.0, -1.0, None, 0.0, -0.5],
        "sysB": [-10.0, -6.0, -15.0, None, -7.0],
        "sysC": [-1.0, 0.0, -2.0, -1.0, -3.0],
        "refB": [0.0, 0.0, -1.0, None, 0.0],
        "synthetic_ref": [0.0, 0.0, 0.0, 0.0, 0.0],
    },
    "da-sqm": {
        "sysA": [95.0, 80.0, 88.0, None, 90.0],
        "sysB": [40.5, 30.0, None, None, 35.0],
    },
}
# metric-scores/<lp>/: seg scores (None: a missing score), a reference-free metric, one read
# only with refB, one lacking sysC and the human "systems" (scored 0), one with system scores only
METRICS: dict[str, dict[str, list[float | None]]] = {
    "COMET-refA.seg": {
        "sysA": [0.9, 0.8, 0.85, 0.7, 0.95],
        "sysB": [0.3, 0.2, None, 0.4, 0.25],
        "sysC": [0.8, 0.75, 0.7, 0.65, 0.6],
        "refB": [0.9, 0.9, 0.8, 0.8, 0.9],
        "synthetic_ref": [1.0, 1.0, 1.0, 1.0, 1.0],
    },
    "COMET-refA.sys": {"sysA": [0.5], "sysB": [0.1], "sysC": [0.4], "refB": [0.9]},
    "COMET-refB.seg": {s: [9.0] * 5 for s in ("sysA", "sysB", "sysC", "refA", "synthetic_ref")},
    "CometKiwi-src.seg": {s: [0.1 * k, 0.2, 0.3, 0.4 * k, 0.5] for k, s in enumerate(SYSTEMS)},
    "BLEU-refA.seg": {"sysA": [50.0, 40.0, 30.0, 20.0, 10.0], "sysB": [5.0, 4.0, 3.0, 2.0, 1.0]},
    "MetricX-refA.sys": {s: [-1.0 - k] for k, s in enumerate(SYSTEMS)},
}
DOMAINS = ["news", "news", "speech", "speech", "social"]
# WMT23 en-de's outlier, named as a user reproducing WMT's results would
OUT = ["synthetic_ref"]


def write_mtme(root: Path, name: str = "wmt23") -> Path:
    """A test set in mt-metrics-eval's layout: 5 segments, references refA and refB (both copied
    into system-outputs as human "systems"), 3 systems and an outlier, two segment-level gold
    scores, a system-level one and another language pair's files that must not be read."""
    folder = root / name
    for sub in ("sources", "references", f"system-outputs/{LP}", "human-scores", "documents"):
        (folder / sub).mkdir(parents=True, exist_ok=True)

    def lines(path: Path, rows: list[str]) -> None:
        path.write_text("".join(f"{r}\n" for r in rows), encoding="utf-8")

    lines(folder / "sources" / f"{LP}.txt", SOURCES)
    lines(folder / "sources" / "zh-en.txt", ["x"])
    for ref, rows in REFERENCES.items():
        lines(folder / "references" / f"{LP}.{ref}.txt", rows)
        lines(folder / "system-outputs" / LP / f"{ref}.txt", rows)
    lines(folder / "references" / "zh-en.refA.txt", ["y"])
    for system, rows in SYSTEMS.items():
        lines(folder / "system-outputs" / LP / f"{system}.txt", rows)
    for gold, per_system in GOLD.items():
        rows = [f"{s}\t{'None' if v is None else v}" for s, vs in per_system.items() for v in vs]
        lines(folder / "human-scores" / f"{LP}.{gold}.seg.score", rows)
    lines(folder / "human-scores" / f"{LP}.mqm.sys.score", ["sysA\t-0.4", "sysB\t-9.5"])
    lines(folder / "human-scores" / "zh-en.mqm.seg.score", ["nobody\t1"])
    (folder / "metric-scores" / LP).mkdir(parents=True)
    for metric, per_system in METRICS.items():
        rows = [f"{s}\t{'None' if v is None else v}" for s, vs in per_system.items() for v in vs]
        lines(folder / "metric-scores" / LP / f"{metric}.score", rows)
    lines(folder / "metric-scores" / LP / "COMET-refA.domain.score", ["news sysA 1"])
    lines(folder / "documents" / f"{LP}.docs", [f"{d} doc{i // 2}" for i, d in enumerate(DOMAINS)])
    return folder


@pytest.fixture
def mtme(tmp_path: Path) -> Path:
    return write_mtme(tmp_path)


def _expected(systems: list[str], ref: str = "refA", items: range = range(5)) -> pd.DataFrame:
    rows = []
    for i in items:
        for system in sorted(systems):
            outputs = {**SYSTEMS, **REFERENCES}[system]
            row: dict[str, object] = {
                "item_id": str(i + 1),
                "system": system,
                "source": SOURCES[i],
                "references": [REFERENCES[ref][i]],
                "candidate": outputs[i],
            }
            for gold, per_system in GOLD.items():
                value = per_system.get(system, [None] * 5)[i]
                row[f"human_{gold}"] = math.nan if value is None else value
            rows.append(row)
    return pd.DataFrame(rows)


def _check(df: pd.DataFrame, expected: pd.DataFrame) -> None:
    """Every cell of the tidy columns, NaN where the file says None or has no score."""
    assert len(df) == len(expected)
    for column in expected.columns:
        got, want = df[column].tolist(), expected[column].tolist()
        for k, (a, b) in enumerate(zip(got, want, strict=True)):
            if isinstance(b, float) and math.isnan(b):
                assert isinstance(a, float) and math.isnan(a), (column, k, a)
            else:
                assert a == b, (column, k, a, b)


def test_the_table_is_what_the_files_say(mtme: Path) -> None:
    df = load_mtme(str(mtme), LP, outliers=OUT)
    _check(df, _expected(["sysA", "sysB", "sysC"]))
    assert sorted(c for c in df.columns if c.startswith("human_")) == ["human_da-sqm", "human_mqm"]
    # None and an unrated system are missing values, never zeros
    assert df["human_mqm"].isna().sum() == 2 and df["human_da-sqm"].isna().sum() == 8
    assert df.loc[0, "origin"] == f"{mtme}/system-outputs/{LP}/sysA.txt:1"
    assert f"{mtme}/sources/{LP}.txt" in df.attrs["data_files"]


def test_the_reference_is_the_named_one_or_the_first(
    mtme: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        first = load_mtme(str(mtme), LP)
    assert set(first["references"].map(tuple)) == {(r,) for r in REFERENCES["refA"]}
    assert "references refA, refB: using refA" in caplog.text
    named = load_mtme(str(mtme), LP, ref="refB", outliers=OUT)
    _check(named, _expected(["sysA", "sysB", "sysC"], ref="refB"))
    with pytest.raises(ConfigError, match=r"data\.ref 'refC' is not a reference of en-de; choose"):
        load_mtme(str(mtme), LP, ref="refC")
    # a single reference is taken without a word
    for path in (mtme / "references" / f"{LP}.refB.txt", mtme / "system-outputs" / LP / "refB.txt"):
        path.unlink()
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        # (refB's metric scores name a system that is gone now)
        only = load_mtme(str(mtme), LP, gold="da-sqm", outliers=OUT, metric_scores="none")
    assert "using" not in caplog.text
    assert set(only["system"]) == {"sysA", "sysB", "sysC"}


def test_human_references_as_systems(mtme: Path) -> None:
    df = load_mtme(str(mtme), LP, include_human=True, outliers=OUT)
    # the chosen reference is never a system: it would be scored against itself
    _check(df, _expected(["sysA", "sysB", "sysC", "refB"]))
    other = load_mtme(str(mtme), LP, ref="refB", include_human=True, outliers=OUT)
    _check(other, _expected(["sysA", "sysB", "sysC", "refA"], ref="refB"))


def test_outliers(mtme: Path) -> None:
    everyone = ["sysA", "sysB", "sysC", "synthetic_ref"]
    _check(load_mtme(str(mtme), LP), _expected(everyone))
    _check(load_mtme(str(mtme), LP, outliers=[]), _expected(everyone))
    _check(load_mtme(str(mtme), LP, outliers=["synthetic_ref"]), _expected(everyone[:3]))
    _check(
        load_mtme(str(mtme), LP, outliers=["sysB"]), _expected(["sysA", "sysC", "synthetic_ref"])
    )


def test_gold_domain_and_max_items(mtme: Path) -> None:
    mqm = load_mtme(str(mtme), LP, gold="mqm")
    assert [c for c in mqm.columns if c.startswith("human_")] == ["human_mqm"]
    assert "human_mqm" in load_mtme(str(mtme), LP, gold=["mqm", "da-sqm"])
    with pytest.raises(ConfigError, match=r"data\.gold 'esa'.*en-de: da-sqm, mqm"):
        load_mtme(str(mtme), LP, gold="esa")
    systems = ["sysA", "sysB", "sysC"]
    _check(load_mtme(str(mtme), LP, max_items=2, outliers=OUT), _expected(systems, items=range(2)))
    _check(
        load_mtme(str(mtme), LP, domain="speech", outliers=OUT),
        _expected(systems, items=range(2, 4)),
    )
    _check(
        load_mtme(str(mtme), LP, domain="news", max_items=1, outliers=OUT),
        _expected(systems, items=range(1)),
    )
    with pytest.raises(ConfigError, match=r"data\.domain 'law'.*news, social, speech"):
        load_mtme(str(mtme), LP, domain="law")


def test_jsonl_files_and_missing_translations(mtme: Path) -> None:
    (mtme / "sources" / f"{LP}.txt").unlink()
    (mtme / "sources" / f"{LP}.jsonl").write_text(
        "".join(json.dumps({"source": s}) + "\n" for s in SOURCES), encoding="utf-8"
    )
    sys_a = mtme / "system-outputs" / LP / "sysA.txt"
    sys_a.unlink()
    rows: list[dict[str, str | None]] = [{"hypothesis": h} for h in SYSTEMS["sysA"]]
    rows[1]["hypothesis"] = None
    sys_a.with_suffix(".jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8"
    )
    # where a name has both, the .txt file is the one read
    (mtme / "system-outputs" / LP / "sysC.jsonl").write_text(
        "".join(json.dumps({"hypothesis": "not read"}) + "\n" for _ in SOURCES), encoding="utf-8"
    )
    sys_b = mtme / "system-outputs" / LP / "sysB.txt"
    sys_b.write_text(sys_b.read_text().replace("Zug sieben.", "[No translation supplied]  "))
    df = load_mtme(str(mtme), LP, outliers=OUT)
    expected = _expected(["sysA", "sysB", "sysC"])
    expected.loc[(expected.system == "sysA") & (expected.item_id == "2"), "candidate"] = ""
    expected.loc[(expected.system == "sysB") & (expected.item_id == "4"), "candidate"] = ""
    _check(df, expected)


def _rewrite(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def _append(path: Path, text: str) -> None:
    path.write_text(path.read_text(encoding="utf-8") + text, encoding="utf-8")


def _drop_last_line(path: Path) -> None:
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:-1]))


MQM = f"human-scores/{LP}.mqm.seg.score"
COMET = f"metric-scores/{LP}/COMET-refA.seg.score"
SYS = f"metric-scores/{LP}/COMET-refA.sys.score"
# (what is broken, how, the file the error names, what the error line says)
BAD: dict[str, tuple[Callable[[Path], object], str, str]] = {
    "missing folder": (shutil.rmtree, ".", "test-set folder not found"),
    "unknown pair": (lambda m: None, "sources/fr-de.txt", "no source file for language pair"),
    "short output": (
        lambda m: _drop_last_line(m / "system-outputs" / LP / "sysC.txt"),
        f"system-outputs/{LP}/sysC.txt, row 5",
        "4 lines but the source file",
    ),
    "long reference": (
        lambda m: _append(m / "references" / f"{LP}.refA.txt", "one line too many\n"),
        f"references/{LP}.refA.txt, row 6",
        "6 lines but the source file",
    ),
    "non-numeric score": (
        lambda m: _rewrite(m / MQM, "sysC\t-2.0", "sysC\tbad"),
        f"{MQM}, row 13",
        "expected a number or None, got 'bad'",
    ),
    "unknown system": (
        lambda m: _rewrite(m / MQM, "sysC\t", "sysX\t"),
        f"{MQM}, row 11",
        "system 'sysX' has no output file in system-outputs/",
    ),
    "too few scores": (
        lambda m: _rewrite(m / MQM, "sysC\t-3.0\n", ""),
        f"{MQM}, row 14",
        "4 scores for system 'sysC' but the source has 5 segments",
    ),
    "too many scores": (
        lambda m: _rewrite(m / MQM, "sysC\t-3.0\n", "sysC\t-3.0\nsysC\t1\n"),
        f"{MQM}, row 16",
        "more than 5 scores for system 'sysC'",
    ),
    "three fields": (
        lambda m: _rewrite(m / MQM, "sysB\t-6.0", "news sysB\t-6.0"),
        f"{MQM}, row 7",
        "expected 'SYSTEM SCORE' (2 fields), found 3",
    ),
    "metric file: short": (
        lambda m: _rewrite(m / COMET, "sysC\t0.6\n", ""),
        f"{COMET}, row 14",
        "4 scores for system 'sysC' but the source has 5 segments",
    ),
    "metric file: unknown system": (
        lambda m: _rewrite(m / COMET, "sysC\t", "sysX\t"),
        f"{COMET}, row 11",
        "system 'sysX' has no output file",
    ),
    "metric file: not a number": (
        lambda m: _rewrite(m / COMET, "sysA\t0.8", "sysA\tn/a"),
        f"{COMET}, row 2",
        "expected a number or None, got 'n/a'",
    ),
    "system file: two scores": (
        lambda m: _rewrite(m / SYS, "sysB\t0.1\n", "sysB\t0.1\nsysB\t0.2\n"),
        f"{SYS}, row 3",
        "two scores for system 'sysB'",
    ),
}


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_bad_input_names_the_file_and_line(mtme: Path, case: str) -> None:
    breaks, where, what = BAD[case]
    breaks(mtme)
    with pytest.raises(DataError) as err:
        load_mtme(str(mtme), "fr-de" if case == "unknown pair" else LP)
    message = str(err.value)
    assert message.startswith(f"{mtme / where}: "), message
    assert what in message, message
    assert "\n" not in message


def test_the_download_folder_is_not_a_test_set(mtme: Path) -> None:
    with pytest.raises(DataError, match=r"it holds the test sets wmt23: set data\.path to one"):
        load_mtme(str(mtme.parent), LP)


FAST = ["report.print_tables=false", "correlation.ci=false", "report.progress=false"]


@pytest.mark.slow
@pytest.mark.parametrize(
    "case", ["missing folder", "short output", "non-numeric score", "unknown system"]
)
def test_bad_input_on_the_command_line(mtme: Path, tmp_path: Path, case: str) -> None:
    """Exit code 2 and one ``paraeval: error:`` line naming the file and line, no traceback."""
    breaks, where, what = BAD[case]
    breaks(mtme)
    args = ["data=mtme", f"data.path={mtme}", f"data.lp={LP}", "metrics=[bleu,chrf]"]
    proc = run_cli([*args, "tracking=none", f"hydra.run.dir={tmp_path}/o", *FAST], tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr + proc.stdout
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("paraeval: error:")]
    assert len(errors) == 1, proc.stderr[-2000:]
    assert errors[0].startswith(f"paraeval: error: {mtme / where}: "), errors[0]
    assert what in errors[0], errors[0]


@pytest.mark.slow
def test_end_to_end(mtme: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = run_cli(
        [
            "data=mtme",
            f"data.path={mtme}",
            f"data.lp={LP}",
            "data.outliers=[synthetic_ref]",
            "metrics=[bleu,chrf]",
            "tracking=none",
            f"hydra.run.dir={out}",
            f"cache.dir={tmp_path / 'cache'}",
            *FAST,
        ],
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    segments = pd.read_parquet(out / "segment_scores.parquet")
    assert len(segments) == 15 and set(segments["system"]) == {"sysA", "sysB", "sysC"}
    corr = pd.read_csv(out / "correlations.csv")
    assert set(corr["aspect"]) == {"human_mqm", "human_da-sqm"}
    assert {"bleu", "chrf"} <= set(corr["metric"])
    assert corr["value"].notna().any()
