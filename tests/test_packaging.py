"""The installed modules are this repository's, and a wheel works outside the repository."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import paraeval.correlation
import paraeval.metrics
import paraeval.pipeline
import pytest

REPO = Path(__file__).resolve().parents[1]


def test_generic_package_names_resolve_to_this_repo() -> None:
    # `pipeline`, `metrics` and `correlation` are common names: make sure no other distribution's
    # package of the same name shadows ours.
    for module in (paraeval.pipeline, paraeval.metrics, paraeval.correlation):
        assert module.__file__ is not None
        assert Path(module.__file__).resolve().is_relative_to(REPO), module.__file__


@pytest.mark.slow
def test_wheel_installs_and_runs_outside_the_repo(tmp_path: Path) -> None:
    wheel_dir = tmp_path / "wheel"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            str(REPO),
            "-w",
            str(wheel_dir),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    wheel = next(wheel_dir.glob("paraeval-*.whl"))
    env_dir = tmp_path / "env"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True, timeout=120
    )
    py = env_dir / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    # The fresh environment gets the wheel itself; its third-party dependencies (torch & co, too
    # large to reinstall in a test) come from the test environment through a plain path entry,
    # which does not run that environment's editable-install hooks.
    deps = sysconfig.get_paths()["purelib"]
    (site / "_paraeval_test_deps.pth").write_text(deps + "\n")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(py),
            "install",
            "--no-deps",
            "-q",
            str(wheel),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    env = dict(
        os.environ, HF_HUB_OFFLINE="1", MLFLOW_DISABLE_TELEMETRY="true", PYTHONNOUSERSITE="1"
    )
    env.pop("PYTHONPATH", None)
    # an installed wheel finds WordNet where its user put it: NLTK_DATA (the setup script of a
    # checkout prepares <repo>/.cache/nltk_data, which the wheel knows nothing about)
    env["NLTK_DATA"] = str(REPO / ".cache" / "nltk_data")
    where = subprocess.run(
        [
            str(py),
            "-c",
            "import paraeval.pipeline, paraeval.metrics; print(paraeval.pipeline.__file__); "
            "print(paraeval.metrics.__file__)",
        ],
        cwd=outside,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert str(site) in where and str(REPO) not in where
    paraeval = env_dir / "bin" / "paraeval"
    helped = subprocess.run(
        [str(paraeval), "--help"], cwd=outside, env=env, capture_output=True, text=True, timeout=120
    )
    assert helped.returncode == 0, helped.stderr[-2000:]
    assert "metrics" in helped.stdout and "data" in helped.stdout
    demo = subprocess.run(
        [
            str(paraeval),
            f"tracking.store_dir={outside / 'store'}",
            "correlation.n_resamples=50",
            "hydra.run.dir=out",
        ],
        cwd=outside,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert demo.returncode == 0, demo.stderr[-3000:]
    assert (outside / "out" / "system_scores.csv").is_file()
    assert (outside / "store" / "mlflow.db").is_file()
