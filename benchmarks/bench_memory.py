"""Peak memory of a whole run on a large table: ``paraeval`` in a subprocess, its peak RSS.

Generates ``--items`` items x ``--systems`` systems (default 40,000 x 10 = 400,000 rows) of
synthetic paraphrases with one reference and a human score each, as a Parquet long table in a
temporary folder, then runs ``paraeval data=table data.path=... metrics=[bleu] tracking=none``
(the default correlation and comparison, cache off) in a child process and reports its peak
resident set size (``ru_maxrss``: the largest single process), the peak of its processes'
memory together (the sum of their proportional set sizes, sampled: the figure processes forked
from the run share its pages, which RSS would count twice), the same run with every figure in
its own process (``report.parallel_figures=false``), the bytes per row, and the wall time, and
whether the peak (of the processes together) meets the target: at most ``--target-gb`` (2.5 GB,
GB = 10**9 bytes) at the default 400,000 rows (the target is set for that size only). The anchor,
measured in the same run: the peak RSS of a child process that only reads the same table with
pandas (``pd.read_parquet``), what holding the data costs. ``--stages`` runs
the stages in-process instead (as ``compute`` does, freed heap memory returned between them)
and prints the peak RSS after each (``--tracemalloc``: also the Python allocations they hold);
that process also holds the generator's rows, so its figures are a little higher.

``--large`` runs the same table a third time with large counts (:data:`LARGE`: ten times the
comparison's resamples and trials, four times the correlation's resamples, whose sets are then
over the size kept whole and are drawn again where read), large but feasible requests whose
resampling runs in blocks (issue 37): its peak must meet the same target. ``--extra KEY=VALUE``
adds overrides to every run (``--stages`` too).

Usage: ``python benchmarks/bench_memory.py [--items 40000] [--systems 10] [--stages] [--large]
[--extra KEY=VALUE ...] [--json PATH]``
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from results import row, write_rows

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

_WORDS_TEXT = (
    "the a of to in and is was for on that with by as at from it be this are were which an or "
    "government people year city report price market house children country world time day man "
    "woman said told asked began bought quickly large small new old good great high long little"
)
WORDS = _WORDS_TEXT.split()
DEFAULT_ROWS = 400_000  # the size the target is set for (issue 14)
# large but feasible counts, run in blocks (issue 37): ten times the comparison's defaults, four
# times the correlation's (each of its sets, 320 MB of indices at 40,000 items, drawn again where
# read)
LARGE = ["compare.n_bootstrap=10000", "compare.n_ar=100000", "correlation.n_resamples=4000"]


def make_table(path: Path, items: int, systems: int, seed: int = 1) -> None:
    import pandas as pd

    rng = random.Random(seed)
    rows = []
    for i in range(items):
        n = rng.randint(6, 30)
        source = " ".join(rng.choice(WORDS) for _ in range(n))
        ref = " ".join(w if rng.random() < 0.7 else rng.choice(WORDS) for w in source.split())
        for s in range(systems):
            words = [w if rng.random() < 0.6 else rng.choice(WORDS) for w in source.split()]
            rows.append(
                {
                    "item_id": f"i{i}",
                    "system": f"sys{s}",
                    "source": source,
                    "references": [ref],
                    "candidate": " ".join(words),
                    "human_meaning": rng.random() * 5,
                }
            )
    pd.DataFrame(rows).to_parquet(path, index=False)


def overrides(path: Path, out: Path) -> list[str]:
    return [
        "data=table",
        f"data.path={path}",
        "metrics=[bleu]",
        "tracking=none",
        "cache.enabled=false",
        "report.progress=false",
        "report.print_tables=false",
        f"hydra.run.dir={out}",
    ]


def parent_map() -> dict[int, int]:
    """Each process of the machine and its parent, from /proc."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat[stat.rindex(")") + 2 :].split()[1])
    return parents


