"""Every ``paraeval`` command in the README's shell blocks runs as written: on files made from the
demo, with cheap metric and resampling settings added for the keys a command does not set, an
output folder and a store in a temporary folder, and the README's server address pointed at a
real ``mlflow server`` started for the test."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pandas as pd
import pytest

from paraeval.pipeline.data.load import demo_path
from tests.pipeline.helpers import run_cli
from tests.pipeline.test_mlflow_server import server  # noqa: F401  (the fixture)

README = Path(__file__).resolve().parents[1] / "README.md"
BASH = re.compile(r"^```bash[ \t]*\n(.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)
# settings a command gets unless it sets the key itself
CHEAP = {
    "metrics": "metrics=[bleu,ibleu]",
    "correlation.n_resamples": "correlation.n_resamples=50",
    "correlation.significance.n_resamples": "correlation.significance.n_resamples=50",
    "compare.n_bootstrap": "compare.n_bootstrap=50",
    "compare.n_ar": "compare.n_ar=100",
    "report.progress": "report.progress=false",
}


def readme_commands(text: str) -> list[list[str]]:
    """The ``paraeval`` command lines of the ```bash blocks: continuations joined, comments
    dropped, split as a shell would."""
    commands = []
    for block in BASH.findall(text):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words and words[0] == "paraeval":
                commands.append(words[1:])
    return commands


COMMANDS = readme_commands(README.read_text(encoding="utf-8"))


def test_the_extractor_joins_continuations_and_drops_comments() -> None:
    text = "```bash\nparaeval a=1 \\\n   'b=[x, y]'   # note\nmake run\n```\n"
    assert readme_commands(text) == [["a=1", "b=[x, y]"]]
    assert len(COMMANDS) >= 10


def _key(arg: str) -> str:
    return arg.partition("=")[0].lstrip("+~")


def _files(work: Path) -> None:
    """The files the README's commands name, made from the demo."""
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


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("readme")
    _files(folder)
    return folder


@pytest.mark.parametrize("args", COMMANDS, ids=[" ".join(c)[:60] for c in COMMANDS])
def test_readme_command_runs(
    args: list[str],
    work: Path,
    server: str,  # noqa: F811
    shared_data_or_none: Path | None,
) -> None:
    if args[:1] in (["--help"], ["--version"]):
        proc = run_cli(args, work)
        assert proc.returncode == 0, proc.stderr[-2000:]
        expected = "Examples:" if args[0] == "--help" else "paraeval 0.1.0"
        assert expected in proc.stdout
        return
    assert shared_data_or_none is not None or "data=parabank" not in args, "no shared data"
    n = COMMANDS.index(args)
    multirun = "-m" in args
    keys = {_key(a) for a in args}
    extra = [v for k, v in CHEAP.items() if k not in keys]
    if "metrics.ibleu.alpha" in keys and "metrics" not in keys:
        extra[0] = "metrics=[bleu,ibleu]"
    out = work / f"out{n}"
    extra.append(f"hydra.{'sweep' if multirun else 'run'}.dir={out}")
    extra.append(f"cache.dir={work / 'cache'}")
    if not any(k.startswith("tracking") for k in keys):
        extra.append(f"tracking.store_dir={work / 'store'}")
    # the README's server address is that of the server started for this test
    args = [a.replace("http://127.0.0.1:5000", server) for a in args]
    env = {"PARAEVAL_SHARED_DATA": str(shared_data_or_none)} if shared_data_or_none else {}
    proc = run_cli(args + extra, work, timeout=900, **env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "error" not in proc.stderr.lower(), proc.stderr
    runs = sorted(p.parent for p in out.rglob("system_scores.csv"))
    assert runs, proc.stdout[-2000:]
    if multirun:
        assert len(runs) == len(args[args.index("-m") + 1].split("=", 1)[1].split(","))
    first = runs[0]
    assert (first / "report.html").is_file()
    if "data.human" in keys or "data.columns.human" in keys:
        corr = pd.read_csv(first / "correlations.csv")
        assert set(corr["aspect"]) == {"human_meaning"} and corr["value"].notna().any()
    if "report.format" in keys:
        assert {p.suffix for p in (first / "plots").iterdir()} == {".svg"}
    if "tracking.uri" in keys:
        assert f"MLflow store: {server}" in proc.stdout
    if "tracking" in keys:
        assert "MLflow store" not in proc.stdout
    if "report.print_tables" in keys:
        assert proc.stdout.startswith("Outputs:")
