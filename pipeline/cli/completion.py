"""Tab completion: Hydra's candidates but class paths (``data._target_=``), and what Hydra does not
offer: a group's options in a list or a sweep (``metrics=[bleu,ch`` -> ``metrics=[bleu,chrf``)."""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from contextlib import redirect_stdout

from paraeval.pipeline.cli.checks import GROUPS
from paraeval.pipeline.config.compose import config_dir


def query(argv: list[str], hydra_query: Callable[[], None]) -> None:
    """The shell's script reads the candidates from stdout: fish one a line, bash and zsh spaced."""
    line = os.environ.get("COMP_LINE", "")
    word = "" if line.endswith(" ") else (line.split() or [""])[-1]
    key, _, value = word.partition("=")
    group = key.lstrip("+~")
    cut = max(value.rfind(","), value.rfind("[")) + 1  # a list's or a sweep's next option
    if group in GROUPS and cut:
        prefix, chosen = value[cut:], value[:cut].replace("[", ",").split(",")
        options = sorted(p.stem for p in (config_dir() / group).glob("*.yaml"))
        start = word.removesuffix(prefix)
        found = [start + o for o in options if o.startswith(prefix) and o not in chosen]
    else:
        buffer = io.StringIO()
        with redirect_stdout(buffer):
            hydra_query()
        keys = [(c, c.partition("=")[0].split(".")) for c in buffer.getvalue().split()]
        found = [c for c, parts in keys if not any(p.startswith("_") for p in parts)]
    print(("\n" if "query=fish" in argv else " ").join(found))
