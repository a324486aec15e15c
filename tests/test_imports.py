"""Every import goes through the one import name, ``paraeval``.

The repository's folders ``pipeline/``, ``metrics/`` and ``correlation/`` install as
``paraeval.pipeline`` ... and nothing installs the bare names (other distributions on PyPI own
them). A bare ``import pipeline`` would work in a checkout's working directory and break once
installed, so it is caught here on the source, and Hydra ``_target_`` strings with it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
SOURCE_DIRS = ("pipeline", "metrics", "correlation", "tests", "benchmarks", "scripts")
BANNED = ("pipeline", "metrics", "correlation")
TARGET_PREFIXES = ("paraeval.", "hydra_plugins.")
# the installed name of each repository folder (pyproject.toml's package-dir)
INSTALLED = {
    "paraeval": REPO / "pipeline" / "_paraeval",
    "paraeval.pipeline": REPO / "pipeline",
    "paraeval.metrics": REPO / "metrics",
    "paraeval.correlation": REPO / "correlation",
    "paraeval.conf": REPO / "conf",
}


def _python_files() -> list[Path]:
    files = [p for d in SOURCE_DIRS for p in sorted((REPO / d).rglob("*.py"))]
    return [p for p in files if ".venv" not in p.parts and "__pycache__" not in p.parts]


def _is_banned(module: str) -> bool:
    return module.split(".")[0] in BANNED


def banned_imports(source: str, filename: str = "<string>") -> Iterator[tuple[int, str]]:
    """(line, text) of each absolute import of a bare banned name, including names given to
    ``importlib.import_module`` / ``__import__`` as string literals and ``_target_`` strings."""
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _is_banned(alias.name):
                    yield node.lineno, f"import {alias.name}"
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module and _is_banned(node.module):
                yield node.lineno, f"from {node.module} import ..."
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if (
                name in ("import_module", "__import__")
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
                and _is_banned(node.args[0].value)
            ):
                yield node.lineno, f"{name}({node.args[0].value!r})"
            for kw in node.keywords:
                if kw.arg == "_target_" and isinstance(kw.value, ast.Constant):
                    target = kw.value.value
                    if isinstance(target, str) and not target.startswith(TARGET_PREFIXES):
                        yield node.lineno, f"_target_={target!r}"
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if (
                    isinstance(key, ast.Constant)
                    and key.value == "_target_"
                    and isinstance(value, ast.Constant)
                    and isinstance(value.value, str)
                    and not value.value.startswith(TARGET_PREFIXES)
                ):
                    yield node.lineno, f"'_target_': {value.value!r}"


def _yaml_targets(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "_target_" and isinstance(value, str):
                yield value
            else:
                yield from _yaml_targets(value)
    elif isinstance(node, list):
        for value in node:
            yield from _yaml_targets(value)


def test_the_checker_catches_each_form() -> None:
    source = "\n".join(
        [
            "import pipeline",
            "import metrics.sacre as s",
            "from correlation import correlate",
            "from pipeline.app import run",
            "import os, correlation.levels",
            "def f():\n    import metrics",
            "importlib.import_module('pipeline.load')",
            "__import__('metrics')",
            "cfg = {'_target_': 'metrics.sacre.BLEU'}",
            "instantiate(_target_='pipeline.load.load_demo')",
            # allowed
            "import paraeval.pipeline",
            "from paraeval.metrics import BLEU",
            "from . import metrics",
            "from .pipeline import x",
            "import pipelines, metrics_extra",
            "cfg = {'_target_': 'paraeval.metrics.sacre.BLEU'}",
        ]
    )
    found = sorted(line for line, _ in banned_imports(source))
    assert found == [1, 2, 3, 4, 5, 7, 8, 9, 10, 11]


def test_no_bare_package_imports_in_the_sources() -> None:
    files = _python_files()
    # the folders are really there (an empty walk would pass vacuously)
    assert len(files) > 50
    for d in SOURCE_DIRS:
        assert any(p.is_relative_to(REPO / d) for p in files), d
    bad = [
        f"{path.relative_to(REPO)}:{line}: {text}"
        for path in files
        for line, text in banned_imports(path.read_text(encoding="utf-8"), str(path))
    ]
    assert not bad, "import through `paraeval.` instead:\n" + "\n".join(bad)


def _defined_names(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.ImportFrom):
            names.update(a.asname or a.name for a in node.names)
    return names


def _source_of(module: str) -> Path | None:
    """The repository file of an installed ``paraeval.*`` module name."""
    for package in sorted(INSTALLED, key=len, reverse=True):
        if module == package or module.startswith(package + "."):
            rest = module[len(package) :].lstrip(".").split(".") if module != package else []
            base = INSTALLED[package].joinpath(*rest)
            for candidate in (base.with_suffix(".py"), base / "__init__.py"):
                if candidate.is_file():
                    return candidate
    return None


def _conf_targets() -> list[tuple[str, str]]:
    files = sorted((REPO / "conf").rglob("*.yaml"))
    assert files, "conf/ holds no YAML files"
    return [
        (str(path.relative_to(REPO)), target)
        for path in files
        for target in _yaml_targets(yaml.safe_load(path.read_text(encoding="utf-8")))
    ]


def test_config_targets_use_the_installed_name() -> None:
    targets = _conf_targets()
    assert len(targets) >= 19 + 5  # metrics and data loaders at least
    bad = [f"{where}: {t}" for where, t in targets if not t.startswith(TARGET_PREFIXES)]
    assert not bad, "_target_ must start with paraeval. (or hydra_plugins.):\n" + "\n".join(bad)


@pytest.mark.parametrize(
    "target",
    sorted({t for _, t in _conf_targets() if t.startswith("paraeval.")}),
)
def test_paraeval_config_targets_exist_in_the_sources(target: str) -> None:
    module, _, attr = target.rpartition(".")
    path = _source_of(module)
    assert path is not None, f"{target}: no source file for {module}"
    assert attr in _defined_names(path), f"{target}: {attr} is not defined in {path}"
