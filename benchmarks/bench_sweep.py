"""A cache-served job of an iBLEU α multirun against one warm-cache run of the same config.

For each data set (the embedded demo, ParaBank-Eval), in a scratch folder with an empty score
cache and a new SQLite MLflow store, the real CLI in subprocesses:

1. the multirun ``paraeval -m data=X metrics.ibleu.alpha=0,0.05,...,1`` (``--alphas`` values, 21
   by default, the default metric set): its first job scores every metric and fills the score
   cache; every later job is served by the cache (checked from each job's log: no miss). The
   time per job after the first is the time from the second job's start (its "loaded N rows"
   log line) to the end of the command, over the number of later jobs: each job's own work,
   its MLflow logging and Hydra's work between jobs.
2. the anchor: ``paraeval data=X metrics.ibleu.alpha=0.5`` once, on the cache and the MLflow
   store that the multirun filled: a single warm-cache run of the same config, timed from the
   start of its process to its end.

Reported, no target: a cache-served job costs what a warm-cache run costs, less the process
start that the jobs of one multirun share (the α curve of one run gives the whole curve).

    .venv/bin/python benchmarks/bench_sweep.py                        # the demo and ParaBank-Eval
    .venv/bin/python benchmarks/bench_sweep.py --data demo --alphas 3 # quick
    .venv/bin/python benchmarks/bench_sweep.py --data parabank --extra data.max_items=40
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from results import row, write_rows

REPO = Path(__file__).resolve().parents[1]
DATA_NAMES = {"demo": "the demo", "parabank": "ParaBank-Eval"}
ANCHOR_ALPHA = "0.5"
CACHE_LINE = re.compile(r"score cache .*?: (\d+) hits, (\d+) misses")
# the line every job logs once its data is loaded: "[2026-01-31 12:00:00,123][paraeval][INFO] -
# loaded 192 rows: ..."
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


def _cli(args: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, float]:
    """Wall seconds, processor seconds (every process of the command) and the time it ended
    (seconds since the epoch) of ``paraeval ARGS``."""
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
    ended = time.time()
    elapsed = time.perf_counter() - start
    cpu = _children_cpu() - cpu
    if proc.returncode != 0:
        sys.exit(f"paraeval failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return elapsed, cpu, ended


def _log(folder: Path) -> str:
    return (folder / "paraeval.log").read_text(encoding="utf-8")


def _cache_counts(text: str) -> tuple[int, int]:
    match = CACHE_LINE.search(text)
    if not match:
        return -1, -1
    return int(match.group(1)), int(match.group(2))


def _job_start(text: str) -> float:
    """When the job started its own work (its "loaded N rows" line), seconds since the epoch."""
    for line in text.splitlines():
        match = START_LINE.match(line)
        if match:
            stamp = dt.datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S")
            return stamp.timestamp() + int(match.group(2)) / 1000
    return float("nan")


def measure(
    data_option: str, alphas: list[float], work: Path, data: Path, extra: list[str]
) -> dict[str, Any]:
    """The multirun, then the single warm-cache run, on one cache and one MLflow store."""
    folder = work / data_option
    env = _env(folder / "cache", data)
    common = [
        f"data={data_option}",
        "report.print_tables=false",
        f"tracking.store_dir={folder / 'store'}",
        *extra,
    ]
    sweep, sweep_cpu, ended = _cli(
        [
            "-m",
            *common,
            "metrics.ibleu.alpha=" + ",".join(f"{a:g}" for a in alphas),
            f"hydra.sweep.dir={folder / 'runs'}",
        ],
        env,
        work,
    )
    logs = [_log(folder / "runs" / str(j)) for j in range(len(alphas))]
    counts = [_cache_counts(text) for text in logs]
    later_misses = sum(m for _, m in counts[1:])
    starts = [_job_start(text) for text in logs]
    later = len(alphas) - 1
    per_job = (ended - starts[1]) / later
    # job j's cost, from its start to the next one's: the spread of the jobs
    spans = [b - a for a, b in itertools.pairwise(starts[1:])]
    one, one_cpu, one_ended = _cli(
        [*common, f"metrics.ibleu.alpha={ANCHOR_ALPHA}", f"hydra.run.dir={folder / 'one'}"],
        env,
        work,
    )
    one_log = _log(folder / "one")
    one_hits, one_misses = _cache_counts(one_log)
    return {
        "jobs": len(alphas),
        "sweep": sweep,
        "sweep_cpu": sweep_cpu,
        "first_job": starts[1] - (ended - sweep),
        "per_job": per_job,
        "spans": spans,
        "first_counts": counts[0],
        "later_hits": sum(h for h, _ in counts[1:]),
        "later_misses": later_misses,
        "one": one,
        "one_cpu": one_cpu,
        "one_work": one_ended - _job_start(one_log),
        "one_counts": (one_hits, one_misses),
    }


def report(data_option: str, m: dict[str, Any]) -> None:
    name = DATA_NAMES[data_option]
    print(f"\n{name}: {m['jobs']}-value metrics.ibleu.alpha multirun")
    print(f"  the whole multirun:          {m['sweep']:8.1f} s  ({m['sweep_cpu']:.1f} CPU-s)")
    print(f"  its first job (process start to the second job's start): {m['first_job']:6.1f} s")
    hits, misses = m["first_counts"]
    print(f"  first job's score cache:     {hits} hits, {misses} misses")
    verdict = "no metric recomputed" if m["later_misses"] == 0 else "METRICS RECOMPUTED"
    print(
        f"  later jobs' score cache:     {m['later_hits']} hits, {m['later_misses']} misses "
        f"({verdict})"
    )
    print(f"  a cache-served job (after the first, mean): {m['per_job']:6.2f} s")
    if m["spans"]:
        spans = m["spans"]
        print(
            f"  job to next job's start:     median {statistics.median(spans):.2f} s, "
            f"min {min(spans):.2f} s, max {max(spans):.2f} s"
        )
    hits, misses = m["one_counts"]
    print(
        f"  anchor, one warm-cache run:  {m['one']:8.2f} s  ({m['one_cpu']:.1f} CPU-s; "
        f"{m['one_work']:.2f} s from its data loaded to its end; cache {hits} hits, "
        f"{misses} misses)"
    )
    print(f"  ratio job / warm run:        {m['per_job'] / m['one']:8.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path(os.environ.get("PARAEVAL_SHARED_DATA", REPO.parent / "shared" / "data")),
    )
    parser.add_argument(
        "--data", nargs="+", choices=sorted(DATA_NAMES), default=["demo", "parabank"]
    )
    parser.add_argument("--alphas", type=int, default=21, help="grid size of the multirun (>= 3)")
    parser.add_argument("--work", type=Path, default=None, help="scratch folder (default: temp)")
    parser.add_argument("--extra", nargs="*", default=[], help="more overrides for every run")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args()
    if args.alphas < 3:
        parser.error("--alphas: at least 3 (a first job and two cache-served ones)")
    data = args.data_dir.resolve()
    if "parabank" in args.data and not (data / "parabank_eval").is_dir():
        sys.exit(f"ParaBank-Eval not found under {data} (set PARAEVAL_SHARED_DATA)")
    work = (args.work or Path(tempfile.mkdtemp(prefix="bench-sweep-"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    alphas = [round(k / (args.alphas - 1), 4) for k in range(args.alphas)]
    rows = []
    failed = False
    for option in args.data:
        m = measure(option, alphas, work, data, args.extra)
        report(option, m)
        failed = failed or m["later_misses"] != 0
        what = f"{DATA_NAMES[option]}: a cache-served job of a {m['jobs']}-value α multirun"
        if args.extra:
            what += f" ({' '.join(args.extra)})"
        anchor = "one warm-cache run of the same config (process start to end)"
        rows.append(row("bench_sweep", what, m["per_job"], "s", anchor, m["one"]))
    write_rows(args.json, rows)
    print(f"\nscratch folder: {work}")
    if failed:
        sys.exit("a cache-served job recomputed a metric")


if __name__ == "__main__":
    main()
