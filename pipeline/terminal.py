"""Light on imports: Hydra loads the formatter before the run starts."""

from __future__ import annotations

import argparse
import functools
import logging
import re
import shutil
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from paraeval.pipeline.names import show

WIDTH = 100
STATUS_AFTER_S = 1.0
printable = show  # text from data for the terminal
_wrap = functools.partial(textwrap.wrap, break_on_hyphens=False, break_long_words=False)


def fit(text: str) -> str:
    """Long lines wrapped, continuation lines indented past a ``key: `` or their own indent."""
    out: list[str] = []
    for line in text.splitlines():
        if len(line) <= WIDTH:
            out.append(line)
            continue
        key = re.match(r"\s*[\w.-]+: ", line)
        indent = " " * (key.end() if key else len(line) - len(line.lstrip()) + 4)
        out.extend(_wrap(line, width=WIDTH, subsequent_indent=indent) or [line])
    return "".join(line + "\n" for line in out)


class HelpFormatter(argparse.HelpFormatter):
    """At most :data:`WIDTH` columns: argparse alone fills a wide terminal."""

    def __init__(self, prog: str) -> None:
        columns = shutil.get_terminal_size().columns - 2  # argparse's own margin
        super().__init__(prog, width=min(columns, WIDTH))


class RawDescriptionHelpFormatter(argparse.RawDescriptionHelpFormatter, HelpFormatter):
    pass


class TerminalFormatter(logging.Formatter):
    """Wrapped by default only on a terminal: a pipe or log collector gets one line a message."""

    def __init__(self, wrap: bool | None = None) -> None:
        super().__init__()
        self.wrap = wrap

    def format(self, record: logging.LogRecord) -> str:
        prefix = f"paraeval: {record.levelname.lower()}: "
        # a message of several lines (a table) is still one line: its lines joined
        message = " ".join(printable(record.getMessage(), keep_newlines=True).split("\n"))
        wrap = sys.stderr.isatty() if self.wrap is None else self.wrap
        if not wrap:
            return prefix + message
        return "\n".join(_wrap(message, width=WIDTH, initial_indent=prefix, subsequent_indent="  "))


class FileOnly(logging.Filter):
    """Library records and ``file_only`` ones (an error already printed) go to the log file."""

    def filter(self, record: logging.LogRecord) -> bool:
        own = record.name == "paraeval" or record.name.startswith("paraeval.")
        return own and not getattr(record, "file_only", False)


class Status:
    """On a terminal, the running stage's name shows while it runs."""

    def __init__(self, enabled: bool = True, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.live = enabled and self.stream.isatty()

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        if self.live:
            print(f"\r\033[K{name} …", end="", file=self.stream, flush=True)
        try:
            yield
        finally:
            if self.live:
                print("\r\033[K", end="", file=self.stream, flush=True)
        # a stage that failed says so in its error line, not here
        elapsed = time.perf_counter() - start
        if self.enabled and elapsed >= STATUS_AFTER_S:
            print(f"paraeval: {name}: {elapsed:.1f} s\n", end="", file=self.stream, flush=True)
