"""The shape of pipeline/: no import cycle, thin glue, typed stage boundaries."""

from __future__ import annotations

import ast
import inspect
import typing
from pathlib import Path

from paraeval.pipeline.cli import app

from paraeval.pipeline.stages import evaluation

PIPELINE = Path(__file__).resolve().parents[2] / "pipeline"
PREFIX = "paraeval.pipeline."


def _type_checking_block(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _imports(path: Path) -> set[str]:
    """Every paraeval.pipeline module imported anywhere in the file (functions included), except
    under ``if TYPE_CHECKING:``, which never runs."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if _type_checking_block(node):
            return
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith(PREFIX):
                found.add(node.module.removeprefix(PREFIX).split(".")[0])
            elif node.module == "paraeval.pipeline":
                found.update(a.name for a in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PREFIX):
                    found.add(alias.name.removeprefix(PREFIX).split(".")[0])
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return found - {path.stem}


def _graph() -> dict[str, set[str]]:
    modules = {p.stem: p for p in PIPELINE.glob("*.py")}
    return {name: _imports(path) & set(modules) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_pipeline_has_no_import_cycle() -> None:
    graph = _graph()
    assert "evaluation" in graph and "score" in graph["evaluation"]  # the walk sees imports
    assert _cycles(graph) == []


def test_run_is_thin_glue() -> None:
    lines = inspect.getsource(app.run).splitlines()
    assert len(lines) <= 60, len(lines)


def test_stage_boundaries_are_typed_without_any() -> None:
    for stage in evaluation.STAGES:
        hints = typing.get_type_hints(stage)
        assert hints["ev"] is evaluation.Evaluation, stage.__name__
        assert "Any" not in str(hints["return"]), stage.__name__
    for name, hint in typing.get_type_hints(evaluation.Evaluation).items():
        assert "Any" not in str(hint), name
