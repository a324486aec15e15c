"""The documents' code blocks, found once for the tests that run them, and the rules they follow.

The documents are README.md and docs/*.md. Their fenced blocks are of three kinds:

- ```python: run by tests/test_readme.py, each block on its own. A block whose first line is
  ``# file: NAME.py`` is also a file the document defines: it is written to the folder where that
  document's blocks and commands run, before they run.
- ```bash: their ``paraeval`` and ``paraeval-log`` lines are run by tests/test_readme_commands.py,
  in order. Lines with other commands (make, pip, python scripts, mlflow, ray) install or set
  things up and are not run by the tests (``make test`` has done that setup).
- ```text: output shown to the reader; nothing to run.

A block right below an HTML comment ``<!-- not run here: REASON -->`` needs what the test machine
lacks (a GPU, a SLURM or Ray cluster, a remote server): it is not run, its reason names one of
those, and the text above it tells the reader so. Every other block is run.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)
NOT_RUN = re.compile(r"<!--[ \t]*not run here:[ \t]*([^\n]*?)[ \t]*-->[ \t]*\n\Z")
LANGUAGES = ("python", "bash", "text")
# what a block may need that the test machine lacks
LACKING = ("GPU", "SLURM", "Ray cluster", "remote server", "remote cluster")
# the commands the tests run; any other command of a bash block is setup
RUN = ("paraeval", "paraeval-log", "paraeval-score")
SETUP = ("make", "pip", "python", "mlflow", "ray", ".venv/bin/pytest")
ENV_WORD = re.compile(r"^[A-Z_][A-Z0-9_]*=")
FILE_LINE = re.compile(r"^# file: ([\w.-]+\.py)[ \t]*$")


@dataclass(frozen=True)
class Block:
    doc: str  # the document's path relative to the repository
    line: int  # the line of the block's first code line
    language: str
    code: str
    not_run: str | None  # the reason, where the block is marked as not run here

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}"

    @property
    def file_name(self) -> str | None:
        """NAME.py where the block is a file the document defines."""
        first = self.code.split("\n", 1)[0]
        m = FILE_LINE.match(first)
        return m.group(1) if m else None


@dataclass(frozen=True)
class Command:
    block: Block
    line: int  # the document's line where the command starts
    env: dict[str, str]  # NAME=value words before the command
    program: str
    args: list[str]

    @property
    def id(self) -> str:
        return f"{self.block.doc}:{self.line}"


def documents() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def blocks_of(text: str, doc: str) -> list[Block]:
    found = []
    for m in FENCE.finditer(text):
        marker = NOT_RUN.search(text, 0, m.start())
        found.append(
            Block(
                doc=doc,
                line=text.count("\n", 0, m.start(2)) + 1,
                language=m.group(1).strip(),
                code=m.group(2),
                not_run=marker.group(1) if marker else None,
            )
        )
    return found


def all_blocks() -> list[Block]:
    return [
        b
        for path in documents()
        for b in blocks_of(path.read_text(encoding="utf-8"), str(path.relative_to(REPO)))
    ]


def commands_of(block: Block) -> list[Command]:
    """Every command of a bash block: continuations joined, comments dropped, split as a shell
    would, with leading NAME=value words taken as its environment."""
    commands = []
    lines = block.code.split("\n")
    i = 0
    while i < len(lines):
        start = i
        text = lines[i]
        while text.endswith("\\") and i + 1 < len(lines):
            i += 1
            text = text[:-1] + " " + lines[i]
        i += 1
        words = shlex.split(text, comments=True)
        env = {}
        while words and ENV_WORD.match(words[0]):
            name, _, value = words.pop(0).partition("=")
            env[name] = value
        if words:
            commands.append(Command(block, block.line + start, env, words[0], words[1:]))
    return commands


def run_blocks(language: str) -> list[Block]:
    """The blocks of ``language`` that the tests run."""
    return [b for b in all_blocks() if b.language == language and b.not_run is None]


def run_commands(block: Block) -> list[Command]:
    return [c for c in commands_of(block) if c.program in RUN]


# --------------------------------------------------------------------------- the extractor
def test_blocks_carry_their_document_line_language_and_marker() -> None:
    text = (
        "intro\n```python\nx = 1\n```\n\n<!-- not run here: needs a GPU -->\n```bash\nls\n```\n"
        "```text\nout\n```\n"
    )
    found = blocks_of(text, "doc.md")
    assert [(b.id, b.language, b.code, b.not_run) for b in found] == [
        ("doc.md:3", "python", "x = 1\n", None),
        ("doc.md:8", "bash", "ls\n", "needs a GPU"),
        ("doc.md:11", "text", "out\n", None),
    ]


def test_a_marker_applies_only_to_the_block_right_below_it() -> None:
    text = "<!-- not run here: needs a GPU -->\nsome text\n```bash\nparaeval\n```\n"
    assert blocks_of(text, "d.md")[0].not_run is None


def test_commands_join_continuations_drop_comments_and_take_the_environment() -> None:
    text = (
        "```bash\nparaeval a=1 \\\n   'b=[x, y]'   # note\nmake run\n"
        "PYTHONPATH=. paraeval c=2\nparaeval-log out --store-dir mlflow\n```\n"
    )
    block = blocks_of(text, "d.md")[0]
    assert [(c.id, c.env, c.program, c.args) for c in run_commands(block)] == [
        ("d.md:2", {}, "paraeval", ["a=1", "b=[x, y]"]),
        ("d.md:5", {"PYTHONPATH": "."}, "paraeval", ["c=2"]),
        ("d.md:6", {}, "paraeval-log", ["out", "--store-dir", "mlflow"]),
    ]
    assert [c.program for c in commands_of(block)] == [
        "paraeval",
        "make",
        "paraeval",
        "paraeval-log",
    ]


def test_a_file_block_names_its_file() -> None:
    (block,) = blocks_of("```python\n# file: my_mod.py\nX = 1\n```\n", "d.md")
    assert block.file_name == "my_mod.py"
    (plain,) = blocks_of("```python\n# a comment\nX = 1\n```\n", "d.md")
    assert plain.file_name is None


# --------------------------------------------------------------------------- the documents' rules
def test_every_block_is_python_bash_or_text() -> None:
    odd = [(b.id, b.language) for b in all_blocks() if b.language not in LANGUAGES]
    assert not odd, f"blocks the tests would neither run nor recognise as output: {odd}"


def test_blocks_not_run_here_need_what_the_test_machine_lacks_and_say_so() -> None:
    for path in documents():
        text = path.read_text(encoding="utf-8")
        for b in blocks_of(text, str(path.relative_to(REPO))):
            if b.not_run is None:
                continue
            assert any(k.lower() in b.not_run.lower() for k in LACKING), (b.id, b.not_run)
            # the reader, who does not see the comment, is told in the paragraph above it
            above = text[: text.index(b.code)].rsplit("<!--", 1)[0][-600:]
            assert "not run" in above, f"{b.id}: the text above the block does not say so"


def test_bash_blocks_hold_commands_the_tests_run_or_setup_commands() -> None:
    for b in all_blocks():
        if b.language != "bash":
            continue
        unknown = [c.program for c in commands_of(b) if c.program not in RUN + SETUP]
        assert not unknown, f"{b.id}: commands neither run nor known as setup: {unknown}"


def test_the_documents_have_blocks_of_each_kind_to_run() -> None:
    python = run_blocks("python")
    commands = [c for b in run_blocks("bash") for c in run_commands(b)]
    docs = {b.doc for b in python} | {c.block.doc for c in commands}
    assert {"README.md", "docs/api.md", "docs/cli.md", "docs/alpha.md"} <= docs
    assert {c.program for c in commands} == set(RUN)
    # a handful of representative commands, each taking seconds: the suite stays short
    assert 8 <= len(commands) <= 25, len(commands)


def test_the_readme_is_short_and_shows_the_test_command() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 300
    assert "make test" in readme and "make run" in readme
    assert "make test" in (REPO / ".ci" / "run").read_text(encoding="utf-8")


def test_relative_links_of_the_documents_resolve() -> None:
    link = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
    for path in [*documents(), REPO / "CHANGELOG.md"]:
        text = path.read_text(encoding="utf-8")
        for target in link.findall(text):
            if "://" in target:
                continue
            assert (path.parent / target).exists(), f"{path.name}: broken link {target}"
