"""Every figure is drawn from the evaluation's tables: the stages produce tables only,
``write_figures`` writes the figure files a user sees (their names and format) in the calling
process, :class:`figures.Figures` draws each as soon as its tables exist in forked processes that
end with the run, and a figure that fails is one warning while the others are still drawn."""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from paraeval.pipeline.api import compose_config
from paraeval.pipeline.config.settings import Settings
from paraeval.pipeline.data.load import load_data
from paraeval.pipeline.errors import RunContext
from paraeval.pipeline.names import slug
from paraeval.pipeline.report import figures
from paraeval.pipeline.report.plots import scatter_columns
from paraeval.pipeline.stages.evaluation import STAGES, Evaluation, compute, write_tables

# no semantic metric: no adequacy, no diversity-adequacy view
METRICS = "metrics=[bleu,ibleu,ter,chrf]"
CHEAP = [
    "report.progress=false",
    "cache.enabled=false",
    "correlation.n_resamples=50",
    "correlation.significance.n_resamples=50",
    "compare.n_bootstrap=50",
    "compare.n_ar=50",
]


def _evaluation(*overrides: str, metrics: str = METRICS) -> Evaluation:
    settings = Settings.from_config(compose_config([metrics, *CHEAP, *overrides]))
    return compute(load_data(settings.data), settings)


@pytest.fixture(scope="module")
def demo() -> Evaluation:
    # a semantic metric and self-BLEU: the systems' adequacy and diversity, and their view
    return _evaluation(metrics="metrics=[bleu,ibleu,self_bleu,cosine]")


def _expected(ev: Evaluation, fmt: str) -> set[str]:
    agg = ev.aggregated
    assert agg is not None
    names = {"correlation_heatmap", "system_ranking", "alpha_curve"}
    if ev.paraphrase is not None:  # an adequacy and a diversity measure: the frontier
        names.add("paraphrase_frontier")
    for metric in scatter_columns(agg.segments, list(agg.columns)):
        for aspect in ev.aspects:
            names.add(f"scatter_{slug(metric)}_{slug(aspect)}")
    return {f"{name}.{fmt}" for name in names}


def test_stages_produce_tables_and_draw_nothing(demo: Evaluation, tmp_path: Path) -> None:
    ev = Evaluation(demo.settings, demo.table)
    for stage in STAGES:
        assert stage(ev) is None
    write_tables(ev, tmp_path)
    assert not (tmp_path / "plots").exists()
    assert (tmp_path / "correlations.csv").is_file()


@pytest.mark.slow
def test_every_figure_of_the_demo_is_drawn_in_this_process(
    demo: Evaluation, tmp_path: Path
) -> None:
    written = figures.write_figures(demo, tmp_path)
    names = {p.name for p in written}
    assert names == _expected(demo, "png")
    assert names == {p.name for p in (tmp_path / "plots").iterdir()}
    assert len(names) == 4 + 4 * 2  # four figures, four columns' scatter plots per rating
    for path in written:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # no helper process was started for them
    assert multiprocessing.active_children() == []


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["pdf", "svg"])
def test_the_configured_format_names_every_figure(fmt: str, tmp_path: Path) -> None:
    ev = _evaluation(f"report.format={fmt}", "alpha_curve.grid=[0.0,0.5,1.0]")
    written = figures.write_figures(ev, tmp_path)
    assert {p.name for p in written} == _expected(ev, fmt)
    head = b"%PDF-" if fmt == "pdf" else b"<?xml"
    assert all(p.read_bytes().startswith(head) for p in written)


