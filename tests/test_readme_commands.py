"""Every ``paraeval``, ``paraeval-log`` and ``paraeval-score`` command in the ```bash blocks of
README.md and docs/*.md runs as written, one test per block, its commands in order, as a user
would type them.

They run in one folder holding the files the documents name, made from the demo (``my.tsv``,
``scores.csv``, ``src.txt`` ...) or written in mt-metrics-eval's layout (``mt-metrics-eval-v2/``),
and the files the documents define (``# file: NAME.py`` blocks, see tests/test_docs.py). A
command gets cheap metric and resampling settings for the keys it does
not set itself, and an output folder and an MLflow store in a temporary folder unless it names
them; the documents' server address is pointed at a real ``mlflow server`` started for the test.
Commands of other programs in those blocks (make, pip, python scripts, mlflow) install or set up
and are not run here; blocks marked ``<!-- not run here: ... -->`` need a cluster, a GPU or a
remote server and are not run either. The ParaBank-Eval command needs the research data of
../shared/data (or PARAEVAL_SHARED_DATA) and skips with that reason where it is absent, as every
test on that data does."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from paraeval.pipeline.data.load import demo_path
from tests.pipeline.helpers import cli_env, relog, run_cli
from tests.pipeline.test_mlflow_server import server  # noqa: F401  (the fixture)
from tests.pipeline.test_mtme import write_mtme
from tests.test_docs import Block, Command, all_blocks, run_blocks, run_commands

BLOCKS = [b for b in run_blocks("bash") if run_commands(b)]
DOCUMENTED_SERVER = "http://127.0.0.1:5000"
# settings a command gets unless it sets the key itself
CHEAP = {
    "metrics": "metrics=[bleu,ibleu]",
    "correlation.n_resamples": "correlation.n_resamples=50",
    "correlation.significance.n_resamples": "correlation.significance.n_resamples=50",
    "compare.n_bootstrap": "compare.n_bootstrap=50",
    "compare.n_ar": "compare.n_ar=100",
    "report.progress": "report.progress=false",
}
# arguments after which paraeval runs nothing: it prints and exits
PRINTS = {"--help": "Examples:", "--version": "paraeval 0.1.0", "--cfg": "seed:"}


def _key(arg: str) -> str:
    return arg.partition("=")[0].lstrip("+~")


def _n_jobs(args: list[str]) -> int:
    """Jobs of a multirun: the product of the numbers of comma-separated values."""
    counts = [
        len(value.split(","))
        for value in (a.partition("=")[2] for a in args if "=" in a)
        if value[:1] not in "[{" and "," in value
    ]
    return math.prod(counts)


def test_jobs_of_a_multirun_are_counted_over_every_swept_key() -> None:
    assert _n_jobs(["normalize=minmax,zscore", "metrics=[bleu,chrf]"]) == 2
    assert _n_jobs(["hydra/launcher=parallel", "a=0.5,0.9", "b=1,2,3"]) == 6


def _files(work: Path) -> None:
    """The files the documents' commands name, made from the demo, and the files they define."""
    demo = pd.read_json(demo_path(), lines=True, dtype={"item_id": str})
    table = demo.assign(references=[json.dumps(r) for r in demo["references"]])
    table.to_csv(work / "my.tsv", sep="\t", index=False)
    ratings = table.drop(columns=["human_fluency"]).rename(columns={"human_meaning": "score"})
    ratings.to_csv(work / "scores.csv", index=False)
    items = demo.drop_duplicates("item_id").set_index("item_id")
    (work / "src.txt").write_text("\n".join(items["source"]) + "\n")
    for k in (0, 1):
        refs = [r[k] if len(r) > k else "" for r in items["references"]]
        (work / f"ref{k + 1}.txt").write_text("\n".join(refs) + "\n")
    for name, system in (("a", "strong"), ("b", "weak")):
        rows = demo[demo["system"] == system].set_index("item_id").loc[items.index]
        (work / f"{name}.txt").write_text("\n".join(rows["candidate"]) + "\n")
        (work / f"{name}.meaning.txt").write_text(
            "\n".join(f"{v:g}" for v in rows["human_meaning"]) + "\n"
        )
    # a small test set in mt-metrics-eval's layout, where its download would be unpacked
    write_mtme(work / "mt-metrics-eval-v2")
    for b in all_blocks():
        if b.file_name is not None:
            (work / b.file_name).write_text(b.code, encoding="utf-8")


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("docs")
    _files(folder)
    return folder


