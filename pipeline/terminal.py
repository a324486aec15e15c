"""Status lines of long stages and log records on the terminal, one short line each, control
characters escaped. Light on imports: Hydra loads the formatter before the run starts."""

from __future__ import annotations

import logging
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from paraeval.pipeline.names import show

WIDTH = 100
# a stage that ends sooner than this gets no status line of its own
STATUS_AFTER_S = 1.0
# text from data for the terminal, control characters escaped
printable = show


class TerminalFormatter(logging.Formatter):
    """``paraeval: warning: <message>``, wrapped at 100 columns, control characters escaped;
    the log file keeps the full record with its time and logger."""

    def format(self, record: logging.LogRecord) -> str:
        return textwrap.fill(
            printable(record.getMessage()),
            width=WIDTH,
            initial_indent=f"paraeval: {record.levelname.lower()}: ",
            subsequent_indent="  ",
            break_on_hyphens=False,
            break_long_words=False,
        )


class FileOnly(logging.Filter):
    """Records marked ``extra={"file_only": True}`` (an error already printed as one line)
    stay out of the terminal."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(record, "file_only", False)


class Status:
    """One line on stderr for each stage that took longer than :data:`STATUS_AFTER_S`; on a
    terminal, the running stage's name shows while it runs."""

    def __init__(self, enabled: bool = True, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.live = enabled and self.stream.isatty()

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        if self.live:
            self.stream.write(f"\r\033[K{name} …")
            self.stream.flush()
        try:
            yield
        finally:
            if self.live:
                self.stream.write("\r\033[K")
                self.stream.flush()
        # a stage that failed says so in its error line, not here
        elapsed = time.perf_counter() - start
        if self.enabled and elapsed >= STATUS_AFTER_S:
            self.stream.write(f"{name}: {elapsed:.1f} s\n")
            self.stream.flush()