@pytest.mark.slow
def test_a_failing_figure_is_one_warning_and_the_others_are_drawn(
    demo: Evaluation,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(*args: object, **kwargs: object) -> bool:
        raise ValueError("no such column 'human_x'")

    monkeypatch.setattr(figures, "correlation_heatmap", broken)
    with caplog.at_level(logging.WARNING):
        written = figures.write_figures(demo, tmp_path)
    failed = [r.getMessage() for r in caplog.records if "plotting failed" in r.getMessage()]
    assert len(failed) == 1, failed
    assert "correlation_heatmap.png" in failed[0] and "human_x" in failed[0]
    assert {p.name for p in written} == _expected(demo, "png") - {"correlation_heatmap.png"}
    assert not (tmp_path / "plots" / "correlation_heatmap.png").exists()


@pytest.mark.slow
def test_figures_follow_the_evaluation_they_are_drawn_from(
    demo: Evaluation, tmp_path: Path
) -> None:
    """Without a comparison or an α curve those figures are not drawn; without ratings there is
    no heatmap and no scatter plot."""
    ev = _evaluation("compare.enabled=false", "alpha_curve.enabled=false")
    names = {p.name for p in figures.write_figures(ev, tmp_path / "a")}
    assert names == _expected(ev, "png") - {"system_ranking.png", "alpha_curve.png"}
    unrated = Evaluation(demo.settings, demo.table.drop(columns=demo.aspects))
    for stage in STAGES:
        stage(unrated)
    names = {p.name for p in figures.write_figures(unrated, tmp_path / "b")}
    assert names == {"paraphrase_frontier.png", "system_ranking.png"}


def _stage_by_stage(demo: Evaluation, drawing: figures.Figures) -> list[set[str]]:
    """The demo's stages run again with ``drawing`` started after each; the figure files
    started after each stage."""
    ev = Evaluation(demo.settings, demo.table)
    started = []
    for stage in STAGES:
        stage(ev)
        drawing.start_ready(ev)
        started.append({p.name for p, _ in drawing.started})
    return started


linux_only = pytest.mark.skipif(sys.platform != "linux", reason="figures are forked on Linux")


@pytest.mark.slow
@linux_only
def test_each_figure_starts_with_its_tables_in_a_process_and_all_are_drawn(
    demo: Evaluation, tmp_path: Path
) -> None:
    (tmp_path / "plots").mkdir()
    stale = tmp_path / "plots" / "alpha_curve.png"
    stale.write_bytes(b"an earlier run's figure")
    drawing = figures.Figures(tmp_path, True, RunContext())
    started = _stage_by_stage(demo, drawing)
    # score: nothing; aggregate: the scatter plots; compare: ranking and the frontier;
    # correlate: the heatmap; α curve: its figure
    scatter = {n for n in _expected(demo, "png") if n.startswith("scatter_")}
    assert started[0] == set() and started[1] == scatter
    assert started[2] - started[1] == {"system_ranking.png", "paraphrase_frontier.png"}
    assert started[3] - started[2] == {"correlation_heatmap.png"}
    assert started[4] - started[3] == {"alpha_curve.png"}
    assert len(drawing.pids) == 4  # one process per stage that made figures
    written = drawing.wait()
    assert {p.name for p in written} == _expected(demo, "png") == started[-1]
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in written)
    assert drawing.pids == []


@linux_only
def test_a_killed_figure_process_is_a_warning_naming_the_folder(
    demo: Evaluation, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    drawing = figures.Figures(tmp_path, True, RunContext())
    ev = Evaluation(demo.settings, demo.table)
    for stage in STAGES[:2]:
        stage(ev)
    drawing.start_ready(ev)
    os.kill(drawing.pids[0], signal.SIGKILL)
    with caplog.at_level(logging.WARNING):
        written = drawing.wait()
    warned = [r.getMessage() for r in caplog.records if "figure process" in r.getMessage()]
    assert len(warned) == 1 and str(tmp_path) in warned[0] and "signal 9" in warned[0]
    assert len(written) < len(drawing.started)
    assert drawing.context.figures_missing == [tmp_path]  # the command exits 4 for it


@linux_only
def test_stop_ends_the_figure_processes_at_once(demo: Evaluation, tmp_path: Path) -> None:
    drawing = figures.Figures(tmp_path, True, RunContext())
    _stage_by_stage(demo, drawing)
    pids = list(drawing.pids)
    begun = time.monotonic()
    drawing.stop()
    assert time.monotonic() - begun < 2.0
    for pid in pids:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # reaped: no such child any more
    assert drawing.pids == []


@pytest.mark.slow
def test_without_parallel_figures_every_figure_is_drawn_here_at_the_end(
    demo: Evaluation, tmp_path: Path
) -> None:
    drawing = figures.Figures(tmp_path, False, RunContext())
    _stage_by_stage(demo, drawing)
    assert drawing.pids == [] and not (tmp_path / "plots").exists()
    assert {p.name for p in drawing.wait()} == _expected(demo, "png")
