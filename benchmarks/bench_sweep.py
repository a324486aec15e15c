"""α sweep cost: one run vs a 21-value ``metrics.ibleu.alpha`` multirun, on the embedded demo (192
rows) or on ParaBank-Eval (14,323 rows).

Both start from an empty score cache and an empty MLflow store, with the default metric set, and
run the real CLI in a subprocess, after an untimed demo run that fills numba's on-disk cache of
compiled code (otherwise the first timed run alone would pay the compilation). The sweep's first
job computes every metric; the later jobs must recompute none (checked from each job's log). The
cost of a cache-served job is read from the jobs' logs (the time from one job's start to the next
one's, Hydra's own work between jobs included); targets: at most 1 s per job and a sweep at most 2x
one run on the demo, at most 1.3x on ParaBank-Eval. Then two cache-served jobs run in one process,
as in a multirun, and the second is timed stage by stage (figures drawn in-process there, so that
they show as a stage) to show where the per-job time goes (load, scoring from the cache,
aggregation, correlation, comparison, plots, α curve, MLflow).

    .venv/bin/python benchmarks/bench_sweep.py                      # the demo
    .venv/bin/python benchmarks/bench_sweep.py --data parabank      # ../shared/data
    PARAEVAL_SHARED_DATA=/data .venv/bin/python benchmarks/bench_sweep.py --data parabank
    .venv/bin/python benchmarks/bench_sweep.py --extra correlation.n_resamples=200
"""

from __future__ import annotations

import argparse
import gc
import itertools
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
# data option -> (sweep / one run, seconds per cache-served job or None)
TARGETS: dict[str, tuple[float, float | None]] = {"demo": (2.0, 1.0), "parabank": (1.3, None)}
CACHE_LINE = re.compile(r"score cache .*?: (\d+) hits, (\d+) misses")
# the first line every job logs: "[2026-01-31 12:00:00,123][paraeval][INFO] - loaded 192 rows"
START_LINE = re.compile(
    r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})\]\[paraeval\]\[INFO\] - loaded "
)


