"""iBLEU α: the in-run curve against a brute-force recomputation, the seeded dev/test split, a
Hydra multirun whose later jobs are all cache hits, parallel jobs on one SQLite store, and the
launcher configs."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from mlflow.tracking import MlflowClient
from scipy import stats

import paraeval.metrics.sacre as sacre
from paraeval.pipeline.config.compose import config_dir
from paraeval.pipeline.data.load import load_demo
from paraeval.pipeline.errors import ConfigError
from paraeval.pipeline.stages.alpha import alpha_curve, split_items
from tests.pipeline.helpers import alpha_curve_settings, invocation_runs, run_cli

SMALL = "metrics=[bleu,ibleu,self_bleu,chrf]"


def ibleu_stats(df: pd.DataFrame, metric: sacre.IBLEU) -> dict[tuple[str, str], np.ndarray]:
    """iBLEU's sufficient statistics per system, keyed as the score stage keys them."""
    st: dict[tuple[str, str], np.ndarray] = {}
    for system in dict.fromkeys(df["system"]):
        sub = df[df.system == system]
        res = metric.score(sub.candidate.tolist(), sub.references.tolist(), sub.source.tolist())
        assert res.stats is not None
        st[("ibleu", str(system))] = res.stats
    return st


def test_split_is_seeded_disjoint_and_complete() -> None:
    items = [f"i{k}" for k in range(40)]
    dev, test = split_items(items, 0.25, seed=7)
    assert (dev, test) == split_items(list(reversed(items)), 0.25, seed=7)
    assert len(dev) == 10 and len(test) == 30
    assert set(dev).isdisjoint(test) and set(dev) | set(test) == set(items)
    assert split_items(items, 0.25, seed=8)[0] != dev
    assert split_items(["a", "b"], 0.99, seed=0)[1] != []  # both sides stay non-empty


def test_settings_are_validated() -> None:
    with pytest.raises(ConfigError, match="dev_fraction"):
        alpha_curve_settings(**{"dev_fraction": 1.0})
    with pytest.raises(ConfigError, match="grid"):
        alpha_curve_settings(**{"grid": [0.5, 1.5]})
    with pytest.raises(ConfigError, match="not defined at level"):
        alpha_curve_settings(**{"levels": ["segment"], "coefficient": "pairwise_accuracy"})
    with pytest.raises(ConfigError, match="unknown setting"):
        alpha_curve_settings(**{"alpha": 0.3})
    assert len(alpha_curve_settings().grid) == 21


def test_curve_equals_rescoring_every_alpha_on_each_split() -> None:
    """The curve from BLEU statistics against iBLEU scored from text for every α, per split, with
    scipy's Kendall τ-b as the reference coefficient."""
    df = load_demo().sort_values(["system", "item_id"]).reset_index(drop=True)
    df["human_meaning"] = df["human_meaning"].astype(float)
    systems = list(dict.fromkeys(df["system"]))
    ibleu = sacre.IBLEU(alpha=0.8)
    st = ibleu_stats(df, ibleu)
    settings = alpha_curve_settings(
        grid=[0.0, 0.6, 1.0], levels=["segment", "system"], coefficient="kendall_b", seed=3
    )
    got = alpha_curve(df, st, ibleu, "ibleu", ["human_meaning"], settings)

    dev, test = split_items(df["item_id"].astype(str).tolist(), 0.5, 3)
    for split, items in (("dev", dev), ("test", test)):
        part = df[df["item_id"].astype(str).isin(items)]
        for alpha in (0.0, 0.6, 1.0):
            metric = sacre.IBLEU(alpha=alpha)
            seg, corpus, human = [], [], []
            for system in systems:
                sub = part[part.system == system]
                res = metric.score(
                    sub.candidate.tolist(), sub.references.tolist(), sub.source.tolist()
                )
                seg.append(pd.DataFrame({"m": res.segment["ibleu"], "h": sub.human_meaning}))
                corpus.append(res.corpus["ibleu"])
                human.append(sub.human_meaning.mean())
            pooled = pd.concat(seg).dropna()
            want_seg = stats.kendalltau(pooled.m, pooled.h, variant="b").statistic
            want_sys = stats.kendalltau(corpus, human, variant="b").statistic
            rows = got.curve[(got.curve.split == split) & np.isclose(got.curve.alpha, alpha)]
            values = rows.set_index("level")["value"]
            assert values["segment"] == pytest.approx(want_seg, abs=1e-12)
            if np.isnan(want_sys):
                assert np.isnan(values["system"])
            else:
                assert values["system"] == pytest.approx(want_sys, abs=1e-12)
    choice = got.choice.set_index("level")
    for level in ("segment", "system"):
        dev_curve = got.curve[(got.curve.level == level) & (got.curve.split == "dev")]
        best = dev_curve.loc[dev_curve["value"].idxmax()]  # type: ignore[call-overload]
        assert choice.loc[level, "chosen_alpha"] == best.alpha
        test_row = got.curve[
            (got.curve.level == level)
            & (got.curve.split == "test")
            & (got.curve.alpha == best.alpha)
        ]
        assert choice.loc[level, "test"] == pytest.approx(float(test_row["value"].iloc[0]))
        assert choice.loc[level, "n_dev_items"] == len(dev)


