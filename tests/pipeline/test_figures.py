"""Figures drawn in a helper process: complete on disk after ``wait``, their warnings in the
run's log, and a caller's unguarded script is not run again by the helper."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from paraeval.pipeline.report.figures import Figures
from paraeval.pipeline.report.plots import write_plots

REPO = Path(__file__).resolve().parents[2]


def _frames() -> tuple[pd.DataFrame, pd.DataFrame]:
    seg = pd.DataFrame(
        {
            "system": ["a", "a", "b", "b"],
            "bleu": [1.0, 2.0, 3.0, 4.0],
            "human_meaning": [1.0, 3.0, 2.0, 4.0],
        }
    )
    return seg, seg.groupby("system")[["bleu", "human_meaning"]].mean()


@pytest.mark.parametrize("background", [True, False])
def test_figures_are_on_disk_after_wait(tmp_path: Path, background: bool) -> None:
    seg, systems = _frames()
    figures = Figures(background=background)
    figures.submit(write_plots, tmp_path, seg, systems, pd.DataFrame(), ["bleu"], ["human_meaning"])
    figures.wait()
    png = tmp_path / "plots" / "scatter_bleu_human_meaning.png"
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert figures.background is background


@pytest.mark.parametrize("background", [True, False])
def test_a_failing_figure_is_a_warning_in_the_run_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, background: bool
) -> None:
    seg, systems = _frames()
    figures = Figures(background=background)
    with caplog.at_level(logging.WARNING):
        # no 'human_fluency' column: the helper's write_plots fails and says so
        figures.submit(
            write_plots, tmp_path, seg, systems, pd.DataFrame(), ["bleu"], ["human_fluency"]
        )
        figures.wait()
    messages = [r.getMessage() for r in caplog.records]
    failed = [m for m in messages if "plotting failed" in m]
    # once: drawn in the helper or in this process, the warning is not repeated
    assert len(failed) == 1 and "human_fluency" in failed[0], messages


def test_helper_does_not_rerun_an_unguarded_script(tmp_path: Path) -> None:
    script = tmp_path / "unguarded.py"
    script.write_text(
        textwrap.dedent(
            f"""
            from pathlib import Path
            import pandas as pd
            from paraeval.pipeline.report.figures import Figures
            from paraeval.pipeline.report.plots import write_plots
            print("script ran", flush=True)
            seg = pd.DataFrame({{"system": ["a", "b"], "bleu": [1.0, 2.0], "human_x": [2.0, 1.0]}})
            f = Figures()
            f.submit(write_plots, Path({str(tmp_path)!r}), seg, seg.set_index("system"),
                     pd.DataFrame(), ["bleu"], ["human_x"])
            f.wait()
            """
        ),
        encoding="utf-8",
    )
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.count("script ran") == 1
    assert (tmp_path / "plots" / "scatter_bleu_human_x.png").is_file()


def test_scatter_plots_are_handed_over_before_the_correlations(tmp_path: Path) -> None:
    """The scatter plots need the scores only: their jobs (one per rating, each for a helper of
    its own) are handed over when aggregation ends; the ranking (the comparison's figure)
    follows, before the correlation stage runs; the heatmap follows the correlations. Together
    the scatter plots and the heatmap draw what ``write_plots`` draws from the finished
    evaluation."""
    import paraeval.pipeline.stages.evaluation as evaluation
    from paraeval.pipeline.api import compose_config
    from paraeval.pipeline.report.plots import scatter_columns
    from paraeval.pipeline.config.settings import Settings

    settings = Settings.from_config(
        compose_config(
            ["metrics=[bleu,ibleu,chrf]", "report.progress=false", "cache.enabled=false"]
        )
    )
    events: list[str] = []
    lanes: list[int | None] = []
    real_correlate = evaluation.correlate

    def correlate(*args: object, **kwargs: object) -> pd.DataFrame:
        events.append("correlate")
        return real_correlate(*args, **kwargs)  # type: ignore[arg-type]

    evaluation.correlate = correlate  # type: ignore[assignment]
    try:
        ev = evaluation.compute(
            settings.data.load(),
            settings,
            on_figure=lambda job: (
                events.append(job.func.__name__),  # type: ignore[attr-defined]
                lanes.append(getattr(job, "lane", None)),
            ),
        )
    finally:
        evaluation.correlate = real_correlate  # type: ignore[assignment]
    assert events[:5] == [
        "_draw_scatters",
        "_draw_scatters",
        "_draw_compare",
        "correlate",
        "_draw_heatmap",
    ]
    assert lanes[:2] == [0, 1]
    assert [job.args[3] for job in ev.figures[:2]] == [["human_meaning"], ["human_fluency"]]
    for job in ev.figures:
        job(tmp_path / "jobs")
    agg = ev.aggregated
    assert agg is not None
    shown = scatter_columns(agg.segments, list(agg.columns))
    write_plots(tmp_path / "all", agg.segments, agg.systems, ev.correlations, shown, ev.aspects)
    expected = {p.name for p in (tmp_path / "all" / "plots").glob("*.png")}
    assert "correlation_heatmap.png" in expected and len(expected) > 4
    assert expected <= {p.name for p in (tmp_path / "jobs" / "plots").glob("*.png")}


GATE_SCRIPT = """
import functools, json, sys, time
from pathlib import Path
sys.path.insert(0, {folder!r})
from paraeval.pipeline.report import figures
from drawing import draw

out = Path({folder!r})

def job(k, lanes_cpu, run_cpu):
    f = figures.Figures()
    start = time.process_time()
    for lane in (0, 1):
        fn = functools.partial(draw, lanes_cpu, f"{{k}}-{{lane}}")
        fn.lane = lane
        f.submit(fn, out)
    while time.process_time() - start < run_cpu:  # the run's own work
        pass
    f.wait()
    return figures._THROTTLED

states = [job(0, 0.1, 0.0), job(1, 0.2, 1.2), job(2, 0.2, 0.6), job(3, 0.6, 0.0), job(4, 0.2, 0.0)]
print(json.dumps(states))
"""

DRAWING = """
import json, time
from pathlib import Path

def draw(seconds, name, out):
    start = time.monotonic()
    spent = time.process_time()
    while time.process_time() - spent < seconds:
        pass
    Path(out, name + ".json").write_text(json.dumps([start, time.monotonic()]))
"""


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one helper where there is one core")
def test_lanes_take_turns_when_the_figures_weigh_less_than_the_run(tmp_path: Path) -> None:
    """Job 0 is not counted; after job 1 (figures 0.4 s of processor time against the run's
    1.2 s) the two helpers take turns while the run works, so job 2's drawings do not overlap
    (0.4 s against the run's 0.6 s: still taking turns after it). Job 3's run only waits for
    its figures, and a run that waits lends its permit: they are drawn at once although the
    lanes take turns; their 1.2 s weigh more than 1.25 times the run, so both draw at once
    from job 4 on."""
    import json

    (tmp_path / "drawing.py").write_text(DRAWING, encoding="utf-8")
    script = tmp_path / "gate.py"
    script.write_text(GATE_SCRIPT.format(folder=str(tmp_path)), encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == [False, True, True, False, False]

    def overlap(k: int) -> float:
        (a0, a1), (b0, b1) = (
            json.loads((tmp_path / f"{k}-{lane}.json").read_text()) for lane in (0, 1)
        )
        return min(a1, b1) - max(a0, b0)

    assert overlap(2) <= 0  # one after the other
    assert overlap(3) > 0.2  # at once (0.6 s each): the waiting run lent its permit
    assert overlap(4) > 0.05  # at once, not taking turns any more


class _Pending:
    """A drawing's future for the plumbing tests: done or not, its result or what it raises."""

    def __init__(self, outcome: object, done: bool = False) -> None:
        self.outcome, self._done = outcome, done

    def done(self) -> bool:
        return self._done

    def result(self) -> object:
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return self.outcome

    def cancel(self) -> bool:
        return False


def _throttled_run(monkeypatch: pytest.MonkeyPatch) -> threading.Semaphore:
    """Permits as the CLI has them after a throttled job: two, one held by the run."""
    from paraeval.pipeline.report import figures

    gate = threading.Semaphore(2)
    gate.acquire()
    monkeypatch.setattr(figures, "_GATE", gate)
    monkeypatch.setattr(figures, "_THROTTLED", True)
    monkeypatch.setattr(figures, "_JOBS_SEEN", 0)  # this wait is the first job: not balanced
    return gate


def test_a_waiting_run_lends_its_permit_and_takes_it_back(monkeypatch: pytest.MonkeyPatch) -> None:
    from paraeval.pipeline.report import figures

    gate = _throttled_run(monkeypatch)
    seen: list[bool] = []

    class Drawing(_Pending):
        def result(self) -> object:
            # while the run waits, a helper can take a second permit (the run's)
            seen.append(gate.acquire(blocking=False))
            gate.release()
            return super().result()

    f = Figures()
    f._pending = [(0, Drawing(([], 0.1)))]
    f.wait()
    assert seen == [True]
    assert figures._THROTTLED is True
    # the run holds its permit again: one is left for the helpers
    assert gate.acquire(blocking=False) and not gate.acquire(blocking=False)


def test_figures_already_drawn_need_no_lending(monkeypatch: pytest.MonkeyPatch) -> None:
    gate = _throttled_run(monkeypatch)
    seen: list[bool] = []

    class Drawn(_Pending):
        def result(self) -> object:
            seen.append(gate.acquire(blocking=False))
            seen.append(gate.acquire(blocking=False))
            gate.release()
            return super().result()

    f = Figures()
    f._pending = [(0, Drawn(([], 0.1), done=True))]
    f.wait()
    assert seen == [True, False]  # the run kept its permit


def test_an_interrupt_while_lending_does_not_wait_for_a_permit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Both permits are with the helpers (drawing) when the interrupt lands: the run must not
    wait for one of them to finish before it stops."""
    from paraeval.pipeline.report import figures

    gate = _throttled_run(monkeypatch)
    monkeypatch.setattr(figures, "GATE_TIMEOUT_S", 30.0)

    class Interrupted(_Pending):
        def result(self) -> object:
            assert gate.acquire(blocking=False) and gate.acquire(blocking=False)
            raise KeyboardInterrupt

    f = Figures()
    f._pending = [(0, Interrupted(None))]
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        f.wait()
    assert time.monotonic() - start < 5
    assert figures._THROTTLED is False
