"""What a user meets at the shell before any run: Hydra's tab completion, help that fits 100
columns, and "did you mean" for a misspelt option."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tests.pipeline.helpers import cli_env, relog, run_cli


@pytest.mark.parametrize("flag", ["-sc", "--shell-completion"])
def test_completion_script_installs(tmp_path: Path, flag: str) -> None:
    proc = run_cli([flag, "install=bash"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stderr == ""
    # Hydra's bash script: a completion function registered with `complete`
    assert "hydra_bash_completion()" in proc.stdout
    assert "complete -o nospace -o default -F hydra_bash_completion" in proc.stdout
    assert not (tmp_path / "outputs").exists()  # no run began


def _query(line: str, cwd: Path) -> list[str]:
    """The candidates the completion script asks the command for, as bash asks: the command line
    typed so far in COMP_LINE, the cursor in COMP_POINT, then ``-sc query=bash``."""
    proc = run_cli(["-sc", "query=bash"], cwd, COMP_LINE=line, COMP_POINT=str(len(line)))
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.split()


@pytest.mark.slow
def test_completion_offers_metrics_and_keys(tmp_path: Path) -> None:
    metrics = _query("paraeval metrics=", tmp_path)
    names = {p.stem for p in (Path(__file__).parents[2] / "conf" / "metrics").glob("*.yaml")}
    assert {c.removeprefix("metrics=") for c in metrics} == names
    assert _query("paraeval metrics=ch", tmp_path) == ["metrics=chrf"]
    data = _query("paraeval data.", tmp_path)
    assert "data.name=" in data and all(c.startswith("data.") for c in data), data
    assert not [c for c in data if "_target_" in c]  # a class path is no setting of the user's
    assert "correlation=" in _query("paraeval cor", tmp_path)
    # inside a list and a sweep, the options not chosen yet
    assert _query("paraeval metrics=[bleu,ch", tmp_path) == ["metrics=[bleu,chrf"]
    after_bleu = _query("paraeval metrics=[bleu,", tmp_path)
    assert {c.removeprefix("metrics=[bleu,") for c in after_bleu} == names - {"bleu"}
    assert _query("paraeval -m normalize=minmax,zs", tmp_path) == ["normalize=minmax,zscore"]


def test_completion_in_bash(tmp_path: Path) -> None:
    # the script as `eval "$(paraeval -sc install=bash)"` installs it, then its function called
    # as bash calls it on <Tab>; `paraeval` is a console script as pip writes one
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "paraeval"
    script.write_text(f"#!{sys.executable}\nfrom paraeval.pipeline.cli.main import main\nmain()\n")
    script.chmod(0o755)
    tab = (
        'eval "$(paraeval -sc install=bash)"\n'
        "complete -p paraeval\n"
        'COMP_LINE="paraeval seed=1 metrics=ch"; COMP_POINT=${#COMP_LINE}\n'
        "COMP_WORDS=($COMP_LINE); COMP_CWORD=2\n"
        "hydra_bash_completion\n"
        'echo "reply: ${COMPREPLY[*]}"\n'
        'COMP_LINE="paraeval metrics=[bleu,ch"; COMP_POINT=${#COMP_LINE}\n'
        "COMP_WORDS=($COMP_LINE); COMP_CWORD=1\n"
        "hydra_bash_completion\n"
        'echo "reply: ${COMPREPLY[*]}"\n'
    )
    env = cli_env(PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    proc = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", tab],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert lines[0].endswith("-F hydra_bash_completion paraeval"), lines
    assert lines[-2:] == ["reply: metrics=chrf", "reply: metrics=[bleu,chrf"], lines


def test_a_word_for_an_integer_fails_at_once_and_writes_nothing(tmp_path: Path) -> None:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = run_cli(["seed=abc"], tmp_path)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr == "paraeval: error: seed must be an integer, got 'abc'\n"
    assert not list(tmp_path.iterdir())  # no outputs/ folder, nothing else
    # the command's own time (a shared machine's wall clock measures its neighbours too): before
    # Hydra's run, no pandas, torch or MLflow is imported (about 0.6 s; the run's check took 4 s)
    took = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    assert took < 2.0, took
    # the same for any integer setting
    proc = run_cli(["correlation.n_resamples=many"], tmp_path)
    assert (
        proc.stderr == "paraeval: error: correlation.n_resamples must be an integer, got 'many'\n"
    )


def test_help_fits_100_columns(tmp_path: Path) -> None:
    proc = run_cli(["--help"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert max(len(line) for line in lines) <= 100, max(lines, key=len)
    # the metric options are all there, wrapped under their group's name
    for name in ("bert_ibleu", "semantic_diversity", "wmd"):
        assert name in proc.stdout
    first = next(i for i, line in enumerate(lines) if line.startswith("metrics: "))
    assert lines[first + 1].startswith(" " * len("metrics: ") + lines[first + 1].strip())


def test_paraeval_log_help_fits_100_columns(tmp_path: Path) -> None:
    # a wide terminal: argparse would fill it
    proc = relog("--help", cwd=tmp_path, COLUMNS="250")
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert max(len(line) for line in lines) <= 100, max(lines, key=len)
    assert "--store-dir" in proc.stdout


def test_paraeval_score_help_fits_100_columns(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "paraeval.pipeline.cli.score", "--help"],
        cwd=tmp_path,
        env=cli_env(COLUMNS="250"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert max(len(line) for line in lines) <= 100, max(lines, key=len)
    assert "paraeval-score -r ref.txt -m bleu chrf < hyp.txt" in proc.stdout  # examples kept


@pytest.mark.parametrize(
    ("argument", "said"),
    [
        (
            "metrics=[bleu,chfr]",
            "unknown metrics option 'chfr' in 'metrics=[bleu,chfr]'; did you mean 'chrf'?",
        ),
        (
            "normalize=zcore",
            "unknown normalize option 'zcore' in 'normalize=zcore'; did you mean 'zscore'?",
        ),
        ("metrics=[qqqq]", "paraeval --help lists the "),
        ("normalize=qqqq", "choose from ['bounds', 'minmax', 'rank', 'zscore']"),
        ("seed=1 correlaton.n_resamples=5", "did you mean 'correlation'?"),
    ],
)
def test_misspelt_options_get_a_suggestion(tmp_path: Path, argument: str, said: str) -> None:
    proc = run_cli([*argument.split(), "tracking=none", f"hydra.run.dir={tmp_path}/o"], tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("paraeval: error: "), proc.stderr[-2000:]
    assert said in lines[0]
    # a near miss names the nearest option only, not the other 27 metrics
    assert "bertscore" not in lines[0] and "Traceback" not in proc.stderr
    assert not (tmp_path / "o").exists()


def test_a_closed_pipe_is_no_traceback(tmp_path: Path) -> None:
    # `paraeval -sc install=bash | head -1`: the reader is gone before the script is printed
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "paraeval", "-sc", "install=bash"],
            cwd=tmp_path,
            env=cli_env(),
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write)
    assert proc.returncode == 1
    assert proc.stderr == ""