@pytest.mark.slow
def test_multirun_alpha_sweep_is_served_from_the_cache(tmp_path: Path) -> None:
    store, sweep = tmp_path / "store", tmp_path / "sweep"
    proc = run_cli(
        [
            "-m",
            SMALL,
            "metrics.ibleu.alpha=0.2,0.5,0.9",
            f"tracking.store_dir={store}",
            f"hydra.sweep.dir={sweep}",
            "correlation.ci=false",
            "alpha_curve.grid=[0,0.5,1]",
            "report.print_tables=false",
        ],
        cwd=tmp_path,
        PARAEVAL_CACHE_DIR=str(tmp_path / "cache"),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    parents = sorted(invocation_runs(store), key=lambda r: int(r.data.tags["paraeval.sweep_job"]))
    assert [r.data.params["metrics.ibleu.alpha"] for r in parents] == ["0.2", "0.5", "0.9"]
    assert len({r.data.tags["paraeval.sweep"] for r in parents}) == 1
    assert parents[0].data.tags["paraeval.sweep"] == str(sweep.resolve())
    names = [r.info.run_name for r in parents]
    assert len(set(names)) == 3 and all("metrics.ibleu.alpha=" in n for n in names)
    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    for parent in parents:  # a sweep job's tags too: a dozen of paraeval's own at most
        assert len([k for k in parent.data.tags if not k.startswith("mlflow.")]) <= 12
        assert parent.data.tags["paraeval.hydra.launcher"] == "BasicLauncher"
        by_parent = f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'"
        for child in client.search_runs([parent.info.experiment_id], filter_string=by_parent):
            assert child.data.tags["paraeval.sweep"] == parent.data.tags["paraeval.sweep"]
            assert child.data.tags["mlflow.note.content"].count("\n") == 0

    def cache(run: Any) -> pd.DataFrame:
        path = client.download_artifacts(run.info.run_id, "tables/cache_counts.csv")
        return pd.read_csv(path).set_index("stage")

    first = cache(parents[0])
    assert first.loc["(all metrics)", "misses"] == 4 * 4
    assert first.loc["(all metrics)", "hits"] == 0
    for later in parents[1:]:
        m = cache(later)
        for metric_id in ("bleu", "ibleu", "self_bleu", "chrf"):
            assert (m.loc[metric_id, "hits"], m.loc[metric_id, "misses"]) == (4, 0)
    for job in (1, 2):
        log_text = (sweep / str(job) / "paraeval.log").read_text()
        assert "16 hits, 0 misses" in log_text
    # different α, same cached statistics: different iBLEU, identical BLEU
    s0 = pd.read_csv(sweep / "0" / "system_scores.csv").set_index("system")
    s2 = pd.read_csv(sweep / "2" / "system_scores.csv").set_index("system")
    pd.testing.assert_series_equal(s0["bleu"], s2["bleu"])
    assert not np.allclose(s0["ibleu"], s2["ibleu"])
    assert (sweep / "0" / "plots" / "alpha_curve.png").stat().st_size > 1000
    curve = pd.read_csv(sweep / "0" / "alpha_curve.csv")
    assert set(curve["alpha"]) == {0.0, 0.5, 1.0} and set(curve["split"]) == {"dev", "test"}
    # the first job's α × system table already holds what the α = 0.5 job scored
    by_alpha = pd.read_csv(sweep / "0" / "alpha_systems.csv")
    half = by_alpha[by_alpha.alpha == 0.5].set_index("system")["ibleu"]
    s1 = pd.read_csv(sweep / "1" / "system_scores.csv").set_index("system")
    pd.testing.assert_series_equal(half, s1["ibleu"], check_names=False, rtol=1e-12)


@pytest.mark.slow
def test_parallel_jobs_share_one_sqlite_store(tmp_path: Path) -> None:
    store, sweep = tmp_path / "store", tmp_path / "sweep"
    proc = run_cli(
        [
            "-m",
            "hydra/launcher=parallel",
            "hydra.launcher.n_jobs=3",
            "metrics=[bleu,ibleu]",
            "metrics.ibleu.alpha=0.1,0.4,0.7",
            f"tracking.store_dir={store}",  # a fresh store: all jobs create it at once
            f"hydra.sweep.dir={sweep}",
            "correlation.ci=false",
            "alpha_curve.enabled=false",
            "report.print_tables=false",
        ],
        cwd=tmp_path,
        PARAEVAL_CACHE_DIR=str(tmp_path / "cache"),
    )
    output = proc.stdout + proc.stderr
    logs = "".join((sweep / str(j) / "paraeval.log").read_text() for j in range(3))
    assert proc.returncode == 0, output[-3000:]
    for text in (output, logs):
        assert "database is locked" not in text
        assert "MLflow logging failed" not in text
    parents = invocation_runs(store)
    assert sorted(r.data.params["metrics.ibleu.alpha"] for r in parents) == ["0.1", "0.4", "0.7"]
    assert {r.data.tags["paraeval.hydra.launcher"] for r in parents} == {"JoblibLauncher"}
    assert all(r.info.status == "FINISHED" for r in parents)


LAUNCHERS = {
    "parallel": "hydra_plugins.hydra_joblib_launcher",
    "slurm": "hydra_plugins.hydra_submitit_launcher",
    "slurm_local": "hydra_plugins.hydra_submitit_launcher",
    "ray_cluster": "hydra_plugins.hydra_ray_launcher",
}


@pytest.mark.parametrize(
    "option", sorted(p.stem for p in (config_dir() / "hydra/launcher").glob("*.yaml"))
)
def test_launcher_configs_compose_and_name_an_installed_launcher(option: str) -> None:
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        cfg = compose("config", overrides=[f"hydra/launcher={option}"], return_hydra_config=True)
    target = str(cfg.hydra.launcher._target_)
    plugin = LAUNCHERS[option]
    assert target.startswith(plugin + ".")
    if importlib.util.find_spec(plugin) is None:
        # the Ray plugin is an optional extra (pip install 'paraeval[ray]'): composing the config
        # and naming the right launcher is what can be checked without it
        assert option == "ray_cluster", f"{plugin} should be installed by the dev setup"
        return
    import inspect

    from hydra.utils import get_class

    # every setting of the config is a constructor argument of the launcher
    params = inspect.signature(get_class(target)).parameters
    if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        assert set(cfg.hydra.launcher) - {"_target_"} <= set(params)


def test_system_scores_for_every_alpha_equal_ibleu_scored_at_that_alpha() -> None:
    """The α × system table: each system's corpus iBLEU at every α of the grid, from the run's
    statistics, against iBLEU scored from text with that α (what an α sweep's job computes)."""
    df = load_demo()
    configured = sacre.IBLEU(alpha=0.8)
    st = ibleu_stats(df, configured)
    grid = [0.0, 0.35, 0.8, 1.0]
    settings = alpha_curve_settings(grid=grid)
    got = alpha_curve(df, st, configured, "ibleu", ["human_meaning"], settings)
    table = got.system_scores
    systems = list(dict.fromkeys(df["system"]))
    assert list(table.columns) == ["alpha", "system", "ibleu", "bleu_references", "bleu_source"]
    assert len(table) == len(grid) * len(systems)
    for alpha in grid:
        metric = sacre.IBLEU(alpha=alpha)
        for system in systems:
            sub = df[df.system == system]
            texts = (sub.candidate.tolist(), sub.references.tolist(), sub.source.tolist())
            want = metric.score(*texts)
            row = table[(table.alpha == alpha) & (table.system == system)]
            assert float(row["ibleu"].iloc[0]) == pytest.approx(want.corpus["ibleu"], abs=1e-9)
    # α = 1 is BLEU against the references, α = 0 minus BLEU against the source
    one = table[table.alpha == 1.0].set_index("system")
    assert np.allclose(one["ibleu"], one["bleu_references"])
    zero = table[table.alpha == 0.0].set_index("system")
    assert np.allclose(zero["ibleu"], -zero["bleu_source"])
