"""The bad-input matrix through the CLI, one test per row (the rows not in test_bad_input.py).

Every user mistake ends with exactly one ``paraeval: error: ...`` line on stderr and exit code 2,
never a traceback; every input that can be evaluated is evaluated, with one warning line where the
result needs explaining (a NaN correlation, a missing rating, an unreachable tracking server).

The CLI runs are independent, so one module fixture starts them all at once (a few at a time) and
each test reads its own run: the import cost of a run (~5 s) is paid in parallel.

Decision on ``NaN`` written as a human score: the text ``NaN`` (any case) is a missing rating, like
an empty cell, and the loader says so in one warning line that names the first such cell; a float
NaN in JSONL or Parquet is the ordinary missing value of those formats and passes silently.
"""

from __future__ import annotations

import csv
import errno
import json
import os
import re
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import sacrebleu
from sacrebleu.metrics import BLEU as SacreBLEU

from tests.pipeline.helpers import REPO, cli_env, correlation_settings, run_cli

FAST = [
    "tracking=none",
    "report.print_tables=false",
    "correlation.ci=false",
    "compare.enabled=false",
    "alpha_curve.enabled=false",
]
ERROR_PREFIX = "paraeval: error: "
WORDS = [
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "lazy",
    "dog",
    "river",
    "bank",
    "money",
    "stone",
    "light",
    "green",
    "house",
    "small",
    "large",
    "old",
    "new",
    "city",
    "road",
    "tree",
    "bird",
    "sings",
    "morning",
    "evening",
    "rain",
    "falls",
    "slowly",
    "people",
    "walk",
    "home",
]
CONSTANT = "nothing to see here"  # shares no word with WORDS: BLEU 0 against every reference
LONG_TOKENS = 10_000


@dataclass
class Run:
    proc: subprocess.CompletedProcess[str]
    seconds: float
    out: Path

    @property
    def text(self) -> str:
        return self.proc.stdout + self.proc.stderr


# --------------------------------------------------------------------------- input files
def _sentence(rng: np.random.Generator, lo: int = 4, hi: int = 9) -> str:
    return " ".join(rng.choice(WORDS, size=int(rng.integers(lo, hi))))


def _rows(
    n_items: int = 8, systems: tuple[str, ...] = ("a", "b", "c"), seed: int = 0
) -> list[dict]:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n_items):
        source = _sentence(rng)
        refs = [_sentence(rng)]
        for s in systems:
            rows.append(
                {
                    "item_id": f"i{i}",
                    "system": s,
                    "source": source,
                    "references": refs,
                    "candidate": _sentence(rng),
                    "human_meaning": float(rng.integers(1, 6)),
                }
            )
    return rows


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


EXTERNAL_MODULE = '''
"""A metric class outside paraeval; importing it leaves a marker file."""
from pathlib import Path

from paraeval.metrics.sacre import BLEU

Path(__file__).with_name("imported.marker").write_text("imported")


class Echo(BLEU):
    name = "echo"
'''