def _run_paraeval(command: Command, work: Path, address: str, shared_data: Path | None) -> None:
    args = command.args
    where = f"{command.id}: paraeval {' '.join(args)}"
    printed = next((PRINTS[a] for a in args if a in PRINTS), None)
    if printed is not None:
        proc = run_cli(args, work, timeout=300, **command.env)
        assert proc.returncode == 0, (where, proc.stderr[-2000:])
        assert printed in proc.stdout, where
        return
    multirun = "-m" in args
    keys = {_key(a) for a in args}
    extra = [v for k, v in CHEAP.items() if k not in keys]
    folder_key = f"hydra.{'sweep' if multirun else 'run'}.dir"
    out = work / f"out-{command.id.replace('/', '-').replace(':', '-')}"
    if folder_key in keys:
        out = work / next(a for a in args if _key(a) == folder_key).partition("=")[2]
    else:
        extra.append(f"{folder_key}={out}")
    extra.append(f"cache.dir={work / 'cache'}")
    if not any(k.startswith("tracking") for k in keys):
        extra.append(f"tracking.store_dir={work / 'store'}")
    # the documents' server address is that of the server started for this test
    args = [a.replace(DOCUMENTED_SERVER, address) for a in args]
    env = dict(command.env)
    if shared_data is not None:
        env["PARAEVAL_SHARED_DATA"] = str(shared_data)
    proc = run_cli(args + extra, work, timeout=900, **env)
    assert proc.returncode == 0, (where, proc.stderr[-3000:])
    assert "Traceback" not in proc.stderr, (where, proc.stderr)
    assert "error" not in proc.stderr.lower(), (where, proc.stderr)
    runs = sorted(p.parent for p in out.rglob("system_scores.csv"))
    assert runs, (where, proc.stdout[-2000:])
    if multirun:
        assert len(runs) == _n_jobs(args), where
    first = runs[0]
    assert (first / "report.html").is_file(), where
    if "data.human" in keys or "data.columns.human" in keys:
        corr = pd.read_csv(first / "correlations.csv")
        assert set(corr["aspect"]) == {"human_meaning"} and corr["value"].notna().any(), where
    if "report.format" in keys:
        assert {p.suffix for p in (first / "plots").iterdir()} == {".svg"}, where
    if "tracking.uri" in keys:
        assert f"MLflow store: {address}" in proc.stdout, where
    if "tracking" in keys:
        assert "MLflow store" not in proc.stdout, where
    if "report.print_tables" in keys:
        assert proc.stdout.startswith("Outputs:"), where
    if "alpha_curve.levels" in keys:
        curve = pd.read_csv(first / "alpha_curve.csv")
        assert set(curve["level"]) == {"segment", "item", "system"}, where
    for key in keys:
        if key.startswith("metrics.") and key.endswith("._target_"):  # a metric of one's own
            column = key.split(".")[1]
            assert column in pd.read_csv(first / "system_scores.csv").columns, where


def _run_relog(command: Command, work: Path) -> None:
    where = f"{command.id}: paraeval-log {' '.join(command.args)}"
    proc = relog(*command.args, cwd=work)
    assert proc.returncode == 0, (where, proc.stderr[-2000:])
    # the positional arguments: every option of paraeval-log takes a value
    folders, args = [], iter(command.args)
    for arg in args:
        if arg.startswith("-"):
            if "=" not in arg:
                next(args, None)
        else:
            folders.append(arg)
    assert folders and all((work / f / "run_info.json").is_file() for f in folders), where
    for folder in folders:
        assert f"{folder}: logged as run" in proc.stdout, (where, proc.stdout)
    again = relog(*command.args, cwd=work)  # idempotent: reported, not logged twice
    assert again.returncode == 0 and "already logged as run" in again.stdout, where


def _run_score(command: Command, work: Path) -> None:
    """``paraeval-score ARGS`` as a user runs it (the module, as the console script does)."""
    where = f"{command.id}: paraeval-score {' '.join(command.args)}"
    proc = subprocess.run(
        [sys.executable, "-m", "paraeval.pipeline.cli.score", *command.args],
        cwd=work,
        env=cli_env(**command.env),
        input="",
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0 and proc.stderr == "", (where, proc.stderr[-2000:])
    header, *lines = proc.stdout.splitlines()
    assert header.split() == ["system", "metric", "score", "signature"], where
    # each score's signature starts with its metric's id
    rows = [line.split() for line in lines]
    assert rows and all(r[3].startswith(f"{r[1]}|") for r in rows), (where, proc.stdout)


@pytest.mark.slow
@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_document_commands_run(
    block: Block,
    work: Path,
    server: str,  # noqa: F811
    shared_data_or_none: Path | None,
) -> None:
    commands = run_commands(block)
    if shared_data_or_none is None and any("data=parabank" in c.args for c in commands):
        pytest.skip("ParaBank-Eval is absent (../shared/data or PARAEVAL_SHARED_DATA)")
    for command in commands:
        if command.program == "paraeval-log":
            _run_relog(command, work)
        elif command.program == "paraeval-score":
            _run_score(command, work)
        else:
            _run_paraeval(command, work, server, shared_data_or_none)
