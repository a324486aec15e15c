"""The architecture of docs/architecture.md, checked on the package as installed: the
import-linter contracts of pyproject.toml hold, and no module imports another that imports it back
(imports inside functions and under ``TYPE_CHECKING`` count). import-linter and grimp read a
package from its folders, which exist only once the wheel maps the repository's folders into
``paraeval``: the wheel is built and installed into a temporary folder first."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CONTRACTS = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
PACKAGE_SOURCES = ("pyproject.toml", "README.md", "pipeline", "metrics", "correlation", "conf")

# grimp's graph of the installed package: every module's imports, as JSON
GRAPH_SCRIPT = """
import json, grimp
graph = grimp.build_graph("paraeval", cache_dir=None)
print(json.dumps({m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}))
"""


def _env(site: Path) -> dict[str, str]:
    # the installed copy first: the editable install's finder would map `paraeval` to the
    # repository, whose folders grimp cannot read as one package
    return {**os.environ, "PYTHONPATH": str(site), "PYTHONDONTWRITEBYTECODE": "1"}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("installed")
    # built from a copy: an in-tree build keeps modules deleted since in the checkout's build/
    source = root / "source"
    source.mkdir()
    for name in PACKAGE_SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(
                REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__")
            )
        else:
            shutil.copy2(REPO / name, source / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", str(source), "-w", str(root / "w")],
        check=True,
        timeout=300,
        cwd=root,
    )
    (wheel,) = (root / "w").glob("paraeval-*.whl")
    target = root / "site"
    subprocess.run([*pip, "install", "--no-deps", "--target", str(target), str(wheel)], check=True)
    return target


def _lint(site: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(REPO / "pyproject.toml"), "--no-cache"],
        cwd=cwd,
        env=_env(site),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _graph(site: Path, cwd: Path) -> dict[str, list[str]]:
    proc = subprocess.run(
        [sys.executable, "-c", GRAPH_SCRIPT],
        cwd=cwd,
        env=_env(site),
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    graph: dict[str, list[str]] = json.loads(proc.stdout)
    return graph


def cycles(graph: dict[str, list[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def test_the_cycle_finder_finds_cycles() -> None:
    assert cycles({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}) == [["a", "b", "c"]]
    assert cycles({"a": ["b"], "b": ["a"], "c": ["d"], "d": ["c"]}) == [["a", "b"], ["c", "d"]]
    assert cycles({"a": ["b"], "b": []}) == []


@pytest.mark.slow
def test_the_contracts_hold_on_the_installed_package(site: Path, tmp_path: Path) -> None:
    proc = _lint(site, tmp_path)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    kept = len(CONTRACTS["contracts"])
    assert f"Contracts: {kept} kept, 0 broken." in proc.stdout, proc.stdout[-2000:]


@pytest.mark.slow
def test_an_upward_import_breaks_the_layers(site: Path, tmp_path: Path) -> None:
    """The check can fail: the settings importing a stage is reported, file and line."""
    broken = tmp_path / "site"
    shutil.copytree(site, broken)
    (broken / "paraeval" / "pipeline" / "config" / "upward.py").write_text(
        "def f() -> None:\n    from paraeval.pipeline.stages import score  # noqa: F401\n"
    )
    proc = _lint(broken, tmp_path)
    assert proc.returncode != 0
    assert "paraeval.pipeline.config.upward -> paraeval.pipeline.stages.score (l.2)" in proc.stdout


@pytest.mark.slow
def test_no_module_imports_one_that_imports_it_back(site: Path, tmp_path: Path) -> None:
    graph = _graph(site, tmp_path)
    assert len(graph) > 80 and "paraeval.pipeline.stages.score" in graph
    # what the graph counts: an import inside a function, one under TYPE_CHECKING
    assert "paraeval.correlation.significance" in graph["paraeval.pipeline.stages.memory_bounds"]
    assert "paraeval.pipeline.stages.aggregate" in graph["paraeval.pipeline.stages.correlate"]
    assert cycles(graph) == []
    # the package root is the public API's facade: nothing inside imports it
    assert [m for m, deps in graph.items() if "paraeval" in deps] == []