def _specs(work: Path) -> dict[str, tuple[list[str], dict[str, str]]]:
    """name -> (CLI arguments, extra environment). Builds the input files on the way."""

    def table(name: str, path: Path, metrics: str = "[bleu,chrf]", *extra: str) -> list[str]:
        return [
            "data=table",
            f"data.path={path}",
            f"metrics={metrics}",
            f"cache.dir={work / ('cache_' + name)}",
            f"hydra.run.dir={work / ('out_' + name)}",
            *FAST,
            *extra,
        ]

    specs: dict[str, tuple[list[str], dict[str, str]]] = {}
    base = _jsonl(work / "base.jsonl", _rows())

    rows = _rows()
    rows[1]["candidate"] = " \t "
    rows[5]["candidate"] = "\u3000"  # ideographic space
    specs["whitespace"] = (table("whitespace", _jsonl(work / "ws.jsonl", rows)), {})

    rows = _rows()
    extra = {"i0": ["quick brown fox", "lazy dog sings", "old city road"], "i2": ["rain falls"]}
    for r in rows:
        r["references"] = r["references"] + extra.get(r["item_id"], [])
    specs["ragged"] = (table("ragged", _jsonl(work / "ragged.jsonl", rows)), {})

    # line-aligned files: an empty line in the second reference file = one reference fewer
    (work / "src.txt").write_text("a b c d\ne f g h\ni j k l\n", encoding="utf-8")
    (work / "ref1.txt").write_text("a b c x\ne f g x\ni j k x\n", encoding="utf-8")
    (work / "ref2.txt").write_text("a b y d\n\ni j y l\n", encoding="utf-8")
    (work / "sa.txt").write_text("a b c d\ne f x h\ni x k l\n", encoding="utf-8")
    (work / "sb.txt").write_text("a x c d\ne f g h\nx j k l\n", encoding="utf-8")
    specs["ragged_text"] = (
        [
            "data=text",
            f"data.source={work}/src.txt",
            f"data.references=[{work}/ref1.txt,{work}/ref2.txt]",
            f"data.systems={{a: {work}/sa.txt, b: {work}/sb.txt}}",
            "metrics=[bleu,chrf]",
            f"cache.dir={work}/cache_ragged_text",
            f"hydra.run.dir={work}/out_ragged_text",
            *FAST,
        ],
        {},
    )

    rows = _rows()
    with (work / "nan.csv").open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["item_id", "system", "source", "references", "candidate", "human_meaning"])
        for k, r in enumerate(rows):
            score = {2: "NaN", 7: "nan"}.get(k, str(r["human_meaning"]))
            writer.writerow(
                [
                    r["item_id"],
                    r["system"],
                    r["source"],
                    json.dumps(r["references"]),
                    r["candidate"],
                    score,
                ]
            )
    specs["nan_score"] = (table("nan_score", work / "nan.csv"), {})

    rows = _rows()
    long_text = " ".join(["word"] * LONG_TOKENS)
    # item i0: a 10,000-token candidate (a) and a 300-token one (b): both beyond the encoder's
    # limit, so after truncation they are the same input and get the same cosine
    rows[0]["candidate"] = long_text
    rows[1]["candidate"] = " ".join(["word"] * 300)
    for r in rows:
        if r["item_id"] == "i1":
            r["references"] = [long_text]
    specs["long_line"] = (
        table("long_line", _jsonl(work / "long.jsonl", rows), "[bleu,chrf,cosine]"),
        {},
    )

    rows = _rows(systems=("a", "b", "const"))
    for r in rows:
        # one broken system that says the same thing for every item, and three items where every
        # system says it: there the metric is constant across systems
        if r["system"] == "const" or r["item_id"] in ("i0", "i1", "i2"):
            r["candidate"] = CONSTANT
        r["metric_flat"] = 0.5  # a precomputed metric that never varies
    specs["constant"] = (table("constant", _jsonl(work / "const.jsonl", rows)), {})

    specs["single_system"] = (
        table("single_system", _jsonl(work / "single.jsonl", _rows(n_items=10, systems=("only",)))),
        {},
    )
    specs["unknown_level"] = (
        table("unknown_level", base, "[bleu,chrf]", "correlation.levels=[segment,corpus]"),
        {},
    )
    specs["unknown_coefficient"] = (
        table("unknown_coefficient", base, "[bleu,chrf]", "correlation.coefficients=[pearson,tau]"),
        {},
    )
    specs["significance_level"] = (
        table("significance_level", base, "[bleu,chrf]", "correlation.significance.level=corpus"),
        {},
    )
    specs["seed"] = (table("seed", base, "[bleu,chrf]", "seed=abc"), {})
    (work / "empty_nltk").mkdir()
    specs["wordnet_missing"] = (
        table("wordnet_missing", base, "[meteor]", f"metrics.meteor.wordnet_dir={work}/empty_nltk"),
        {},
    )
    specs["encoder_missing"] = (
        table("encoder_missing", base, "[cosine]", f"metrics.cosine.model={work}/nope"),
        {},
    )
    specs["tracking_down"] = (
        [a for a in table("tracking_down", base) if a != "tracking=none"]
        + ["tracking=server", f"tracking.uri=http://127.0.0.1:{_closed_port()}"],
        {},
    )
    (work / "latin1.csv").write_bytes(
        "item_id,system,source,references,candidate\ni0,a,ok,a ref,caf\xe9\n".encode("latin-1")
    )
    specs["not_utf8_column"] = (table("not_utf8_column", work / "latin1.csv"), {})
    (work / "a_file").write_text("not a folder\n", encoding="utf-8")
    specs["out_under_file"] = (
        [a for a in table("x", base) if not a.startswith("hydra.run.dir=")]
        + [f"hydra.run.dir={work}/a_file/out"],
        {},
    )
    specs["out_in_proc"] = (
        [a for a in table("y", base) if not a.startswith("hydra.run.dir=")]
        + ["hydra.run.dir=/proc/paraeval-reliability-test"],
        {},
    )
    specs["target_os_system"] = (
        table("evil", base, "[bleu]", "+metrics.evil._target_=os.system"),
        {},
    )
    specs["target_os_system_opt_in"] = (
        table(
            "evil2",
            base,
            "[bleu]",
            "+metrics.evil._target_=os.system",
            "+allow_external_metrics=true",
        ),
        {},
    )
    for name, opt_in in (("external_refused", False), ("external_allowed", True)):
        ext = work / name
        ext.mkdir()
        (ext / "paraeval_ext_metric.py").write_text(EXTERNAL_MODULE, encoding="utf-8")
        args = table(name, base, "[bleu]", "+metrics.echo._target_=paraeval_ext_metric.Echo")
        specs[name] = (
            args + (["+allow_external_metrics=true"] if opt_in else []),
            {"PYTHONPATH": str(ext)},
        )
    return specs


