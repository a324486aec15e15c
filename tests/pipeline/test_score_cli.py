"""``paraeval-score``: the same numbers as sacrebleu's command line and as the pipeline, a light
import path, and one-line errors. Run as ``python -m paraeval.pipeline.cli.score``, as the
console script does."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from paraeval.pipeline.data.load import demo_path
from tests.pipeline.helpers import cli_env, run_cli

SYSTEMS = ("strong", "weak")


def score_cli(
    *args: str, cwd: Path, stdin: str | None = None, timeout: int = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "paraeval.pipeline.cli.score", *args],
        cwd=cwd,
        env=cli_env(),
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def scores_of(proc: subprocess.CompletedProcess[str]) -> dict[tuple[str, str], dict[str, object]]:
    assert proc.returncode == 0, proc.stderr
    return {(r["system"], r["metric"]): r for r in json.loads(proc.stdout)}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo as line-aligned files: src.txt, ref1.txt (every line), ref2.txt (an empty line
    where an item has one reference), ref2full.txt, strong.txt, weak.txt."""
    folder = tmp_path_factory.mktemp("score")
    rows = [json.loads(line) for line in demo_path().read_text(encoding="utf-8").splitlines()]
    items = {r["item_id"]: r for r in rows}
    (folder / "src.txt").write_text("".join(r["source"] + "\n" for r in items.values()))
    for k in (0, 1):
        refs = [r["references"][k] if len(r["references"]) > k else "" for r in items.values()]
        (folder / f"ref{k + 1}.txt").write_text("".join(ref + "\n" for ref in refs))
    # a second reference on every line (the source where an item has one): sacrebleu counts an
    # empty reference line as a reference of length 0, paraeval (as the text loader) as none
    full = [r["references"][1] if len(r["references"]) > 1 else r["source"] for r in items.values()]
    (folder / "ref2full.txt").write_text("".join(ref + "\n" for ref in full))
    for system in SYSTEMS:
        by_item = {r["item_id"]: r["candidate"] for r in rows if r["system"] == system}
        (folder / f"{system}.txt").write_text("".join(by_item[i] + "\n" for i in items))
    return folder


@pytest.mark.slow
@pytest.mark.parametrize(
    ("refs", "metrics"),
    [
        (["ref1.txt"], ["bleu", "chrf", "ter"]),
        (["ref1.txt", "ref2full.txt"], ["bleu", "chrf", "ter"]),
    ],
)
def test_scores_equal_sacrebleus_command_line(
    files: Path, refs: list[str], metrics: list[str]
) -> None:
    ours = scores_of(
        score_cli(
            "-r", *refs, "-m", *metrics, "-i", "strong.txt", "weak.txt", "-f", "json", cwd=files
        )
    )
    for system in SYSTEMS:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "sacrebleu",
                *refs,
                "-i",
                f"{system}.txt",
                "-m",
                *metrics,
                "-f",
                "json",
                "-w",
                "9",
            ],
            cwd=files,
            capture_output=True,
            text=True,
            check=True,
            env=cli_env(),
        )
        theirs = json.loads(proc.stdout)
        assert len(theirs) == len(metrics)
        for metric, result in zip(metrics, theirs, strict=True):
            mine = ours[(system, metric)]
            assert mine["score"] == pytest.approx(result["score"], abs=1e-8), (system, metric)
            # sacrebleu's signature is ours after the metric's name
            assert mine["signature"] == f"{metric}|{result['signature']}"


def test_stdin_is_one_system_and_files_are_named_by_their_stem(files: Path) -> None:
    hyp = (files / "weak.txt").read_text()
    piped = scores_of(score_cli("-r", "ref1.txt", "-m", "bleu", "-f", "json", cwd=files, stdin=hyp))
    named = scores_of(
        score_cli("-r", "ref1.txt", "-m", "bleu", "-f", "json", "-i", "weak.txt", cwd=files)
    )
    assert list(piped) == [("stdin", "bleu")] and list(named) == [("weak", "bleu")]
    assert piped["stdin", "bleu"]["score"] == named["weak", "bleu"]["score"]


