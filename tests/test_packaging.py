"""The installed modules are this repository's, and a wheel works outside the repository."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest

import paraeval.correlation
import paraeval.metrics
import paraeval.pipeline

REPO = Path(__file__).resolve().parents[1]
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
# PyPI's distributions of two of the generic names (make setup-dev downloads them; see Makefile)
FOREIGN_WHEELS = REPO / ".cache" / "foreign-wheels"
FOREIGN = {"pipeline": "0.1.0", "correlation": "1.0.0"}
# each of these, importable from the working folder, fails the command that imports it
TRAP = 'raise RuntimeError("the bare name {name!r} was imported instead of paraeval.{name}")\n'


def test_generic_package_names_resolve_to_this_repo() -> None:
    # `pipeline`, `metrics` and `correlation` are common names: make sure no other distribution's
    # package of the same name shadows ours.
    for module in (paraeval.pipeline, paraeval.metrics, paraeval.correlation):
        assert module.__file__ is not None
        assert Path(module.__file__).resolve().is_relative_to(REPO), module.__file__


def _run(args: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(args, capture_output=True, text=True, **kwargs)  # type: ignore[call-overload]
    assert done.returncode == 0, f"{args}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


def _record(text: str) -> list[str]:
    return [row[0] for row in csv.reader(io.StringIO(text)) if row]


def _files_under(root: Path, folder: str) -> set[str]:
    return {
        p.relative_to(root).as_posix()
        for p in (root / folder).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


def _foreign_wheels() -> list[Path]:
    wheels = [FOREIGN_WHEELS / f"{name}-{v}-py3-none-any.whl" for name, v in FOREIGN.items()]
    missing = [w.name for w in wheels if not w.is_file()]
    if missing:
        pytest.fail(
            f"{FOREIGN_WHEELS} lacks {missing}: run `make setup-dev`, which downloads PyPI's "
            "`pipeline` and `correlation` wheels for this test (the test itself is offline)"
        )
    return wheels


@pytest.mark.slow
def test_wheel_installs_next_to_the_generic_distributions_and_runs_outside_the_repo(
    tmp_path: Path,
) -> None:
    foreign_wheels = _foreign_wheels()
    # (a) the wheel
    wheel_dir = tmp_path / "wheel"
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
    _run([*build, str(REPO), "-w", str(wheel_dir)], timeout=300)
    (wheel,) = wheel_dir.glob("paraeval-*.whl")
    dist_info = f"paraeval-{VERSION}.dist-info"
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        recorded = _record(zf.read(f"{dist_info}/RECORD").decode())
    assert {n.split("/")[0] for n in names} == {"paraeval", dist_info}
    assert sorted(recorded) == sorted(names)
    conf_yaml = {p.relative_to(REPO / "conf").as_posix() for p in (REPO / "conf").rglob("*.yaml")}
    assert {n.removeprefix("paraeval/conf/") for n in names if n.endswith(".yaml")} == conf_yaml
    assert "paraeval/pipeline/data/demo/demo.jsonl" in names
    # report.html's template and style sheet
    templates = {p.name for p in (REPO / "pipeline" / "report" / "templates").iterdir()}
    assert {"report.html.j2", "report.css"} <= templates
    assert {f"paraeval/pipeline/report/templates/{t}" for t in templates} <= set(names)
    assets = {p.name for p in (REPO / "metrics" / "assets").iterdir() if p.is_file()}
    assert assets and {f"paraeval/metrics/assets/{a}" for a in assets} <= set(names)
    assert "paraeval/__init__.py" in names and "paraeval/__main__.py" in names

    # (b) a fresh environment: PyPI's `pipeline` and `correlation` first, then the wheel
    env_dir = tmp_path / "env"
    _run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], timeout=120)
    py = env_dir / "bin" / "python"
    site = Path(
        _run(
            [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
        ).stdout.strip()
    )
    # Third-party dependencies (torch & co, too large to reinstall in a test) come from the test
    # environment through plain path entries, which do not run that environment's .pth files
    # (its editable-install hook for paraeval, the checkout's path).
    deps = [sysconfig.get_paths()["purelib"]] + [
        p
        for p in sys.path
        if Path(p).name in ("site-packages", "dist-packages") and Path(p).is_dir()
    ]
    (site / "_paraeval_test_deps.pth").write_text("\n".join(dict.fromkeys(deps)) + "\n")
    pip = [sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps"]
    _run(
        pip
        + ["--no-index", "--find-links", str(FOREIGN_WHEELS)]
        + [f"{name}=={v}" for name, v in FOREIGN.items()],
        timeout=300,
    )
    foreign_files = {
        name: set(_record((site / f"{name}-{v}.dist-info" / "RECORD").read_text()))
        for name, v in FOREIGN.items()
    }
    assert len(foreign_wheels) == 2 and all(foreign_files.values())
    _run([*pip, str(wheel)], timeout=300)

    # (c) nothing of paraeval at the top of site-packages; pipeline/ and correlation are PyPI's
    top = {p.name for p in site.iterdir()} - {"__pycache__", "_paraeval_test_deps.pth"}
    assert top == {
        "paraeval",
        dist_info,
        "pipeline",
        f"pipeline-{FOREIGN['pipeline']}.dist-info",
        "correlation.py",
        f"correlation-{FOREIGN['correlation']}.dist-info",
    }, top
    assert not (site / "metrics").exists() and not (site / "correlation").exists()
    assert (
        _files_under(site, "pipeline")
        == {f for f in foreign_files["pipeline"] if f.startswith("pipeline/") and ".pyc" not in f}
        == {"pipeline/__init__.py", "pipeline/pipeline.py"}
    )
    assert "correlation.py" in foreign_files["correlation"]
    installed = _record((site / dist_info / "RECORD").read_text())
    scripts = {f"../../../bin/{name}" for name in ("paraeval", "paraeval-log", "paraeval-score")}
    assert scripts <= set(installed)
    stray = [
        f
        for f in installed
        if not f.startswith(("paraeval/", f"{dist_info}/")) and f not in scripts
    ]
    assert not stray, stray
    assert (site / dist_info / "top_level.txt").read_text().split() == ["paraeval"]

    # (d) from a folder whose pipeline.py, metrics.py and correlation.py fail on import, also
    # put in front of every process's path, so that no bare import can go unnoticed
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    for name in ("pipeline", "metrics", "correlation"):
        (outside / f"{name}.py").write_text(TRAP.format(name=name))
    env = dict(
        os.environ, HF_HUB_OFFLINE="1", MLFLOW_DISABLE_TELEMETRY="true", PYTHONNOUSERSITE="1"
    )
    env.pop("PYTHONPATH", None)
    # an installed wheel finds WordNet where its user put it: NLTK_DATA (the setup script of a
    # checkout prepares <repo>/.cache/nltk_data, which the wheel knows nothing about)
    env["NLTK_DATA"] = str(REPO / ".cache" / "nltk_data")
    clean_env = dict(env)
    env["PYTHONPATH"] = str(outside)
    bare = subprocess.run(
        [str(py), "-c", "import metrics"], cwd=outside, env=env, capture_output=True, text=True
    )
    assert bare.returncode != 0 and "bare name 'metrics'" in bare.stderr  # the trap is armed

    paraeval = str(env_dir / "bin" / "paraeval")
    for cmd in ([paraeval, "--version"], [str(py), "-m", "paraeval", "--version"]):
        shown = _run(cmd, cwd=outside, env=env, timeout=120)
        assert shown.stdout.strip() == f"paraeval {VERSION}", cmd
    helped = _run([paraeval, "--help"], cwd=outside, env=env, timeout=120)
    assert "metrics" in helped.stdout and "data" in helped.stdout

    api = _run(
        [
            str(py),
            "-c",
            "import sys\n"
            "import paraeval\n"
            "from paraeval.metrics import BLEU\n"
            "result = BLEU().score(['the cat sat on the mat'], [['the cat sat on the mat']])\n"
            "assert abs(result.corpus['bleu'] - 100.0) < 1e-9, result.corpus\n"
            "from paraeval.pipeline.data.load import demo_path\n"
            "ev = paraeval.evaluate(demo_path(), ['bleu', 'ibleu'], cache={'enabled': False},\n"
            "    correlation={'n_resamples': 50}, compare={'n_bootstrap': 50, 'n_ar': 100})\n"
            "assert ev.systems.loc['copy', 'ibleu'] < 0 < ev.systems.loc['strong', 'ibleu']\n"
            "assert not ev.correlations.empty and ev.write('api_out').is_dir()\n"
            "assert not {'pipeline', 'metrics', 'correlation'} & set(sys.modules)\n"
            "print(paraeval.__version__)\n"
            "print(sys.modules['paraeval.metrics'].__file__)\n",
        ],
        cwd=outside,
        env=env,
        timeout=300,
    )
    version, metrics_file = api.stdout.split()[-2:]
    assert (outside / "api_out" / "system_scores.csv").is_file()
    page = (outside / "api_out" / "report.html").read_text(encoding="utf-8")
    assert '<section id="answers">' in page and 'data-ranking="syntactic"' in page
    assert ">strong</td>" in page  # the template and its tables from the installed wheel
    assert version == VERSION
    assert Path(metrics_file).is_relative_to(site) and not Path(metrics_file).is_relative_to(REPO)

    demo = _run(
        [
            paraeval,
            f"tracking.store_dir={outside / 'store'}",
            "correlation.n_resamples=50",
            "hydra.run.dir=out",
        ],
        cwd=outside,
        env=env,
        timeout=600,
    )
    assert (outside / "out" / "system_scores.csv").is_file(), demo.stdout[-2000:]
    assert (outside / "store" / "mlflow.db").is_file()

    # the generic names, imported by themselves (no trap on the path), are PyPI's packages
    check = tmp_path / "check_foreign.py"
    check.write_text(
        "import importlib.metadata as md\n"
        "import correlation, pipeline\n"
        "import paraeval.correlation, paraeval.pipeline\n"
        "assert pipeline is not paraeval.pipeline and correlation is not paraeval.correlation\n"
        "assert callable(correlation.corr) and hasattr(pipeline, '__path__')\n"
        "assert not hasattr(correlation, 'correlate')\n"
        "names = md.packages_distributions()\n"
        "assert set(names['pipeline']) == {'pipeline'}, names['pipeline']\n"
        "assert set(names['correlation']) == {'correlation'}, names['correlation']\n"
        "assert set(names['paraeval']) == {'paraeval'}, names['paraeval']\n"
        "print(pipeline.__file__)\n"
        "print(correlation.__file__)\n"
    )
    where = _run([str(py), str(check)], cwd=tmp_path, env=clean_env, timeout=120).stdout.split()
    assert where == [str(site / "pipeline" / "__init__.py"), str(site / "correlation.py")]
