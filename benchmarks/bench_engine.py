"""``engine=ray`` against ``engine=local``: the whole ParaBank-Eval run, where Ray's time goes, and
the peak memory of a Ray worker for pools ten times apart.

1. The run: ``paraeval data=parabank`` with the default metric set, score cache and tracking off,
   as a user runs it (a fresh process each), ``engine=local`` and ``engine=ray`` (a Ray instance
   the run starts on this machine and stops after scoring), interleaved ``--repeat`` times (the
   median run of each side). Each pair's segment and system scores are compared: every n-gram
   column identical, every encoder column within 1e-6 (the script exits otherwise).
   Reported: wall seconds, the score stage's seconds, the ratio ray /
   local (target: at most 1.3x), the part of the ray run that is Ray's start and stop (the seconds
   ``paraeval.log`` gives for them), and the CPU seconds of the command and the processes it
   waited for (printed only: Ray's workers are not among them).
2. Where the rest goes (``--breakdown N``: the first N ParaBank sources, 40 by default; 0 skips):
   in one process, each metric of the default set scored alone (``pipeline.stages.score.score``)
   on one engine, first ``engine=local`` then ``engine=ray``: per metric, the seconds on each.
   With Ray each metric is one or more Ray Data executions (tasks for the n-gram metrics, a pool
   of actors that each load the metric's model or WordNet for the others).
3. Memory (``--pools``): generated pools (``bench_memory.make_table``: sentences of 6 to 30
   words, 10 systems, every candidate distinct), each metric alone with ``engine=ray``, the
   correlation's intervals, the comparison and the alpha curve off. While the run goes, the
   peak resident set (``VmHWM`` of ``/proc/PID/status``) of each of the instance's worker
   processes that scored (Ray titles them ``ray::MapBatches(...)`` or ``ray::MapWorker(...)``)
   is read, and its private memory (``RssAnon``) and object store pages (``RssShmem``: Ray's
   shared memory, which ``VmHWM`` counts too) sampled; reported: the largest of each, at each
   size, the growth of the first two, and, for the worker with the most private memory, the
   largest private memory in the first and in the second half of its samples (no more in the
   second half: it stopped growing with the rows it scored). Sizes: BLEU and chrF
   100,000 and 1,000,000 rows, BERTScore 10,000 and 100,000 (two CPU cores encode some 240
   sentences/s: the larger pool takes about ten minutes); ``--scale 0.1`` divides them by ten.

The machine may be shared: the summary gives the load average at the start and the end.
``--json PATH`` writes the figures for docs/performance.md.

    .venv/bin/python benchmarks/bench_engine.py                      # everything, issue sizes
    .venv/bin/python benchmarks/bench_engine.py --repeat 1 --scale 0.1
    .venv/bin/python benchmarks/bench_engine.py --skip-run --breakdown 0 --scale 0.01  # minutes
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_memory import make_table, parent_map
from bench_run import STAGE_LINE, load_average, run_env
from results import row, write_rows

REPO = Path(__file__).resolve().parents[1]
TARGET_RATIO = 1.3
# the smaller pool of each metric at --scale 1; the larger is FACTOR times it (issue 39)
POOLS = {"bleu": 100_000, "chrf": 100_000, "bertscore": 10_000}
FACTOR = 10
SYSTEMS = 10
SAMPLE_S = 0.2
# what paraeval.log says about Ray's fixed costs (pipeline/engine/ray_engine.py)
READY = re.compile(r"engine=ray: scoring on .* \(ready in (?P<s>[0-9.]+) s\)")
STOPPED = re.compile(r"engine=ray: Ray stopped in (?P<s>[0-9.]+) s")
# a Ray worker's process title while it scores a shard (a task or a pool's actor)
SCORING = ("ray::MapBatches", "ray::MapWorker")


def _env(work: Path) -> dict[str, str]:
    data = Path(os.environ.get("PARAEVAL_SHARED_DATA", REPO.parent / "shared" / "data"))
    return {**run_env(work, data), "RAY_USAGE_STATS_ENABLED": "0"}


# --------------------------------------------------------------------------- processes
def descendants(root: int) -> list[int]:
    """The processes under ``root`` (its children, theirs, ...), from /proc."""
    children: dict[int, list[int]] = {}
    for pid, parent in parent_map().items():
        children.setdefault(parent, []).append(pid)
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        for child in children.get(pid, []):
            out.append(child)
            todo.append(child)
    return out


# what of a worker's resident set is its own: Ray's object store is shared memory that every
# worker maps, and the pages of it a worker has touched count in its VmRSS and VmHWM too
FIELDS = ("VmHWM", "RssAnon", "RssShmem")


def sample_workers(
    root: int, peaks: dict[int, dict[str, int]], private: dict[int, list[int]]
) -> None:
    """Records in ``peaks`` the largest of each of :data:`FIELDS` (kB) seen so far for each
    process under ``root`` seen scoring (RssAnon and RssShmem are sampled, VmHWM is the
    kernel's peak of the whole resident set), and appends each one's RssAnon to ``private``."""
    for pid in descendants(root):
        try:
            title = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
            if not (title.startswith(SCORING) or pid in peaks):
                continue
            seen = peaks.setdefault(pid, dict.fromkeys(FIELDS, 0))
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                key, _, value = line.partition(":")
                if key in seen:
                    seen[key] = max(seen[key], int(value.split()[0]))
                if key == "RssAnon":
                    private.setdefault(pid, []).append(int(value.split()[0]))
        except (OSError, UnicodeDecodeError, ValueError, IndexError):
            continue


def halves(samples: list[int]) -> tuple[float, float]:
    """The largest of the first and of the second half of a worker's samples (MB): where the
    second is no larger, its memory stopped growing with the rows it had scored."""
    mid = len(samples) // 2
    return max(samples[:mid], default=0) / 1024, max(samples[mid:], default=0) / 1024


def run_cli(overrides: list[str], work: Path, tag: str) -> dict[str, Any]:
    """One ``paraeval`` command in a fresh process, its Ray workers sampled while it runs: wall
    and CPU seconds, the stage times it printed, Ray's start and stop from its log, and the
    largest peak resident set of a worker that scored (MB; 0 without Ray)."""
    out = work / f"out-{tag}"
    args = [sys.executable, "-m", "paraeval", *overrides, f"hydra.run.dir={out}"]
    err_path = work / f"{tag}.stderr"
    print(f"  {tag} starts: {load_average()}", flush=True)
    peaks: dict[int, dict[str, int]] = {}
    private: dict[int, list[int]] = {}
    start = time.perf_counter()
    with err_path.open("w") as err:
        proc = subprocess.Popen(
            args, env=_env(work), cwd=work, stdout=subprocess.DEVNULL, stderr=err
        )
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            sample_workers(proc.pid, peaks, private)
            time.sleep(SAMPLE_S)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    print(f"  {tag} ends:   {load_average()} ({wall:.1f} s)", flush=True)
    stderr = err_path.read_text(encoding="utf-8", errors="replace")
    if code != 0:
        sys.exit(f"{tag} failed ({code}):\n{stderr[-4000:]}")
    stages: dict[str, float] = {}
    for line in stderr.splitlines():
        m = STAGE_LINE.match(line.strip().removeprefix("paraeval: "))
        if m:
            stages[m["stage"]] = stages.get(m["stage"], 0.0) + float(m["seconds"])
    log = (out / "paraeval.log").read_text(encoding="utf-8")
    ready, stopped = READY.search(log), STOPPED.search(log)
    return {
        "wall": wall,
        "cpu": usage.ru_utime + usage.ru_stime,
        "stages": stages,
        "ray_start": float(ready["s"]) if ready else 0.0,
        "ray_stop": float(stopped["s"]) if stopped else 0.0,
        "worker_peak_mb": max((p["VmHWM"] for p in peaks.values()), default=0) / 1024,
        "worker_private_mb": max((p["RssAnon"] for p in peaks.values()), default=0) / 1024,
        "worker_shared_mb": max((p["RssShmem"] for p in peaks.values()), default=0) / 1024,
        "workers": len(peaks),
        # the worker with the most private memory: its samples' halves
        "private_halves": halves(max(private.values(), key=max, default=[])),
    }


# --------------------------------------------------------------------------- 1. the run
RUN = ["data=parabank", "cache.enabled=false", "tracking=none", "report.print_tables=false"]
WHAT = "ParaBank-Eval, the whole default run (cache and tracking off)"


# the columns that come from an encoder (float32 batches differ between engines: within 1e-6),
# and what is made of them (the semantic average, adequacy); every other number is identical
ENCODER_COLUMNS = re.compile(
    r"^(bertscore_.*|cosine|wmd|semantic.*|adequacy|parascore.*|bert_ibleu)$"
)
TOLERANCE = 1e-6


def same_numbers(local: Path, ray: Path) -> tuple[float, float]:
    """The largest difference between the two runs' segment and system scores, over the columns
    that must be identical and over the encoder columns; exits where either is out of bounds."""
    import numpy as np
    import pandas as pd

    worst = {True: 0.0, False: 0.0}
    where = {True: "", False: ""}
    for name, read in (("segment_scores.parquet", pd.read_parquet),
                       ("system_scores.csv", pd.read_csv)):  # fmt: skip
        a, b = read(local / name), read(ray / name)
        if list(a.columns) != list(b.columns) or len(a) != len(b):
            sys.exit(f"engine=ray's {name} has other columns or rows than engine=local's")
        for column in a.columns:
            if a[column].dtype.kind != "f":
                if not a[column].equals(b[column]):
                    sys.exit(f"engine=ray's {name} differs in column {column}")
                continue
            x, y = a[column].to_numpy(float), b[column].to_numpy(float)
            if not np.array_equal(np.isnan(x), np.isnan(y)):
                sys.exit(f"engine=ray's {name}: column {column} is NaN in other rows")
            diff = float(np.max(np.abs(x - y), initial=0.0, where=~np.isnan(x)))
            encoder = bool(ENCODER_COLUMNS.match(column))
            if diff > worst[encoder]:
                worst[encoder], where[encoder] = diff, f"{name}:{column}"
    if worst[False] != 0.0 or worst[True] > TOLERANCE:
        sys.exit(
            f"engine=ray's numbers differ: n-gram by {worst[False]} ({where[False]}), "
            f"encoder by {worst[True]} ({where[True]})"
        )
    return worst[False], worst[True]


def compare_engines(work: Path, repeat: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    runs: dict[str, list[dict[str, Any]]] = {"local": [], "ray": []}
    for i in range(repeat):  # interleaved: load that drifts touches both sides alike
        for kind in runs:
            runs[kind].append(run_cli([*RUN, f"engine={kind}"], work, f"{kind}-{i}"))
        ngram, encoder = same_numbers(work / f"out-local-{i}", work / f"out-ray-{i}")
        print(
            f"  same numbers: n-gram columns differ by {ngram:g}, encoder columns by at most "
            f"{encoder:.2g} (bound {TOLERANCE:g})"
        )
    median = {k: sorted(v, key=lambda r: r["wall"])[len(v) // 2] for k, v in runs.items()}
    local, ray = median["local"], median["ray"]
    fixed = ray["ray_start"] + ray["ray_stop"]
    for kind, r in median.items():
        walls = [round(x["wall"], 1) for x in runs[kind]]
        score = r["stages"].get("score", float("nan"))
        # the CPU of the command and the processes it waited for: Ray's workers are not among
        # them, so engine=ray's figure leaves out the scoring
        print(
            f"  engine={kind:5s} {r['wall']:7.1f} s wall (median of {walls}), {r['cpu']:6.1f} "
            f"CPU-s in the command's processes, score stage {score:6.1f} s"
        )
    ratio = ray["wall"] / local["wall"]
    verdict = "MET" if ratio <= TARGET_RATIO else "NOT MET"
    print(f"  ray / local: {ratio:.2f}x wall; target <= {TARGET_RATIO:g}x: {verdict}")
    print(
        f"  of the ray run: Ray's start {ray['ray_start']:.1f} s, stop {ray['ray_stop']:.1f} s; "
        f"without them ray / local would be {(ray['wall'] - fixed) / local['wall']:.2f}x"
    )
    score_local = local["stages"].get("score")
    score_ray = ray["stages"].get("score")
    anchor = "the same run with engine=local"
    what = f"{WHAT}, engine=ray (Ray started by the run)"
    rows = [
        row("bench_engine", f"{what}, wall", ray["wall"], "s", anchor, local["wall"]),
        row("bench_engine", f"{what}, Ray's start and stop (paraeval.log)", fixed, "s",
            "the engine=ray run's wall", ray["wall"]),
    ]  # fmt: skip
    if score_local is not None and score_ray is not None:
        where = "the score stage with engine=local"
        what = f"{what}, the score stage (Ray's start and stop in it)"
        rows.append(row("bench_engine", what, score_ray, "s", where, score_local))
    return rows, median


# --------------------------------------------------------------------------- 2. the breakdown
def breakdown_child(items: int) -> None:
    """Each metric alone on each engine, in this process; one JSON line of seconds."""
    from omegaconf import OmegaConf

    from paraeval.pipeline.config.compose import compose_config
    from paraeval.pipeline.config.nodes import EngineSettings
    from paraeval.pipeline.data.load import load_parabank
    from paraeval.pipeline.engine.ray_engine import open_engine
    from paraeval.pipeline.stages.score import build_metrics, score

    nodes = OmegaConf.to_container(compose_config([]).metrics, resolve=True)
    assert isinstance(nodes, dict)
    data = os.environ["PARAEVAL_SHARED_DATA"]  # set by the parent (bench_run's environment)
    table = load_parabank(str(Path(data) / "parabank_eval"), max_items=items)
    result: dict[str, Any] = {"rows": len(table)}
    for kind in ("local", "ray"):
        seconds: dict[str, float] = {}
        start = time.perf_counter()
        node = OmegaConf.to_container(compose_config([f"engine={kind}"]).engine)
        with open_engine(EngineSettings.from_node(node), nodes) as engine:  # type: ignore[arg-type]
            seconds["(engine start)"] = time.perf_counter() - start
            for metric_id, metric in build_metrics(nodes).items():
                start = time.perf_counter()
                score(table, {metric_id: metric}, progress=False, engine=engine)
                seconds[metric_id] = time.perf_counter() - start
            start = time.perf_counter()
        seconds["(engine stop)"] = time.perf_counter() - start
        result[kind] = seconds
    print("BREAKDOWN " + json.dumps(result), flush=True)


def breakdown(work: Path, items: int) -> list[dict[str, Any]]:
    cmd = [sys.executable, __file__, "--child-breakdown", str(items)]
    print(f"  breakdown starts: {load_average()}", flush=True)
    proc = subprocess.run(cmd, env=_env(work), cwd=work, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"breakdown failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    line = next(x for x in proc.stdout.splitlines() if x.startswith("BREAKDOWN "))
    result = json.loads(line.removeprefix("BREAKDOWN "))
    local, ray = result["local"], result["ray"]
    print(f"\neach metric alone, {result['rows']:,} rows ({items} sources x 36 systems)")
    print(f"  {'':16s} {'local':>8s} {'ray':>8s}")
    for name in ray:
        print(f"  {name:16s} {local[name]:8.1f} {ray[name]:8.1f}")
    total_local, total_ray = sum(local.values()), sum(ray.values())
    print(f"  {'total':16s} {total_local:8.1f} {total_ray:8.1f}  ({total_ray / total_local:.2f}x)")
    what = f"ParaBank-Eval's first {items} sources, each default metric scored alone"
    return [
        row("bench_engine", f"{what}, engine=ray, in all", total_ray, "s",
            "the same with engine=local", total_local),
    ]  # fmt: skip


# --------------------------------------------------------------------------- 3. memory
POOL_RUN = [
    "cache.enabled=false",
    "tracking=none",
    "report.print_tables=false",
    "correlation.ci=false",
    "compare.enabled=false",
    "alpha_curve.enabled=false",
    "engine=ray",
]


def pool_memory(work: Path, scale: float) -> list[dict[str, Any]]:
    tables: dict[int, Path] = {}
    rows = []
    for metric, base in POOLS.items():
        sizes = [max(SYSTEMS, round(base * scale)), max(SYSTEMS, round(base * scale)) * FACTOR]
        peaks = []
        for size in sizes:
            if size not in tables:
                tables[size] = work / f"pool-{size}.parquet"
                make_table(tables[size], size // SYSTEMS, SYSTEMS)
            overrides = [
                *POOL_RUN,
                "data=table",
                f"data.path={tables[size]}",
                f"metrics=[{metric}]",
            ]
            run = run_cli(overrides, work, f"{metric}-{size}")
            peaks.append(run)
            print(
                f"  {metric:9s} {size:>9,} rows: worker peak {run['worker_peak_mb']:7.0f} MB, "
                f"of it at most {run['worker_private_mb']:.0f} MB private and "
                f"{run['worker_shared_mb']:.0f} MB of the object store "
                f"({run['workers']} workers scored), score stage "
                f"{run['stages'].get('score', float('nan')):6.1f} s"
            )
            first, second = run["private_halves"]
            print(
                f"  {'':9s} {'':>9s}       that worker's private memory: at most {first:.0f} MB "
                f"in the first half of its samples, {second:.0f} MB in the second"
            )
        for key, what in (
            ("worker_peak_mb", "peak resident memory (VmHWM)"),
            ("worker_private_mb", "peak private memory (RssAnon)"),
        ):
            small, big = (run[key] for run in peaks)
            growth = big / small if small else float("nan")
            print(f"  {metric:9s} {FACTOR}x the rows: {what} per worker {growth:.2f}x")
            what = f"{metric}, {what} of a Ray worker, {sizes[1]:,} rows"
            rows.append(
                row("bench_engine", what, big, "MB", f"the same at {sizes[0]:,} rows", small)
            )
        first, second = peaks[1]["private_halves"]
        what = (
            f"{metric}, private memory (RssAnon) of the Ray worker with the most, {sizes[1]:,} "
            "rows, second half of its samples"
        )
        rows.append(row("bench_engine", what, second, "MB", "the first half", first))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    parser.add_argument("--work", type=Path, default=None, help="scratch folder (default: temp)")
    parser.add_argument("--repeat", type=int, default=2, help="runs per engine (median)")
    parser.add_argument("--skip-run", action="store_true", help="no whole ParaBank-Eval runs")
    parser.add_argument("--breakdown", type=int, default=40, help="sources (0: no breakdown)")
    parser.add_argument("--pools", default=",".join(POOLS), help="metrics for memory ('': none)")
    parser.add_argument("--scale", type=float, default=1.0, help="pool sizes times this")
    parser.add_argument("--child-breakdown", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_breakdown:
        breakdown_child(args.child_breakdown)
        return
    work = (args.work or Path(tempfile.mkdtemp(prefix="bench-engine-"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    start_load = load_average()
    rows: list[dict[str, Any]] = []
    if not args.skip_run:
        print("ParaBank-Eval, default run, engine=local and engine=ray, interleaved")
        rows += compare_engines(work, args.repeat)[0]
    if args.breakdown:
        rows += breakdown(work, args.breakdown)
    wanted = [m for m in args.pools.split(",") if m]
    if wanted:
        print(f"\npeak memory per Ray worker, pools {FACTOR}x apart (scale {args.scale:g})")
        for metric in [m for m in POOLS if m not in wanted]:
            POOLS.pop(metric)
        rows += pool_memory(work, args.scale)
    print(f"\nstart: {start_load}\nend:   {load_average()}")
    write_rows(args.json, rows)
    print(f"scratch folder: {work}")


if __name__ == "__main__":
    main()
