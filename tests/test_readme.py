"""The README's Python examples run as written: every ```python block, each on its own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)


def python_blocks(text: str) -> list[tuple[int, str]]:
    """(first line number, code) of each ```python fenced block."""
    return [(text.count("\n", 0, m.start(1)) + 1, m.group(1)) for m in FENCE.finditer(text)]


BLOCKS = python_blocks(README.read_text(encoding="utf-8"))


def test_the_extractor_finds_fenced_python_blocks() -> None:
    text = "intro\n```python\nx = 1\n```\n```bash\nls\n```\n\n```python\ny = 2\nz = 3\n```\n"
    assert python_blocks(text) == [(3, "x = 1\n"), (10, "y = 2\nz = 3\n")]
    # the README has the metrics and the correlation examples at least
    assert len(BLOCKS) >= 2
    code = "\n".join(c for _, c in BLOCKS)
    assert "from paraeval.metrics import" in code
    assert "from paraeval.correlation import" in code


@pytest.mark.parametrize(("line", "code"), BLOCKS, ids=[f"README.md:{n}" for n, _ in BLOCKS])
def test_readme_example_runs(
    line: int, code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    # line numbers in a traceback are the README's
    compiled = compile("\n" * (line - 1) + code, str(README), "exec")
    namespace: dict[str, object] = {"__name__": "__readme__"}
    exec(compiled, namespace)
