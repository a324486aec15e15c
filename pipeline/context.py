"""The run context: what one command shares with the layers it calls, owned by the command and
passed down (never a module global): its output folder, the interrupts its signal handler
deferred or raised, and the folders whose figures or MLflow run are missing, which its exit status
reports."""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from pathlib import Path

from paraeval.pipeline.errors import Interrupted


@dataclass
class RunContext:
    out_dir: Path | None = None  # the output folder of the job in progress
    # signals the handler deferred because they landed in code an exception must not cut (the
    # MLflow store's session): raised once it is left, by a retry timer or a checkpoint
    # (:meth:`raise_deferred`), so a run never finishes as if Ctrl-C was not pressed
    deferred_signals: list[int] = field(default_factory=list)
    # the signal the handler raised, until the code that acts on it calls :meth:`taken`: raised
    # where Python swallows exceptions (a callback of ``os.fork``), the retry timer raises it again
    raised_signals: list[int] = field(default_factory=list)
    figures_missing: list[Path] = field(default_factory=list)  # a drawing process was killed
    not_logged: list[Path] = field(default_factory=list)  # the tracker's backend failed

    def taken(self) -> None:
        """The interrupt reached the code that acts on it: nothing is left to raise again."""
        signal.setitimer(signal.ITIMER_REAL, 0)
        self.raised_signals.clear()
        self.deferred_signals.clear()

    def raise_deferred(self) -> None:
        """Raise a deferred interrupt now, once: the retry timer is stopped and the signal
        taken. Called between the store's requests."""
        if self.deferred_signals:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signum = self.deferred_signals[0]
            self.deferred_signals.clear()
            raise Interrupted(signum)
