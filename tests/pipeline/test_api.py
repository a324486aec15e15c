"""paraeval.evaluate: the CLI's pipeline from Python, on a DataFrame or a path, same numbers."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

import paraeval
from paraeval.pipeline.data.load import demo_path, read_table
from paraeval.pipeline.errors import ConfigError, DataError

from .helpers import run_cli

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from compare_outputs import compare_dirs

CHEAP = {
    "correlation": {"n_resamples": 100, "significance": {"n_resamples": 100}},
    "compare": {"n_bootstrap": 100, "n_ar": 200},
    "report": {"progress": False},
}
METRICS = ["bleu", "ibleu", "self_bleu", "chrf"]


def _demo_frame() -> pd.DataFrame:
    return read_table(demo_path())


@pytest.mark.slow
def test_evaluate_on_a_dataframe_writes_what_the_cli_writes(tmp_path: Path) -> None:
    cli_out = tmp_path / "cli"
    proc = run_cli(
        [
            "data=table",
            f"data.path={demo_path()}",
            f"metrics=[{','.join(METRICS)}]",
            "correlation.n_resamples=100",
            "correlation.significance.n_resamples=100",
            "compare.n_bootstrap=100",
            "compare.n_ar=200",
            "tracking=none",
            "report.print_tables=false",
            f"cache.dir={tmp_path / 'cache'}",
            f"hydra.run.dir={cli_out}",
        ],
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    ev = paraeval.evaluate(_demo_frame(), METRICS, cache={"dir": str(tmp_path / "cache2")}, **CHEAP)
    api_out = ev.write(tmp_path / "api")
    assert compare_dirs(cli_out, api_out) == []
    # the attributes hold what the files hold
    files = pd.read_csv(api_out / "system_scores.csv").set_index("system")
    assert list(ev.systems.columns) == list(files.columns)
    assert ev.systems["bleu"].to_dict() == pytest.approx(files["bleu"].to_dict(), rel=1e-12)
    assert set(ev.signatures) == set(pd.read_csv(api_out / "signatures.csv")["column"])
    assert len(ev.correlations) == len(pd.read_csv(api_out / "correlations.csv"))
    assert set(ev.comparison["system"]) == {"copy", "strong", "medium", "weak"}
    assert ev.signatures["ibleu"].startswith("ibleu|alpha:0.8|ref:[")


def test_evaluate_on_a_path_with_settings_and_overrides(tmp_path: Path) -> None:
    ev = paraeval.evaluate(
        demo_path(),
        ["bleu", "ibleu"],
        overrides=["metrics.ibleu.alpha=0.5"],
        normalize="zscore",
        compare={"enabled": False},
        alpha_curve={"enabled": False},
        cache={"enabled": False},
        **{k: v for k, v in CHEAP.items() if k != "compare"},
    )
    assert ev.signatures["ibleu"].startswith("ibleu|alpha:0.5|ref:[")
    assert ev.signatures["syntactic"].startswith("syntactic|norm:zscore")
    assert ev.comparison.empty and ev.alpha_curve is None
    s = ev.systems
    # iBLEU at alpha 0.5 from the two BLEUs the run has: 0.5 * BLEU(c, R) - 0.5 * BLEU(c, S)
    assert s.loc["copy", "ibleu"] == pytest.approx(0.5 * s.loc["copy", "bleu"] - 0.5 * 100.0)


@pytest.mark.slow
def test_log_sends_the_evaluation_to_a_sqlite_store(tmp_path: Path) -> None:
    ev = paraeval.evaluate(
        _demo_frame(), ["bleu"], cache={"enabled": False}, alpha_curve={"enabled": False}, **CHEAP
    )
    store = tmp_path / "store"
    run_id = ev.log(tmp_path / "out", tracking={"store_dir": str(store), "uri": None})
    assert run_id is not None
    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    run = client.get_run(run_id)
    assert run.data.params["metrics.selected"] == "bleu"
    table = pd.read_json(
        client.download_artifacts(run_id, "tables/signatures.json"), orient="split"
    )
    assert table.set_index("column").loc["bleu", "signature"] == ev.signatures["bleu"]
    assert (tmp_path / "out" / "system_scores.csv").is_file()


def test_mistakes_are_user_errors() -> None:
    frame = _demo_frame().drop(columns=["candidate"])
    with pytest.raises(DataError, match="candidate"):
        paraeval.evaluate(frame, ["bleu"])
    with pytest.raises(ConfigError, match="unknown setting 'nosuch'"):
        paraeval.evaluate(_demo_frame(), ["bleu"], nosuch=1)
    # a misspelt name: the nearest, not the 28 metrics or every key
    with pytest.raises(ConfigError, match=r"^unknown metric 'chfr'; did you mean 'chrf'\?$"):
        paraeval.evaluate(_demo_frame(), ["bleu", "chfr"])
    with pytest.raises(ConfigError, match=r"^unknown setting 'sede'; did you mean 'seed'\?$"):
        paraeval.evaluate(_demo_frame(), ["bleu"], sede=1)