def _run(args: list[str], cwd: Path, env: dict[str, str], out: Path) -> Run:
    start = time.perf_counter()
    proc = run_cli(args, cwd, **env)
    return Run(proc, time.perf_counter() - start, out)


# conftest.py guards the test process only; the CLI runs in subprocesses, which get the same
# guard through a sitecustomize module that also writes every attempt to a file the tests read
NET_GUARD = """
import os, socket

_log = os.environ.get("PARAEVAL_NET_LOG")
_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _allowed(address):
    if isinstance(address, (str, bytes)):
        return True
    host = str(address[0]) if isinstance(address, tuple) and address else ""
    return host in ("localhost", "::1") or host.startswith("127.")


def _deny(address):
    if _log:
        with open(_log, "a", encoding="utf-8") as fh:
            fh.write(f"{os.getpid()} {address!r}\\n")
    raise OSError(f"network access blocked in tests: {address!r}")


def _connect(self, address):
    return _real_connect(self, address) if _allowed(address) else _deny(address)


def _connect_ex(self, address):
    return _real_connect_ex(self, address) if _allowed(address) else _deny(address)


socket.socket.connect = _connect
socket.socket.connect_ex = _connect_ex
"""


def _guard_env(work: Path) -> dict[str, str]:
    guard = work / "net_guard"
    guard.mkdir(exist_ok=True)
    (guard / "sitecustomize.py").write_text(NET_GUARD, encoding="utf-8")
    return {"PYTHONPATH": str(guard), "PARAEVAL_NET_LOG": str(work / "network_attempts.log")}


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("reliability")


@pytest.fixture(scope="module")
def runs(work: Path) -> dict[str, Run]:
    specs = _specs(work)
    guard = _guard_env(work)

    def env_for(extra: dict[str, str]) -> dict[str, str]:
        env = {**guard, **extra}
        if "PYTHONPATH" in extra:
            env["PYTHONPATH"] = os.pathsep.join([guard["PYTHONPATH"], extra["PYTHONPATH"]])
        return env

    with ThreadPoolExecutor(max_workers=min(6, max(2, os.cpu_count() or 2))) as pool:
        futures = {
            name: pool.submit(_run, args, work, env_for(env), work / f"out_{name}")
            for name, (args, env) in specs.items()
        }
        return {name: f.result() for name, f in futures.items()}


@pytest.mark.slow
def test_no_run_reached_for_the_network(runs: dict[str, Run], work: Path) -> None:
    log = work / "network_attempts.log"
    assert not log.exists() or log.read_text() == "", log.read_text()
    # the guard is live in a subprocess: a connection to a documentation address is recorded
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import socket\ntry:\n socket.create_connection(('192.0.2.1', 80), timeout=1)\n"
            "except OSError as e:\n print(e)",
        ],
        env=cli_env(**_guard_env(work)),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "network access blocked" in probe.stdout, probe.stdout + probe.stderr
    assert "192.0.2.1" in log.read_text()


