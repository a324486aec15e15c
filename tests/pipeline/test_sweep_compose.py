"""A multirun's job configs (pipeline/sweep_compose.py): composed once per job, and copied from
an earlier job's where only plain values differ; every one equal to Hydra's own compose."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra._internal.utils import create_config_search_path
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from paraeval.pipeline.cli.main import config_dir
from paraeval.pipeline.cli.sweep_compose import compose_each_sweep_job_once

# Hydra's own load_sweep_config, taken before any test installs the shortcuts
HYDRA_LOAD_SWEEP_CONFIG = ConfigLoaderImpl.load_sweep_config


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The shortcuts installed for one test (undone after it); yields a list whose length is the
    number of composes Hydra made."""
    monkeypatch.setattr(ConfigLoaderImpl, "load_sweep_config", HYDRA_LOAD_SWEEP_CONFIG)
    compose_each_sweep_job_once()
    compose_each_sweep_job_once()  # installed once
    assert ConfigLoaderImpl.load_sweep_config is not HYDRA_LOAD_SWEEP_CONFIG
    composes: list[int] = []
    real = ConfigLoaderImpl.load_configuration

    def counting(self: ConfigLoaderImpl, *args: Any, **kwargs: Any) -> DictConfig:
        composes.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(ConfigLoaderImpl, "load_configuration", counting)
    yield composes


def loader_and_master(overrides: list[str]) -> tuple[ConfigLoaderImpl, DictConfig]:
    loader = ConfigLoaderImpl(config_search_path=create_config_search_path(str(config_dir())))
    master = loader.load_configuration("config", overrides, RunMode.MULTIRUN)
    return loader, master


def same_config(a: DictConfig, b: DictConfig) -> None:
    """Equal values (unresolved, with their types), the same YAML and the same flags."""
    assert OmegaConf.to_container(a, resolve=False) == OmegaConf.to_container(b, resolve=False)
    assert OmegaConf.to_yaml(a) == OmegaConf.to_yaml(b)
    for x, y in ((a, b), (a.hydra, b.hydra), (a.metrics, b.metrics)):
        assert OmegaConf.is_struct(x) == OmegaConf.is_struct(y)
        assert OmegaConf.is_readonly(x) == OmegaConf.is_readonly(y)


def test_each_sweep_job_config_is_composed_once(installed: list[int]) -> None:
    """The config Hydra's sweeper composes to validate a job is the one its launcher runs: one
    compose per job instead of two, and the same config as a fresh compose."""
    loader, master = loader_and_master(["report.progress=false"])
    job = ["metrics.ibleu.alpha=0.3"]
    fresh = HYDRA_LOAD_SWEEP_CONFIG(loader, master, job)
    installed.clear()
    validated = loader.load_sweep_config(master, job)  # the sweeper's validation
    launched = loader.load_sweep_config(master, job)  # the launcher
    assert len(installed) == 1 and launched is validated
    again = loader.load_sweep_config(master, job)  # a later request: a copy of the first
    assert len(installed) == 1 and again is not launched
    same_config(launched, fresh)
    same_config(again, fresh)
    assert launched.metrics.ibleu.alpha == 0.3


# sweeps as Hydra's basic sweeper hands them out: the command line's fixed overrides and one
# value of each swept setting, in the command line's order
SWEEPS = {
    "alpha": (
        ["data=demo", "report.print_tables=false", "metrics.ibleu.alpha=0.0,0.05,1.0,0.55"],
        [
            ["data=demo", "report.print_tables=false", f"metrics.ibleu.alpha={a}"]
            for a in ("0.0", "0.05", "1.0", "0.55")
        ],
    ),
    "two settings, ints, strings and an interpolation": (
        ["metrics=[bleu,ibleu]", "correlation.n_resamples=10,20", "report.format=png,svg"],
        [
            ["metrics=[bleu,ibleu]", f"correlation.n_resamples={n}", f"report.format={f}"]
            for n in ("10", "20", "${seed}")
            for f in ("png", "svg", "'png'")
        ],
    ),
    "excluded from the output folder's name": (
        ["hydra.job.config.override_dirname.exclude_keys=[seed]", "seed=1,2,3", "data=demo"],
        [["seed=1", "data=demo"], ["seed=2", "data=demo"], ["seed=3", "data=demo"]],
    ),
}


@pytest.mark.parametrize("name", list(SWEEPS))
def test_copied_job_configs_equal_hydras_composes(name: str, installed: list[int]) -> None:
    command_line, jobs = SWEEPS[name]
    loader, master = loader_and_master(command_line)
    expected = [HYDRA_LOAD_SWEEP_CONFIG(loader, master, job) for job in jobs]
    installed.clear()
    got = [loader.load_sweep_config(master, job) for job in jobs]
    assert len(installed) == 1  # the first job composed; every later one copied
    for job, a, b in zip(jobs, got, expected, strict=True):
        same_config(a, b)
        assert OmegaConf.to_container(a.hydra.overrides.task, resolve=False) == job
        assert a.hydra.job.override_dirname == b.hydra.job.override_dirname
    assert len({str(c.hydra.job.override_dirname) for c in got}) == len(
        {str(c.hydra.job.override_dirname) for c in expected}
    )
    # the launcher gets the configs validated above: no compose, no copy
    launched = [loader.load_sweep_config(master, job) for job in jobs]
    assert all(a is b for a, b in zip(launched, got, strict=True))
    assert len(installed) == 1


def test_a_value_of_another_type_is_taken_as_a_compose_takes_it(installed: list[int]) -> None:
    """A string where the earlier job set a number (the settings are untyped YAML): the copy
    holds it as Hydra's compose does, and the run's own checks refuse it later."""
    loader, master = loader_and_master(["correlation.n_resamples=10,x"])
    loader.load_sweep_config(master, ["correlation.n_resamples=10"])
    expected = HYDRA_LOAD_SWEEP_CONFIG(loader, master, ["correlation.n_resamples=x"])
    installed.clear()
    copied = loader.load_sweep_config(master, ["correlation.n_resamples=x"])
    assert not installed  # a copy, not a compose
    same_config(copied, expected)
    assert copied.correlation.n_resamples == "x"


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (["data=demo"], ["data=parabank"]),  # a config group: another defaults tree
        (["metrics=[bleu,ibleu]"], ["metrics=[bleu,chrf]"]),  # a multi-select group
        (["+extra=1"], ["+extra=2"]),  # an added key
        (["report.format=png"], ["report.format=png", "seed=3"]),  # another set of keys
        (["report.format=png"], ["seed=3"]),  # another key at the same place
        (["alpha_curve={seed: 3}"], ["alpha_curve={dev_fraction: 0.4}"]),  # a dict merges: compose
        (["hydra.job.chdir=false"], ["hydra.job.chdir=true"]),  # a hydra setting
    ],
)
def test_other_changes_are_composed(
    first: list[str], second: list[str], installed: list[int]
) -> None:
    loader, master = loader_and_master([])
    for job in (first, second):
        try:
            expected = HYDRA_LOAD_SWEEP_CONFIG(loader, master, job)
        except Exception:
            pytest.fail(f"Hydra cannot compose {job}: not a case of this test")
        installed.clear()
        same_config(loader.load_sweep_config(master, job), expected)
        assert len(installed) == 1
