"""An evaluation's output folder: its tables, then the figures and ``report.html`` drawn from them.
Above both the stages and the report, so that the command line and the Python API write the same."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from paraeval.pipeline.errors import RunContext
from paraeval.pipeline.report.figures import Figures, write_html
from paraeval.pipeline.stages.evaluation import Evaluation, write_tables


def write_outputs(ev: Evaluation, out_dir: str | Path) -> Path:
    with writing_outputs(out_dir, ev.settings.report.parallel_figures) as outputs:
        outputs.write_tables(ev)
    return outputs.out


class Outputs:
    """The output folder of an evaluation being computed; :meth:`finish` writes ``report.html``
    once the figures are drawn (a tracker calls it before it logs the folder)."""

    def __init__(
        self, out_dir: str | Path, parallel_figures: bool, context: RunContext | None = None
    ) -> None:
        self.out = Path(out_dir)
        self.figures = Figures(self.out, parallel_figures, context or RunContext())
        self.written: Evaluation | None = None  # the evaluation whose tables are written
        self.finished = False

    def draw_ready(self, ev: Evaluation) -> None:
        self.figures.start_ready(ev)

    def write_tables(self, ev: Evaluation) -> None:
        write_tables(ev, self.out)
        self.written = ev
        self.draw_ready(ev)

    def finish(self) -> None:
        if self.finished:
            return
        self.finished = True
        self.figures.wait()
        if self.written is not None:
            write_html(self.written, self.out)


@contextmanager
def writing_outputs(
    out_dir: str | Path, parallel_figures: bool, context: RunContext | None = None
) -> Iterator[Outputs]:
    """An :class:`Outputs`, finished on the way out whatever the block did (a failed logging
    loses no output); an interrupt stops the figures instead."""
    outputs = Outputs(out_dir, parallel_figures, context)
    try:
        yield outputs
    except Exception:
        outputs.finish()
        raise
    except BaseException:
        outputs.figures.stop()
        raise
    outputs.finish()
