"""The figure worker of the command line: it draws its share of the figures (the same files as
drawn in one process), its failures are the run's warnings, the run draws the share of a worker
that died, and it ends when the run stops it."""

from __future__ import annotations

import logging
import os
import signal
from pathlib import Path

import pytest

from paraeval.pipeline.report import figures
from paraeval.pipeline.report.worker import FigureWorker, split, supported
from tests.pipeline.test_figures import _evaluation, _expected

pytestmark = pytest.mark.skipif(not supported(), reason="the worker needs Linux's prctl")


@pytest.fixture(scope="module")
def demo() -> figures.Evaluation:
    return _evaluation(metrics="metrics=[bleu,ibleu,self_bleu,cosine]")


def test_split_gives_each_side_about_half_the_weight() -> None:
    jobs = [(Path(f"{w}.png"), print) for w in (5, 1, 1, 1, 1, 1, 0.5)]
    theirs, ours = split(jobs, lambda job: float(job[0].stem))  # type: ignore[arg-type]
    # heaviest first, each to the lighter side (the worker on a tie)
    assert [j[0].stem for j in theirs] == ["5", "0.5"]
    assert [j[0].stem for j in ours] == ["1"] * 5


def test_the_worker_draws_its_share_and_the_files_are_the_same(
    demo: figures.Evaluation, tmp_path: Path
) -> None:
    with FigureWorker() as worker:
        assert worker.proc is not None and worker.proc.poll() is None
        pid = worker.proc.pid
        written = figures.write_figures(demo, tmp_path / "both", worker)
        assert worker.proc.poll() is None  # it waits for the next jobs
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text()
    alone = figures.write_figures(demo, tmp_path / "alone")
    assert {p.name for p in written} == {p.name for p in alone} == _expected(demo, "png")
    for path in written:
        assert path.is_file() and path.stat().st_size > 1000


def test_a_figure_failing_in_the_worker_is_a_warning_of_the_run(
    demo: figures.Evaluation,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the ranking is the heaviest figure: the worker draws it; a comparison it cannot read fails
    # there the way a figure fails in the run
    assert demo.compared is not None
    unreadable = demo.compared.table[["system"]]
    broken = type(demo.compared)(**{**vars(demo.compared), "table": unreadable})
    monkeypatch.setattr(demo, "compared", broken)
    with FigureWorker() as worker, caplog.at_level(logging.WARNING):
        written = figures.write_figures(demo, tmp_path, worker)
    failed = [r.getMessage() for r in caplog.records if "plotting failed" in r.getMessage()]
    assert any("system_ranking.png" in m for m in failed), failed
    assert "system_ranking.png" not in {p.name for p in written}
    assert "correlation_heatmap.png" in {p.name for p in written}


def test_the_share_of_a_worker_that_died_is_drawn_by_the_run(
    demo: figures.Evaluation, tmp_path: Path
) -> None:
    with FigureWorker() as worker:
        assert worker.proc is not None
        os.kill(worker.proc.pid, signal.SIGKILL)
        worker.proc.wait()
        written = figures.write_figures(demo, tmp_path, worker)
    assert {p.name for p in written} == _expected(demo, "png")
