"""Bad input through the CLI: one line naming file/row/column, exit code != 0, no traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from tests.pipeline.helpers import run_cli

FAST = ["tracking=none", "report.print_tables=false", "correlation.ci=false", "metrics=[bleu,chrf]"]


def _table(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def _rows(n: int = 4) -> list[dict[str, object]]:
    return [
        {
            "item_id": f"i{i}",
            "system": s,
            "source": f"the source {i}",
            "references": [f"a ref {i}"],
            "candidate": f"cand {s} {i}",
            "human_meaning": float(i % 3),
        }
        for i in range(n)
        for s in ("a", "b", "c")
    ]


def _assert_user_error(proc, *fragments: str) -> None:  # type: ignore[no-untyped-def]
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("paraeval: error:")]
    assert len(lines) == 1, proc.stderr[-2000:]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.mark.slow
def test_missing_column(tmp_path: Path) -> None:
    rows = _rows()
    for r in rows:
        del r["candidate"]
    path = _table(tmp_path / "t.jsonl", rows)
    proc = run_cli(
        ["data=table", f"data.path={path}", f"hydra.run.dir={tmp_path}/o", *FAST], tmp_path
    )
    _assert_user_error(proc, str(path), "column 'candidate'", "not found")


@pytest.mark.slow
def test_item_without_reference(tmp_path: Path) -> None:
    rows = _rows()
    rows[4]["references"] = []
    path = _table(tmp_path / "t.jsonl", rows)
    proc = run_cli(
        ["data=table", f"data.path={path}", f"hydra.run.dir={tmp_path}/o", *FAST], tmp_path
    )
    _assert_user_error(proc, str(path), "row 5", "column 'references'", "needs one")


@pytest.mark.slow
def test_mismatched_line_counts(tmp_path: Path) -> None:
    (tmp_path / "src.txt").write_text("a b c\nd e f\ng h i\n", encoding="utf-8")
    (tmp_path / "ref.txt").write_text("a b x\nd e x\ng h x\n", encoding="utf-8")
    (tmp_path / "a.txt").write_text("a b\nd e\n", encoding="utf-8")
    proc = run_cli(
        [
            "data=text",
            f"data.source={tmp_path}/src.txt",
            f"data.references=[{tmp_path}/ref.txt]",
            f"data.systems={{a: {tmp_path}/a.txt}}",
            f"hydra.run.dir={tmp_path}/o",
            *FAST,
        ],
        tmp_path,
    )
    _assert_user_error(proc, f"{tmp_path}/a.txt", "row 3", "2 lines", "has 3")


@pytest.mark.slow
@pytest.mark.parametrize("alpha", ["1.5", "-0.1"])
def test_alpha_outside_unit_interval(tmp_path: Path, alpha: str) -> None:
    proc = run_cli(
        [f"metrics.ibleu.alpha={alpha}", "tracking=none", f"hydra.run.dir={tmp_path}/o"], tmp_path
    )
    _assert_user_error(proc, "alpha must be in [0, 1]", alpha)


def test_unknown_metric_id(tmp_path: Path) -> None:
    proc = run_cli(
        ["metrics=[bleu,blue]", "tracking=none", f"hydra.run.dir={tmp_path}/o"], tmp_path
    )
    _assert_user_error(proc, "unknown metrics option 'blue'")


@pytest.mark.slow
def test_unreadable_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.tsv"
    proc = run_cli(
        ["data=table", f"data.path={missing}", f"hydra.run.dir={tmp_path}/o", *FAST], tmp_path
    )
    _assert_user_error(proc, str(missing), "not found")


@pytest.mark.slow
def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.tsv"
    path.write_bytes(
        "item_id\tsystem\tsource\treferences\tcandidate\n1\ta\tcaf\xe9\tx\ty\n".encode("latin-1")
    )
    proc = run_cli(
        ["data=table", f"data.path={path}", f"hydra.run.dir={tmp_path}/o", *FAST], tmp_path
    )
    _assert_user_error(proc, str(path), "row 2", "UTF-8")


@pytest.mark.slow
def test_non_numeric_human_score(tmp_path: Path) -> None:
    rows = _rows()
    rows[2]["human_meaning"] = "good"
    path = _table(tmp_path / "t.jsonl", rows)
    proc = run_cli(
        ["data=table", f"data.path={path}", f"hydra.run.dir={tmp_path}/o", *FAST], tmp_path
    )
    _assert_user_error(proc, str(path), "row 3", "column 'human_meaning'", "expected a number")


@pytest.mark.slow
def test_duplicate_item_system(tmp_path: Path) -> None:
    rows = _rows()
    rows.append(dict(rows[0]))
    path = _table(tmp_path / "t.jsonl", rows)
    proc = run_cli(
        ["data=table", f"data.path={path}", f"hydra.run.dir={tmp_path}/o", *FAST], tmp_path
    )
    _assert_user_error(proc, str(path), "duplicate (item_id, system)")


@pytest.mark.slow
def test_empty_candidate_is_scored_and_warned(tmp_path: Path) -> None:
    rows = _rows()
    rows[1]["candidate"] = ""
    rows[5]["candidate"] = "   "
    path = _table(tmp_path / "t.jsonl", rows)
    proc = run_cli(
        ["data=table", f"data.path={path}", f"hydra.run.dir={tmp_path}/o", *FAST], tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "2 empty or whitespace-only candidates" in proc.stdout + proc.stderr
    import pandas as pd

    seg = pd.read_parquet(tmp_path / "o" / "segment_scores.parquet")
    assert seg["bleu"].notna().all()
    assert seg.loc[seg.candidate == "", "bleu"].iloc[0] == 0.0


# --------------------------------------------------------------------------- config checked first
def _one_error_line(proc) -> str:  # type: ignore[no-untyped-def]
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("paraeval: error:")]
    assert len(lines) == 1, proc.stderr[-2000:]
    return lines[0]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("override", "fragments"),
    [
        ("compare.n_bootstrap=-5", ["compare.n_bootstrap must be a positive integer", "-5"]),
        ("compare.confidence=1.5", ["compare.confidence must be a number in (0, 1)", "1.5"]),
        ("report.max_rows=abc", ["report.max_rows must be an integer", "'abc'"]),
        ("report.max_rows=0", ["report.max_rows must be a positive integer"]),
        ("cache.enabled=maybe", ["cache.enabled must be true or false", "'maybe'"]),
        ("report.progress=1", ["report.progress must be true or false"]),
        ("compare.enabled=yes", ["compare.enabled must be true or false"]),
        ("+metric.ibleu.alpha=0.5", ["unknown setting 'metric'", "did you mean 'metrics'"]),
        (
            "+metrics.ibleu.alhpa=0.5",
            ["metrics.ibleu: unknown setting(s) ['alhpa']", "'metrics.ibleu.alpha'"],
        ),
        ("+report.maxrows=3", ["unknown setting 'report.maxrows'", "'report.max_rows'"]),
        ("+cache.dri=/tmp/x", ["unknown setting 'cache.dri'", "'cache.dir'"]),
        ("metric.ibleu.alpha=0.5", ["unknown setting 'metric'", "did you mean 'metrics'"]),
        (
            "metrics.ibleu.alhpa=0.5",
            ["'metrics.ibleu.alhpa'", "did you mean 'metrics.ibleu.alpha'"],
        ),
        ("report.maxrows=3", ["'report.maxrows'", "did you mean 'report.max_rows'"]),
    ],
)
def test_config_mistakes_are_one_line_before_loading(
    tmp_path: Path, override: str, fragments: list[str]
) -> None:
    """The data path does not exist: a message about the config proves nothing was loaded."""
    proc = run_cli(
        [
            "data=table",
            f"data.path={tmp_path / 'not_there.jsonl'}",
            "metrics=[bleu,ibleu]",
            "tracking=none",
            f"hydra.run.dir={tmp_path / 'out'}",
            override,
        ],
        tmp_path,
    )
    line = _one_error_line(proc)
    for fragment in fragments:
        assert fragment in line, line
    assert "+" not in line.partition("did you mean")[2]  # never advice to add a key with '+'
    assert not (tmp_path / "out" / "segment_scores.parquet").exists()


@pytest.mark.slow
def test_baseline_checked_after_loading_before_scoring(tmp_path: Path) -> None:
    path = _table(tmp_path / "t.jsonl", _rows())
    cache = tmp_path / "cache"
    proc = run_cli(
        [
            "data=table",
            f"data.path={path}",
            *FAST,
            f"cache.dir={cache}",
            "compare.baseline=nosuch",
            f"hydra.run.dir={tmp_path / 'out'}",
        ],
        tmp_path,
    )
    line = _one_error_line(proc)
    assert "compare.baseline 'nosuch' is not a system; choose from ['a', 'b', 'c']" in line
    assert "scoring" not in proc.stderr  # no progress bar: nothing was scored
    assert not cache.exists()  # nothing was scored, so nothing was cached


@pytest.mark.slow
def test_user_config_dir_adds_data_metric_and_tracking_options(tmp_path: Path) -> None:
    mine = tmp_path / "myconf"
    for group in ("data", "metrics", "tracking"):
        (mine / group).mkdir(parents=True)
    path = _table(tmp_path / "t.jsonl", _rows())
    (mine / "data" / "mydata.yaml").write_text(
        f"_target_: paraeval.pipeline.data.load.load_table\nname: mydata\npath: {path}\n",
        encoding="utf-8",
    )
    (mine / "metrics" / "chrf_pp.yaml").write_text(
        "chrf:\n  _target_: paraeval.metrics.sacre.CHRF\n  word_order: 2\n", encoding="utf-8"
    )
    (mine / "tracking" / "mystore.yaml").write_text(
        "_target_: paraeval.pipeline.tracking.trackers.NoTracker\nenabled: false\nuri: null\n"
        f"store_dir: {tmp_path / 'store'}\nexperiment: mine\nrun_name: null\n",
        encoding="utf-8",
    )
    out = tmp_path / "out"
    proc = run_cli(
        [
            "--config-dir",
            str(mine),
            "data=mydata",
            "metrics=[bleu,chrf_pp]",
            "tracking=mystore",
            "tracking.experiment=mine2",
            "report.print_tables=false",
            "correlation.ci=false",
            f"hydra.run.dir={out}",
        ],
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    info = json.loads((out / "run_info.json").read_text())
    # the user's data config was used; the dataset is named after its file
    assert info["params"]["data.name"] == "mydata" and info["data_name"] == path.name
    assert info["tracking"]["experiment"] == "mine2"
    assert info["params"]["metrics.chrf.word_order"] == "2"
    signatures = pd.read_csv(out / "signatures.csv").set_index("column")["signature"]
    assert "nw:2" in signatures["chrf"]


# --------------------------------------------------------------------------- hostile names
HOSTILE_SYSTEMS = ["good", "evil\x1b]0;pwned\x07\x1b[2J", "nul\x00sys", "rtl\u202eabc"]
HUMAN_TRAVERSAL = "human_/../../../X"
METRIC_ABSOLUTE = "metric_/etc/passwd"


def _hostile_rows() -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for i in range(6):
        for k, system in enumerate(HOSTILE_SYSTEMS):
            rows.append(
                {
                    "item_id": f"i{i}",
                    "system": system,
                    "source": f"the source {i}",
                    "references": [f"a ref {i} x"],
                    "candidate": f"cand {k} {i} \x1b[31mred\x1b[0m",
                    HUMAN_TRAVERSAL: float((i * k) % 5),
                    METRIC_ABSOLUTE: float(i + k),
                    "human_ok": float(i % 3 + k),
                }
            )
    return rows


@pytest.mark.slow
def test_hostile_names_never_reach_paths_keys_or_the_terminal_raw(tmp_path: Path) -> None:
    import re

    from mlflow.tracking import MlflowClient

    data = _table(tmp_path / "h.jsonl", _hostile_rows())
    cwd = tmp_path / "deep" / "er" / "cwd"
    cwd.mkdir(parents=True)
    out = cwd / "out"
    store = tmp_path / "store"
    before = {p for p in tmp_path.rglob("*")}
    proc = run_cli(
        [
            "data=table",
            f"data.path={data}",
            "metrics=[bleu,chrf]",
            f"tracking.store_dir={store}",
            f"cache.dir={tmp_path / 'cache'}",
            f"hydra.run.dir={out}",
        ],
        cwd,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    # nothing written outside the output folder, the store and the cache
    created = {p for p in tmp_path.rglob("*")} - before
    allowed = (out, store, tmp_path / "cache")
    stray = [p for p in created if not any(p == a or a in p.parents for a in allowed)]
    assert stray == [], stray
    assert not (tmp_path / "X").exists() and not (tmp_path / "deep" / "X").exists()
    plots = sorted(p.name for p in (out / "plots").iterdir())
    assert all(re.fullmatch(r"[A-Za-z0-9_.\-]+", name) for name in plots), plots
    assert "scatter_bleu_human_ok.png" in plots  # safe names unchanged
    # the traversal and absolute-path columns got a file each, distinct and inside plots/
    odd = [
        n for n in plots if n.startswith("scatter_bleu_human_") and n != "scatter_bleu_human_ok.png"
    ]
    assert len(odd) == 1 and ".." not in odd[0]
    # no control character reaches the terminal or the log; the names are shown escaped
    log_text = (out / "paraeval.log").read_text(encoding="utf-8")
    for text in (proc.stdout, proc.stderr.replace("\r", ""), log_text):
        assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e]", text)
    assert "evil\\x1b]0;pwned\\x07\\x1b[2J" in proc.stdout
    assert "rtl\\u202eabc" in proc.stdout
    # the MLflow run finished, with safe keys
    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    exp = client.get_experiment_by_name("paraeval")
    assert exp is not None
    runs = client.search_runs([exp.experiment_id])
    assert len(runs) == 1 + len(HOSTILE_SYSTEMS)
    assert {r.info.status for r in runs} == {"FINISHED"}
    keys = [k for r in runs for k in (*r.data.metrics, *r.data.tags)]
    assert not [k for k in keys if ".." in k or k.startswith("/") or "\x1b" in k]
    systems = {r.data.tags.get("paraeval.system") for r in runs} - {None}
    assert systems == set(HOSTILE_SYSTEMS)  # tag values keep the data as it is


# --------------------------------------------------------------------------- silently wrong input
def _load_error(path: Path, **options: object) -> str:
    from paraeval.pipeline.data.load import load_table
    from paraeval.pipeline.errors import DataError

    with pytest.raises(DataError) as info:
        load_table(str(path), **options)  # type: ignore[arg-type]
    message = str(info.value)
    assert "\n" not in message
    return message


def _annotated(path: Path, rows: list[dict[str, object]]) -> Path:
    base = {"source": "the source", "references": ["a ref"], "human_meaning": 3.0}
    return _table(path, [{**base, **r} for r in rows])


def test_annotator_rows_disagreeing_on_the_candidate(tmp_path: Path) -> None:
    path = _annotated(
        tmp_path / "ann.jsonl",
        [
            {"item_id": "i1", "system": "a", "candidate": "first text", "worker": "w1"},
            {"item_id": "i1", "system": "a", "candidate": "other text", "worker": "w2"},
        ],
    )
    message = _load_error(path, annotator="worker")
    assert message == (
        f"{path}, row 1, column 'candidate': the annotator rows of (item_id, system) = (i1, a) "
        f"disagree on the candidate text: 'first text' here, 'other text' at {path}:2; every "
        "row of one item and system must carry the same text"
    )


def test_same_annotator_rating_twice(tmp_path: Path) -> None:
    path = _annotated(
        tmp_path / "ann.jsonl",
        [
            {"item_id": "i1", "system": "a", "candidate": "c", "worker": "w1"},
            {"item_id": "i1", "system": "a", "candidate": "c", "worker": "w2"},
            {"item_id": "i1", "system": "a", "candidate": "c", "worker": "w1"},
        ],
    )
    message = _load_error(path, annotator="worker")
    assert message == (
        f"{path}, row 1, column 'worker': annotator 'w1' rates (item_id, system) = (i1, a) "
        f"twice, also at {path}:3; keep one rating per annotator"
    )


def test_jsonl_line_without_the_candidate_key(tmp_path: Path) -> None:
    rows = _rows()
    del rows[4]["candidate"]
    path = _table(tmp_path / "t.jsonl", rows)
    message = _load_error(path)
    assert message.startswith(
        f"{path}, row 5, column 'candidate': this line has no 'candidate' key"
    )
    # an empty candidate is still a candidate (scored, with a warning)
    rows[4]["candidate"] = ""
    from paraeval.pipeline.data.load import load_table

    assert len(load_table(str(_table(tmp_path / "ok.jsonl", rows)))) == len(rows)


def test_csv_with_a_duplicated_header(tmp_path: Path) -> None:
    path = tmp_path / "dup.csv"
    path.write_text(
        "item_id,system,source,candidate,references,candidate\ni1,a,src,cand one,ref,cand two\n",
        encoding="utf-8",
    )
    message = _load_error(path)
    assert message == (
        f"{path}, row 1, column 'candidate': the header names column 'candidate' twice "
        "(fields 4 and 6); rename one"
    )


def test_item_ids_differing_in_leading_zeros(tmp_path: Path) -> None:
    """JSON gives the number 1 where a spreadsheet export wrote '01'."""
    rows = [
        {"item_id": "01", "system": "a", "source": "s", "references": ["r"], "candidate": "x"},
        {"item_id": "02", "system": "a", "source": "t", "references": ["r"], "candidate": "y"},
        {"item_id": 1, "system": "b", "source": "s", "references": ["r"], "candidate": "z"},
    ]
    path = _table(tmp_path / "ids.jsonl", rows)
    message = _load_error(path)
    assert message == (
        f"{path}, row 3, column 'item_id': item ids '01' ({path}:1) and '1' ({path}:3) differ "
        "only in leading zeros and would be two items; write every id the same way"
    )


def test_tsv_line_break_inside_quotes(tmp_path: Path) -> None:
    path = tmp_path / "t.tsv"
    path.write_text(
        "item_id\tsystem\tsource\treferences\tcandidate\n"
        'i1\ta\tsrc\tref\t"hello\n'
        'world"\n'
        "i2\ta\tsrc2\tref\tfine\n",
        encoding="utf-8",
    )
    message = _load_error(path)
    assert message.startswith(
        f"{path}, row 3, column 'system': 1 field but the header has 5; a line break inside a "
        "quoted field?"
    )


def test_csv_row_with_missing_fields(tmp_path: Path) -> None:
    path = tmp_path / "short.csv"
    path.write_text(
        'item_id,system,source,references,candidate\ni1,a,src,ref,"multi\nline ok"\ni2,a,src\n',
        encoding="utf-8",
    )
    message = _load_error(path)
    assert message == f"{path}, row 4, column 'references': 3 fields but the header has 5"


@pytest.mark.slow
def test_silently_wrong_input_through_the_cli_is_one_line(tmp_path: Path) -> None:
    rows = _rows()
    del rows[2]["candidate"]
    path = _table(tmp_path / "t.jsonl", rows)
    proc = run_cli(
        ["data=table", f"data.path={path}", *FAST, f"hydra.run.dir={tmp_path / 'out'}"], tmp_path
    )
    line = _one_error_line(proc)
    assert f"{path}, row 3, column 'candidate': this line has no 'candidate' key" in line
