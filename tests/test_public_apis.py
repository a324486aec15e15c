"""Public APIs only: no module of paraeval imports, calls, reads or patches a private name of a
dependency. The one listed exception is sacrebleu's metric hooks, which sacrebleu's own
significance module uses.

The check walks every module's AST. A name is a dependency's private name when it has a leading
underscore (not a dunder) and the dependency defines it (its sources are scanned); names paraeval
defines itself are its own. Module paths count too: ``hydra._internal``, ``mlflow.store``,
``...dbmodels`` and any private module of a dependency.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CHECKED = ("pipeline", "metrics", "correlation", "benchmarks", "scripts")
DEPENDENCIES = (
    "hydra",
    "omegaconf",
    "mlflow",
    "matplotlib",
    "sqlalchemy",
    "pandas",
    "numpy",
    "scipy",
    "sacrebleu",
    "bert_score",
    "transformers",
    "tqdm",
    "rich",
    "nltk",
    "ot",
    "filelock",
    "threadpoolctl",
)
# internal modules without an underscore in their own name
INTERNAL_MODULES = ("mlflow.store", "mlflow.server", "mlflow.utils", "mlflow.protos")
INTERNAL_PARTS = ("dbmodels", "_internal")
ALLOWED = {
    ("sacrebleu", "_extract_corpus_statistics"),
    ("sacrebleu", "_compute_score_from_stats"),
}
ALLOWED_NAMES = {name for _, name in ALLOWED}
DEFINED = re.compile(
    r"(?:^|\s)(?:def|class)\s+(_[A-Za-z0-9]\w*)|\.(_[A-Za-z0-9]\w*)\s*(?::[^=\n]*)?=[^=]"
    r"|^\s*(_[A-Za-z0-9]\w*)\s*(?::[^=\n]*)?=[^=]",
    re.M,
)


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


@cache
def dependency_private_names() -> frozenset[str]:
    """Every private name that a dependency's sources define (functions, classes, attributes)."""
    names: set[str] = set()
    for dep in DEPENDENCIES:
        folder = _package_dir(dep)
        if folder is None:
            continue
        for path in folder.rglob("*.py"):
            text = path.read_text(encoding="utf-8", errors="replace")
            for m in DEFINED.finditer(text):
                names.add(next(g for g in m.groups() if g))
    return frozenset(names - ALLOWED_NAMES)


def _sources() -> list[Path]:
    return [
        p
        for d in CHECKED
        for p in sorted((REPO / d).rglob("*.py"))
        if "__pycache__" not in p.parts and ".venv" not in p.parts
    ]


@cache
def own_private_names() -> frozenset[str]:
    """Private names paraeval defines itself (its own helpers and attributes)."""
    names: set[str] = set()
    for path in _sources():
        for m in DEFINED.finditer(path.read_text(encoding="utf-8")):
            names.add(next(g for g in m.groups() if g))
    return frozenset(names)


def _is_dependency(module: str) -> bool:
    top = module.split(".")[0]
    return top in DEPENDENCIES or (
        top not in sys.stdlib_module_names and top not in ("paraeval", "tests", "__future__")
    )


def _internal_module(module: str) -> bool:
    parts = module.split(".")
    return (
        any(_private(p) for p in parts[1:])
        or any(module == m or module.startswith(m + ".") for m in INTERNAL_MODULES)
        or any(p in INTERNAL_PARTS for p in parts)
    )