def test_text_output_has_a_line_per_system_and_metric_with_its_signature(files: Path) -> None:
    proc = score_cli(
        "-r", "ref1.txt", "-m", "bleu", "chrf", "-i", "strong.txt", "weak.txt", "-w", "2", cwd=files
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["system", "metric", "score", "signature"]
    assert [line.split()[:2] for line in lines[1:]] == [
        [s, m] for s in SYSTEMS for m in ("bleu", "chrf")
    ]
    # the signatures start in one column
    assert len({line.index(" bleu|" if "bleu|" in line else " chrf|") for line in lines[1:]}) == 1
    assert all(len(line.split()[2].split(".")[1]) == 2 for line in lines[1:])


def test_a_setting_is_changed_with_set(files: Path) -> None:
    base = scores_of(
        score_cli("-r", "ref1.txt", "-m", "bleu", "-i", "weak.txt", "-f", "json", cwd=files)
    )
    lower = scores_of(
        score_cli(
            "-r",
            "ref1.txt",
            "-m",
            "bleu",
            "-i",
            "weak.txt",
            "-f",
            "json",
            "--set",
            "bleu.lowercase=true",
            cwd=files,
        )
    )
    assert "case:mixed" in str(base["weak", "bleu"]["signature"])
    assert "case:lc" in str(lower["weak", "bleu"]["signature"])
    bad = score_cli(
        "-r", "ref1.txt", "-m", "bleu", "-i", "weak.txt", "--set", "bleu.lowercas=true", cwd=files
    )
    assert bad.returncode == 2 and "did you mean 'metrics.bleu.lowercase'" in bad.stderr


@pytest.mark.slow
def test_the_scores_are_the_pipelines(files: Path, tmp_path: Path) -> None:
    metrics = ["bleu", "chrf", "ter", "ibleu"]
    ours = scores_of(
        score_cli(
            "-r",
            "ref1.txt",
            "ref2.txt",
            "-s",
            "src.txt",
            "-m",
            *metrics,
            "-i",
            "strong.txt",
            "weak.txt",
            "-f",
            "json",
            cwd=files,
        )
    )
    out = tmp_path / "run"
    proc = run_cli(
        [
            "data=text",
            "data.source=src.txt",
            "data.references=[ref1.txt,ref2.txt]",
            "data.systems={strong: strong.txt, weak: weak.txt}",
            f"metrics=[{','.join(metrics)}]",
            "experiment=quick",
            "compare.enabled=false",
            "alpha_curve.enabled=false",
            "cache.enabled=false",
            "report.progress=false",
            f"hydra.run.dir={out}",
        ],
        files,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    table = pd.read_csv(out / "system_scores.csv", index_col="system")
    signatures = pd.read_csv(out / "signatures.csv", index_col=0)["signature"]
    for system in SYSTEMS:
        for metric in metrics:
            assert ours[system, metric]["score"] == pytest.approx(
                table.loc[system, metric], rel=1e-12, abs=1e-12
            )
            assert ours[system, metric]["signature"] == signatures[metric]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-r", "nope.txt", "-i", "weak.txt"], "nope.txt: file not found"),
        (["-r", "ref1.txt", "-i", "short.txt"], "short.txt has 47 lines but ref1.txt has 48"),
        (
            ["-r", "ref1.txt", "-m", "blue", "-i", "weak.txt"],
            "unknown metric 'blue'; did you mean 'bleu'?",
        ),
        (
            ["-r", "ref1.txt", "-m", "ibleu", "-i", "weak.txt"],
            "metric 'ibleu' needs the source sentences",
        ),
        (["-m", "bleu", "-i", "weak.txt"], "metric 'bleu' needs references: no -r file given"),
    ],
)
def test_errors_are_one_line_with_exit_status_2(files: Path, args: list[str], message: str) -> None:
    lines = (files / "weak.txt").read_text().splitlines()
    (files / "short.txt").write_text("".join(line + "\n" for line in lines[:-1]))
    proc = score_cli(*args, cwd=files)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.startswith("paraeval: error: ") and proc.stderr.count("\n") == 1, proc.stderr
    assert message in proc.stderr


