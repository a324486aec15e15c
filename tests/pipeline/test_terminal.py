"""The terminal summary and the short lines on stderr: 100 columns, names from data escaped."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import pandas as pd
import pytest

import paraeval
from paraeval.pipeline import terminal
from paraeval.pipeline.data.load import demo_path
from paraeval.pipeline.report.summary import render_summary
from tests.pipeline.helpers import assert_aligned, table_rows

CHEAP = {
    "correlation": {"n_resamples": 50, "significance": {"n_resamples": 50}},
    "compare": {"n_bootstrap": 50, "n_ar": 100},
    "report": {"progress": False, "max_rows": 12},
    "cache": {"enabled": False},
    "alpha_curve": {"enabled": False},
}
ESC_NAME = "evil\x1b]0;pwned\x07\x1b[2J"


def _frame(n_systems: int = 30, n_items: int = 6) -> pd.DataFrame:
    rows = []
    for i in range(n_items):
        src = f"the quick brown fox number {i} jumps over the lazy dog"
        for k in range(n_systems):
            name = ESC_NAME if k == 0 else f"a-rather-long-system-name-{k:02d}-with-a-suffix"
            words = src.split()
            cand = " ".join(words[: 3 + (k + i) % 8]) if k % 3 else src
            rows.append(
                {
                    "item_id": f"i{i}",
                    "system": name,
                    "source": src,
                    "references": [src.replace("quick", "fast")],
                    "candidate": cand,
                    "human_meaning": float((k * 7 + i * 3) % 11),
                }
            )
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def summary(tmp_path_factory: pytest.TempPathFactory) -> str:
    ev = paraeval.evaluate(_frame(), ["bleu", "chrf", "ter", "self_bleu"], **CHEAP)
    out = tmp_path_factory.mktemp("terminal")
    return render_summary(ev, out, "abc123", "sqlite:////x/mlflow.db")


def test_summary_fits_100_columns_and_caps_rows(summary: str) -> None:
    lines = summary.splitlines()
    assert max(len(line) for line in lines[:-3]) <= 100, max(lines, key=len)
    # 30 systems, max_rows 12: the tables say how many they left out
    assert summary.count("… 18 more") == 2  # systems and comparison
    assert "Systems (30, corpus level)" in summary
    assert "ter ↓" in summary


def test_names_from_data_cannot_drive_the_terminal(summary: str) -> None:
    assert "\x1b" not in summary and "\x07" not in summary
    assert "evil\\x1b]0;pwned\\x07\\x1b[2J" in summary


def test_printable_escapes_every_control_character() -> None:
    assert terminal.printable("a\x00b\x1b[31mc\td\n\u202e") == "a\\x00b\\x1b[31mc\td\\x0a\\u202e"
    assert terminal.printable("naïve ↓ ok") == "naïve ↓ ok"


def test_log_records_are_one_short_escaped_entry() -> None:
    record = logging.LogRecord(
        "paraeval", logging.WARNING, __file__, 1, "system %s: " + "word " * 40, (ESC_NAME,), None
    )
    text = terminal.TerminalFormatter(wrap=True).format(record)
    assert text.startswith("paraeval: warning: system evil\\x1b]0;pwned")
    assert "\x1b" not in text
    assert all(len(line) <= 100 for line in text.splitlines())
    assert all(line.startswith("  ") for line in text.splitlines()[1:])
    assert terminal.FileOnly().filter(record)
    record.file_only = True
    assert not terminal.FileOnly().filter(record)


def test_log_records_are_one_line_each_off_a_terminal() -> None:
    record = logging.LogRecord(
        "paraeval.x", logging.WARNING, __file__, 1, "first\nsecond " + "word " * 40, None, None
    )
    # pytest's stderr is not a terminal: the default is not to wrap
    text = terminal.TerminalFormatter().format(record)
    assert "\n" not in text and text.startswith("paraeval: warning: first second word")
    assert len(text) > 100


def test_the_terminal_shows_paraevals_records_only() -> None:
    def record(name: str) -> logging.LogRecord:
        return logging.LogRecord(name, logging.WARNING, __file__, 1, "m", None, None)

    shown = terminal.FileOnly()
    assert shown.filter(record("paraeval")) and shown.filter(record("paraeval.pipeline.x"))
    assert not shown.filter(record("py.warnings"))  # captured Python warnings
    assert not shown.filter(record("mlflow.data"))
    assert not shown.filter(record("paraevalish"))


def test_status_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    stream = io.StringIO()
    status = terminal.Status(enabled=True, stream=stream)
    with status.stage("quick"):
        pass
    assert stream.getvalue() == ""  # under a second: no line
    monkeypatch.setattr(terminal, "STATUS_AFTER_S", 0.0)
    with status.stage("slow"):
        pass
    assert stream.getvalue().startswith("paraeval: slow: 0.0 s")
    with pytest.raises(RuntimeError), status.stage("failing"):
        raise RuntimeError("boom")
    assert "failing" not in stream.getvalue()  # its error line says it
    quiet = io.StringIO()
    with terminal.Status(enabled=False, stream=quiet).stage("slow"):
        pass
    assert quiet.getvalue() == ""


def test_no_ratings_names_the_columns_it_saw(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    frame = _frame(n_systems=3).rename(columns={"human_meaning": "score"})
    with caplog.at_level(logging.WARNING, logger="paraeval"):
        ev = paraeval.evaluate(frame, ["bleu"], **{**CHEAP, "compare": {"enabled": False}})
    assert ev.correlations.empty
    hits = [r.getMessage() for r in caplog.records if "no human ratings" in r.getMessage()]
    assert len(hits) == 1
    assert "'score'" in hits[0] and "data.columns.human={aspect: column}" in hits[0]
    mapped = paraeval.evaluate(
        frame,
        ["bleu"],
        overrides=["data.columns.human={meaning: score}"],
        **{**CHEAP, "compare": {"enabled": False}},
    )
    assert set(mapped.correlations["aspect"]) == {"human_meaning"}
    assert mapped.systems["human_meaning"].notna().all()


def test_every_table_has_its_columns_aligned(summary: str, tmp_path: Path) -> None:
    # systems, correlations, comparison: every value of a column ends at the same character
    assert assert_aligned(summary) == 3
    # the demo's baseline (copy) differs from no system significantly: a row without marks
    ev = paraeval.evaluate(demo_path(), ["bleu", "chrf", "ter"], **CHEAP)
    demo = render_summary(ev, tmp_path, None, None)
    rows = table_rows(demo)["System comparison"]
    marked = ["†" in " ".join(c[2] for c in r) for r in rows]
    assert any(marked) and not all(marked), rows
    assert assert_aligned(demo) == 3