# --------------------------------------------------------------------------- assertions
def _error_line(run: Run, *fragments: str) -> str:
    """The single error line of a failed run; no traceback anywhere."""
    assert run.proc.returncode == 2, run.text[-3000:]
    assert "Traceback" not in run.text, run.text[-3000:]
    lines = [ln for ln in run.proc.stderr.splitlines() if ln.startswith(ERROR_PREFIX)]
    assert len(lines) == 1, run.proc.stderr[-3000:]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    print(f"MATRIX | {lines[0]} | exit {run.proc.returncode}")
    return lines[0]


def _warnings(run: Run) -> list[str]:
    """Messages of the WARNING records in the run's log file; the terminal shows each as one
    ``paraeval: warning:`` entry on stderr and nothing on stdout."""
    log_file = run.out / "paraeval.log"
    text = log_file.read_text() if log_file.is_file() else ""
    out = re.findall(r"^\[[^]]+\]\[[^]]+\]\[WARNING\] - (.*)$", text, flags=re.M)
    assert run.proc.stderr.count("paraeval: warning: ") == len(out), run.proc.stderr
    assert "warning" not in run.proc.stdout.lower(), run.proc.stdout
    return out


def _ok(run: Run, status: int = 0) -> None:
    assert run.proc.returncode == status, run.text[-3000:]
    assert "Traceback" not in run.text, run.text[-3000:]
    for name in ("segment_scores.parquet", "system_scores.csv", "correlations.csv"):
        assert (run.out / name).is_file(), name


def _one_warning(run: Run, *fragments: str) -> str:
    hits = [w for w in _warnings(run) if all(f in w for f in fragments)]
    assert len(hits) == 1, _warnings(run)
    print(f"MATRIX | {hits[0]} | exit {run.proc.returncode}")
    return hits[0]


# --------------------------------------------------------------------------- evaluated inputs
def test_whitespace_only_candidates_are_scored_and_warned(runs: dict[str, Run]) -> None:
    run = runs["whitespace"]
    _ok(run)
    _one_warning(run, "2 empty or whitespace-only candidates (scored as given)", "'b': 1")
    seg = pd.read_parquet(run.out / "segment_scores.parquet")
    blank = seg[seg["candidate"].str.strip() == ""]
    assert len(blank) == 2
    # nothing of a blank candidate matches a reference: the lowest score, a number, not NaN
    assert (blank[["bleu", "chrf"]] == 0.0).all().all()
    assert seg[["bleu", "chrf"]].notna().all().all()


def test_ragged_references_work(runs: dict[str, Run]) -> None:
    run = runs["ragged"]
    _ok(run)
    seg = pd.read_parquet(run.out / "segment_scores.parquet")
    counts = {len(r) for r in seg["references"]}
    assert counts >= {1, 2, 4}, counts
    for row in seg.itertuples():
        expected = sacrebleu.sentence_bleu(row.candidate, list(row.references)).score
        assert row.bleu == pytest.approx(expected, abs=1e-9)
        expected = sacrebleu.sentence_chrf(row.candidate, list(row.references)).score
        assert row.chrf == pytest.approx(expected, abs=1e-9)
    systems = pd.read_csv(run.out / "system_scores.csv").set_index("system")
    for system, sub in seg.groupby("system"):
        refs = [list(r) for r in sub["references"]]
        width = max(map(len, refs))
        streams = [[r[k] if k < len(r) else None for r in refs] for k in range(width)]
        corpus = SacreBLEU().corpus_score(sub["candidate"].tolist(), streams).score
        assert systems.loc[system, "bleu"] == pytest.approx(corpus, abs=1e-9)


def test_ragged_references_from_text_files(runs: dict[str, Run]) -> None:
    run = runs["ragged_text"]
    _ok(run)
    seg = pd.read_parquet(run.out / "segment_scores.parquet")
    by_item = seg.groupby("item_id")["references"].first().map(list).to_dict()
    assert [len(by_item[k]) for k in sorted(by_item)] == [2, 1, 2]
    row = seg[(seg.item_id == sorted(by_item)[1]) & (seg.system == "a")].iloc[0]
    assert row.bleu == pytest.approx(sacrebleu.sentence_bleu("e f x h", ["e f g x"]).score)


