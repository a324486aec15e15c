"""limits.max_stage_minutes: a pilot's estimate stops a long resampling stage before its work,
draws nothing from the run's generator, and the stages show a bar only when asked."""

from __future__ import annotations

import io
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from paraeval.pipeline.errors import ConfigError
from paraeval.pipeline.stages.aggregate import Aggregated, aggregate
from paraeval.pipeline.stages.compare import compare
from paraeval.pipeline.stages.correlate import correlate, significance
from paraeval.pipeline.stages.limits import Limit
from paraeval.pipeline.stages.score import Scores, build_metrics, score
from tests.pipeline.helpers import compare_settings, correlation_settings, run_cli


def _sleeping(k: int) -> None:
    time.sleep(0.02 + 0.0001 * k)  # a fixed cost and a cost per resample


def test_estimate_is_near_the_time_of_the_work() -> None:
    # a limit under the first bound makes the pilots grow until the rate is measured
    estimate = Limit(minutes=2 / 60).check("work", "n", 4000, _sleeping, 1.0)
    start = time.perf_counter()
    _sleeping(4000)
    measured = time.perf_counter() - start
    assert measured / 3 < estimate < 3 * measured


def test_estimate_over_the_limit_is_one_message_naming_everything() -> None:
    start = time.perf_counter()
    with pytest.raises(ConfigError) as caught:
        Limit(minutes=5).check("the stage's draws", "stage.n_resamples", 10**9, _sleeping, 1.0)
    assert time.perf_counter() - start < 10
    message = str(caught.value)
    assert message.startswith("limits.max_stage_minutes: the stage's draws")
    assert "stage.n_resamples=1,000,000,000" in message and "limit of 5;" in message
    minutes = float(message.split("about ")[1].split(" minutes")[0].replace(",", ""))
    assert 1e4 / 60 < minutes < 1e6 / 60  # 10^9 x 0.1 ms = 10^5 s


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("progress", [True, False])
def test_bar_counts_jobs_only_when_enabled(progress: bool) -> None:
    stream = _Terminal()
    counted = Limit(progress=progress, file=stream).counted(map, "bootstrap")
    assert list(counted(lambda x: 2 * x, [1, 2, 3])) == [2, 4, 6]
    assert ("bootstrap:   0%|          | 0/3" in stream.getvalue()) is progress


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Scores, Aggregated]:
    from omegaconf import OmegaConf

    from paraeval.pipeline.api import compose_config
    from paraeval.pipeline.config.nodes import DataSettings
    from paraeval.pipeline.data.load import load_data

    cfg = compose_config(["metrics=[bleu,chrf,ter]", "tracking=none"])
    node = OmegaConf.to_container(cfg.data, resolve=True)
    table = load_data(DataSettings.from_node(node))  # type: ignore[arg-type]
    scores = score(table, build_metrics(cfg.metrics), progress=False)
    return scores, aggregate(scores)


def test_pilots_change_no_number(demo: tuple[Scores, Aggregated]) -> None:
    scores, agg = demo
    changes = {"n_resamples": 50, "significance": {"method": "permutation", "n_resamples": 200}}
    cfg = correlation_settings(changes)
    tables: list[list[pd.DataFrame]] = []
    for limit in (Limit(), Limit(minutes=1e6)):
        rng = np.random.default_rng(3)
        corr = correlate(agg, cfg, rng, scores, limit=limit)
        sig = significance(agg, cfg, rng, limit=limit)
        compared = compare(scores, agg, compare_settings(n_bootstrap=40, n_ar=300), limit=limit)
        tables.append([corr, sig, compared.table])
    assert len(tables[0][1]) == 2 * 6  # bleu, chrf, ter, syntactic: 6 pairs per aspect
    for plain, piloted in zip(*tables, strict=True):
        pd.testing.assert_frame_equal(plain, piloted, check_exact=True)


@pytest.mark.slow
def test_limit_stops_the_run_and_keeps_earlier_outputs(tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ["metrics=[bleu,chrf]", "tracking=none", f"cache.dir={tmp_path / 'cache'}"]
    args += ["correlation.significance.method=permutation", f"hydra.run.dir={out}"]
    start = time.perf_counter()
    proc = run_cli([*args, "correlation.significance.n_resamples=1000000000"], tmp_path)
    assert time.perf_counter() - start < 120  # the run, not 10^9 permutations
    assert proc.returncode == 2, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("paraeval: error:")]
    assert len(errors) == 1
    assert "the significance test's permutations" in errors[0]
    assert "correlation.significance.n_resamples=1,000,000,000" in errors[0]
    assert "more than the limit of 120" in errors[0]
    # the comparison ran before: its figure is drawn, the scores are in the cache
    assert (out / "plots" / "system_ranking.png").is_file()
    assert any((tmp_path / "cache").rglob("*"))
