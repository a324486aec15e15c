"""Count and size settings are checked after loading and before scoring: a count that is not a
positive integer, or whose memory on the loaded data exceeds what the machine has available, is
one ``paraeval: error:`` line, exit 2, and nothing is scored."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from paraeval.correlation import resamples as resamples_module
from paraeval.correlation.table import correlation_table
from paraeval.pipeline.config.compose import compose_config
from paraeval.pipeline.config.settings import Settings
from paraeval.pipeline.errors import ConfigError
from paraeval.pipeline.stages.memory_bounds import Shape, available_memory, check_memory, estimates
from tests.pipeline.helpers import run_cli

FAST = ["tracking=none", "report.print_tables=false", "metrics=[bleu,chrf]"]


def _rows(n: int, varied_ratings: bool) -> list[dict[str, object]]:
    return [
        {
            "item_id": f"i{i}",
            "system": s,
            "source": f"the source sentence {i}",
            "references": [f"a reference sentence {i}"],
            "candidate": f"candidate {s} {i}",
            "human_meaning": float((i * 7 + ord(s)) % 5) if varied_ratings else 1.0,
        }
        for i in range(n)
        for s in ("a", "b", "c")
    ]


def _table(path: Path, n: int = 6) -> Path:
    rows = _rows(n, varied_ratings=True)
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def _settings(*overrides: str) -> Settings:
    return Settings.from_config(compose_config(["data=table", "data.path=unused", *overrides]))


def _frame(n: int = 6) -> pd.DataFrame:
    return pd.DataFrame(_rows(n, varied_ratings=False))


@pytest.mark.slow
@pytest.mark.parametrize(
    "override",
    [
        "compare.n_ar=1000000000",
        "compare.n_bootstrap=1000000000",
        "correlation.n_resamples=1000000000",
    ],
)
def test_an_infeasible_count_is_one_line_before_any_scoring(tmp_path: Path, override: str) -> None:
    path = _table(tmp_path / "t.jsonl")
    cache, out = tmp_path / "cache", tmp_path / "out"
    proc = run_cli(
        [
            "data=table",
            f"data.path={path}",
            *FAST,
            f"cache.dir={cache}",
            f"hydra.run.dir={out}",
            override,
        ],
        tmp_path,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr + proc.stdout
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("paraeval: error:")]
    assert len(errors) == 1, proc.stderr[-2000:]
    key = override.partition("=")[0]
    line = errors[0]
    assert f"{key}=1000000000 needs about" in line, line
    assert "18 rows: 6 items x 3 systems" in line and "available" in line and f"lower {key}" in line
    assert "scoring" not in proc.stderr  # no progress bar: the score stage never started
    assert not cache.exists()  # the score stage makes the cache: nothing was scored
    assert not (out / "segment_scores.parquet").exists()


@pytest.mark.parametrize(
    ("override", "fragment"),
    [
        (
            "correlation.n_resamples=2.5",
            "correlation.n_resamples must be a positive integer, got 2.5",
        ),
        ("correlation.n_resamples=0", "correlation.n_resamples must be a positive integer, got 0"),
        ("correlation.n_resamples=true", "correlation.n_resamples must be a positive integer"),
        (
            "correlation.significance.n_resamples=-3",
            "correlation.significance.n_resamples must be a positive integer, got -3",
        ),
        (
            "correlation.significance.block_size=0",
            "correlation.significance.block_size must be a positive integer, got 0",
        ),
        ("compare.n_ar=0", "compare.n_ar must be a positive integer, got 0"),
        ("compare.n_bootstrap=1.5", "compare.n_bootstrap must be a positive integer, got 1.5"),
        ("+metrics.bleu.batch_size=0", "metrics.bleu.batch_size must be a positive integer"),
        (
            "metrics.bleu.max_ngram_order=0",
            "metrics.bleu.max_ngram_order must be a positive integer",
        ),
        ("metrics.bleu.max_ngram_order=2.5", "metrics.bleu.max_ngram_order must be a positive"),
    ],
)
def test_counts_must_be_positive_integers(override: str, fragment: str) -> None:
    with pytest.raises(ConfigError, match=None) as err:
        _settings("metrics=[bleu,chrf]", override)
    assert fragment in str(err.value), str(err.value)


def test_encoder_counts_are_checked_too() -> None:
    for override, fragment in [
        ("metrics.cosine.batch_size=-1", "metrics.cosine.batch_size must be a positive integer"),
        (
            "metrics.bertscore.bert_score_batch_size=-1",
            "metrics.bertscore.bert_score_batch_size must be an integer >= 0",
        ),
        ("metrics.bertscore.batch_size=abc", "metrics.bertscore.batch_size must be a positive"),
    ]:
        with pytest.raises(ConfigError) as err:
            _settings("metrics=[cosine,bertscore]", override)
        assert fragment in str(err.value), str(err.value)


def test_every_count_setting_has_an_estimate() -> None:
    settings = _settings(
        "metrics=[bleu,ibleu,nist,bertscore,cosine]",
        "correlation.significance.method=permutation",
        "correlation.coefficients=[pearson,soft_pairwise_accuracy]",
    )
    keys = {key for key, _, _ in estimates(settings, Shape.of(_frame(), 5))}
    assert keys >= {
        "correlation.n_resamples",
        "correlation.significance.n_resamples",
        "correlation.coefficient_settings.soft_pairwise_accuracy.n_permutations",
        "compare.n_bootstrap",
        "compare.n_ar",
        "metrics.bertscore.batch_size",
        "metrics.bertscore.bert_score_batch_size",
        "metrics.cosine.batch_size",
        "metrics.bleu.max_ngram_order",
        "metrics.nist.max_order",
        "alpha_curve.grid",
    }, keys


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("compare.n_ar=20000000", "compare.n_ar"),
        ("compare.n_bootstrap=20000000", "compare.n_bootstrap"),
        ("correlation.n_resamples=20000000", "correlation.n_resamples"),
        ("correlation.significance.n_resamples=200000000", "correlation.significance.n_resamples"),
        ("metrics.bleu.max_ngram_order=100000000", "metrics.bleu.max_ngram_order"),
    ],
)
def test_the_limit_is_compared_with_the_estimate(override: str, key: str) -> None:
    settings = _settings("metrics=[bleu]", "correlation.significance.method=permutation", override)
    table = _frame()
    check_memory(settings, table, limit=10**12)  # feasible on a large machine
    with pytest.raises(ConfigError) as err:
        check_memory(settings, table, limit=10**9)  # not on one with 1 GB available
    message = str(err.value)
    assert message.startswith(f"{override} needs about "), message
    assert "more than the 1.0 GB this machine has available" in message, message


def test_the_defaults_fit_and_large_feasible_requests_pass() -> None:
    table = _frame(48)
    check_memory(_settings("metrics=[bleu,chrf,bertscore]"), table)
    check_memory(_settings("compare.n_bootstrap=100000", "compare.n_ar=1000000"), table)


def test_available_memory_is_read_from_the_kernel() -> None:
    found = available_memory()
    assert found is not None and found > 0
    total = next(
        int(line.split()[1]) * 1024
        for line in Path("/proc/meminfo").read_text().splitlines()
        if line.startswith("MemTotal:")
    )
    assert found <= total


def test_resamples_drawn_again_give_the_same_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """A set of resamples too large to hold keeps its generator's states and draws its rows
    again where they are read: the same rows, and the generator ends in the same state."""
    rng = np.random.default_rng(3)
    metric = rng.normal(size=(5, 70))
    human = metric + rng.normal(size=(5, 70))
    human[0, :3] = np.nan
    kwargs = dict(
        levels=("segment", "item", "system"),
        coefficients=("pearson", "kendall_b", "soft_pairwise_accuracy"),
        n_resamples=300,
    )
    held_rng, drawn_rng = np.random.default_rng(11), np.random.default_rng(11)
    held = correlation_table({"m": metric}, {"h": human}, rng=held_rng, **kwargs)
    monkeypatch.setattr(resamples_module, "HELD_INDEX_BYTES", 0)
    drawn = correlation_table({"m": metric}, {"h": human}, rng=drawn_rng, **kwargs)
    assert pd.DataFrame(drawn).equals(pd.DataFrame(held))
    assert held_rng.random() == drawn_rng.random()
    res = resamples_module.draw_resamples(np.random.default_rng(1), 5, 70, 300, "both")
    assert isinstance(res.item_idx, resamples_module.DrawnRows)
    monkeypatch.setattr(resamples_module, "HELD_INDEX_BYTES", 2**28)
    whole = resamples_module.draw_resamples(np.random.default_rng(1), 5, 70, 300, "both")
    np.testing.assert_array_equal(np.asarray(res.item_idx), whole.item_idx)
    np.testing.assert_array_equal(res.item_idx[123], whole.item_idx[123])
    np.testing.assert_array_equal(res.sys_idx, whole.sys_idx)