def tree_pss(root: int) -> int:
    """Bytes of memory that process ``root`` and its descendants hold together: the sum of their
    proportional set sizes (a page shared by k processes counts 1/k in each: the run's pages
    that a forked figure process shares copy-on-write are counted once, not twice as by RSS)."""
    parents = parent_map()
    tree, total = {root}, 0
    for pid in sorted(parents):  # a child's pid is not always larger: close the tree first
        ancestor = parents.get(pid)
        while ancestor and ancestor not in tree and ancestor in parents:
            ancestor = parents[ancestor]
        if ancestor in tree:
            tree.add(pid)
    for pid in tree:
        try:
            rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:
            continue
        total += sum(
            int(line.split()[1]) * 1024 for line in rollup.splitlines() if line.startswith("Pss:")
        )
    return total


def peak_of(args: list[str]) -> tuple[float, int, int]:
    """Wall seconds, peak RSS in bytes of one child process (the largest of it and the processes
    it waited for), from its own resource usage, so that children measured one after the other
    do not share a peak; and the peak of :func:`tree_pss`, sampled every 50 ms."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(args, env=dict(os.environ), stdout=subprocess.DEVNULL)
    pss = 0
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        with contextlib.suppress(OSError, ValueError):
            pss = max(pss, tree_pss(proc.pid))
        time.sleep(0.05)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, args)
    return wall, usage.ru_maxrss * 1024, pss


def run_child(path: Path, out: Path, *extra: str) -> tuple[float, int, int]:
    return peak_of([sys.executable, "-m", "paraeval", *overrides(path, out), *extra])


def run_anchor(path: Path) -> tuple[float, int, int]:
    """The table read by pandas alone, in a child process."""
    code = "import sys, pandas; pandas.read_parquet(sys.argv[1])"
    return peak_of([sys.executable, "-c", code, str(path)])


def run_stages(path: Path, trace: bool, extra: list[str]) -> None:
    """The stages in this process: the peak RSS after each (a stage that raises it is where the
    peak is) and, with ``trace``, the Python allocations each leaves held (tracemalloc; slow)."""
    import tracemalloc

    from paraeval.pipeline.config.compose import compose_config
    from paraeval.pipeline.config.settings import Settings
    from paraeval.pipeline.data.load import load_data
    from paraeval.pipeline.lifetime import release_free_memory
    from paraeval.pipeline.stages.evaluation import STAGES, Evaluation

    def peak_rss() -> float:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10

    cfg_overrides = [o for o in overrides(path, Path("unused")) if not o.startswith("hydra.")]
    cfg_overrides += extra
    cfg = compose_config(cfg_overrides)
    cfg.data.path = str(path)
    if trace:
        tracemalloc.start(8)
    print(f"{'after imports':<22} peak RSS {peak_rss():8.0f} MiB")
    settings = Settings.from_config(cfg)
    t0 = time.perf_counter()
    ev = Evaluation(settings=settings, table=load_data(settings.data))
    print(f"{'load':<22} peak RSS {peak_rss():8.0f} MiB  {time.perf_counter() - t0:6.1f} s")
    for stage in STAGES:
        t0 = time.perf_counter()
        stage(ev)
        release_free_memory()
        took = time.perf_counter() - t0
        line = f"{stage.__name__:<22} peak RSS {peak_rss():8.0f} MiB  {took:6.1f} s"
        if trace:
            current, peak = tracemalloc.get_traced_memory()
            line += f"  python held {current / 2**20:7.1f} MiB, peak {peak / 2**20:7.1f} MiB"
            tracemalloc.reset_peak()
        print(line, flush=True)
    if trace:
        print("\nlargest Python allocations held at the end:")
        for stat in tracemalloc.take_snapshot().statistics("traceback")[:6]:
            print(f"  {stat.size / 2**20:8.1f} MiB  {stat.count:>9} blocks")
            for frame in stat.traceback.format()[-4:]:
                print("     ", frame)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=40000)
    parser.add_argument("--systems", type=int, default=10)
    parser.add_argument(
        "--stages", action="store_true", help="in-process: the peak RSS after each stage"
    )
    parser.add_argument("--tracemalloc", action="store_true", help="with --stages: and Python's")
    parser.add_argument(
        "--target-gb", type=float, default=2.5, help="peak RSS target at 400,000 rows (GB)"
    )
    parser.add_argument("--large", action="store_true", help=f"also a run with {' '.join(LARGE)}")
    parser.add_argument(
        "--extra", nargs="*", default=[], metavar="KEY=VALUE", help="overrides for every run"
    )
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args(argv)
    extra: list[str] = list(args.extra)
    rows = args.items * args.systems
    with tempfile.TemporaryDirectory(prefix="paraeval-mem-") as tmp:
        path = Path(tmp) / "table.parquet"
        t0 = time.perf_counter()
        make_table(path, args.items, args.systems)
        print(
            f"{rows:,} rows ({args.items:,} items x {args.systems} systems) generated in "
            f"{time.perf_counter() - t0:.1f} s"
        )
        if args.stages:
            run_stages(path, args.tracemalloc, extra + (LARGE if args.large else []))
            return 0
        wall, peak, pss = run_child(path, Path(tmp) / "out", *extra)
        inline = run_child(path, Path(tmp) / "out-inline", "report.parallel_figures=false", *extra)
        large = run_child(path, Path(tmp) / "out-large", *extra, *LARGE) if args.large else None
        anchor_wall, anchor_peak, _ = run_anchor(path)
    print(f"paraeval metrics=[bleu], default correlation and comparison: {wall:.1f} s wall")
    print(f"peak RSS {peak / 1e9:.2f} GB = {peak / rows / 1e3:.2f} KB per row (largest process)")
    print(f"peak of the run's processes together (PSS) {pss / 1e9:.2f} GB")
    print(
        f"every figure in the run's process (report.parallel_figures=false): {inline[0]:.1f} s "
        f"wall, peak RSS {inline[1] / 1e9:.2f} GB, PSS {inline[2] / 1e9:.2f} GB"
    )
    print(
        f"anchor, the table read by pandas alone: peak RSS {anchor_peak / 1e9:.2f} GB "
        f"({anchor_wall:.1f} s); ratio {peak / anchor_peak:.2f}"
    )
    if large is not None:
        print(
            f"large counts ({' '.join(LARGE)}): {large[0]:.1f} s wall, "
            f"peak RSS {large[1] / 1e9:.2f} GB, PSS {large[2] / 1e9:.2f} GB"
        )
    what = f"`paraeval data=table metrics=[bleu] tracking=none`, {rows:,} generated rows"
    anchor = "the table read by pandas alone (`pd.read_parquet`), peak RSS"
    figures = [
        row("bench_memory", f"peak RSS of {what}", peak / 1e9, "GB", anchor, anchor_peak / 1e9),
        row(
            "bench_memory",
            f"peak memory of the run's processes together (PSS) of {what}",
            pss / 1e9,
            "GB",
            anchor,
            anchor_peak / 1e9,
        ),
    ]
    if large is not None:
        figures.append(
            row(
                "bench_memory",
                f"peak RSS of {what}, large counts (`{' '.join(LARGE)}`)",
                large[1] / 1e9,
                "GB",
                anchor,
                anchor_peak / 1e9,
            )
        )
    write_rows(args.json, figures)
    if rows == DEFAULT_ROWS:
        peaks = [("default counts", pss)] + ([("large counts", large[2])] if large else [])
        for label, value in peaks:
            verdict = "OK" if value <= args.target_gb * 1e9 else "OVER"
            print(f"target <= {args.target_gb:g} GB (PSS) at {rows:,} rows, {label}: {verdict}")
    else:
        print(f"(the target, <= {args.target_gb:g} GB, is set for {DEFAULT_ROWS:,} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