def test_ngram_metrics_import_no_pandas_hydra_mlflow_or_torch(files: Path) -> None:
    code = (
        "import sys\n"
        "from paraeval.pipeline.cli.score import main\n"
        "assert main(['-r', 'ref1.txt', '-m', 'bleu', 'chrf', 'ter', '-i', 'weak.txt']) == 0\n"
        "heavy = ('pandas', 'hydra', 'mlflow', 'torch', 'matplotlib', 'transformers')\n"
        "print('IMPORTED', sorted(m for m in heavy if m in sys.modules))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=files,
        env=cli_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "IMPORTED []" in proc.stdout


def test_the_settings_are_the_ones_a_run_composes() -> None:
    """paraeval-score reads conf/ without Hydra: every metric's settings, shared encoder node
    included, equal the composed config's (with the cache off, as this command writes nothing)."""
    from omegaconf import OmegaConf

    from paraeval.pipeline.cli.score import metric_settings
    from paraeval.pipeline.config.compose import compose_config
    from paraeval.pipeline.config.targets import metric_ids

    ids = metric_ids()
    cfg = compose_config([f"metrics=[{','.join(ids)}]", "cache.enabled=false", "cache.dir=null"])
    composed = OmegaConf.to_container(cfg.metrics, resolve=True)
    assert metric_settings(ids, []) == composed
    assert metric_settings(["cosine"], ["cosine.batch_size=8"])["cosine"]["batch_size"] == 8


def test_text_has_fixed_decimals_per_metric_and_json_full_precision(files: Path) -> None:
    args = ["-r", "ref1.txt", "-s", "src.txt", "-m", "bleu", "pinc", "ter"]
    args += ["-i", *(f"{s}.txt" for s in SYSTEMS)]
    text = score_cli(*args, cwd=files)
    assert text.returncode == 0, text.stderr
    exact = scores_of(score_cli(*args, "-f", "json", "-w", "1", cwd=files))
    lines = text.stdout.splitlines()
    printed = {(ln.split()[0], ln.split()[1]): ln.split()[2] for ln in lines[1:]}
    assert printed.keys() == exact.keys()
    for metric in ("bleu", "pinc", "ter"):
        values = [float(str(exact[s, metric]["score"])) for s in SYSTEMS]
        # every system of a metric with the decimals of 4 significant digits of its largest score
        decimals = 3 - math.floor(math.log10(max(abs(v) for v in values)))
        for system, value in zip(SYSTEMS, values, strict=True):
            assert printed[system, metric] == f"{value:.{decimals}f}", (system, metric)
    # BLEU is on 0-100, PINC on 0-1: their decimals differ; JSON keeps every digit, -w or not
    assert len(printed["weak", "bleu"].split(".")[1]) == 2
    assert len(printed["weak", "pinc"].split(".")[1]) == 4
    assert all(len(repr(r["score"]).split(".")[1]) > 6 for r in exact.values())
    # the scores right-aligned: each ends two columns before the signatures, which start together
    (start,) = {ln.index(ln.split()[3]) for ln in lines}
    assert all(ln[: start - 2].endswith(" " + ln.split()[2]) for ln in lines)


@pytest.mark.slow
def test_list_prints_every_metric_with_its_default_mark(tmp_path: Path) -> None:
    from paraeval.pipeline.config.compose import compose_config
    from paraeval.pipeline.config.targets import metric_ids

    proc = score_cli("--list", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["id", "group", "direction", "needs", "default"]
    rows = {ln.split()[0]: ln.split() for ln in lines[1:]}
    assert sorted(rows) == metric_ids()
    default = set(compose_config().metrics)
    assert {m for m, r in rows.items() if r[-1] == "yes"} == default
    assert {r[-1] for r in rows.values()} == {"yes", "no"}
    assert rows["ter"][1:3] == ["syntactic", "lower"] and rows["bleu"][3] == "references"
    assert "sources," in rows["parascore"] and "WordNet" in rows["meteor"]


def test_help_describes_every_option_for_a_pip_user(tmp_path: Path) -> None:
    proc = score_cli("--help", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "conf/" not in proc.stdout  # a folder of the installed package, not the user's
    options = proc.stdout.split("options:")[1].split("examples:")[0]
    # each option's block (its line and the indented lines after it) says more than its name
    blocks = re.split(r"\n  (?=-)", options.strip("\n"))
    assert len(blocks) == 9, blocks
    for block in blocks:
        _, _, said = block.partition("  ")
        assert len(said.split()) >= 3, block


@pytest.mark.slow
def test_a_cold_encoder_metric_draws_no_progress_bar(files: Path) -> None:
    # no model is in memory in a new process; HF_HUB_OFFLINE: the installed all-MiniLM-L6-v2
    env = cli_env(HF_HUB_OFFLINE="1")
    env.pop("HF_HUB_DISABLE_PROGRESS_BARS", None)
    args = ["-r", "ref1.txt", "-i", "weak.txt", "-m", "bertscore"]
    proc = subprocess.run(
        [sys.executable, "-m", "paraeval.pipeline.cli.score", *args],
        cwd=files,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "bertscore_f1" in proc.stdout
    assert proc.stderr == ""  # no "Loading weights" bar, no carriage return
