"""Every ``_target_`` from config is looked up by its exact name (pipeline/targets.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig

from paraeval.pipeline.config.compose import config_dir
from paraeval.pipeline.config.settings import Settings
from paraeval.pipeline.data.load import LOADERS, load_data
from paraeval.pipeline.errors import ConfigError
from paraeval.pipeline.tracking.trackers import tracker_from_settings
from tests.pipeline.helpers import run_cli

CONF = config_dir()

# names that start like an allowed one but reach other code: the modules' own imports (pandas,
# os, importlib as seen from inside paraeval), a private helper, a parent package
HOSTILE = [
    "paraeval.pipeline.data.load.pd.read_pickle",
    "paraeval.pipeline.data.load.json.loads",
    "paraeval.pipeline.data.load.Path.unlink",
    "paraeval.pipeline.data.load.memoized_load",
    "paraeval.pipeline.data.load",
    "pandas.read_pickle",
    "os.system",
    "builtins.eval",
]


def _compose(overrides: list[str]) -> DictConfig:
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("config", overrides=overrides, return_hydra_config=False)


def _check(cfg: DictConfig) -> None:
    """What a run checks before any work: the settings, the tracker it builds, the loader."""
    settings = Settings.from_config(cfg)
    tracker_from_settings(settings.tracking)
    load_data(settings.data)


@pytest.mark.slow
@pytest.mark.parametrize("target", HOSTILE)
@pytest.mark.parametrize("group", ["data", "normalize", "tracking"])
def test_hostile_targets_refused_in_every_group(group: str, target: str) -> None:
    cfg = _compose(["tracking=none", f"{group}._target_={target}"])
    with pytest.raises(ConfigError, match=rf"{group}\._target_ '{target}' is not allowed"):
        _check(cfg)


@pytest.mark.parametrize(
    "target",
    [
        "paraeval.metrics.sacre.os.system",
        "paraeval.metrics.sacre.sacrebleu.BLEU",
        "paraeval.metrics.base.Metric",
        "paraeval.metrics.sacre.importlib.import_module",
    ],
)
def test_metric_targets_inside_the_package_are_exact_names(target: str) -> None:
    from paraeval.pipeline.stages.score import build_metric

    with pytest.raises(ConfigError, match="is not allowed"):
        build_metric("evil", {"_target_": target})


def test_every_shipped_option_is_on_the_list() -> None:
    for group in ("data", "normalize", "tracking"):
        for option in sorted((CONF / group).glob("*.yaml")):
            overrides = [f"{group}={option.stem}"]
            if group == "data" and "???" in option.read_text():
                continue  # a required path: composed with one below
            settings = Settings.from_config(_compose(overrides))
            tracker_from_settings(settings.tracking)
            assert settings.data.target in LOADERS
    Settings.from_config(_compose(["data=table", "data.path=x.jsonl"]))
    from paraeval.pipeline.stages.score import build_metric

    cfg = _compose([])
    for metric_id in ("bleu", "ibleu", "chrf", "ter"):
        assert build_metric(metric_id, cfg.metrics[metric_id]).name == metric_id
    # the package-level name works too
    assert build_metric("bleu", {"_target_": "paraeval.metrics.BLEU"}).name == "bleu"


def test_near_miss_names_the_nearest_allowed_target() -> None:
    cfg = _compose(["data._target_=paraeval.pipeline.data.load.load_tabel"])
    near = r"did you mean 'paraeval\.pipeline\.data\.load\.load_table'"
    with pytest.raises(ConfigError, match=near):
        _check(cfg)


@pytest.mark.slow
def test_pickle_on_the_command_line_never_runs(tmp_path: Path) -> None:
    """The reported route: a pickle whose unpickling writes a marker file."""
    marker = tmp_path / "pwned"
    payload = tmp_path / "evil.pkl"
    payload.write_bytes(b"cos\nsystem\n(S'touch " + str(marker).encode() + b"'\ntR.")
    proc = run_cli(
        [
            "data._target_=paraeval.pipeline.data.load.pd.read_pickle",
            f"+data.filepath_or_buffer={payload}",
            "tracking=none",
            f"hydra.run.dir={tmp_path / 'out'}",
        ],
        tmp_path,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("paraeval: error:")]
    assert len(lines) == 1 and "is not allowed" in lines[0], proc.stderr[-2000:]
    assert not marker.exists()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["data=table"], r"^data\.path is required, e\.g\. data\.path=<value>$"),
        (["data=text"], r"^data\.source is required"),  # the first of two, in key order
        # a required value reached through an interpolation names the value, not the reference
        (["data=table", "+report.title=${data.path}"], r"^data\.path is required"),
        (
            ["data=table", "data.path=${oc.env:PARAEVAL_TEST_UNSET_VARIABLE}"],
            r"^the configuration does not resolve: .*PARAEVAL_TEST_UNSET_VARIABLE",
        ),
    ],
)
def test_a_required_or_unresolvable_value_is_one_line(
    overrides: list[str], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PARAEVAL_TEST_UNSET_VARIABLE", raising=False)
    with pytest.raises(ConfigError, match=message):
        Settings.from_config(_compose(["tracking=none", *overrides]))