def test_nan_text_as_human_score_is_a_missing_rating(runs: dict[str, Run]) -> None:
    run = runs["nan_score"]
    _ok(run)
    _one_warning(run, "human_meaning", "2 cells", "'NaN'", "missing", "nan.csv", "row 4")
    seg = pd.read_parquet(run.out / "segment_scores.parquet")
    assert seg["human_meaning"].isna().sum() == 2
    corr = pd.read_csv(run.out / "correlations.csv")
    segment = corr[(corr.level == "segment") & (corr.metric == "bleu")]
    assert (segment["n"] == len(seg) - 2).all() and (segment["n_dropped"] == 2).all()


def test_ten_thousand_token_line(runs: dict[str, Run]) -> None:
    run = runs["long_line"]
    _ok(run)
    print(f"10,000-token line run: {run.seconds:.1f} s")
    assert run.seconds < 240
    seg = pd.read_parquet(run.out / "segment_scores.parquet").set_index(["item_id", "system"])
    assert seg[["bleu", "chrf", "cosine"]].notna().all().all()
    assert len(seg.loc[("i0", "a"), "candidate"].split()) == LONG_TOKENS
    # the encoder truncates: 10,000 and 300 repetitions of one word are the same truncated input
    assert seg.loc[("i0", "a"), "cosine"] == pytest.approx(seg.loc[("i0", "b"), "cosine"], abs=1e-6)


def test_constant_system_gives_nan_correlation_reported(runs: dict[str, Run]) -> None:
    run = runs["constant"]
    _ok(run)
    seg = pd.read_parquet(run.out / "segment_scores.parquet")
    assert (seg.loc[seg.system == "const", "bleu"] == 0.0).all()
    corr = pd.read_csv(run.out / "correlations.csv")
    flat = corr[corr.metric == "metric_flat"]
    assert len(flat) and flat["value"].isna().all()
    # item level: an item whose chrF or whose rating is the same for every system has no
    # correlation of its own; i0..i2 (every system gave the same text) are among them
    per_item = seg.groupby("item_id").agg(
        chrf=("chrf", "nunique"), human=("human_meaning", "nunique")
    )
    undefined = set(per_item.index[(per_item.chrf == 1) | (per_item.human == 1)])
    assert {"i0", "i1", "i2"} <= undefined
    item = corr[(corr.level == "item") & (corr.metric == "chrf")]
    assert (item["n_dropped"] == len(undefined)).all()
    assert (item["n"] == 8 - len(undefined)).all()
    assert item["value"].notna().all()
    _one_warning(run, "correlations are undefined (NaN", "n_dropped")
    _one_warning(run, "item level", "items whose own correlation is undefined", "of 8 items")


def test_single_system(runs: dict[str, Run]) -> None:
    run = runs["single_system"]
    _ok(run)
    _one_warning(run, "system-level correlation needs at least 2 systems, the data has 1")
    assert len(pd.read_csv(run.out / "system_scores.csv")) == 1
    corr = pd.read_csv(run.out / "correlations.csv")
    system = corr[corr.level == "system"]
    assert len(system) and system["value"].isna().all() and (system["n"] == 1).all()
    segment = corr[(corr.level == "segment") & corr.metric.isin(["bleu", "chrf"])]
    assert len(segment) and segment["value"].notna().all() and (segment["n"] == 10).all()


# --------------------------------------------------------------------------- user errors
def _no_scoring(run: Run) -> None:
    # a configuration typo is answered before the (possibly long) scoring pass
    log_file = run.out / "paraeval.log"
    logged = log_file.read_text() if log_file.is_file() else ""
    assert "score cache" not in logged and "score: " not in run.proc.stderr


def test_unknown_correlation_level(runs: dict[str, Run]) -> None:
    _error_line(runs["unknown_level"], "correlation.levels", "unknown level 'corpus'", "segment")
    _no_scoring(runs["unknown_level"])


