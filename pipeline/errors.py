"""User errors (one line: where, and what to do), interrupts, and the per-command run context."""

from __future__ import annotations

import difflib
import signal
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path


class UserError(Exception):
    """Printed as one line, no traceback."""


class DataError(UserError):
    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        row: int | None = None,
        column: str | None = None,
    ) -> None:
        where = [str(file)] if file is not None else []
        where += [f"row {row}"] if row is not None else []
        where += [f"column '{column}'"] if column is not None else []
        prefix = ", ".join(where)
        super().__init__(f"{prefix}: {message}" if prefix else message)
        self.file, self.row, self.column = file, row, column


class ConfigError(UserError):
    """An invalid configuration value."""


class OutputError(UserError):
    def __init__(self, path: object, exc: OSError) -> None:
        reason = exc.strerror or str(exc) or type(exc).__name__
        folder = getattr(path, "parent", None)
        kept = f"; files written before it are kept in {folder}" if folder is not None else ""
        super().__init__(
            f"cannot write {path} ({reason}){kept}; free space or choose another "
            "output folder (hydra.run.dir) and run again"
        )
        self.path, self.errno = path, exc.errno


def suggest(choice: str, options: Iterable[str], what: str) -> str:
    """The whole list only where it is short: 28 metric names would bury the answer."""
    ordered = sorted(options)
    near = difflib.get_close_matches(choice, ordered, n=3, cutoff=0.6)
    if near:
        return f"did you mean {' or '.join(repr(n) for n in near)}?"
    if len(ordered) <= 10:
        return f"choose from {ordered}"
    return f"paraeval --help lists the {len(ordered)} {what}"


def not_allowed(where: str, name: str, kind: str, choices: list[str]) -> ConfigError:
    near = difflib.get_close_matches(name, choices, n=1, cutoff=0.6)
    hint = f"did you mean '{near[0]}'? " if near else ""
    return ConfigError(
        f"{where} '{name}' is not allowed: it is not a paraeval {kind}; {hint}"
        f"choose from {', '.join(choices)}"
    )


class Interrupted(BaseException):
    """A BaseException, like KeyboardInterrupt: ``except Exception`` blocks let it through."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        self.name = signal.Signals(signum).name
        self.status = 128 + signum  # the shell's convention: 130 for SIGINT, 143 for SIGTERM
        super().__init__(self.name)

    def __reduce__(self) -> tuple[type[Interrupted], tuple[int]]:
        # rebuilt from its number where a sweep's worker sends it back to the command
        return (Interrupted, (self.signum,))


def being_handled() -> bool:
    """Whether an :class:`Interrupted` is the exception being handled or what it arose from."""
    exc: BaseException | None = sys.exc_info()[1]
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, Interrupted):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


@dataclass
class RunContext:
    out_dir: Path | None = None  # the output folder of the job in progress
    # landed in code an exception must not cut (the MLflow store's session): raised once it is left
    deferred_signals: list[int] = field(default_factory=list)
    # until :meth:`taken`: the timer raises again one Python swallowed (an os.fork callback)
    raised_signals: list[int] = field(default_factory=list)
    figures_missing: list[Path] = field(default_factory=list)  # a drawing process was killed
    not_logged: list[Path] = field(default_factory=list)  # the tracker's backend failed

    def taken(self) -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)
        self.raised_signals.clear()
        self.deferred_signals.clear()

    def raise_deferred(self) -> None:
        """Called between the store's requests."""
        if self.deferred_signals:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signum = self.deferred_signals[0]
            self.deferred_signals.clear()
            raise Interrupted(signum)