def _env(cache: Path, data: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        PARAEVAL_CACHE_DIR=str(cache),
        PARAEVAL_SHARED_DATA=str(data),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        MLFLOW_DISABLE_TELEMETRY="true",
        TOKENIZERS_PARALLELISM="false",
        PYTHONWARNINGS="ignore",
    )
    return env


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _cli(args: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """Wall seconds and processor seconds of the command, its helper processes included (the
    command waits for them, so their time is counted in its children's)."""
    start = time.perf_counter()
    cpu = _children_cpu()
    proc = subprocess.run(
        [sys.executable, "-m", "paraeval", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.perf_counter() - start
    cpu = _children_cpu() - cpu
    if proc.returncode != 0:
        sys.exit(f"paraeval failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return elapsed, cpu


def _cache_counts(log_file: Path) -> tuple[int, int]:
    match = CACHE_LINE.search(log_file.read_text(encoding="utf-8"))
    if not match:
        return -1, -1
    return int(match.group(1)), int(match.group(2))


def _job_start(log_file: Path) -> float:
    """When the job started its own work (its 'loaded N rows' line), in seconds since the epoch."""
    import datetime as dt

    for line in log_file.read_text(encoding="utf-8").splitlines():
        match = START_LINE.match(line)
        if match:
            stamp = dt.datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S")
            return stamp.timestamp() + int(match.group(2)) / 1000
    return float("nan")


def stage_breakdown(
    overrides: list[str], out_dir: Path, warmup: Sequence[list[str]] = ()
) -> tuple[float, dict[str, float]]:
    """One job in-process with timers around the stages that ``app.run`` calls. The ``warmup``
    jobs run first in the same process, as in a multirun, and only the last job is timed: two
    of them, for the steady state of a sweep (what earlier jobs keep in the process serves the
    next: figures, panels, glyphs, memos of unchanged columns)."""
    from hydra import compose, initialize_config_dir

    import paraeval.pipeline.cli.app as app
    import paraeval.pipeline.stages.evaluation as evaluation
    import paraeval.pipeline.config.settings as settings
    import paraeval.pipeline.tracking.trackers as tracking

    timings: dict[str, float] = {}

    def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def inner(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                timings[name] = timings.get(name, 0.0) + time.perf_counter() - start

        return inner

    stages = {
        "load_data": "load",
        "build_metrics": "build metrics",
        "score": "score (cache lookups)",
        "aggregate": "aggregate",
        "correlate": "correlate",
        "correlate_cached": "correlate (per-column cache)",
        "significance": "significance",
        "human_report": "human report",
        "compare": "system comparison",
        "compute_alpha_curve": "alpha curve",
        "_draw_scatters": "plots",
        "_draw_heatmap": "plots",
        "_draw_compare": "plots",
        "_draw_alpha_curve": "plots",
        "write_tables": "write tables",
        "log_output_dir": "MLflow logging",
    }
    # the names as the glue (app), the stages, the settings and the tracker call them
    for module in (app, evaluation, settings, tracking):
        for attr, name in stages.items():
            if hasattr(module, attr):
                setattr(module, attr, timed(name, getattr(module, attr)))
    for k, before in enumerate(warmup):
        with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
            first = compose("config", overrides=before)
        gc.freeze()  # as the CLI does around every job
        app.run(first, out_dir / f"warmup{k}", before)
        gc.freeze()
    timings.clear()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=overrides)
    start = time.perf_counter()
    app.run(cfg, out_dir, overrides)
    total = time.perf_counter() - start
    timings["other"] = total - sum(timings.values())
    return total, timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path(os.environ.get("PARAEVAL_SHARED_DATA", REPO.parent / "shared" / "data")),
    )
    parser.add_argument("--data", choices=sorted(TARGETS), default="demo")
    parser.add_argument("--alphas", type=int, default=21, help="grid size of the sweep")
    parser.add_argument("--work", type=Path, default=None, help="scratch folder (default: temp)")
    parser.add_argument("--extra", nargs="*", default=[], help="more overrides for every run")
    args = parser.parse_args()
    if args.data == "parabank" and not (args.data_dir / "parabank_eval").is_dir():
        sys.exit(f"ParaBank-Eval not found under {args.data_dir} (set PARAEVAL_SHARED_DATA)")
    data = args.data_dir.resolve()
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    work.mkdir(parents=True, exist_ok=True)
    alphas = [round(k / (args.alphas - 1), 4) for k in range(args.alphas)]
    common = [f"data={args.data}", "report.print_tables=false", *args.extra]
    target_ratio, target_job = TARGETS[args.data]

    # numba keeps what it compiles in the package's __pycache__, filled by whichever run comes
    # first: on a fresh clone the one run would pay the compilation (about 12 s of a 59 s
    # ParaBank-Eval run) and the sweep would not. A demo run first, untimed, fills it for both.
    warm_dir = work / "warmup"
    warm, _ = _cli(
        [
            "data=demo",
            "report.print_tables=false",
            f"tracking.store_dir={warm_dir / 'store'}",
            f"hydra.run.dir={warm_dir / 'out'}",
        ],
        _env(warm_dir / "cache", data),
        work,
    )
    print(f"warm-up on the demo (compiled code cached, untimed): {warm:.1f} s")

    one_dir = work / "one"
    one, one_cpu = _cli(
        [
            *common,
            f"tracking.store_dir={one_dir / 'store'}",
            f"hydra.run.dir={one_dir / 'out'}",
        ],
        _env(one_dir / "cache", data),
        work,
    )
    print(f"one run (cold cache):            {one:8.1f} s  ({one_cpu:.1f} CPU-s)")

    sweep_dir = work / "sweep"
    sweep, sweep_cpu = _cli(
        [
            "-m",
            *common,
            "metrics.ibleu.alpha=" + ",".join(f"{a:g}" for a in alphas),
            f"tracking.store_dir={sweep_dir / 'store'}",
            f"hydra.sweep.dir={sweep_dir / 'runs'}",
        ],
        _env(sweep_dir / "cache", data),
        work,
    )
    ratio = sweep / one
    print(f"{len(alphas)}-value alpha sweep (cold cache): {sweep:8.1f} s  ({sweep_cpu:.1f} CPU-s)")
    print(
        f"ratio sweep / one run:            {ratio:8.2f}  (target <= {target_ratio}; naive "
        f"{len(alphas)}x)  {'OK' if ratio <= target_ratio else 'OVER TARGET'}"
    )
    counts = [
        _cache_counts(sweep_dir / "runs" / str(j) / "paraeval.log") for j in range(len(alphas))
    ]
    print(f"job 0 cache: {counts[0][0]} hits, {counts[0][1]} misses")
    later = counts[1:]
    misses = sum(m for _, m in later)
    print(
        f"jobs 1-{len(alphas) - 1} cache: {sum(h for h, _ in later)} hits, {misses} misses "
        f"({'no metric recomputed' if misses == 0 else 'METRICS RECOMPUTED'})"
    )
    per_job = (sweep - one) / max(len(alphas) - 1, 1)
    per_job_cpu = (sweep_cpu - one_cpu) / max(len(alphas) - 1, 1)
    # processor time varies less than wall time on a shared machine: a change to the per-job
    # work shows in it where the wall-clock figures of two sweeps overlap
    print(
        f"marginal cost per cache-served job, (sweep - one run) / {len(alphas) - 1}: "
        f"{per_job:6.2f} s, {per_job_cpu:6.2f} CPU-s (every process of the command)"
    )
    starts = [_job_start(sweep_dir / "runs" / str(j) / "paraeval.log") for j in range(len(alphas))]
    # job j's cost: from its start to job j+1's start (its own work and Hydra's between jobs)
    costs = [b - a for a, b in itertools.pairwise(starts[1:])]
    if costs:
        median = statistics.median(costs)
        verdict = ""
        if target_job is not None:
            verdict = f"  (target <= {target_job:g} s) " + (
                "OK" if median <= target_job else "OVER TARGET"
            )
        print(
            f"cache-served job (jobs 1-{len(alphas) - 2}, from the logs): median {median:.2f} s, "
            f"min {min(costs):.2f} s, max {max(costs):.2f} s{verdict}"
        )

    os.environ.update(_env(sweep_dir / "cache", data))
    job = [
        *common,
        "report.progress=false",  # no progress bars in the printed breakdown
        # figures in this process, so that drawing is timed as a stage of its own
        "report.plot_process=false",
        f"tracking.store_dir={sweep_dir / 'store'}",
    ]
    total, timings = stage_breakdown(
        [*job, "metrics.ibleu.alpha=0.34"],
        work / "breakdown",
        warmup=[[*job, "metrics.ibleu.alpha=0.32"], [*job, "metrics.ibleu.alpha=0.33"]],
    )
    print(
        f"\na cache-served job after two others in the same process (as in a multirun), figures "
        f"drawn in-process: {total:.2f} s"
    )
    for name, seconds in sorted(timings.items(), key=lambda kv: -kv[1]):
        print(f"  {name:24s} {seconds:7.2f} s  {100 * seconds / total:5.1f} %")
    print(f"\nscratch folder: {work}")


if __name__ == "__main__":
    main()
