"""The Python examples of README.md and docs/*.md run as written: every ```python block, each on
its own, in a fresh folder with a fresh score cache. A block that is a file the document defines
(first line ``# file: NAME.py``, see tests/test_docs.py) is written into that folder first, with
the document's other files, so the blocks after it can import it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.test_docs import REPO, Block, all_blocks, run_blocks

BLOCKS = run_blocks("python")


def test_the_documents_have_the_metric_correlation_and_evaluate_examples() -> None:
    code = "\n".join(b.code for b in BLOCKS)
    assert "from paraeval.metrics import" in code
    assert "from paraeval.correlation import" in code
    assert "paraeval.evaluate(" in code
    assert any(b.doc == "README.md" for b in BLOCKS)


def _files_of(doc: str) -> list[Block]:
    return [b for b in all_blocks() if b.doc == doc and b.file_name is not None]


@pytest.mark.slow
@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_document_example_runs(
    block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PARAEVAL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PARAEVAL_MLFLOW_DIR", str(tmp_path / "mlflow"))
    files = _files_of(block.doc)
    for f in files:
        assert f.file_name is not None
        (tmp_path / f.file_name).write_text(f.code, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    # line numbers in a traceback are the document's
    compiled = compile("\n" * (block.line - 1) + block.code, str(REPO / block.doc), "exec")
    namespace: dict[str, object] = {"__name__": "__docs__"}
    try:
        exec(compiled, namespace)
    finally:
        for f in files:
            sys.modules.pop(Path(str(f.file_name)).stem, None)