def _chain(node: ast.AST) -> list[str] | None:
    """``a.b.c`` as ["a", "b", "c"], or None for anything that is not a dotted name."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return [node.id, *reversed(parts)]
    return None


def violations(source: str, filename: str = "<string>") -> Iterator[tuple[int, str]]:
    """(line, what) for each use of a dependency's private or internal name in ``source``."""
    tree = ast.parse(source, filename)
    aliases: dict[str, str] = {}  # local name -> the dependency's dotted name it is bound to
    private = dependency_private_names() - own_private_names()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if _is_dependency(a.name):
                    if _internal_module(a.name):
                        yield node.lineno, f"import {a.name}"
                    # `import a.b` binds `a`; `import a.b as c` binds `c` to a.b
                    bound = a.name if a.asname else a.name.split(".")[0]
                    aliases[a.asname or bound] = bound
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if not _is_dependency(node.module):
                continue
            if _internal_module(node.module):
                yield node.lineno, f"from {node.module} import ..."
            for a in node.names:
                if _private(a.name) and (node.module.split(".")[0], a.name) not in ALLOWED:
                    yield node.lineno, f"from {node.module} import {a.name}"
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            chain = _chain(node)
            if chain and chain[0] in aliases:
                dotted = ".".join([aliases[chain[0]], *chain[1:]])
                if _internal_module(dotted):
                    yield node.lineno, dotted
                    continue
            if node.attr in private:
                yield node.lineno, f".{node.attr}"
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else None
            arg = node.args[1] if len(node.args) >= 2 else None
            if (
                name in ("getattr", "setattr", "hasattr", "delattr")
                and isinstance(arg, ast.Constant)
                and isinstance(arg.value, str)
                and arg.value in private
            ):
                yield node.lineno, f"{name}(..., {arg.value!r})"
            if name in ("setattr", "delattr") and node.args:
                chain = _chain(node.args[0])
                if chain and chain[0] in aliases:
                    yield node.lineno, f"{name}({'.'.join(chain)}, ...): patches a dependency"
        elif isinstance(node, ast.ClassDef):
            # overriding a dependency's private method patches it for every caller
            subclasses = any((chain := _chain(base)) and chain[0] in aliases for base in node.bases)
            for item in node.body if subclasses else ():
                if (
                    isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                    and item.name in dependency_private_names()
                ):
                    yield item.lineno, f"{node.name}.{item.name} overrides a private method"
        elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                chain = _chain(target) if isinstance(target, ast.Attribute) else None
                if chain and chain[0] in aliases:
                    yield node.lineno, f"{'.'.join(chain)} = ...: patches a dependency"


@pytest.mark.slow
def test_the_checker_finds_private_imports_calls_and_patches() -> None:
    bad = (
        "import hydra._internal.config_loader_impl\n"
        "from mlflow.store.tracking.dbmodels import models\n"
        "from mlflow.tracking import _tracking_service\n"
        "from matplotlib.backends.backend_agg import RendererAgg\n"
        "RendererAgg.draw_text = lambda *a: None\n"
        "import numpy as np\n"
        "np.core = None\n"
        "def f(client):\n"
        "    return client._tracking_client.store\n"
        "def g(r):\n"
        "    return getattr(r, '_draw_text_glyphs_and_boxes')\n"
        "from mlflow.utils.validation import _validate_batch_log_data\n"
        "from nltk.corpus.reader.wordnet import WordNetCorpusReader\n"
        "class R(WordNetCorpusReader):\n"
        "    def _scan_satellites(self):\n"
        "        pass\n"
        "    def open(self, file):\n"
        "        pass\n"
    )
    found = [line for line, _ in violations(bad)]
    assert found.count(1) == 1 and found.count(2) == 1 and found.count(3) == 1
    assert {5, 7, 9, 11, 12, 15} <= set(found) and 17 not in found
    good = (
        "import numpy as np\n"
        "from mlflow import MlflowClient\n"
        "from sacrebleu.metrics import BLEU\n"
        "class M:\n"
        "    def _own(self):\n"
        "        return self._own_state\n"
        "def f(b):\n"
        "    return b._extract_corpus_statistics([], [])\n"
        "x = np.linalg.norm([1.0])\n"
    )
    assert list(violations(good)) == []


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(REPO)))
def test_no_private_name_of_a_dependency(path: Path) -> None:
    found = list(violations(path.read_text(encoding="utf-8"), str(path)))
    assert not found, "\n".join(f"{path.relative_to(REPO)}:{line}: {what}" for line, what in found)