def test_unknown_correlation_coefficient(runs: dict[str, Run]) -> None:
    run = runs["unknown_coefficient"]
    _error_line(run, "correlation.coefficients", "unknown coefficient 'tau'", "kendall_b")
    _no_scoring(run)


def test_unknown_significance_level(runs: dict[str, Run]) -> None:
    run = runs["significance_level"]
    _error_line(run, "correlation.significance.level must be one of", "got 'corpus'")
    _no_scoring(run)


def test_seed_not_an_integer(runs: dict[str, Run]) -> None:
    _error_line(runs["seed"], "seed must be an integer, got 'abc'")
    _no_scoring(runs["seed"])


@pytest.mark.parametrize(
    ("setting", "fragment"),
    [
        ({"unit": "rows"}, "correlation.unit must be one of ['items', 'systems', 'both', 'auto']"),
        ({"item_nan": "drop"}, "correlation.item_nan must be one of ['skip', 'zero']"),
        ({"confidence": 95}, "correlation.confidence must be in (0, 1), got 95"),
        ({"n_resamples": 0}, "correlation.n_resamples must be a positive integer, got 0"),
        ({"levels": ["segment", "corpus"]}, "unknown level 'corpus'"),
        ({"coefficients": "tau"}, "unknown coefficient 'tau'"),
        (
            {"significance": {"enabled": True, "coefficient": "tau"}},
            "correlation.significance.coefficient must be one of",
        ),
        (
            {"significance": {"enabled": True, "alpha": 5}},
            "correlation.significance.alpha must be in [0, 1], got 5",
        ),
    ],
)
def test_correlation_settings_checked_before_scoring(setting: dict, fragment: str) -> None:
    from paraeval.pipeline.errors import ConfigError

    with pytest.raises(ConfigError) as info:
        correlation_settings(setting)
    assert fragment in str(info.value)
    assert "\n" not in str(info.value)


def test_correlation_settings_defaults_pass() -> None:
    for name in ("default", "full", "wmt"):
        settings = correlation_settings(preset=name)  # a preset file holds only its differences
        assert settings.levels and settings.coefficients
    assert correlation_settings({"levels": "system"}).levels == ("system",)


def test_not_utf8_names_row_and_column(runs: dict[str, Run]) -> None:
    run = runs["not_utf8_column"]
    _error_line(
        run, "latin1.csv, row 2, column 'candidate'", "byte 0xe9", "re-save the file as UTF-8"
    )


def test_wordnet_missing(runs: dict[str, Run]) -> None:
    run = runs["wordnet_missing"]
    _error_line(run, "WordNet 3.0 not found", "empty_nltk", "setup_wordnet.py")
    _no_scoring(run)


def test_encoder_model_path_missing(runs: dict[str, Run]) -> None:
    run = runs["encoder_missing"]
    _error_line(run, "encoder model path", "/nope' does not exist")
    _no_scoring(run)


def test_unreachable_tracking_server(runs: dict[str, Run]) -> None:
    run = runs["tracking_down"]
    _ok(run, status=3)  # outputs written, not logged: never a silent 0
    line = _one_warning(run, "is unreachable", "outputs kept in", "paraeval-log")
    assert str(run.out) in line
    assert (run.out / "run_info.json").is_file()
    assert run.seconds < 120  # no minutes of client retries


@pytest.mark.parametrize("name", ["out_under_file", "out_in_proc"])
def test_output_directory_not_writable(runs: dict[str, Run], name: str) -> None:
    run = runs[name]
    _error_line(run, "output directory", "is not writable", "hydra.run.dir")
    _no_scoring(run)


def test_target_outside_project_refused(runs: dict[str, Run]) -> None:
    _error_line(
        runs["target_os_system"],
        "metrics.evil._target_ 'os.system' is outside paraeval's metrics package",
        "allow_external_metrics=true",
    )


def test_target_opt_in_still_needs_a_metric_class(runs: dict[str, Run]) -> None:
    _error_line(runs["target_os_system_opt_in"], "'os.system' is not a paraeval metric class")


def test_external_metric_module_is_not_imported_without_opt_in(runs: dict[str, Run]) -> None:
    run = runs["external_refused"]
    _error_line(run, "metrics.echo._target_ 'paraeval_ext_metric.Echo'", "outside")
    marker = run.out.parent / "external_refused" / "imported.marker"
    assert not marker.exists()  # refused before import: no code of the module ran


def test_external_metric_runs_with_opt_in(runs: dict[str, Run]) -> None:
    run = runs["external_allowed"]
    _ok(run)
    assert (run.out.parent / "external_allowed" / "imported.marker").is_file()
    seg = pd.read_parquet(run.out / "segment_scores.parquet")
    assert np.allclose(seg["echo"], seg["bleu"])


# --------------------------------------------------------------------------- atomic outputs
def test_finished_run_leaves_no_temporary_files(runs: dict[str, Run]) -> None:
    run = runs["ragged"]
    _ok(run)
    leftovers = [p for p in run.out.rglob("*") if p.name.endswith(".tmp")]
    assert leftovers == []
    umask = os.umask(0)
    os.umask(umask)
    expected = 0o666 & ~umask
    files = [p for p in run.out.rglob("*") if p.is_file() and ".hydra" not in p.parts]
    assert any(p.suffix == ".png" for p in files)
    for p in files:
        if p.suffix == ".log":
            continue
        assert stat.S_IMODE(p.stat().st_mode) == expected, p


def _failing_writer(payload: bytes) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        path.write_bytes(payload)  # half a file, then the disk is full
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    return write


def test_failed_write_keeps_the_previous_file_and_no_temporary(tmp_path: Path) -> None:
    from paraeval.pipeline.errors import OutputError
    from paraeval.pipeline.files import atomic_write, write_parquet

    target = tmp_path / "segment_scores.parquet"
    good = pd.DataFrame({"item_id": ["1", "2"], "bleu": [1.0, 2.0]})
    write_parquet(good, target)
    before = target.read_bytes()
    with pytest.raises(OutputError, match="No space left on device") as info:
        atomic_write(target, _failing_writer(before[: len(before) // 2]))
    assert str(info.value).startswith(f"cannot write {target} (No space left on device)")
    assert info.value.errno == errno.ENOSPC and "\n" not in str(info.value)
    assert target.read_bytes() == before
    pd.testing.assert_frame_equal(pd.read_parquet(target), good)
    assert [p.name for p in tmp_path.iterdir()] == [target.name]

    fresh = tmp_path / "never.csv"
    with pytest.raises(OutputError, match=r"never\.csv"):
        atomic_write(fresh, _failing_writer(b"item_id,bl"))
    assert not fresh.exists()
    assert [p.name for p in tmp_path.iterdir()] == [target.name]


def test_plots_are_written_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer that dies half-way leaves the earlier file whole, and no temporary file."""
    from matplotlib.figure import Figure

    from paraeval.pipeline.report.plots import new_figure, save_figure

    fig = new_figure((4, 3))
    fig.add_subplot().plot([0, 1], [1, 0])
    path = tmp_path / "plots" / "p.png"
    save_figure(fig, path, dpi=50)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    before = path.read_bytes()

    def broken(self: Figure, fname: object, **kw: object) -> None:
        Path(str(fname)).write_bytes(before[:100])
        raise RuntimeError("renderer died")

    monkeypatch.setattr(Figure, "savefig", broken)
    with pytest.raises(RuntimeError, match="renderer died"):
        save_figure(fig, path, dpi=50)
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == ["p.png"]


@pytest.mark.slow
@pytest.mark.parametrize("multirun", [False, True])
def test_unwritable_current_directory_without_an_output_override(multirun: bool) -> None:
    """Hydra's default output folder is relative to the current directory; /proc takes no new
    folder, even for root. One line that names the setting, no traceback."""
    env = dict(os.environ, PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1")
    args = [sys.executable, "-m", "paraeval", *(["-m"] if multirun else []), "metrics=[bleu]"]
    proc = subprocess.run(args, cwd="/proc", capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith(ERROR_PREFIX)]
    key = "hydra.sweep.dir" if multirun else "hydra.run.dir"
    folder = "/proc/multirun" if multirun else "/proc/outputs"
    assert len(lines) == 1 and folder in lines[0] and key in lines[0], proc.stderr[-2000:]
